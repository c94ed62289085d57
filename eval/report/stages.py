"""The report's stages, each run through one of the project's own entry points.

- structure: ``grammar_probe build`` and ``run`` in child processes (beside the content stages), each the
  recorded command line itself;
- the headline pair, the reader and trace ablations and depth: sweeps declared here from the plan's sections (depth
  as ``python -m eval.depth --config`` declares it: :func:`eval.depth.experiment_plan`) and run on the experiment
  runner (:mod:`eval.sweep`: one run layout with result.json, one rate rule, resume) into ``WORK/language_model``,
  ``WORK/ablation_{predictor,trace}`` and ``WORK/depth``; the numbers are read from the runner's results (turned into
  the shapes the report reads: ablation.json's, depth.json's), the command recorded is the one that reproduces each
  folder from the plan it keeps (``sweep.yaml``);
- the content probes: a typed call (:func:`eval.probes.experiment.run_content_probes`) with the plan's checked
  values: identity at lag on the runner's final models, the recall map on fresh models; the command line that
  reproduces it is written from the same values as a by-product (:func:`command_line`).

Outputs stay under ``WORK`` (``OUT/work`` in the finished report): datasets, checkpoints, results.
"""

from __future__ import annotations

import json
import math
import shlex
import statistics
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

import train_config
from ema_boundary import corpus, packing
from ema_boundary.format import count
from ema_boundary.io import atomic_dir, write_json
from ema_boundary.usage import UsageError
from ema_boundary.yamlio import read_yaml_file
from eval import ablation as eval_ablation
from eval import depth as eval_depth
from eval import gap as eval_gap
from eval.ngram import ngram_references
from eval.probes.experiment import ProbeInputError, ProbeSettings, default_map_models, run_content_probes
from eval.probes.experiment import probe_text as read_text
from eval.probes.models import resolve_model
from eval.report.plan import CORPORA, REPO, Plan, in_repo
from eval.runs import param_count, read_metrics, read_spen_yaml
from eval.sweep.paths import run_id
from eval.sweep.plan import plan_from_dict
from eval.sweep.runner import run_in_process
from eval.sweep.trainers import SWEEP_OWNED, ngram_lines
from modeling_spen.variants import SPEN_VARIANTS

GRAMMAR = ("python", "-m", "grammar_probe")
ABLATION = ("python", "-m", "eval.ablation")
PROBES = ("python", "-m", "eval.probes")
GAP = ("python", "-m", "eval.gap")
ARCHITECTURES = {"spen": "SPEN (EMA traces)", "gpt2": "GPT-2 architecture"}


def command_line(prog: Sequence[str], flags: Mapping[str, Any]) -> str:
    """The command line that reproduces a stage's call, written from the values the call was given: a flag
    with True stands alone, None, False and empty lists are left out, a list is written as its items."""
    args: list[str] = []
    for flag, value in flags.items():
        if value is None or value is False or (isinstance(value, (list, tuple)) and not value):
            continue
        args.append(flag)
        if value is not True:
            args += [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    return shlex.join([*prog, *args])


# ---------------------------------------------------------------------------------------------
# Structure: the grammar corpus, SPCN and its baselines
# ---------------------------------------------------------------------------------------------


class Structure:
    """The structure stage (``grammar_probe build``, then ``run``) in child processes, beside the content stages:
    it is CPU-bound and independent of them. :meth:`result` waits for it."""

    def __init__(self, argvs: list[list[str]], out: Path, log: Path) -> None:
        self.commands = [shlex.join([*GRAMMAR, *argv]) for argv in argvs]
        self.out, self.log = out, log
        # The folder relative paths in argv mean: this one, fixed now (a runner stage that trains in this process
        # works inside its sweep folder meanwhile).
        self.cwd = Path.cwd()
        self.status: int | None = None
        self.failed = ""
        self.process: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()  # a child is started only while the stage has not been stopped
        self._thread = threading.Thread(target=self._run, args=(argvs,), daemon=True)
        self._thread.start()

    def _run(self, argvs: list[list[str]]) -> None:
        with open(self.log, "w") as f:
            for argv in argvs:  # exactly the recorded argv, one command after the other
                with self._lock:
                    if self._stop.is_set():
                        return
                    self.process = subprocess.Popen([sys.executable, "-m", "grammar_probe", *argv], stdout=f,
                                                    stderr=subprocess.STDOUT, cwd=self.cwd)
                self.status = self.process.wait()
                if self.status != 0:
                    self.failed = shlex.join([*GRAMMAR, *argv])
                    return

    def stop(self) -> None:
        """Kill the child and wait for the stage to end (the report failed elsewhere): nothing keeps running or
        writing after the report exits, so its folder can be kept as it is."""
        with self._lock:
            self._stop.set()
            if self.process is not None and self.process.poll() is None:
                self.process.kill()
        self._thread.join()

    def result(self) -> dict[str, Any]:
        self._thread.join()
        if self.status != 0:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise UsageError(f"stage failed (exit status {self.status}): {self.failed}: {tail[0]}")
        results = json.loads((self.out / "results.json").read_text())
        results["command"] = self.commands
        return results


def start_structure(work: Path, plan: Plan) -> Structure:
    """Start the grammar corpus build, then SPCN, the taggers and the scores (``python -m grammar_probe``)."""
    g = plan.grammar
    dataset, out, log = work / "grammar_dataset", work / "grammar_probe", work / "logs" / "grammar_probe.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    optional = {"--validation-size": g.validation_size, "--test-size": g.test_size,
                "--ceiling-sentences": g.ceiling_sentences, "--window-sentences": g.window_sentences}
    build = ["build", "--out", dataset, "--seed", plan.seed, "--train-size", g.train_size,
             *[x for flag, v in optional.items() if v is not None for x in (flag, v)]]
    optional = {"--seeds": g.seeds, "--train-sentences": g.train_sentences, "--eval-sentences": g.eval_sentences}
    run = ["run", "--dataset", dataset, "--out", out, "--seed", plan.seed, "--workers", g.workers,
           *(["--quick"] if g.quick else []), *[x for flag, v in optional.items() if v is not None for x in (flag, v)]]
    return Structure([[str(a) for a in build], [str(a) for a in run]], out, log)


# ---------------------------------------------------------------------------------------------
# Content: the headline pair in a stated regime, the n-gram reference, the ablations, the probes
# ---------------------------------------------------------------------------------------------


def build_tokenizer(work: Path, plan: Plan) -> Path:
    """One tokenizer for every language-model run: the SPEN YAML's (a BPE trained on the training split when
    it names none). Both architectures' YAMLs must agree on the vocabulary size."""
    cfg = _yaml(plan, "spen")
    vocab = {w: json.loads((Path(_yaml(plan, w)["model_name_or_path"]) / "config.json").read_text())["vocab_size"]
             for w in ARCHITECTURES}
    if len(set(vocab.values())) != 1:
        raise UsageError(f"{plan.path}: the two architectures' vocabularies differ ({vocab}); "
                         "one tokenizer serves both")
    return eval_ablation.build_tokenizer(cfg, plan.data, work / "tokenizer")


def _yaml(plan: Plan, which: str) -> dict[str, Any]:
    try:
        return train_config.read_yaml(plan.yaml_path(which))
    except train_config.ConfigError as e:
        raise UsageError(f"train.py: {e}") from None


# The settings both architectures' YAMLs must share: they fix the blocks every run is chosen and scored on.
SHARED_SPLIT = ("data", "val_every", "test_every", "block_size", "max_eval_samples", "max_test_samples")
SWEEP = ("ema-boundary", "sweep")


def _arm_settings(plan: Plan, which: str, model: dict[str, Any] | None = None) -> dict[str, Any]:
    """A train.py YAML as a runner arm declares it (``config``): the YAML's own keys but those the runner sets per
    run (folder, steps, rate, seed, model folder), the model as ``{from: FOLDER}`` (and ``model``'s other keys), the
    report's corpus."""
    def canonical(key: str) -> str:
        return next((n for n, s in train_config.SETTINGS.items() if key == n or key in s.old), key)

    raw = read_yaml_file(plan.yaml_path(which))[0] or {}
    settings = {k: v for k, v in raw.items() if canonical(k) not in SWEEP_OWNED}
    folder = Path(_yaml(plan, which)["model_name_or_path"]).resolve()
    if folder.is_relative_to(REPO):  # as plans name it: repository-relative (the sweep runs from a clone)
        folder = folder.relative_to(REPO)
    return {**settings, "data": plan.data, "model": {"from": str(folder), **(model or {})}}


def run_sweep(folder: Path, declared: dict[str, Any], tokenizer: Path) -> dict[str, Any]:
    """Run a sweep declared here into ``folder`` on the experiment runner (:mod:`eval.sweep`: its run layout,
    result.json per run, its rate rule, resume where ``folder`` holds it already), every run on the report's
    tokenizer; its results.json content. The plan is kept as ``folder/sweep.yaml``; the command recorded is the
    one that reproduces the folder from it."""
    sweep = plan_from_dict(declared, str(folder / "sweep.yaml"))
    return run_in_process(sweep, folder, sweep_command(folder), shared={"tokenizer": tokenizer},
                          progress=lambda line: print(line, file=sys.stderr))


def sweep_command(folder: Path) -> str:
    """The command that reproduces a stage's sweep folder from the plan it keeps."""
    return shlex.join([*SWEEP, str(folder / "sweep.yaml"), "--output_dir", "NEW_DIR"])


def _run_of(folder: Path, seeds: Mapping[str, Any], seed: int | str) -> tuple[dict[str, Any], Path]:
    """A seed's runner result (results.json's ``arms.A.budgets.N.SEED``) and its train.py folder."""
    r = seeds[str(seed)]
    return r, folder / r["run"] / "train"


def _run_command(folder: Path, result: dict[str, Any]) -> str:
    """The command that reruns one run (from its sweep folder, as the runner records it)."""
    return f"cd {shlex.quote(str(folder))} && {result['command']}"


def _search(choice: dict[str, Any], rule: dict[str, Any]) -> str:
    """How the runner's rate search ended for one arm (its ``choices`` entry), in words."""
    added = len(choice["extensions"])
    if choice["interior"]:
        return f"interior ({count(added, 'rate')} added beyond the declared grid)" if added else "interior"
    if not rule["extend"]:
        return "edge: the plan declares no extension of the grid"
    if added >= rule["max_extensions"]:
        return f"edge: the cap of {count(rule['max_extensions'], 'added rate')} stopped the extension"
    return "edge: the next rate beyond the edge is not below 1"


def language_model(work: Path, plan: Plan, tokenizer: Path) -> dict[str, Any]:
    """The headline pair as a sweep of two arms on the experiment runner (``work/language_model``): each
    architecture's rate chosen by the runner's rule from the plan's grid on validation (the grid's seed, extended
    beyond an edge as the plan's ``language_model.rate`` declares), then the other seeds at the chosen
    rate (``plan.workers`` at a time). Every seed's final model is scored on the test blocks of the YAMLs' test
    split when they hold one (``scored_on`` says which blocks the comparison reads: "test", else "validation")."""
    lm = plan.language_model
    cfgs = {w: _yaml(plan, w) for w in ARCHITECTURES}
    differ = [k for k in SHARED_SPLIT if cfgs["spen"][k] != cfgs["gpt2"][k]]
    if differ:
        raise UsageError(f"{plan.path}: the two architectures' YAMLs differ in {', '.join(differ)}; the pair must be "
                         "chosen and scored on the same blocks")
    seeds = list(lm.seeds)
    seed0 = seeds[0]  # chooses the rate
    steps = {w: lm.max_steps or cfgs[w]["max_steps"] for w in ARCHITECTURES}
    folder = work / "language_model"
    rule = lm.rate.as_plan()
    results = run_sweep(folder, {
        "name": f"{plan.name}-headline-pair", "trainer": "train", "analysis": "none", "seeds": seeds,
        "score": "test" if cfgs["spen"]["test_every"] else "validation", "workers": plan.workers, "rate": rule,
        "arms": {w: {"config": _arm_settings(plan, w), "budgets": [steps[w]]} for w in ARCHITECTURES},
    }, tokenizer)

    by_arch = {w: results["arms"][w]["budgets"][str(steps[w])] for w in ARCHITECTURES}
    scored_on = "test" if all("test_loss" in r for v in by_arch.values() for r in v.values()) else "validation"
    result: dict[str, Any] = {"seeds": seeds, "lr_grid": list(lm.rate.lr_grid), "grid_seed": seed0,
                              "equivalence_margin": lm.equivalence_margin, "scored_on": scored_on,
                              "split": {k: cfgs["spen"][k] for k in ("val_every", "test_every")}, "architectures": {},
                              "folder": str(folder), "command": sweep_command(folder)}
    if scored_on == "test":
        sizes = {(r["test_tokens"], r["test_documents"]) for v in by_arch.values() for r in v.values()}
        assert len(sizes) == 1, f"the runs scored different test blocks: {sizes}"
        (tokens, documents), = sizes
        result["split"] |= {"test_tokens": tokens, "test_documents": documents}
    for w in ARCHITECTURES:
        choice = results["arms"][w]["choices"][str(seed0)]
        chosen = choice["chosen"]
        runs = {}
        for s in seeds:
            r, out = _run_of(folder, by_arch[w], s)
            curve = read_metrics(out / "metrics.jsonl")
            runs[str(s)] = {"final_val_loss": r["val_loss"], "final_train_loss": curve["loss"][-1],
                            **({"final_test_loss": r["test_loss"]} if "test_loss" in r else {}),
                            "final_dir": str(out / "final"), "command": _run_command(folder, r), "curve": curve}
        rates = sorted([*choice["grid"], *choice["extensions"]])
        grid = {}
        for lr in rates:
            run = folder / run_id(w, lr, seed0, steps[w])
            grid[f"{lr:g}"] = {"final_val_loss": choice["tried"][f"{lr:g}"], "extension": lr not in lm.rate.lr_grid,
                               "command": _run_command(folder, json.loads((run / "result.json").read_text()))}
        counts = by_arch[w][str(seed0)]["parameters"]
        result["architectures"][w] = {
            "label": ARCHITECTURES[w], "yaml": getattr(lm, w), "lr": chosen, "grid": grid,
            "rates_tried": rates, "interior": choice["interior"], "grid_rule": _search(choice, rule),
            "parameters": counts["total"], "parameter_counts": counts,
            "steps": steps[w], "train_tokens": steps[w] * cfgs[w]["total_train_batch_size"] * cfgs[w]["block_size"],
            "runs": runs,
        }
    return result


def ngram_reference(plan: Plan, tokenizer: Path, train_tokens: int, split: str = "validation") -> dict[str, Any]:
    """Kneser-Ney unigram/bigram/trigram perplexities on the blocks the runs are compared on (``split``: the test
    blocks when the runs were scored there, else the validation blocks), counted on the training stream the runs
    read (at most the ``train_tokens`` they saw); also the split's size, for the epochs."""
    cfg = _yaml(plan, "spen")
    tok = AutoTokenizer.from_pretrained(tokenizer)
    n_blocks = cfg["max_test_samples"] if split == "test" else cfg["max_eval_samples"]
    result = ngram_references(plan.data, cfg["val_every"], tok, cfg["block_size"], n_blocks, train_tokens, split,
                              cfg["test_every"])
    val = packing.validation_blocks(plan.data, cfg["val_every"], tok, cfg["block_size"], cfg["max_eval_samples"])
    result["val_tokens"] = int(val.shape[0] * (val.shape[1] - 1))
    return result


def gap(work: Path, plan: Plan, lm: dict[str, Any], tokenizer: Path) -> dict[str, Any] | None:
    """Where the headline pair's gap lives (:mod:`eval.gap`): every seed's per-token loss on the blocks the pair is
    scored on (the test documents when held out), split into AR hits, other repeats and first occurrences, SPEN
    (model b) minus the GPT-2 architecture (model a) paired by seed. None for a streamed corpus (c4), which
    eval.gap does not read. The result is gap.json's content with the command line that reproduces it."""
    if plan.corpus == "c4":
        return None
    cfg = _yaml(plan, "spen")
    split = "test" if lm.get("scored_on") == "test" else "validation"
    seeds = [str(s) for s in lm["seeds"]]
    folders = {w: ",".join(lm["architectures"][w]["runs"][s]["final_dir"] for s in seeds) for w in ARCHITECTURES}
    sides = [eval_gap.resolve_side(folders[w], "--model_name_or_path") for w in ("gpt2", "spen")]
    sides[0].label, sides[1].label = "gpt2_arch", "spen"
    text = plan.corpus if plan.corpus in CORPORA else str(Path(plan.corpus).resolve())
    tok = AutoTokenizer.from_pretrained(tokenizer)
    max_tokens = plan.language_model.gap_max_tokens
    docs = eval_gap.read_documents(text, split, cfg["val_every"], cfg["test_every"])
    tokens = eval_gap.make_tokens(docs, tok, cfg["block_size"], max_tokens)
    out = work / "gap"
    result = eval_gap.run_gap(sides, tokens, len(tok), cfg["block_size"], seed=plan.seed,
                              device="cuda" if torch.cuda.is_available() else "cpu",
                              text={"source": text, "split": split, "val_every": cfg["val_every"],
                                    "test_every": cfg["test_every"]})
    result["command"] = command_line(GAP, {
        "--model_name_or_path": [folders["gpt2"], folders["spen"]], "--labels": ["gpt2_arch", "spen"],
        "--text": text, "--split": split, "--val_every": cfg["val_every"], "--test_every": cfg["test_every"],
        "--block_size": cfg["block_size"], "--tokenizer": tokenizer, "--max_tokens": max_tokens, "--seed": plan.seed,
        "--output_dir": out})
    with atomic_dir(out, tool="eval.gap") as tmp:  # what the recorded command writes: gap.json, gap.png, marker
        write_json(tmp / "gap.json", result)
        eval_gap.render_figure(result, tmp / "gap.png")
    result["folder"] = str(out)
    return result


def ablation(work: Path, plan: Plan, axis: str, lr: float, tokenizer: Path) -> dict[str, Any]:
    """SPEN with every reader (axis "predictor") or every trace (axis "trace") x seeds, paired by seed, verdicts
    against the plan's margin (:func:`eval.ablation.analyse`): a sweep on the experiment runner
    (``work/ablation_{axis}``), one arm per SPEN variant over the SPEN YAML. Each arm trains at ``lr`` (SPEN's rate
    from the headline pair) or, with the plan's ``ablation.lr_grid``, at its own rate chosen by the runner's rule
    from that grid at the longest budget. With more than one budget (``ablation.budgets``) every arm x seed trains
    at each (the shorter ones at the rates the longest chose); the result is the longest budget's, with every
    budget's comparisons under ``budgets`` (the verdict is the longest's). The result has eval.ablation's
    ablation.json shape and carries the command that reproduces the sweep."""
    a = plan.ablation
    cfg = _yaml(plan, "spen")
    budgets = sorted(a.budgets) if a.budgets else [a.max_steps or plan.language_model.max_steps or cfg["max_steps"]]
    longest = budgets[-1]
    arms = (list(a.traces or eval_ablation.TRACE_VARIANTS) if axis == "trace"
            else list(a.predictors or eval_ablation.PREDICTOR_VARIANTS))
    reference = eval_ablation.REFERENCE[axis]
    seeds = list(a.seeds)
    folder = work / f"ablation_{axis}"
    # More validation and logging points for the curves than the YAML's; neither draws random numbers, so every
    # run's trajectory is the one the YAML alone gives.
    curve_points = {"eval_steps": max(1, longest // eval_ablation.CURVE_POINTS),
                    "logging_steps": max(1, longest // (4 * eval_ablation.CURVE_POINTS))}
    grid = sorted(a.lr_grid) if a.lr_grid else [lr]
    results = run_sweep(folder, {
        "name": f"{plan.name}-ablation-{axis}", "trainer": "train", "analysis": "none", "seeds": seeds,
        "budgets": budgets, "score": "test" if cfg["test_every"] else "validation", "workers": plan.workers,
        "rate": {"lr_grid": grid, "choose": "first_seed", "extend": False},
        "arms": {arm: {"config": {**_arm_settings(plan, "spen", {"variant": arm}), **curve_points}} for arm in arms},
    }, tokenizer)

    rate_of = {arm: results["arms"][arm]["choices"][str(seeds[0])]["chosen"] for arm in arms}
    by_budget = {}
    for steps in budgets:
        tokens = steps * cfg["total_train_batch_size"] * cfg["block_size"]
        variants: dict[str, Any] = {}
        for arm in arms:
            arm_runs = {}
            for s in seeds:
                r, out = _run_of(folder, results["arms"][arm]["budgets"][str(steps)], s)
                arm_runs[str(s)] = {"final_val_loss": r["val_loss"], "final_val_ppl": math.exp(r["val_loss"]),
                                    **({"final_test_loss": r["test_loss"], "test_tokens": r["test_tokens"]}
                                       if "test_loss" in r else {}),
                                    "run_dir": str(out.relative_to(folder)), "command": _run_command(folder, r),
                                    "curve": read_metrics(out / "metrics.jsonl")}
            counts = results["arms"][arm]["budgets"][str(steps)][str(seeds[0])]["parameters"]
            variants[arm] = {"fields": SPEN_VARIANTS[arm], "lr": rate_of[arm], "parameters": counts["total"],
                             "tokens_per_parameter": tokens / counts["total"],
                             "non_embedding_parameters": counts["non_embedding"],
                             "mean_val_loss": statistics.fmean(r["final_val_loss"] for r in arm_runs.values()),
                             "runs": arm_runs}
        by_budget[steps] = _ablation_result(variants, reference, a.equivalence_margin) | {
            "axis": axis, "config": str(plan.yaml_path("spen")), "model_config": cfg["model_name_or_path"],
            "max_steps": steps, "tokens": tokens, "lr": rate_of[reference], "lrs": rate_of,
            "lr_grid": list(a.lr_grid) if a.lr_grid else None, "seeds": seeds, "data": plan.data,
            "design": eval_ablation.DESIGN, "reference": reference, "equivalence_margin": a.equivalence_margin}
    result = by_budget[longest]
    if a.lr_grid:
        result["rates"] = {}
        for arm in arms:
            choice = results["arms"][arm]["choices"][str(seeds[0])]
            result["rates"][arm] = {"chosen": choice["chosen"], "grid": choice["tried"],
                                    "edge": len(grid) > 1 and not choice["interior"],
                                    "chosen_on": f"final validation loss, seed {seeds[0]}"}
    result.update(command=sweep_command(folder), folder=str(folder), results_file=str(folder / "results.json"),
                  seconds=results["seconds"]["this_invocation"])
    if len(budgets) > 1:
        result["budgets"] = {str(steps): {**{k: r[k] for k in ("max_steps", "tokens", "final_val_loss", "comparisons",
                                                                "overall", "statement")},
                                          "command": result["command"], "folder": str(folder)}
                             for steps, r in by_budget.items()}
    eval_ablation._plot(result, folder / "loss_curves.png")  # the report's figure of this ablation (report.figures)
    return result


def _ablation_result(variants: dict[str, Any], reference: str, margin: float) -> dict[str, Any]:
    """The comparisons of one budget's arms (eval.ablation's: each arm minus the reference, paired by seed, on the
    test blocks where every run was scored there, else on validation), in ablation.json's keys."""
    val = {v: {s: r["final_val_loss"] for s, r in var["runs"].items()} for v, var in variants.items()}
    on_test = all("final_test_loss" in r for var in variants.values() for r in var["runs"].values())
    final = ({v: {s: r["final_test_loss"] for s, r in var["runs"].items()} for v, var in variants.items()}
             if on_test else val)
    for v, var in variants.items():
        var["mean_loss"] = statistics.fmean(final[v].values())
    out = {"variants": variants, "final_val_loss": val, "scored_on": "test" if on_test else "validation"}
    if on_test:
        out["final_test_loss"] = final
        out["test_tokens"] = next(iter(next(iter(variants.values()))["runs"].values()))["test_tokens"]
    return out | eval_ablation.analyse(final, reference, margin)


def probe_text(plan: Plan) -> str:
    """Held-out text for the identity probe: the validation documents of the training runs."""
    val_every = _yaml(plan, "spen")["val_every"]
    text, n = [], 0
    for doc in corpus.documents(plan.data, "validation", val_every):
        text.append(doc["text"])
        n += len(doc["text"])
        if n > 400_000:
            break
    return "\n\n".join(text)


def probe_settings(plan: Plan) -> Any:
    """The probes' settings (:class:`eval.probes.experiment.ProbeSettings`) of the plan's ``recall`` section,
    checked by the probes' own rules; a bad value is one line naming the plan's line (called before any work)."""
    r = plan.recall
    try:
        return ProbeSettings.make(quick=r.quick, seed=plan.seed, recall_pairs=r.pairs, recall_lrs=r.lr_grid,
                                  recall_steps=r.max_steps, recall_seeds=r.seeds)
    except ProbeInputError as e:
        field = {"recall_pairs": "pairs", "recall_lrs": "lr_grid", "recall_steps": "max_steps",
                 "recall_seeds": "seeds"}.get(e.field or "")
        raise UsageError(f"{plan.where('recall', field)}: {e}" if field else f"{plan.path}: recall: {e}") from None


def content_probes(work: Path, plan: Plan, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Identity at lag on the trained checkpoints and the recall map on fresh models of the map's configs
    (:func:`eval.probes.experiment.run_content_probes`), the GPT-2 architecture as the positive control. The
    result carries the command line that reproduces it (``python -m eval.probes``)."""
    r = plan.recall
    if plan.corpus in CORPORA:
        text_file = work / "probe_text.txt"  # kept, so that the recorded command can be run again
        text = probe_text(plan)
        text_file.write_text(text, encoding="utf-8")
    else:
        text_file = Path(plan.corpus).resolve()
        text = read_text(text_file)
    out = work / "content_probes"
    trained = [f"{name}={path}" for name, path in checkpoints.items()]
    the_map = default_map_models()
    recall_models = list(r.models or [m.name for m in the_map])
    settings = probe_settings(plan)
    result = run_content_probes([*(resolve_model(m) for m in trained), *the_map], text, out, settings,
                                identity=True, recall=recall_models, workers=plan.workers, control="gpt2",
                                progress=None if sys.stderr.isatty() else False)  # no bars in a log file
    result["command"] = command_line(PROBES, {
        "--model_name_or_path": trained, "--default_map": True, "--recall_models": recall_models,
        "--control": "gpt2", "--output_dir": out, "--text": text_file, "--seed": plan.seed,
        "--workers": plan.workers, "--quick": r.quick, "--max_steps": r.max_steps, "--learning_rate": r.lr_grid,
        "--recall_pairs": r.pairs, "--recall_seeds": r.seeds})
    return result


def regime(lm: dict[str, Any], ngram: dict[str, Any]) -> dict[str, Any]:
    """Parameters (total and non-embedding), tokens, tokens per parameter and epochs of each architecture of the
    headline pair, and the held-out tokens it was chosen on (validation) and scored on (test, when held out)."""
    out = {}
    split = lm.get("split") or {}
    for w, a in lm["architectures"].items():
        train_split = ngram["train_split_tokens"]
        non_embedding = a.get("parameter_counts", {}).get("non_embedding")
        out[w] = {"parameters": a["parameters"], "train_tokens": a["train_tokens"],
                  "tokens_per_parameter": a["train_tokens"] / a["parameters"],
                  "epochs": a["train_tokens"] / train_split if train_split else None, "val_tokens": ngram["val_tokens"],
                  "steps": a["steps"], "lr": a["lr"], "seeds": len(a["runs"])}
        if non_embedding:
            out[w] |= {"non_embedding_parameters": non_embedding,
                       "tokens_per_non_embedding_parameter": a["train_tokens"] / non_embedding}
        if "test_tokens" in split:
            out[w] |= {"test_tokens": split["test_tokens"], "test_documents": split["test_documents"]}
    return out


# ---------------------------------------------------------------------------------------------
# Depth: fixed accumulation (the residual sum) against selection in depth (Attention Residuals)
# ---------------------------------------------------------------------------------------------

def depth(work: Path, plan: Plan, tokenizer: Path) -> dict[str, Any] | None:
    """The depth-dilution experiment of the plan's ``depth`` section: the deep narrow SPEN with ``residual="add"``
    and ``"attention"``, paired by seed, on the report's data and tokenizer, as a sweep on the experiment runner
    (``work/depth``) declared as ``python -m eval.depth --config`` declares it (:func:`eval.depth.experiment_plan`),
    scored on validation, each final model measured (``measure: [depth]``). None when the plan has no depth section.
    The result is eval.depth's depth.json (the paired table, the competence gate against the Kneser-Ney bigram on the
    validation blocks, the claim's verdict), written with its figure into the sweep folder, and carries the command
    that reproduces the sweep."""
    d = plan.depth
    if d is None:
        return None
    config = in_repo(d.config)
    folder = work / "depth"
    margins = {"token_accuracy": d.accuracy_margin, "earlier_share": d.share_margin, "val_loss": d.loss_margin}
    cfg = read_spen_yaml(config, "the experiment swaps SPEN's residual")
    steps = d.max_steps or cfg["max_steps"]
    declared = eval_depth.experiment_plan(config, d.seeds, max_steps=steps, data=plan.data, workers=plan.workers,
                               margins=margins)
    # The loss and the gate on validation, as depth.json reads them; one validation at the end of each run and the
    # final model only (neither draws random numbers: the trajectory is the YAML's).
    declared |= {"name": f"{plan.name}-depth", "score": "validation"}
    for arm in declared["arms"].values():
        arm["config"] |= {"eval_steps": steps, "logging_steps": max(1, steps // 20), "save_steps": steps,
                          "save_total_limit": 1}
    results = run_sweep(folder, declared, tokenizer)

    seeds = declared["seeds"]
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    parameters = {}
    for residual in eval_depth.RESIDUALS:
        by_seed = results["arms"][residual]["budgets"][str(steps)]
        runs[residual] = {}
        for s in seeds:
            r, out = _run_of(folder, by_seed, s)
            measured = r["depth"]
            runs[residual][str(s)] = {**eval_depth.run_scalars(measured), "val_loss": r["val_loss"],
                                      "rms": measured["rms"], "recovered": measured["recovered"],
                                      "run_dir": str(out.relative_to(folder)), "command": _run_command(folder, r)}
        parameters[residual] = param_count(_run_of(folder, by_seed, seeds[0])[1] / "final")
    model = json.loads((Path(cfg["model_name_or_path"]) / "config.json").read_text())
    tokens = steps * cfg["total_train_batch_size"] * cfg["block_size"]
    lines = ngram_lines(plan_from_dict(declared, str(folder / "sweep.yaml")), folder, tokens)
    ngram = {k: lines[k] for k in ("unigram", "bigram", "trigram", "train_tokens", "eval_tokens")}
    gate = eval_depth.gate_record({r: statistics.fmean(x["val_loss"] for x in runs[r].values())
                                   for r in eval_depth.RESIDUALS}, ngram)
    table = eval_depth.paired_table(runs, margins)
    result: dict[str, Any] = {
        "claim": eval_depth.CLAIM, "rule": eval_depth.CLAIM_RULE, "design": eval_depth.DESIGN, "config": str(config),
        "model_config": cfg["model_name_or_path"], "num_layers": model["num_hidden_layers"],
        "hidden_size": model["hidden_size"], "residuals": list(eval_depth.RESIDUALS),
        "reference": eval_depth.REFERENCE, "seeds": seeds,
        "max_steps": steps, "tokens": tokens, "lr": declared["rate"]["lr_grid"][0], "data": list(plan.data),
        "margins": margins, "min_seeds": eval_depth.MIN_SEEDS,
        "probe": {**declared["arms"][eval_depth.REFERENCE]["config"]["depth"],
                  "inputs": "the first validation blocks (held-out text)"},
        "parameters": parameters, "runs": runs, "ngram": ngram, "gate": gate, "table": table,
        **eval_depth.claim_verdict(table, gate), "command": sweep_command(folder), "folder": str(folder)}
    write_json(folder / "depth.json", result)
    eval_depth.render_experiment_figure(result, folder / "depth.png")  # the report's figure of this experiment
    return result
