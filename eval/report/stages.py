"""The report's stages, each run through one of the project's own entry points.

Every stage builds the argument list of a command line, executes exactly that list, and records
``shlex.join`` of it: the "reproduce" lines of ``report.json`` are what ran, so they cannot drift.
Outputs stay under ``WORK`` (``OUT/work`` in the finished report): datasets, checkpoints, results.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from eval.report.plan import CORPORA, Plan
from modeling_spen.configuration_spen import TRACES

GRAMMAR = ("python", "-m", "grammar_probe")
ABLATION = ("python", "-m", "eval.ablation")
PROBES = ("python", "-m", "eval.content_probes")
ARCHITECTURES = {"spen": "SPEN (EMA traces)", "gpt2": "GPT-2 architecture"}


def run_entry_point(prog: Sequence[str], main: Callable[[list[str]], object], argv: Sequence[object]) -> str:
    """Run ``main(argv)`` in this process and return the command line that reproduces it.

    A non-zero exit status (the CLIs' convention for bad input) stops the report with its command.
    """
    args = [str(a) for a in argv]
    status = main(args)
    command = shlex.join([*prog, *args])
    if isinstance(status, int) and not isinstance(status, bool) and status != 0:
        raise UsageError(f"stage failed (exit status {status}): {command}")
    return command


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
        self._thread = threading.Thread(target=self._run, args=(argvs,), daemon=True)
        self._thread.start()

    def _run(self, argvs: list[list[str]]) -> None:
        with open(self.log, "w") as f:
            for argv in argvs:  # exactly the recorded argv, one command after the other
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
        """Kill the child (the report failed elsewhere): nothing keeps running after the report exits."""
        self._stop.set()
        if self.process is not None and self.process.poll() is None:
            self.process.kill()

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


def language_model(work: Path, plan: Plan, tokenizer: Path) -> dict[str, Any]:
    """The headline pair: each architecture's rate chosen from the plan's grid on validation (the grid's seed),
    then the other seeds at the chosen rate (``train.py`` runs, ``plan.workers`` at a time)."""
    from eval.runs import Run, param_count, read_metrics, train_runs

    lm = plan.language_model
    cfgs = {w: _yaml(plan, w) for w in ARCHITECTURES}
    seed0 = cfgs["spen"]["seed"]
    seeds = [seed0 + i for i in range(lm.seeds)]

    def run(which: str, lr: float, seed: int) -> Run:
        out = work / "language_model" / which / f"lr_{lr:g}" / f"seed_{seed}"
        argv = ["--config", plan.yaml_path(which), "--output_dir", out, "--seed", seed, "--lr", lr,
                "--tokenizer", tokenizer, "--data", *plan.data,
                *(["--max_steps", lm.max_steps] if lm.max_steps else [])]
        return Run(f"{which}/lr_{lr:g}/seed_{seed}", tuple(argv))

    logs = work / "logs" / "language_model"
    grid = [run(w, lr, seed0) for w in ARCHITECTURES for lr in lm.lr_grid]
    train_runs(grid, logs, plan.workers, desc="learning-rate grid")
    final = {r.name: read_metrics(r.output_dir / "metrics.jsonl")["val_loss"][-1] for r in grid}
    chosen = {w: min(lm.lr_grid, key=lambda lr, w=w: final[f"{w}/lr_{lr:g}/seed_{seed0}"]) for w in ARCHITECTURES}
    rest = [run(w, chosen[w], s) for w in ARCHITECTURES for s in seeds[1:]]
    train_runs(rest, logs, plan.workers, desc="headline pair, more seeds")

    result: dict[str, Any] = {"seeds": seeds, "lr_grid": list(lm.lr_grid), "grid_seed": seed0,
                              "equivalence_margin": lm.equivalence_margin, "architectures": {}}
    for w in ARCHITECTURES:
        by_seed = {}
        for s in seeds:
            r = next(x for x in [*grid, *rest] if x.name == f"{w}/lr_{chosen[w]:g}/seed_{s}")
            curve = read_metrics(r.output_dir / "metrics.jsonl")
            by_seed[str(s)] = {"final_val_loss": curve["val_loss"][-1], "final_train_loss": curve["loss"][-1],
                               "final_dir": str(r.output_dir / "final"), "command": r.command, "curve": curve}
        steps = lm.max_steps or cfgs[w]["max_steps"]
        result["architectures"][w] = {
            "label": ARCHITECTURES[w], "yaml": getattr(lm, w), "lr": chosen[w],
            "grid": {f"{lr:g}": {"final_val_loss": final[f"{w}/lr_{lr:g}/seed_{seed0}"],
                                 "command": next(x for x in grid if x.name == f"{w}/lr_{lr:g}/seed_{seed0}").command}
                     for lr in lm.lr_grid},
            "parameters": param_count(Path(by_seed[str(seed0)]["final_dir"])),
            "steps": steps, "train_tokens": steps * cfgs[w]["total_train_batch_size"] * cfgs[w]["block_size"],
            "runs": by_seed,
        }
    return result


def ngram_reference(plan: Plan, tokenizer: Path, train_tokens: int) -> dict[str, Any]:
    """Kneser-Ney unigram/bigram/trigram perplexities on the runs' own validation blocks, counted on the training
    stream the runs read (at most the ``train_tokens`` they saw); also the split's size, for the epochs."""
    from transformers import AutoTokenizer

    import train_data
    from eval.ngram import ngram_perplexities

    cfg = _yaml(plan, "spen")
    tok = AutoTokenizer.from_pretrained(tokenizer)
    stream: list[int] = []
    exhausted = True  # a streamed corpus (c4) is read only as far as the runs read it; a finite one to its end
    for texts in train_data.batched((d["text"] for d in train_data.documents(plan.data, "train", cfg["val_every"])),
                                    64):
        for ids in tok(texts, add_special_tokens=False, verbose=False)["input_ids"]:
            stream.extend([*ids, tok.eos_token_id])
        if plan.corpus == "c4" and len(stream) >= train_tokens:
            exhausted = False
            break
    val = train_data.validation_blocks(plan.data, cfg["val_every"], tok, cfg["block_size"], cfg["max_eval_samples"])
    result = ngram_perplexities(stream[:train_tokens], val, len(tok))
    # The training split's size in tokens (None when it is larger than what the runs read: a streamed corpus).
    result["train_split_tokens"] = len(stream) if exhausted else None
    result["val_tokens"] = int(val.shape[0] * (val.shape[1] - 1))
    return result


def ablation(work: Path, plan: Plan, axis: str, lr: float, tokenizer: Path) -> dict[str, Any]:
    """SPEN with every reader (axis "predictor") or every trace (axis "trace") x seeds (``eval.ablation``), at
    ``lr`` (SPEN's rate from the grid), paired by seed, verdicts against the plan's margin."""
    from eval.ablation import main

    a = plan.ablation
    out = work / f"ablation_{axis}"
    steps = a.max_steps or plan.language_model.max_steps
    argv = ["--config", plan.yaml_path("spen"), "--seeds", a.seeds, "--out", out,
            *(["--trace", *(a.traces or TRACES)] if axis == "trace" else
              ["--variants", *a.predictors] if a.predictors else []), "--lr", lr, "--margin", a.equivalence_margin,
            "--tokenizer", tokenizer, "--workers", plan.workers,
            *(["--max_steps", steps] if steps else []), "--data", *plan.data]
    command = run_entry_point(ABLATION, main, argv)
    result = json.loads((out / "ablation.json").read_text())
    result["command"], result["folder"] = command, str(out)
    return result


def probe_text(plan: Plan) -> str:
    """Held-out text for the identity probe: the validation documents of the training runs."""
    import train_data

    val_every = _yaml(plan, "spen")["val_every"]
    text, n = [], 0
    for doc in train_data.documents(plan.data, "validation", val_every):
        text.append(doc["text"])
        n += len(doc["text"])
        if n > 400_000:
            break
    return "\n\n".join(text)


def content_probes(work: Path, plan: Plan, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Identity at lag on the trained checkpoints and the recall map on fresh models of the map's configs
    (``eval.content_probes``), the GPT-2 architecture as the positive control."""
    from eval.content_probes import main
    from eval.recall import default_map_configs

    r = plan.recall
    if plan.corpus in CORPORA:
        text = work / "probe_text.txt"
        text.write_text(probe_text(plan), encoding="utf-8")
    else:
        text = Path(plan.corpus).resolve()
    out = work / "content_probes"
    recall_models = list(r.models or default_map_configs())
    argv = ["--models", *[f"{name}={path}" for name, path in checkpoints.items()], "--default-map",
            "--recall-models", *recall_models, "--control", "gpt2", "--out", out, "--text", text,
            "--seed", plan.seed, "--workers", plan.workers, *(["--quick"] if r.quick else []),
            *(["--recall-steps", r.steps] if r.steps else []), *(["--recall-lrs", *r.lrs] if r.lrs else []),
            *(["--recall-pairs", *r.pairs] if r.pairs else [])]
    command = run_entry_point(PROBES, main, argv)
    result = json.loads((out / "content_probes.json").read_text())
    result["command"] = command
    return result


def regime(lm: dict[str, Any], ngram: dict[str, Any]) -> dict[str, Any]:
    """Parameters, tokens, tokens per parameter and epochs of each architecture of the headline pair."""
    out = {}
    for w, a in lm["architectures"].items():
        split = ngram["train_split_tokens"]
        out[w] = {"parameters": a["parameters"], "train_tokens": a["train_tokens"],
                  "tokens_per_parameter": a["train_tokens"] / a["parameters"],
                  "epochs": a["train_tokens"] / split if split else None, "val_tokens": ngram["val_tokens"],
                  "steps": a["steps"], "lr": a["lr"], "seeds": len(a["runs"])}
    return out
