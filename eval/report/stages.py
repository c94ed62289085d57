"""The report's stages, each run through one of the project's own entry points.

- structure: ``grammar_probe build`` and ``run`` in child processes (beside the content stages), each the
  recorded command line itself;
- the headline pair: ``train.py`` runs (:mod:`eval.runs`, each a :class:`~eval.runs.Run` whose command is its
  argv);
- the ablations and the content probes: typed calls (:func:`eval.ablation.run_ablation`,
  :func:`eval.probes.experiment.run_content_probes`) with the plan's checked values; the command line that
  reproduces each is written from the same values as a by-product (:func:`command_line`).

Outputs stay under ``WORK`` (``OUT/work`` in the finished report): datasets, checkpoints, results.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from eval.report.plan import CORPORA, Plan, in_repo

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
                    # In this process's folder, so that relative paths in argv mean what they mean here.
                    self.process = subprocess.Popen([sys.executable, "-m", "grammar_probe", *argv], stdout=f,
                                                    stderr=subprocess.STDOUT)
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
    from eval.ablation import build_tokenizer as build

    cfg = _yaml(plan, "spen")
    vocab = {w: json.loads((Path(_yaml(plan, w)["model_name_or_path"]) / "config.json").read_text())["vocab_size"]
             for w in ARCHITECTURES}
    if len(set(vocab.values())) != 1:
        raise UsageError(f"{plan.path}: the two architectures' vocabularies differ ({vocab}); "
                         "one tokenizer serves both")
    return build(cfg, plan.data, work / "tokenizer")


def _yaml(plan: Plan, which: str) -> dict[str, Any]:
    import train_config

    try:
        return train_config.read_yaml(plan.yaml_path(which))
    except train_config.ConfigError as e:
        raise UsageError(f"train.py: {e}") from None


# The settings both architectures' YAMLs must share: they fix the blocks every run is chosen and scored on.
SHARED_SPLIT = ("data", "val_every", "test_every", "block_size", "max_eval_samples", "max_test_samples")


def language_model(work: Path, plan: Plan, tokenizer: Path) -> dict[str, Any]:
    """The headline pair: each architecture's rate chosen from the plan's grid on validation (the grid's seed),
    the grid extended beyond an edge by the plan's rule (:meth:`LanguageModelPlan.beyond_edge`), then the other
    seeds at the chosen rate (``train.py`` runs, ``plan.workers`` at a time). Every seed's final model is scored
    on the test blocks of the YAMLs' test split when they hold one (``scored_on`` says which blocks the
    comparison reads: "test", else "validation")."""
    from eval.runs import Run, read_metrics, read_test, train_runs

    lm = plan.language_model
    cfgs = {w: _yaml(plan, w) for w in ARCHITECTURES}
    differ = [k for k in SHARED_SPLIT if cfgs["spen"][k] != cfgs["gpt2"][k]]
    if differ:
        raise UsageError(f"{plan.path}: the two architectures' YAMLs differ in {', '.join(differ)}; the pair must be "
                         "chosen and scored on the same blocks")
    seed0 = cfgs["spen"]["seed"]
    seeds = [seed0 + i for i in range(lm.seeds)]
    runs: dict[str, Run] = {}
    rate_of: dict[str, tuple[str, float]] = {}  # run name -> (architecture, rate), the rate as the plan gave it

    def run(which: str, lr: float, seed: int) -> Run:
        out = work / "language_model" / which / f"lr_{lr:g}" / f"seed_{seed}"
        argv = ["--config", plan.yaml_path(which), "--output_dir", out, "--seed", seed, "--learning_rate", lr,
                "--tokenizer", tokenizer, "--data", *plan.data,
                *(["--max_steps", lm.max_steps] if lm.max_steps else [])]
        r = runs[f"{which}/lr_{lr:g}/seed_{seed}"] = Run(f"{which}/lr_{lr:g}/seed_{seed}", tuple(argv))
        rate_of[r.name] = (which, lr)
        return r

    logs = work / "logs" / "language_model"
    losses: dict[str, dict[float, float]] = {w: {} for w in ARCHITECTURES}  # the grid seed's, every rate tried
    todo = [run(w, lr, seed0) for w in ARCHITECTURES for lr in lm.lr_grid]
    desc = "learning-rate grid"
    while todo:  # the declared grid, then the rates beyond an edge, until every choice is interior or capped
        train_runs(todo, logs, plan.workers, desc=desc)
        for r in todo:
            which, lr = rate_of[r.name]
            losses[which][lr] = read_metrics(r.output_dir / "metrics.jsonl")["val_loss"][-1]
        todo = [run(w, lr, seed0) for w in ARCHITECTURES for lr in lm.beyond_edge(losses[w])]
        desc = "learning-rate grid, beyond an edge"
    chosen = {w: min(losses[w], key=losses[w].__getitem__) for w in ARCHITECTURES}
    rest = [run(w, chosen[w], s) for w in ARCHITECTURES for s in seeds[1:]]
    train_runs(rest, logs, plan.workers, desc="headline pair, more seeds")

    tests = {name: read_test(r.output_dir / "metrics.jsonl") for name, r in runs.items()}
    scored_on = "test" if all(tests.values()) else "validation"
    result: dict[str, Any] = {"seeds": seeds, "lr_grid": list(lm.lr_grid), "grid_seed": seed0,
                              "equivalence_margin": lm.equivalence_margin, "scored_on": scored_on,
                              "split": {k: cfgs["spen"][k] for k in ("val_every", "test_every")}, "architectures": {}}
    if scored_on == "test":
        sizes = {(t["test_tokens"], t["test_documents"]) for t in tests.values()}
        assert len(sizes) == 1, f"the runs scored different test blocks: {sizes}"
        (tokens, documents), = sizes
        result["split"] |= {"test_tokens": tokens, "test_documents": documents}
    for w in ARCHITECTURES:
        by_seed = {}
        for s in seeds:
            r = runs[f"{w}/lr_{chosen[w]:g}/seed_{s}"]
            curve = read_metrics(r.output_dir / "metrics.jsonl")
            test = tests[r.name]
            by_seed[str(s)] = {"final_val_loss": curve["val_loss"][-1], "final_train_loss": curve["loss"][-1],
                               **({"final_test_loss": test["test_loss"]} if test else {}),
                               "final_dir": str(r.output_dir / "final"), "command": r.command, "curve": curve}
        steps = lm.max_steps or cfgs[w]["max_steps"]
        counts = _parameter_counts(cfgs[w]["model_name_or_path"])
        tried = sorted(losses[w])
        interior = lm.interior(losses[w])
        result["architectures"][w] = {
            "label": ARCHITECTURES[w], "yaml": getattr(lm, w), "lr": chosen[w],
            "grid": {f"{lr:g}": {"final_val_loss": losses[w][lr], "extension": lr not in lm.lr_grid,
                                 "command": runs[f"{w}/lr_{lr:g}/seed_{seed0}"].command} for lr in tried},
            "rates_tried": tried, "interior": interior,
            "grid_rule": _grid_rule(lm, interior, len(set(tried) - set(lm.lr_grid))),
            "parameters": counts["total"], "parameter_counts": counts,
            "steps": steps, "train_tokens": steps * cfgs[w]["total_train_batch_size"] * cfgs[w]["block_size"],
            "runs": by_seed,
        }
    return result


def _grid_rule(lm: Any, interior: bool, added: int) -> str:
    """How the grid search ended for one architecture, in words."""
    if interior:
        return f"interior ({added} rate(s) added beyond the declared grid)" if added else "interior"
    if not lm.extend_grid:
        return "edge: the plan declares no extension of the grid"
    if added >= lm.max_extensions:
        return f"edge: the cap of {lm.max_extensions} added rate(s) stopped the extension"
    return "edge: the next rate beyond the edge is not below 1"


def _parameter_counts(model_dir: str) -> dict[str, int]:
    """Total, embedding and non-embedding parameters of a model config (ema_boundary.params; no weights built)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
    from ema_boundary.params import parameter_counts

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    return parameter_counts(model).as_dict()


def ngram_reference(plan: Plan, tokenizer: Path, train_tokens: int, split: str = "validation") -> dict[str, Any]:
    """Kneser-Ney unigram/bigram/trigram perplexities on the blocks the runs are compared on (``split``: the test
    blocks when the runs were scored there, else the validation blocks), counted on the training stream the runs
    read (at most the ``train_tokens`` they saw); also the split's size, for the epochs."""
    from transformers import AutoTokenizer

    from ema_boundary import corpus
    from eval.ngram import ngram_references

    cfg = _yaml(plan, "spen")
    tok = AutoTokenizer.from_pretrained(tokenizer)
    n_blocks = cfg["max_test_samples"] if split == "test" else cfg["max_eval_samples"]
    result = ngram_references(plan.data, cfg["val_every"], tok, cfg["block_size"], n_blocks, train_tokens, split,
                              cfg["test_every"])
    val = corpus.validation_blocks(plan.data, cfg["val_every"], tok, cfg["block_size"], cfg["max_eval_samples"])
    result["val_tokens"] = int(val.shape[0] * (val.shape[1] - 1))
    return result


def gap(work: Path, plan: Plan, lm: dict[str, Any], tokenizer: Path) -> dict[str, Any] | None:
    """Where the headline pair's gap lives (:mod:`eval.gap`): every seed's per-token loss on the blocks the pair is
    scored on (the test documents when held out), split into AR hits, other repeats and first occurrences, SPEN
    (model b) minus the GPT-2 architecture (model a) paired by seed. None for a streamed corpus (c4), which
    eval.gap does not read. The result is gap.json's content with the command line that reproduces it."""
    from transformers import AutoTokenizer

    from ema_boundary.io import atomic_dir, write_json
    from eval import gap as eval_gap

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
    import torch

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
    """SPEN with every reader (axis "predictor") or every trace (axis "trace") x seeds
    (:func:`eval.ablation.run_ablation`), paired by seed, verdicts against the plan's margin. Each arm trains at
    ``lr`` (SPEN's rate from the grid) or, with the plan's ``ablation.lr_grid``, at its own rate chosen from that
    grid at the longest budget. With more than one budget (``ablation.budgets``) the stage is
    :func:`eval.ablation.run_budgets` into ``work/ablation_{axis}`` (``steps_N/`` each, shorter budgets at the rates
    the longest chose, ``budgets.json``); the result is then the longest budget's ablation.json with the others under
    ``budgets`` (the verdict is the longest's) and ``budgets_file``. The result carries the command line that
    reproduces it (``python -m eval.ablation``)."""
    from eval.ablation import PREDICTOR_VARIANTS, TRACE_VARIANTS, run_ablation, run_budgets

    a = plan.ablation
    budgets = sorted(a.budgets) if a.budgets else [a.max_steps or plan.language_model.max_steps]
    arms = list(a.traces or TRACE_VARIANTS) if axis == "trace" else list(a.predictors or PREDICTOR_VARIANTS)
    arm_flag = "--trace" if axis == "trace" else "--variants"
    grid = a.lr_grid
    rate = None if grid else lr
    out = work / f"ablation_{axis}"
    design = {"variants": arms if axis != "trace" else None, "traces": arms if axis == "trace" else None,
              "data": plan.data, "lr": rate, "lr_grid": grid, "workers": plan.workers,
              "margin": a.equivalence_margin, "tokenizer": tokenizer}
    if len(budgets) > 1:
        from ema_boundary.io import read_json

        summary = run_budgets(plan.yaml_path("spen"), a.seeds, out, budgets, **design)
        by_budget = {b["max_steps"]: read_json(out / b["folder"] / "ablation.json", "ablation.json",
                                               "written by eval.ablation --budgets") for b in summary["budgets"]}
        longest = by_budget[summary["longest"]]
        longest.update(command=summary["command"], folder=str(out / f"steps_{summary['longest']}"),
                       budgets_file=str(out / "budgets.json"))
        # One command trains every budget; each entry names it and its own folder.
        longest["budgets"] = {str(steps): {**{k: r[k] for k in ("max_steps", "tokens", "final_val_loss",
                                                                 "comparisons", "overall", "statement")},
                                           "command": summary["command"], "folder": str(out / f"steps_{steps}")}
                              for steps, r in sorted(by_budget.items())}
        return longest
    result = run_ablation(plan.yaml_path("spen"), a.seeds, out, max_steps=budgets[0], **design)
    result["command"] = command_line(ABLATION, {
        "--config": plan.yaml_path("spen"), "--seeds": a.seeds, "--output_dir": out, arm_flag: arms,
        "--learning_rate": rate, "--lr_grid": ",".join(f"{g:g}" for g in grid) if grid else None,
        "--margin": a.equivalence_margin, "--tokenizer": tokenizer, "--workers": plan.workers,
        "--max_steps": budgets[0], "--data": plan.data})
    result["folder"] = str(out)
    return result


def probe_text(plan: Plan) -> str:
    """Held-out text for the identity probe: the validation documents of the training runs."""
    from ema_boundary import corpus

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
    from eval.probes.experiment import ProbeInputError, ProbeSettings

    r = plan.recall
    try:
        return ProbeSettings.make(quick=r.quick, seed=plan.seed, recall_pairs=r.pairs, recall_lrs=r.lrs,
                                  recall_steps=r.steps, recall_seeds=r.seeds)
    except ProbeInputError as e:
        field = {"recall_pairs": "pairs", "recall_lrs": "lrs", "recall_steps": "steps",
                 "recall_seeds": "seeds"}.get(e.field or "")
        raise UsageError(f"{plan.where('recall', field)}: {e}" if field else f"{plan.path}: recall: {e}") from None


def content_probes(work: Path, plan: Plan, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Identity at lag on the trained checkpoints and the recall map on fresh models of the map's configs
    (:func:`eval.probes.experiment.run_content_probes`), the GPT-2 architecture as the positive control. The
    result carries the command line that reproduces it (``python -m eval.probes``)."""
    from eval.probes.experiment import default_map_models, run_content_probes
    from eval.probes.experiment import probe_text as read_text
    from eval.probes.models import resolve_model

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
        "--workers": plan.workers, "--quick": r.quick, "--max_steps": r.steps, "--learning_rate": r.lrs,
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

DEPTH = ("python", "-m", "eval.depth")


def depth(work: Path, plan: Plan, tokenizer: Path) -> dict[str, Any] | None:
    """The depth-dilution experiment of the plan's ``depth`` section (:func:`eval.depth.run_depth_experiment`):
    the deep narrow SPEN with ``residual="add"`` and ``"attention"``, paired by seed, on the report's data and
    tokenizer; None when the plan has no depth section. The result carries the command line that reproduces it
    (``python -m eval.depth --config``)."""
    from eval.depth import run_depth_experiment

    d = plan.depth
    if d is None:
        return None
    config = in_repo(d.config)
    out = work / "depth"
    margins = {"token_accuracy": d.accuracy_margin, "earlier_share": d.share_margin, "val_loss": d.loss_margin}
    result = run_depth_experiment(config, d.seeds, out, max_steps=d.max_steps, data=plan.data, tokenizer=tokenizer,
                                  workers=plan.workers, margins=margins)
    result["command"] = command_line(DEPTH, {
        "--config": config, "--seeds": d.seeds, "--max_steps": d.max_steps, "--data": plan.data,
        "--tokenizer": tokenizer, "--workers": plan.workers, "--token_accuracy_margin": d.accuracy_margin,
        "--earlier_share_margin": d.share_margin, "--val_loss_margin": d.loss_margin, "--output_dir": out})
    result["folder"] = str(out)
    return result
