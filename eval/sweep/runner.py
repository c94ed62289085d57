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

How a rate is chosen (one rule, :class:`eval.rates.RateRule`): for each arm, the choosing seed (the first,
or each seed for itself) trains every rate of the grid at the longest budget; the rate with the best validation
objective is chosen, and while it lies at an edge of the rates tried (and the rule extends) the next rate beyond
that edge trains and the choice is made again, up to ``max_extensions``. Every seed then trains at its chosen
rate at every budget and is scored on the plan's split (test blocks by default).

Resuming (``--resume_from DIR``): finished runs are reused, an unfinished run continues from its newest
checkpoint (train.py resumes in its folder), and a plan or run spec that differs from the one recorded is refused
in one line naming the field, as is other data than the sweep ran on (sweep.json's ``fingerprints``: the data's and
the shared tokenizer's content). Every check passes before the invocation is recorded. A run whose result.json or
run.json cannot be read is reported in one line naming the file and trains again (its spec written again from the
plan). ``summarize(DIR)`` rebuilds results.json without training, reporting unreadable files and summarising the
rest.

Stopping: a stop signal (Ctrl-C, SIGTERM, SIGUSR1) to the sweep, to a run or to both stops the invocation
(:mod:`eval.sweep.execute`): every run in progress saves and stops, nothing more starts, and :class:`SweepStopped`
says which runs stopped (resumable, recorded in sweep.json) with the exit status 128 + the signal. A run whose
objective is NaN or infinite is recorded as diverged (``"diverged": true``): never chosen, never scored.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ema_boundary.format import count
from ema_boundary.io import MARKER, check_output_dir, content_digest, output_owner, write_json, write_text
from ema_boundary.machine import machine_record
from ema_boundary.signals import StopSignal, signal_name
from ema_boundary.usage import UsageError
from ema_boundary.yamlio import YAMLFileError
from eval.plans import REPO
from eval.sweep.execute import RunBusy, RunStopped, StopFile, diverged, read_result
from eval.sweep.launch import LocalLauncher
from eval.sweep.paths import RESULT_JSON, RUN_JSON, RunPaths, run_id, run_pattern
from eval.sweep.plan import Arm, SweepPlan, dump, plan_from_text
from eval.sweep.trainers import TRAINERS, ngram_lines, train_settings

TOOL = "ema-boundary sweep"
PLAN_COPY, IDENTITY, RESULTS, RESULTS_MD = "sweep.yaml", "sweep.json", "results.json", "results.md"
SCHEMA = 1
RUN_PATTERN = "runs/<arm>/lr_<rate>/seed_<s>/steps_<n>"


class SweepError(UsageError):
    """A sweep that cannot start or go on (the folder belongs to another plan, a run spec changed): one line."""


class RunFailed(SweepError):
    """A run of the sweep failed: one line naming it and its log (the finished runs are kept)."""


class SweepStopped(StopSignal, KeyboardInterrupt):
    """The sweep stopped on a stop signal: its runs in progress saved and stopped (resumable), nothing more started.
    The message is one line; ``status`` is 128 + the signal. A KeyboardInterrupt, so no ``except Exception`` on the
    way up takes it for a failure."""


def say(line: str) -> None:
    """The sweep's progress lines, on stdout as they happen (flushed: a sweep piped to a file is watched too)."""
    print(line, flush=True)


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


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_record(folder: Path) -> dict[str, Any]:
    """sweep.json of a sweep folder, or :class:`SweepError` in one line naming it (missing, unreadable, not a
    sweep's record)."""
    path = folder / IDENTITY
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(f"{path}: no such file (a sweep folder records its plan's identity there)") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise SweepError(f"{path}: not readable JSON ({str(e).splitlines()[0]}); restore it (its plan is "
                         f"{folder / PLAN_COPY}) or start a new --output_dir") from None
    if not isinstance(recorded, dict) or not isinstance(recorded.get("identity"), dict) \
            or not isinstance(recorded.get("invocations"), list):
        raise SweepError(f"{path}: not a sweep's record (no identity and invocations)")
    return recorded


def check_folder(plan: SweepPlan, folder: Path) -> tuple[dict[str, Any], list[str]]:
    """For ``--resume_from``: the folder's record, checked against ``plan`` (refused in one line where the plan
    changed other than by growing), and what the plan adds to it. Writes nothing."""
    if output_owner(folder) != TOOL:
        raise SweepError(f"--resume_from {folder}: not a sweep folder (no {MARKER} of {TOOL})")
    recorded = read_record(folder)
    identity = json.loads(json.dumps(plan.identity()))  # tuples as lists, as read back
    diff = _first_difference(recorded["identity"], identity)
    added = _added(recorded["identity"], identity) if diff else []
    if diff and not added:
        raise SweepError(f"--resume_from {folder}: the plan differs from the one this sweep ran ({diff}); "
                         "resume with the recorded plan (its sweep.yaml), or start a new --output_dir")
    return recorded, added


def check_fingerprints(folder: Path, recorded: dict[str, Any], now: dict[str, str]) -> list[str]:
    """Refuse (one line naming both) a fingerprint that differs from the recorded one: the sweep would mix runs
    of two data sets. Returns the fingerprints the record lacks (a sweep from before they were recorded, or
    one whose shared tokenizer was made after): recorded now."""
    known = recorded.get("fingerprints") or {}
    for name, value in now.items():
        if name in known and known[name] != value:
            raise SweepError(f"--resume_from {folder}: the {name} differs from the one this sweep ran on ({name} "
                             f"fingerprint {known[name]} recorded, {value} now); resume on the recorded {name}, "
                             "or start a new --output_dir")
    return [name for name in now if name not in known]


def create_folder(plan: SweepPlan, folder: Path, command: str) -> None:
    """A new sweep folder: refused if it holds anything not a sweep's, or an earlier sweep (resumed instead)."""
    if output_owner(folder) == TOOL:
        raise SweepError(f"--output_dir {folder}: holds an earlier sweep; continue it with --resume_from {folder}")
    check_output_dir(folder, tool=TOOL)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / MARKER, {"tool": TOOL, "command": command, "written": _now()})
    write_text(folder / PLAN_COPY, f"# the plan of this sweep, as declared ({plan.path})\n" + dump(plan))
    write_json(folder / IDENTITY, {"plan": relative(plan.path), "identity": json.loads(json.dumps(plan.identity())),
                                   "invocations": [{"command": command, "started": _now()}]})


def open_folder(plan: SweepPlan, folder: Path, command: str, resume: bool) -> None:
    """A new sweep folder (:func:`create_folder`), or the sweep being resumed (checked by :func:`check_folder`,
    then the invocation recorded)."""
    if not resume:
        create_folder(plan, folder, command)
        return
    recorded, added = check_folder(plan, folder)
    record_invocation(plan, folder, recorded, added, {"command": command, "started": _now()})


def record_invocation(plan: SweepPlan, folder: Path, recorded: dict[str, Any], added: list[str],
                      invocation: dict[str, Any] | None, fingerprints: Mapping[str, str] | None = None) -> None:
    """Append ``invocation`` to sweep.json (with the arms, seeds or settings ``added``: the plan copy and identity
    become the grown plan's) and the fingerprints it lacks (``invocation`` None: those only)."""
    if added and invocation is not None:  # the plan grown by arms, seeds or settings: every finished run stays valid
        recorded.update(plan=relative(plan.path), identity=json.loads(json.dumps(plan.identity())))
        invocation["added_arms"] = added
        write_text(folder / PLAN_COPY, f"# the plan of this sweep, as declared ({plan.path})\n" + dump(plan))
    if fingerprints:
        recorded["fingerprints"] = {**(recorded.get("fingerprints") or {}), **fingerprints}
    if invocation is not None:
        recorded["invocations"].append(invocation)
    write_json(folder / IDENTITY, recorded)


def end_invocation(folder: Path, **facts: Any) -> None:
    """Add what happened to the last invocation's record in sweep.json (how it ended: stopped, failed runs)."""
    try:
        recorded = read_record(folder)
    except SweepError:
        return
    recorded["invocations"][-1].update(facts)
    write_json(folder / IDENTITY, recorded)


def read_folder(folder: Path) -> SweepPlan:
    """The plan a sweep folder recorded (for ``--resume_from`` and ``--summarize``)."""
    if output_owner(folder) != TOOL:
        raise SweepError(f"{folder}: not a sweep folder (no {MARKER} of {TOOL})")
    try:
        return plan_from_text((folder / PLAN_COPY).read_text(), str(folder / PLAN_COPY))
    except FileNotFoundError:
        raise SweepError(f"{folder}: no {PLAN_COPY} (not a complete sweep folder)") from None
    except YAMLFileError as e:  # a plan error, or a copy that is not YAML
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
        self.broken: dict[str, str] = {}  # unreadable files (relative to the folder) -> why; their runs train again

    def spec(self, arm: Arm, lr: float, seed: int, steps: int) -> dict[str, Any]:
        return {"sweep": self.plan.name, "trainer": self.plan.trainer, "arm": arm.name, "lr": lr, "seed": seed,
                "steps": steps, "config": self.plan.config_of(arm), "shared": self.shared}

    def _unreadable(self, path: Path, why: str) -> None:
        self.broken[os.path.relpath(path, self.folder)] = why

    def result(self, arm: Arm, lr: float, seed: int, steps: int) -> dict[str, Any] | None:
        """The run's result, or None while it has none, or none that can be read (noted in ``broken``)."""
        path = RunPaths.of(self.folder, arm.name, lr, seed, steps).result
        result, why = read_result(path)
        if why:
            self._unreadable(path, why)
        return result

    # What an analysis reads through the runner (eval.results.Reads): the sweep hands itself to its analysis.

    def ngram_lines(self, train_tokens: int, arm: str | None = None) -> dict[str, Any] | None:
        return ngram_lines(self.plan, self.folder, train_tokens, self.plan.arm(arm) if arm else None)

    def score_of(self, arm: str, lr: float, seed: int, steps: int) -> Any | None:
        result, _ = read_result(RunPaths.of(self.folder, arm, lr, seed, steps).result)  # unreadable: as not run
        return None if result is None else self.trainer.score(result, self.plan.score)

    def train_settings(self, arm: str, relative_to: Path | None = None) -> dict[str, Any]:
        return train_settings(self.plan.config_of(self.plan.arm(arm)), relative_to)

    def read_spec(self, rid: str) -> dict[str, Any] | None:
        """A run's recorded run.json, or None where it has none or none that can be read (noted in ``broken``)."""
        path = RunPaths(self.folder, rid).spec
        spec, why = read_result(path)
        if why:
            self._unreadable(path, why)
        return spec

    def check_declared(self, arms: Sequence[Arm]) -> dict[Path, dict[str, Any]]:
        """Every run.json already in the folder for ``arms`` against the spec the plan gives it now (before the
        invocation is recorded): a run declared with other settings is refused in one line. Returns the specs to
        write again where run.json cannot be read (noted in ``broken``): the plan says what they were, and the
        folder names the rate, seed and steps."""
        rewrite = {}
        for arm in arms:
            for path in sorted(self.folder.glob(f"{run_pattern(arm.name)}/{RUN_JSON}")):
                rid = str(path.parent.relative_to(self.folder))
                spec = self.read_spec(rid)
                if spec is not None and spec.get("arm") == arm.name:
                    self._check_spec(spec, arm, rid)
                elif spec is None:
                    lr, seed, steps = (part.split("_", 1)[1] for part in path.parent.parts[-3:])
                    rewrite[path] = json.loads(json.dumps(self.spec(arm, float(lr), int(seed), int(steps))))
        return rewrite

    def _check_spec(self, recorded: dict[str, Any], arm: Arm, rid: str) -> None:
        try:
            now = json.loads(json.dumps(self.spec(arm, recorded["lr"], recorded["seed"], recorded["steps"])))
        except (KeyError, TypeError):
            return  # not a spec this runner wrote: declare() writes it again
        diff = _first_difference(recorded, now)
        if diff:
            raise SweepError(f"{self.folder / rid}: this run was declared with other settings ({diff}); "
                             "resume with the recorded plan, or start a new --output_dir")

    def declare(self, arm: Arm, lr: float, seed: int, steps: int) -> str:
        """The run's folder with its run.json (a recorded spec must be the same: else the plan changed; one that
        cannot be read is written again from the plan)."""
        paths = RunPaths.of(self.folder, arm.name, lr, seed, steps)
        rid = paths.run
        spec = json.loads(json.dumps(self.spec(arm, lr, seed, steps)))
        path = paths.spec
        if (self.folder / "runs").resolve() not in path.resolve().parents:  # arm names are checked with the plan
            raise SweepError(f"arms.{arm.name}: its runs would be written outside {self.folder / 'runs'}")
        recorded = self.read_spec(rid)
        if recorded is not None:
            diff = _first_difference(recorded, spec)
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
        lower = self.trainer.lower_is_better
        grid = self.plan.grid_of(arm)

        def objective(lr: float) -> float | None:  # None while the run is not finished
            r = self.result(arm, lr, chooser, longest)
            return None if r is None else r[self.trainer.objective]

        search = self.plan.rate.search(objective, lower, grid)
        tried, need, extensions, chosen = search.tried, search.need, search.extensions, search.chosen
        rates = sorted(tried)
        failed = [f"{lr:g}" for lr in rates if diverged(tried[lr])]
        if chosen is not None and diverged(tried[chosen]):  # every rate tried diverged: none is chosen
            chosen = None
        return {"seed": chooser, "steps": longest, "grid": list(grid), "extensions": extensions,
                "tried": {f"{lr:g}": tried[lr] for lr in rates}, "chosen": chosen, "need": need,
                "interior": chosen is not None and rates[0] < chosen < rates[-1],
                "objective": self.trainer.objective, "lower_is_better": lower,
                **({"diverged": failed} if failed else {}),
                **({"no_rate": "every rate tried diverged"} if rates and not need and chosen is None else {})}

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
        """Every finished run's result (with its spec's arm, rate, seed and steps); unreadable ones are noted in
        ``broken`` and left out."""
        out = []
        for path in sorted(self.folder.glob(f"{run_pattern()}/{RESULT_JSON}")):
            rid = str(path.parent.relative_to(self.folder))
            result, why = read_result(path)
            if why:
                self._unreadable(path, why)
            spec = self.read_spec(rid)
            if result is not None and spec is not None and all(k in spec for k in ("arm", "lr", "seed", "steps")):
                out.append({**result, **{k: spec[k] for k in ("arm", "lr", "seed", "steps")}})
        return out

    def planned(self, arms: Sequence[Arm]) -> int:
        """How many runs ``arms`` take at least (each choosing seed's grid at the longest budget, and every seed at
        every budget; a rate extension adds to it): what the ETA counts down."""
        total = 0
        for arm in arms:
            grid, seeds, choosers = self.plan.grid_of(arm), self.plan.seeds_of(arm), self.plan.choosers(arm)
            total += len(choosers) * len(grid) + len(seeds) * len(self.plan.budgets_of(arm)) - len(choosers)
        return total

    def finished(self, arms: Sequence[Arm]) -> int:
        """How many runs of ``arms`` have a result.json."""
        return sum(len(list(self.folder.glob(f"{run_pattern(arm.name)}/{RESULT_JSON}")))
                   for arm in arms)


def run_sweep(plan: SweepPlan, folder: Path, launcher: Any, command: str, *, resume: bool = False,
              arms: Sequence[str] | None = None, max_runs: int | None = None,
              progress: Callable[[str], None] = say, shared: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """Run (or continue) the sweep of ``plan`` in ``folder``; return its results (also in results.json).

    ``arms`` restricts this call to some arms and ``max_runs`` to that many new runs: a long sweep run in parts
    (results.json says what is still missing; ``--resume_from`` continues it). ``shared`` names folders made
    elsewhere that every run shares (``{"tokenizer": FOLDER}``): copied into ``DIR/shared/`` where it holds none
    yet, before the trainer prepares (which then keeps them). ``progress`` gets one line per finished run, with
    the sweep's ETA. Raises :class:`SweepStopped` after a stop signal (the runs in progress saved and stopped),
    :class:`RunFailed` after a failed run (the others finished)."""
    trainer = TRAINERS[plan.trainer]
    trainer.check(plan)
    selected = [plan.arm(a) for a in arms] if arms else list(plan.arms)
    data = trainer.data_fingerprint(plan)  # the data is read (and found) before anything is written
    invocation: dict[str, Any] | None = {"command": command, "started": _now()}
    if resume:  # every check before the invocation is recorded
        recorded, added = check_folder(plan, folder)
        if data is not None:
            check_fingerprints(folder, recorded, {"data": data})
    else:  # recorded with the new folder
        create_folder(plan, folder, command)
        recorded, added, invocation = read_record(folder), [], None
    for name, source in (shared or {}).items():
        if not (folder / "shared" / name).exists():
            shutil.copytree(source, folder / "shared" / name)
    started = time.perf_counter()
    shared = trainer.prepare(plan, folder)
    sweep = Sweep(plan, folder, shared)
    fingerprints = {**({"data": data} if data is not None else {}),
                    **{name: content_digest([folder / path]) for name, path in shared.items()}}
    new = check_fingerprints(folder, recorded, fingerprints)
    rewrite = sweep.check_declared(plan.arms)
    # Every check passed: now the invocation, and what it repairs, are written.
    predates = resume and not recorded.get("fingerprints")
    record_invocation(plan, folder, recorded, added, invocation, {k: fingerprints[k] for k in new})
    if predates and new:
        progress(f"{TOOL}: {folder}: recorded the {' and '.join(new)} fingerprints (this sweep predates them); "
                 "a resume on other data is refused from now on")
    for path, spec in rewrite.items():
        progress(f"{TOOL}: {path}: {sweep.broken.pop(os.path.relpath(path, folder))}; written again from the plan")
        write_json(path, spec)
    reported = set(sweep.broken)  # said once, in feed()

    launched = 0
    failures: list[tuple[str, BaseException]] = []
    stopped: list[str] = []
    busy: set[str] = set()  # runs another invocation is training: left to it
    in_flight: set[str] = set()
    stop = StopFile(folder)

    def feed() -> list[str]:
        """The runs the rate rule makes ready now (none once a run failed or the sweep stops, or ``max_runs`` are
        launched)."""
        nonlocal launched
        if failures or stop.signum() is not None:
            return []
        todo = [r for r in sweep.pending(selected) if run_id(r[0].name, *r[1:]) not in busy | in_flight]
        for path, why in sweep.broken.items():
            if path not in reported:
                reported.add(path)
                progress(f"{TOOL}: {folder / path}: {why}; the run trains again")
        if max_runs is not None:
            todo = todo[:max(0, max_runs - launched)]
        rids = [sweep.declare(*r) for r in todo]
        in_flight.update(rids)
        launched += len(rids)
        return rids

    done = 0
    try:
        for rid, error in launcher.launch(folder, feed, stop):
            in_flight.discard(rid)
            if isinstance(error, RunBusy):
                busy.add(rid)
                what = "left to the other process training it"
            elif isinstance(error, RunStopped):
                stopped.append(rid)
                what = f"stopped by {signal_name(error.signum)} (resumable)"
            elif error is not None:
                failures.append((rid, error))
                what = f"failed ({type(error).__name__}); its log: {RunPaths(folder, rid).log}"
            else:
                done += 1
                what = _finished(sweep, rid)
            progress(f"{TOOL}: {rid} {what}; {_eta(sweep, selected, done, in_flight, started, max_runs, launched)}")
    finally:
        signum = stop.signum()
        stop.clear()
    if signum is not None:
        end_invocation(folder, stopped={"signal": signal.Signals(signum).name, "runs": stopped})
    elif failures:
        end_invocation(folder, failed=[rid for rid, _ in failures])
    results = summarize(folder, plan, seconds=time.perf_counter() - started)
    if signum is not None:
        raise SweepStopped(f"stopped by {signal_name(signum)}: {count(len(stopped), 'run')} saved and stopped"
                           + (f" ({', '.join(stopped[:3])}{', ...' if len(stopped) > 3 else ''})" if stopped else "")
                           + f", nothing more started; finished runs are kept; continue with: "
                           f"ema-boundary sweep --resume_from {folder}", signum)
    if failures:
        rid, error = failures[0]
        raise RunFailed(f"{rid} failed ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}); "
                        f"its log: {RunPaths(folder, rid).log}; {count(len(failures), 'run')} failed, finished runs "
                        "are kept; "
                        f"continue with: ema-boundary sweep --resume_from {folder}")
    missing = results["missing"]
    if busy:
        progress(f"{TOOL}: {count(len(busy), 'run')} left to the other process training them")
    progress(f"{TOOL}: {count(launched - len(busy), 'run')} trained in {time.perf_counter() - started:.0f} s; "
             + (f"{count(len(missing), 'run')} still to run: continue with ema-boundary sweep --resume_from {folder}"
                if missing else f"complete: {folder / RESULTS}"))
    return results


def _finished(sweep: Sweep, rid: str) -> str:
    """A finished run in words: its objective (or that it diverged) and its time."""
    result, _ = read_result(RunPaths(sweep.folder, rid).result)
    if result is None:
        return "finished"
    objective, value = sweep.trainer.objective, result.get(sweep.trainer.objective)
    shown = ("diverged (NaN or infinite): never chosen" if result.get("diverged")
             else f"{objective} {value:.4f}" if isinstance(value, float) else objective)
    over = f" (started over: {result['started_over']})" if result.get("started_over") else ""
    return f"done in {_duration(result.get('wall_seconds', 0.0))}{over}: {shown}"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 90:
        return f"{seconds} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _eta(sweep: Sweep, arms: Sequence[Arm], done: int, in_flight: set[str], started: float, max_runs: int | None,
         launched: int) -> str:
    """``[finished/planned runs], ETA ...``: the runs still to train (at least: a rate extension adds runs) at this
    invocation's pace so far (its runs per second, workers included)."""
    planned, finished = sweep.planned(arms), sweep.finished(arms)
    left = max(planned - finished, len(in_flight))
    if max_runs is not None:
        left = min(left, max(0, max_runs - launched) + len(in_flight))
    if not left:
        return f"[{finished}/{max(planned, finished)} runs] nothing left"
    if not done:
        return f"[{finished}/{max(planned, finished)} runs] {left} left, ETA once a run has finished"
    eta = (time.perf_counter() - started) / done * left
    return f"[{finished}/{max(planned, finished)} runs] {left} left, ETA {_duration(eta)}"


def run_in_process(plan: SweepPlan, folder: Path, command: str, *, shared: Mapping[str, Path] | None = None,
                   progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Run a plan declared in code (:func:`eval.sweep.plan.plan_from_dict`) into ``folder`` on the local launcher
    (``plan.workers`` at a time), or continue it where ``folder`` already holds this plan's sweep: what the
    report's stages call. ``command`` is recorded as the invocation; ``shared`` as in :func:`run_sweep`."""
    resume = output_owner(folder) == TOOL
    return run_sweep(plan, folder, LocalLauncher(plan.workers), command, resume=resume, progress=progress,
                     shared=shared)


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


def cpu_by_arm(runs: Sequence[dict[str, Any]], order: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """The cost of each arm (in the plan's ``order``): its finished runs (every rate tried, extensions included)
    and their CPU seconds, the number a shared machine's neighbours do not move (``cpu_seconds`` of
    execute.run_one; runs finished before it was recorded count as 0 and are counted in ``unmeasured``)."""
    out: dict[str, dict[str, Any]] = {arm: {"runs": 0, "cpu_seconds": 0.0, "unmeasured": 0} for arm in order}
    for r in runs:
        a = out.setdefault(r["arm"], {"runs": 0, "cpu_seconds": 0.0, "unmeasured": 0})
        a["runs"] += 1
        if r.get("cpu_seconds") is None:
            a["unmeasured"] += 1
        else:
            a["cpu_seconds"] += float(r["cpu_seconds"])
    return {arm: a for arm, a in out.items() if a["runs"]}


def summarize(folder: Path, plan: SweepPlan | None = None, seconds: float | None = None) -> dict[str, Any]:
    """results.json (and results.md) of a sweep folder from its finished runs, without training."""
    # delayed: the analyses, figures and results.md import torch, scipy, statsmodels and matplotlib (seconds), which
    # reading, checking and launching a sweep never need
    from eval.sweep.analyses import ANALYSES
    from eval.sweep.figures import write_figures
    from eval.sweep.render import render_markdown

    plan = plan or read_folder(folder)
    sweep = Sweep(plan, folder)
    trainer = sweep.trainer
    arms: dict[str, Any] = {}
    missing: list[str] = []
    failed: list[str] = []  # diverged runs: recorded, never scored
    for arm in plan.arms:
        choices = {str(c): sweep.choice(arm, c) for c in plan.choosers(arm)}
        budgets: dict[str, Any] = {}
        for steps in plan.budgets_of(arm):
            seeds: dict[str, Any] = {}
            for seed in plan.seeds_of(arm):
                lr = sweep.chosen_rate(arm, seed)
                r = sweep.result(arm, lr, seed, steps) if lr is not None else None
                if r is None:
                    chooser = choices.get(str(seed if plan.rate.choose == "each_seed" else plan.choosers(arm)[0]))
                    if lr is None and chooser and chooser.get("no_rate"):
                        continue  # every rate diverged: this seed has no run to train
                    missing.append(run_id(arm.name, lr, seed, steps) if lr is not None else
                                   f"{arm.name} seed {seed} at {steps} steps (its rate is not chosen yet)")
                    continue
                if r.get("diverged"):
                    failed.append(run_id(arm.name, lr, seed, steps))
                    continue
                seeds[str(seed)] = {**r, "lr": lr, "score": trainer.score(r, plan.score)}
            budgets[str(steps)] = seeds
        for c in choices.values():
            missing += [run_id(arm.name, lr, c["seed"], c["steps"]) for lr in c.pop("need")]
            failed += [run_id(arm.name, float(lr), c["seed"], c["steps"]) for lr in c.get("diverged", [])]
        arms[arm.name] = {"choices": choices, "budgets": budgets}
    identity, why = read_result(folder / IDENTITY)
    if identity is None:  # reported; the runs are summarised all the same
        sweep.broken[IDENTITY], identity = why or "no such file", {}
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
                    "this_invocation": seconds, "cpu_by_arm": cpu_by_arm(runs, [a.name for a in plan.arms])},
        "machine": machine_record(),  # of the invocation that wrote this file (ema_boundary.machine)
    }
    if failed:
        results["diverged"] = sorted(set(failed))
    if sweep.broken:
        results["unreadable"] = dict(sorted(sweep.broken.items()))
    results["analysis"] = {"kind": plan.analysis, **ANALYSES[plan.analysis](plan, results, folder, sweep)}
    results["figures"] = write_figures(results["analysis"], folder)
    write_json(folder / RESULTS, results)
    write_text(folder / RESULTS_MD, render_markdown(results))
    return results


__all__ = ["RunFailed", "Sweep", "SweepError", "TOOL", "open_folder", "read_folder", "relative",
           "run_in_process", "run_sweep", "summarize"]
