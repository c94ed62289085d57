"""The experiment runner: a sweep plan in, one folder of runs and one ``results.json`` out, resumable.

The folder (one layout for every experiment)::

    DIR/.ema-boundary-output.json      the marker: this folder is a sweep's (never another tool's, never yours)
    DIR/sweep.yaml                     the plan as declared; a resumed sweep must declare the same runs
    DIR/sweep.json                     what the runs depend on (the plan's identity) and every invocation
    DIR/shared/                        what every run shares (the tokenizer)
    DIR/runs/<arm>/lr_<rate>/seed_<s>/steps_<n>/
        run.json                       the run's spec: trainer, arm, rate, seed, steps, merged settings
        result.json                    its numbers, once complete (else it is unfinished)
        log.txt, train/ ...            its console output and its trainer's files (checkpoints, final model)
    DIR/results.json, results.md       the sweep's results (rates chosen, every seed's score, the analysis)

How a rate is chosen (one rule, :class:`eval.sweep.plan.RateRule`): for each arm, the choosing seed (the first,
or each seed for itself) trains every rate of the grid at the longest budget; the rate with the best validation
objective is chosen, and while it lies at an edge of the rates tried (and the rule extends) the next rate beyond
that edge trains and the choice is made again, up to ``max_extensions``. Every seed then trains at its chosen
rate at every budget and is scored on the plan's split (test blocks by default).

Resuming (``--resume_from DIR``): finished runs are reused, an unfinished run continues from its newest
checkpoint (train.py resumes in its folder), and a plan or run spec that differs from the one recorded is refused
in one line naming the field. ``summarize(DIR)`` rebuilds results.json without training.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ema_boundary.cli import UsageError
from ema_boundary.io import MARKER, check_output_dir, output_owner, write_json, write_text
from ema_boundary.machine import machine_record
from eval.plans import REPO, PlanError
from eval.sweep.execute import LOG, RESULT_JSON, RUN_JSON, RunBusy
from eval.sweep.plan import Arm, SweepPlan, choose, dump, plan_from_text
from eval.sweep.trainers import TRAINERS

TOOL = "ema-boundary sweep"
PLAN_COPY, IDENTITY, RESULTS, RESULTS_MD = "sweep.yaml", "sweep.json", "results.json", "results.md"
SCHEMA = 1
RUN_PATTERN = "runs/<arm>/lr_<rate>/seed_<s>/steps_<n>"


class SweepError(UsageError):
    """A sweep that cannot start or go on (the folder belongs to another plan, a run spec changed): one line."""


class RunFailed(SweepError):
    """A run of the sweep failed: one line naming it and its log (the finished runs are kept)."""


def run_id(arm: str, lr: float, seed: int, steps: int) -> str:
    """A run's folder, relative to the sweep folder."""
    return f"runs/{arm}/lr_{lr:g}/seed_{seed}/steps_{steps}"


def relative(path: str | Path) -> str:
    """A path as recorded in results: relative to the repository root (commands run from a clone)."""
    return os.path.relpath(Path(path).resolve(), REPO)


# ---------------------------------------------------------------------------------------------
# The folder
# ---------------------------------------------------------------------------------------------


def _first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """The first key path where ``a`` and ``b`` differ, with both values (None: equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path + '.' if path else ''}{k}: {a.get(k, '(absent)')!r} here, {b.get(k, '(absent)')!r} now"
            found = _first_difference(a[k], b[k], f"{path + '.' if path else ''}{k}")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {a!r} here, {b!r} now"


def _added(recorded: dict, identity: dict) -> list[str]:
    """What ``identity`` adds to ``recorded`` when adding is its only difference: new arms, seeds added to an arm's
    own list (``"w192/spen: seeds 1, 2"``), rates added to an arm's grid (``"x2: rates 0.01"``: the rule then
    chooses among all of them) and settings the analysis reads that were not declared before
    (``"settings: budget_check"``); else []. A sweep may grow, never change what its finished runs ran or what its
    analysis declared before the run: a run's spec does not depend on the other seeds or rates, the seed that
    chooses a rate stays the first, and a declared setting (a margin, a bar) keeps its value."""
    old_arms, new_arms = recorded.get("arms", {}), identity.get("arms", {})
    old_set, new_set = recorded.get("settings") or {}, identity.get("settings") or {}
    rest = (set(recorded) | set(identity)) - {"arms", "settings"}
    if any(recorded.get(k) != identity.get(k) for k in rest) or any(name not in new_arms for name in old_arms):
        return []
    if any(k not in new_set or new_set[k] != v for k, v in old_set.items()):
        return []
    grown = []
    plan_grid = (recorded.get("rate") or {}).get("lr_grid") or []
    for name, spec in old_arms.items():
        new = new_arms[name]
        if new == spec:
            continue
        old_seeds, new_seeds = spec.get("seeds"), new.get("seeds")
        # An arm's grid grows when every rate it ran stays in it: a finished run's spec names only its own rate.
        old_grid, new_grid = spec.get("lr_grid") or plan_grid, new.get("lr_grid") or plan_grid
        same_else = ({k: v for k, v in spec.items() if k not in ("seeds", "lr_grid")}
                     == {k: v for k, v in new.items() if k not in ("seeds", "lr_grid")})
        seeds_grown = old_seeds == new_seeds or bool(old_seeds and new_seeds
                                                     and new_seeds[:len(old_seeds)] == old_seeds)
        if not (same_else and seeds_grown and set(old_grid) <= set(new_grid)):
            return []
        if new_seeds != old_seeds:
            grown.append(f"{name}: seeds {', '.join(map(str, new_seeds[len(old_seeds):]))}")
        if set(new_grid) != set(old_grid):
            grown.append(f"{name}: rates {', '.join(f'{r:g}' for r in sorted(set(new_grid) - set(old_grid)))}")
    return (grown + [name for name in new_arms if name not in old_arms]
            + [f"settings: {k}" for k in new_set if k not in old_set])


def open_folder(plan: SweepPlan, folder: Path, command: str, resume: bool) -> None:
    """A new sweep folder (refused if it holds anything not a sweep's), or the sweep being resumed (refused if
    its recorded plan differs from ``plan``)."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    identity = json.loads(json.dumps(plan.identity()))  # tuples as lists, as read back
    if resume:
        if output_owner(folder) != TOOL:
            raise SweepError(f"--resume_from {folder}: not a sweep folder (no {MARKER} of {TOOL})")
        recorded = json.loads((folder / IDENTITY).read_text())
        invocation: dict[str, Any] = {"command": command, "started": now}
        diff = _first_difference(recorded["identity"], identity)
        added = _added(recorded["identity"], identity) if diff else []
        if diff and not added:
            raise SweepError(f"--resume_from {folder}: the plan differs from the one this sweep ran ({diff}); "
                             "resume with the recorded plan (its sweep.yaml), or start a new --output_dir")
        if added:  # the same plan with arms, seeds or settings added: it grows; every finished run stays valid
            recorded.update(plan=relative(plan.path), identity=identity)
            invocation["added_arms"] = added
            write_text(folder / PLAN_COPY, f"# the plan of this sweep, as declared ({plan.path})\n" + dump(plan))
        recorded["invocations"].append(invocation)
        write_json(folder / IDENTITY, recorded)
        return
    if output_owner(folder) == TOOL:
        raise SweepError(f"--output_dir {folder}: holds an earlier sweep; continue it with --resume_from {folder}")
    check_output_dir(folder, tool=TOOL)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / MARKER, {"tool": TOOL, "command": command, "written": now})
    write_text(folder / PLAN_COPY, f"# the plan of this sweep, as declared ({plan.path})\n" + dump(plan))
    write_json(folder / IDENTITY, {"plan": relative(plan.path), "identity": identity,
                                   "invocations": [{"command": command, "started": now}]})


def read_folder(folder: Path) -> SweepPlan:
    """The plan a sweep folder recorded (for ``--resume_from`` and ``--summarize``)."""
    if output_owner(folder) != TOOL:
        raise SweepError(f"{folder}: not a sweep folder (no {MARKER} of {TOOL})")
    try:
        return plan_from_text((folder / PLAN_COPY).read_text(), str(folder / PLAN_COPY))
    except FileNotFoundError:
        raise SweepError(f"{folder}: no {PLAN_COPY} (not a complete sweep folder)") from None
    except PlanError as e:
        raise SweepError(str(e)) from None


# ---------------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------------


class Sweep:
    """One sweep folder: its runs' specs and results, the rate rule applied to them, and what is left to run."""

    def __init__(self, plan: SweepPlan, folder: Path, shared: dict[str, str] | None = None) -> None:
        self.plan, self.folder = plan, folder
        self.trainer = TRAINERS[plan.trainer]
        self.shared = shared or {}

    def spec(self, arm: Arm, lr: float, seed: int, steps: int) -> dict[str, Any]:
        return {"sweep": self.plan.name, "trainer": self.plan.trainer, "arm": arm.name, "lr": lr, "seed": seed,
                "steps": steps, "config": self.plan.config_of(arm), "shared": self.shared}

    def result(self, arm: Arm, lr: float, seed: int, steps: int) -> dict[str, Any] | None:
        path = self.folder / run_id(arm.name, lr, seed, steps) / RESULT_JSON
        return json.loads(path.read_text()) if path.is_file() else None

    def declare(self, arm: Arm, lr: float, seed: int, steps: int) -> str:
        """The run's folder with its run.json (a recorded spec must be the same: else the plan changed)."""
        rid = run_id(arm.name, lr, seed, steps)
        spec = json.loads(json.dumps(self.spec(arm, lr, seed, steps)))
        path = self.folder / rid / RUN_JSON
        if path.is_file():
            diff = _first_difference(json.loads(path.read_text()), spec)
            if diff:
                raise SweepError(f"{self.folder / rid}: this run was declared with other settings ({diff}); "
                                 "resume with the recorded plan, or start a new --output_dir")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_json(path, spec)
        return rid

    # -- the rate rule ---------------------------------------------------------------------------

    def choice(self, arm: Arm, chooser: int) -> dict[str, Any]:
        """The rate search of one choosing seed, as far as its runs are finished: the rates tried with their
        validation objective, the next run it needs (None when the choice is made), the rate chosen."""
        longest = self.plan.budgets_of(arm)[-1]
        rule, lower = self.plan.rate, self.trainer.lower_is_better
        grid = self.plan.grid_of(arm)
        tried: dict[float, float] = {}
        need = []
        for lr in grid:
            r = self.result(arm, lr, chooser, longest)
            if r is None:
                need.append(lr)
            else:
                tried[lr] = r[self.trainer.objective]
        extensions: list[float] = []
        while not need:
            nxt = rule.next_rate(tried, len(extensions), lower)
            if nxt is None or nxt in tried:
                break
            extensions.append(nxt)
            r = self.result(arm, nxt, chooser, longest)
            if r is None:
                need.append(nxt)
            else:
                tried[nxt] = r[self.trainer.objective]
        chosen = choose(tried, lower) if tried and not need else None
        rates = sorted(tried)
        return {"seed": chooser, "steps": longest, "grid": list(grid), "extensions": extensions,
                "tried": {f"{lr:g}": tried[lr] for lr in rates}, "chosen": chosen, "need": need,
                "interior": chosen is not None and rates[0] < chosen < rates[-1],
                "objective": self.trainer.objective, "lower_is_better": lower}

    def chosen_rate(self, arm: Arm, seed: int) -> float | None:
        grid = self.plan.grid_of(arm)
        if len(grid) == 1 and self.plan.rate.next_rate({grid[0]: 0.0}, 0) is None:
            return grid[0]  # a lone rate the rule never extends is every seed's before any run: all train at once
        chooser = seed if self.plan.rate.choose == "each_seed" else self.plan.choosers(arm)[0]
        return self.choice(arm, chooser)["chosen"]

    def pending(self, arms: Sequence[Arm]) -> list[tuple[Arm, float, int, int]]:
        """The runs the rule needs next and that are not finished: the rate searches first; once an arm's rate
        is chosen (for a seed), that seed at every budget."""
        out = []
        for arm in arms:
            longest = self.plan.budgets_of(arm)[-1]
            for chooser in self.plan.choosers(arm):
                out += [(arm, lr, chooser, longest) for lr in self.choice(arm, chooser)["need"]]
            for seed in self.plan.seeds_of(arm):
                lr = self.chosen_rate(arm, seed)
                if lr is None:
                    continue
                out += [(arm, lr, seed, steps) for steps in self.plan.budgets_of(arm)
                        if self.result(arm, lr, seed, steps) is None]
        seen, unique = set(), []
        for r in out:
            key = (r[0].name, *r[1:])
            if key not in seen:
                seen.add(key)
                unique.append(r)
        return unique

    def finished_runs(self) -> list[dict[str, Any]]:
        """Every finished run's result (with its spec's arm, rate, seed and steps)."""
        out = []
        for path in sorted((self.folder / "runs").glob(f"**/{RESULT_JSON}")):
            spec = json.loads((path.parent / RUN_JSON).read_text())
            out.append({**json.loads(path.read_text()),
                        **{k: spec[k] for k in ("arm", "lr", "seed", "steps")}})
        return out


def run_sweep(plan: SweepPlan, folder: Path, launcher: Any, command: str, *, resume: bool = False,
              arms: Sequence[str] | None = None, max_runs: int | None = None,
              progress: Callable[[str], None] = print, shared: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """Run (or continue) the sweep of ``plan`` in ``folder``; return its results (also in results.json).

    ``arms`` restricts this call to some arms and ``max_runs`` to that many new runs: a long sweep run in parts
    (results.json says what is still missing; ``--resume_from`` continues it). ``shared`` names folders made
    elsewhere that every run shares (``{"tokenizer": FOLDER}``): copied into ``DIR/shared/`` where it holds none
    yet, before the trainer prepares (which then keeps them)."""
    trainer = TRAINERS[plan.trainer]
    trainer.check(plan)
    selected = [plan.arm(a) for a in arms] if arms else list(plan.arms)
    open_folder(plan, folder, command, resume)
    for name, source in (shared or {}).items():
        if not (folder / "shared" / name).exists():
            shutil.copytree(source, folder / "shared" / name)
    started = time.perf_counter()
    shared = trainer.prepare(plan, folder)
    sweep = Sweep(plan, folder, shared)
    launched = 0
    failures: list[tuple[str, BaseException]] = []
    busy: set[str] = set()  # runs another invocation is training: left to it
    bar = tqdm(desc=f"sweep {plan.name}", unit="run", disable=None)
    in_flight: set[str] = set()

    def feed() -> list[str]:
        """The runs the rate rule makes ready now (none once a run failed, or ``max_runs`` are launched)."""
        nonlocal launched
        if failures:
            return []
        todo = [r for r in sweep.pending(selected) if run_id(r[0].name, *r[1:]) not in busy | in_flight]
        if max_runs is not None:
            todo = todo[:max(0, max_runs - launched)]
        rids = [sweep.declare(*r) for r in todo]
        in_flight.update(rids)
        launched += len(rids)
        bar.total = (bar.total or 0) + len(rids)
        bar.refresh()
        return rids

    try:
        for rid, error in launcher.launch(folder, feed):
            in_flight.discard(rid)
            bar.update()
            bar.set_postfix_str(rid.removeprefix("runs/"))
            if isinstance(error, RunBusy):
                busy.add(rid)
            elif error is not None:
                failures.append((rid, error))
    finally:
        bar.close()
    results = summarize(folder, plan, seconds=time.perf_counter() - started)
    if failures:
        rid, error = failures[0]
        raise RunFailed(f"{rid} failed ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
                         f"its log: {folder / rid / LOG}; {len(failures)} run(s) failed, finished runs are kept; "
                         f"continue with: ema-boundary sweep --resume_from {folder}")
    missing = results["missing"]
    if busy:
        progress(f"{TOOL}: {len(busy)} run(s) left to the other process training them")
    progress(f"{TOOL}: {launched - len(busy)} run(s) trained in {time.perf_counter() - started:.0f} s; "
             + (f"{len(missing)} run(s) still to run: continue with ema-boundary sweep --resume_from {folder}"
                if missing else f"complete: {folder / RESULTS}"))
    return results


def run_in_process(plan: SweepPlan, folder: Path, command: str, *, shared: Mapping[str, Path] | None = None,
                   progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run a plan declared in code (:func:`eval.sweep.plan.plan_from_dict`) into ``folder`` on the local launcher
    (``plan.workers`` at a time), or continue it where ``folder`` already holds this plan's sweep: what the
    report's stages call. ``command`` is recorded as the invocation; ``shared`` as in :func:`run_sweep`."""
    from eval.sweep.launch import LocalLauncher

    resume = output_owner(folder) == TOOL
    return run_sweep(plan, folder, LocalLauncher(plan.workers), command, resume=resume, progress=progress,
                     shared=shared)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def summarize(folder: Path, plan: SweepPlan | None = None, seconds: float | None = None) -> dict[str, Any]:
    """results.json (and results.md) of a sweep folder from its finished runs, without training."""
    from eval.sweep.analyses import ANALYSES
    from eval.sweep.figures import write_figures

    plan = plan or read_folder(folder)
    sweep = Sweep(plan, folder)
    trainer = sweep.trainer
    arms: dict[str, Any] = {}
    missing: list[str] = []
    for arm in plan.arms:
        choices = {str(c): sweep.choice(arm, c) for c in plan.choosers(arm)}
        budgets: dict[str, Any] = {}
        for steps in plan.budgets_of(arm):
            seeds: dict[str, Any] = {}
            for seed in plan.seeds_of(arm):
                lr = sweep.chosen_rate(arm, seed)
                r = sweep.result(arm, lr, seed, steps) if lr is not None else None
                if r is None:
                    missing.append(run_id(arm.name, lr, seed, steps) if lr is not None else
                                   f"{arm.name} seed {seed} at {steps} steps (its rate is not chosen yet)")
                    continue
                seeds[str(seed)] = {**r, "lr": lr, "score": trainer.score(r, plan.score)}
            budgets[str(steps)] = seeds
        for c in choices.values():
            missing += [run_id(arm.name, lr, c["seed"], c["steps"]) for lr in c.pop("need")]
        arms[arm.name] = {"choices": choices, "budgets": budgets}
    identity = json.loads((folder / IDENTITY).read_text()) if (folder / IDENTITY).is_file() else {}
    runs = sweep.finished_runs()
    plan_path = identity.get("plan", relative(plan.path))
    results: dict[str, Any] = {
        "tool": TOOL, "schema": SCHEMA, "name": plan.name, "trainer": plan.trainer,
        "plan": {"path": plan_path, "declared": plan.declared},
        "folder": relative(folder), "scored_on": plan.score,
        "complete": not missing, "missing": sorted(set(missing)),
        "commands": {"reproduce": f"ema-boundary sweep {plan_path} --output_dir NEW_DIR",
                     "resume": f"ema-boundary sweep --resume_from {relative(folder)}",
                     "summarize": f"ema-boundary sweep --summarize {relative(folder)}",
                     "one_run": f"cd {relative(folder)} && {trainer.command(RUN_PATTERN)}",
                     "cwd_of_run_commands": "the sweep folder"},
        "arms": arms,
        "seconds": {"runs": sum(r.get("seconds", 0.0) for r in runs), "runs_count": len(runs),
                    "this_invocation": seconds},
        "machine": machine_record(),  # of the invocation that wrote this file (ema_boundary.machine)
    }
    results["analysis"] = {"kind": plan.analysis, **ANALYSES[plan.analysis](plan, results, folder)}
    results["figures"] = write_figures(results["analysis"], folder)
    write_json(folder / RESULTS, results)
    from eval.sweep.render import render_markdown

    write_text(folder / RESULTS_MD, render_markdown(results))
    return results


__all__ = ["RunFailed", "Sweep", "SweepError", "TOOL", "open_folder", "read_folder", "relative", "run_id",
           "run_in_process", "run_sweep", "summarize"]
