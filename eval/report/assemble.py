"""report.json: the stages' results gathered into one document, with the command behind every number."""

from __future__ import annotations

import math
import os
import platform
import statistics
from pathlib import Path
from typing import Any

from ema_boundary.paper import PAPER


def _ablation_summary(result: dict, axis: str) -> dict[str, Any]:
    """The report's view of one ablation.json: final losses, spreads and the verdict."""
    spread = result["spread"]
    return {
        "final_loss": {v: var["mean_val_loss"] for v, var in result["variants"].items()},
        "final_loss_per_seed": result["final_val_loss"],
        "spread": {f"across_{axis}": spread["across_variants_std"], "across_seeds": spread["across_seeds_std"],
                   "anova_f": spread["anova_f"], "anova_p": spread["anova_p"],
                   f"{axis}_within_seed_spread": spread["within_seed_spread"], "detail": spread},
        "statement": result["statement"],
        "command": result["command"],
    }


def _mean_loss(runs: dict) -> float:
    return statistics.fmean(r["final_val_loss"] for r in runs.values())


def param_count(checkpoint: Path) -> int:
    """Parameters stored in a checkpoint's model.safetensors (tied weights once)."""
    from safetensors import safe_open

    with safe_open(str(checkpoint / "model.safetensors"), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def linear_checkpoint(pred: dict) -> Path:
    """The first seed's SPEN (linear predictor, EMA traces) of the predictor ablation."""
    first = next(iter(pred["variants"]["linear"]["runs"].values()))
    return Path(pred["folder"]) / first["run_dir"] / "final"


def assemble(structure: dict, pred: dict, traces: dict, baseline: dict, probes: dict, top_command: str,
             seconds: float) -> dict[str, Any]:
    import torch
    import transformers

    spen_runs = pred["variants"]["linear"]["runs"]
    spen_loss, gpt2_loss = _mean_loss(spen_runs), _mean_loss(baseline["runs"])
    gpt2_ckpt = Path(next(iter(baseline["runs"].values()))["run_dir"]) / "final"
    return {
        "question": "What can fixed-decay EMA context represent (structure) and what can it not (content)?",
        # grammar_probe's results.json (schema in docs/grammar_probe.md) without its training logs.
        "structure": {k: v for k, v in structure.items() if k != "logs"},
        "content": {
            "perplexity": {"spen": math.exp(spen_loss), "gpt2_arch": math.exp(gpt2_loss)},
            "perplexity_ratio": math.exp(spen_loss - gpt2_loss),
            "val_loss": {"spen": spen_loss, "gpt2_arch": gpt2_loss},
            "parameters": {"spen": param_count(linear_checkpoint(pred)), "gpt2_arch": param_count(gpt2_ckpt)},
            "command": [pred["command"], *baseline["commands"]],
        },
        "ablation": _ablation_summary(pred, "predictors"),
        "traces": _ablation_summary(traces, "traces"),
        "identity_at_lag": {name: {"lags": r["lags"], "accuracy": r["best"], "chance": r["chance"]}
                            for name, r in probes["identity_at_lag"].items()},
        "recall": {name: {k: r[k] for k in ("pairs", "accuracy", "best_lr", "chance", "sweep")}
                   for name, r in probes["recall"].items()},
        "probe_command": probes["command"],
        "paper": PAPER,
        "environment": {
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "platform": platform.platform(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu ({_cpu_count()} cores)",
            "seconds": seconds,
        },
        "command": top_command,
    }


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
