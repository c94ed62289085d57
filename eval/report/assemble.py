"""report.json: the stages' results gathered into one document, with the command behind every number.

Every comparison goes through :mod:`ema_boundary.stats`: paired by seed, a 95% interval, an equivalence test
against the margin the plan declared, and a verdict; "equal" only where that test passes.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
from typing import Any

import torch
import transformers

from ema_boundary import stats
from ema_boundary.machine import machine_record
from ema_boundary.paper import PAPER
from eval.report.claim_rows import evaluate
from eval.report.committed import sweeps_block
from eval.report.paths import portable
from eval.report.schema import SCHEMA_VERSION

NAMES = {"spen": "spen", "gpt2": "gpt2_arch"}  # report.json's keys for the headline pair


def _ablation_summary(result: dict, steps_regime: dict[str, Any]) -> dict[str, Any]:
    """The report's view of one ablation.json: per arm the losses, the comparisons with the reference and the
    overall seed-blocked F test."""
    return {
        "reference": result["reference"],
        # The loss the arms are compared on: the test blocks' when eval.ablation scored them there (older
        # ablation.json files hold only the validation loss).
        "final_loss": {v: var.get("mean_loss", var["mean_val_loss"]) for v, var in result["variants"].items()},
        "final_loss_per_seed": result.get("final_test_loss", result["final_val_loss"]),
        "scored_on": result.get("scored_on", "validation"),
        "comparisons": result["comparisons"],
        "overall": result["overall"],
        "equivalence_margin": result["equivalence_margin"],
        "statement": result["statement"],
        "regime": {**steps_regime, "steps": result["max_steps"], "train_tokens": result["tokens"],
                   "tokens_per_parameter": {v: var["tokens_per_parameter"] for v, var in result["variants"].items()},
                   "parameters": {v: var["parameters"] for v, var in result["variants"].items()},
                   "seeds": len(result["seeds"]), "lr": result["lr"]},
        "command": result["command"],
        # Each arm's own rate (ablation.lr_grid) and the shorter budgets (ablation.budgets), when the plan has them.
        **({"rates": result["rates"]} if result.get("rates") else {}),
        **({"budgets": result["budgets"]} if result.get("budgets") else {}),
    }


def headline(lm: dict[str, Any], ngram: dict[str, Any], regime: dict[str, Any]) -> dict[str, Any]:
    """content: the headline pair's regime, losses with intervals, the paired comparison and the n-gram lines.

    The rates were chosen on validation blocks; the perplexities and the comparison read the test blocks when the
    runs were scored there (``scored_on``), the n-gram lines the same blocks."""
    arch = lm["architectures"]
    scored_on = lm.get("scored_on", "validation")
    val = {NAMES[w]: {s: r["final_val_loss"] for s, r in a["runs"].items()} for w, a in arch.items()}
    train = {NAMES[w]: {s: r["final_train_loss"] for s, r in a["runs"].items()} for w, a in arch.items()}
    test = ({NAMES[w]: {s: r["final_test_loss"] for s, r in a["runs"].items()} for w, a in arch.items()}
            if scored_on == "test" else None)
    scored = test or val
    margin = lm["equivalence_margin"]
    c = stats.compare(scored["spen"], scored["gpt2_arch"], margin)
    lo, hi = c.ci95
    ratio_ci = [math.exp(lo), math.exp(hi)] if math.isfinite(lo) else [math.nan, math.nan]
    spen = regime["spen"]
    split = lm.get("split") or {}
    content = {
        "regime": {
            "parameters": spen["parameters"], "train_tokens": spen["train_tokens"],
            "tokens_per_parameter": spen["tokens_per_parameter"], "epochs": spen["epochs"],
            "val_tokens": spen["val_tokens"], "by_architecture": {NAMES[w]: r for w, r in regime.items()},
            **({"test_tokens": split["test_tokens"], "test_documents": split["test_documents"]}
               if "test_tokens" in split else {}),
        },
        "ngram": {k: ngram[k] for k in ("unigram", "bigram", "trigram", "discount", "train_tokens", "val_targets")
                  } | {"split": ngram.get("split", "validation")},
        "learning_rate": {NAMES[w]: {"chosen": a["lr"], "grid": a["grid"], "grid_seed": lm["grid_seed"],
                                     "chosen_on": "final validation loss of the grid seed",
                                     **{k: a[k] for k in ("rates_tried", "interior", "grid_rule") if k in a}}
                          for w, a in arch.items()},
        "val_loss": {k: stats.summary(list(v.values())) for k, v in val.items()},
        "train_loss": {k: stats.summary(list(v.values())) for k, v in train.items()},
        "perplexity": {k: math.exp(statistics.fmean(v.values())) for k, v in scored.items()},
        "perplexity_ratio": math.exp(c.difference),
        "perplexity_ratio_ci95": ratio_ci,
        "comparison": {"what": f"SPEN minus GPT-2 architecture, final {scored_on} loss (nats), paired by seed",
                       **c.as_dict()},
        "curves": {NAMES[w]: {s: r["curve"] for s, r in a["runs"].items()} for w, a in arch.items()},
        "parameters": {NAMES[w]: a["parameters"] for w, a in arch.items()},
        "command": [r["command"] for a in arch.values() for r in a["runs"].values()]
                   + [g["command"] for a in arch.values() for lr, g in a["grid"].items() if float(lr) != a["lr"]],
        "scored_on": scored_on,
    }
    if test is not None:
        content["test_loss"] = {k: stats.summary(list(v.values())) for k, v in test.items()}
    if all("parameter_counts" in a for a in arch.values()):
        content["parameter_counts"] = {NAMES[w]: a["parameter_counts"] for w, a in arch.items()}
    return content


def assemble(plan: Any, structure: dict, lm: dict, ngram: dict, regime: dict, pred: dict, traces: dict,
             probes: dict, top_command: str, seconds: float, depth: dict | None = None,
             gap: dict | None = None) -> dict[str, Any]:
    content = headline(lm, ngram, regime)
    steps_regime = {"note": "shorter than the headline pair (the plan's ablation.max_steps)"}
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "question": "What can fixed-decay EMA context represent (structure) and what can it not (content)?",
        "plan": {"name": plan.name, "path": plan.path, "declared": plan.declared, "corpus": plan.corpus,
                 "seed": plan.seed, "scale": plan.scale},
        # grammar_probe's results.json (schema in docs/grammar_probe.md) without its training logs.
        "structure": {k: v for k, v in structure.items() if k != "logs"},
        "content": content,
        "claims": [],  # filled below from the other blocks (eval.report.claims)
        "ablation": _ablation_summary(pred, steps_regime),
        "traces": _ablation_summary(traces, steps_regime),
        "probes": probe_block(probes),
        "paper": PAPER,
        "environment": {
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "platform": platform.platform(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu ({_cpu_count()} cores)",
            "workers": plan.workers, "seconds": seconds,
        },
        "command": top_command,
        "machine": machine_record(),  # CPU, threads, git commit, library versions (ema_boundary.machine)
    }
    if getattr(plan, "committed", None):  # the committed sweeps the plan names carry their claims' rows
        report["sweeps"] = sweeps_block(plan.committed)
    if depth is not None:
        report["depth"] = depth_block(depth)
    if gap is not None:
        report["gap"] = gap_block(gap)
    report["claims"] = evaluate(report)
    # Recorded paths relative to the repository or the output folder: the commands run from any clone.
    return portable(report)


DEPTH_KEYS = ("claim", "rule", "design", "config", "model_config", "num_layers", "hidden_size", "residuals",
              "reference", "seeds", "max_steps", "tokens", "lr", "margins", "min_seeds", "probe", "parameters",
              "ngram", "gate", "table", "verdict", "reason", "conclusion", "command")
DEPTH_RUN_KEYS = ("token_accuracy", "token_chance", "embedding_share", "block_share", "earlier_share", "rms_growth",
                  "val_loss", "rms", "command")


def depth_block(result: dict[str, Any]) -> dict[str, Any]:
    """report.json's ``depth``: eval.depth's experiment (depth.json) with, per run, the numbers the table compares
    and the RMS against depth (not the probes' raw R^2, which the shares clip), and the command."""
    return {**{k: result[k] for k in DEPTH_KEYS},
            "runs": {r: {s: {k: run[k] for k in DEPTH_RUN_KEYS} for s, run in by_seed.items()}
                     for r, by_seed in result["runs"].items()}}


def gap_block(gap: dict[str, Any]) -> dict[str, Any]:
    """report.json's ``gap``: eval.gap's gap.json on the headline pair (model a the GPT-2 architecture, model b
    SPEN: every difference is SPEN's deficit), without its definitions' prose."""
    return {k: v for k, v in gap.items() if k != "definitions"}


def probe_block(probes: dict[str, Any]) -> dict[str, Any]:
    """report.json's ``probes``: the content probes' results (identity at lag, the recall map, its positive
    control and the escape comparison: a selective state against a fixed bank of equal state) as the probes'
    renderer reads them, without their per-lag probe details, and the command."""
    return {**{k: probes.get(k) for k in ("models", "recall", "recall_settings", "identity_settings",
                                          "positive_control", "recall_escape")},
            "identity_at_lag": {name: {k: r[k] for k in ("lags", "best", "chance")}
                                for name, r in probes["identity_at_lag"].items()},
            "command": probes["command"]}


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
