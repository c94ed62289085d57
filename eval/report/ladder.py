"""The perplexity claim across a committed scale ladder (``ema-boundary scale``), read by the report.

The report's headline pair is as large as its budget allows; on two CPU cores that is too small to pass the
bigram gate, so its perplexity row says "not testable in this regime". The ladder trains the same fair pair at
several sizes (``hub_configs/report/scale.yaml``, hours), is committed (``docs/scale/report.json``) and the plan
names it (``language_model.ladder``). This module checks that file, keeps what the report needs (report.json's
``scale_ladder``), says where along the ladder the gap can be read and gives the verdict the claims table prints
in its own row (``perplexity_gap_ladder``): read at the **largest size whose models can speak** (every seed of
both architectures below the Kneser-Ney bigram on the same test tokens) and that has an interval.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from ema_boundary.io import read_json

LADDER_TOOL = "eval.scale"  # eval.scale.TOOL: the report.json's "tool" (eval.scale imports the plan, not this)
MIN_SEEDS = 3  # a size's gap is read only with an interval over at least this many paired seeds (the ladder's 3)
SIZE_KEYS = ("name", "width", "layers", "steps", "train_tokens", "architectures", "bigram_loss", "gate", "gap")

__all__ = ["LADDER_TOOL", "MIN_SEEDS", "deciding_size", "ladder_block", "phrase", "read_ladder", "size_text"]


def read_ladder(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """A committed ladder's ``report.json``, checked: one line naming the file (as ``name``, e.g. the path the
    plan wrote, when given) when it cannot serve."""
    where = f"language_model.ladder: {name or path}"
    ladder = read_json(path, "report.json", "an `ema-boundary scale` report.json", name=where)
    if not isinstance(ladder, dict) or ladder.get("tool") != LADDER_TOOL:
        raise UsageError(f"{where}: not an `ema-boundary scale` report.json (its tool is "
                         f"{ladder.get('tool') if isinstance(ladder, dict) else None!r}, expected {LADDER_TOOL!r})")
    sizes = ladder.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        raise UsageError(f"{where}: holds no sizes")
    for i, size in enumerate(sizes):
        missing = [k for k in SIZE_KEYS if not isinstance(size, dict) or k not in size]
        if missing:
            raise UsageError(f"{where}: sizes[{i}] lacks {', '.join(missing)}")
    return ladder


def _arch(a: dict[str, Any]) -> dict[str, Any]:
    return {"parameters": a["parameters"], "tokens_per_parameter": a["tokens_per_parameter"], "lr": a["lr"],
            "lr_interior": a["lr_interior"], "loss": a["loss"], "below_bigram": a["below_bigram"]}


def ladder_block(ladder: dict[str, Any], source: str) -> dict[str, Any]:
    """report.json's ``scale_ladder``: per size the two architectures' parameters, chosen rate and scored loss,
    the bigram, the gate and the paired gap; ``source`` is the report.json the plan named (as written there)."""
    sizes = [{"name": s["name"], "width": s["width"], "layers": s["layers"], "steps": s["steps"],
              "train_tokens": s["train_tokens"], "bigram_loss": s["bigram_loss"], "gate": s["gate"],
              "gap": s["gap"], "architectures": {k: _arch(a) for k, a in s["architectures"].items()}}
             for s in ladder["sizes"]]
    return {"source": source, "plan": (ladder.get("plan") or {}).get("path"), "command": ladder.get("command"),
            "scored_on": ladder.get("scored_on"), "eval_tokens": ladder.get("eval_tokens"),
            "eval_documents": ladder.get("eval_documents"), "corpus": ladder.get("corpus"),
            "seconds": ladder.get("seconds"), "paper": ladder.get("paper"), "min_seeds": MIN_SEEDS, "sizes": sizes}


def _non_embedding(size: dict[str, Any]) -> int:
    return size["architectures"]["spen"]["parameters"]["non_embedding"]


def deciding_size(block: dict[str, Any]) -> dict[str, Any] | None:
    """The size the verdict reads: the largest (non-embedding parameters) at which both models can speak and the
    gap has an interval over at least ``block['min_seeds']`` paired seeds; None when there is none."""
    ready = [s for s in block["sizes"]
             if s["gate"] and s["gap"].get("ci95") is not None and s["gap"]["n"] >= block["min_seeds"]]
    return max(ready, key=_non_embedding) if ready else None


def size_text(size: dict[str, Any]) -> str:
    """One size in words: its parameters, both losses against the bigram, and the gap where it has an interval."""
    a = size["architectures"]
    n = a["spen"]["loss"]["n"]
    text = (f"{size['name']} ({_non_embedding(size):,} non-embedding parameters, {n} seed{'s' * (n != 1)}): SPEN "
            f"{a['spen']['loss']['mean']:.3f}, GPT-2 {a['gpt2']['loss']['mean']:.3f}, bigram {size['bigram_loss']:.3f} "
            "nats")
    gap = size["gap"]
    if not size["gate"]:
        return text + ", not testable (a model is not below the bigram)"
    if gap.get("ci95") is None:
        return text + f", gap {gap['mean']:+.3f} (no interval)"
    lo, hi = gap["ci95"]
    # exp(gap) is SPEN's perplexity over GPT-2's: the paper's 7.9x in the same terms
    return (text + f", gap {gap['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}] (perplexity ratio {math.exp(gap['mean']):.2f}x "
            f"[{math.exp(lo):.2f}, {math.exp(hi):.2f}])")


def phrase(block: dict[str, Any]) -> str:
    """Where along the ladder the perplexity gap can be read, in one sentence with every size's numbers."""
    speak = [s["name"] for s in block["sizes"] if s["gate"]]
    summary = ("both models below the bigram at no size" if not speak
               else f"both models below the bigram at {', '.join(speak)}")
    scored = f"{block['scored_on']} blocks" + (f", {block['eval_tokens']:,} tokens" if block.get("eval_tokens") else "")
    return (f"{summary} (committed ladder `{block['source']}`, SPEN − GPT-2 loss on the {scored}): "
            + "; ".join(size_text(s) for s in block["sizes"]))
