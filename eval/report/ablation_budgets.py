"""The reader and trace claims across a committed ablation at several budgets, read by the report.

The report's own ablations run at the budget the default's 30 minutes allow (100 steps), where the reference arm
is above the Kneser-Ney bigram: its reader and trace rows say "not testable in this regime". The same ablations at
several budgets up to the headline pair's tokens, each arm at its own rate, take hours on two cores; they run once
(``python -m eval.ablation --budgets ... --output_dir D``, one folder per axis), are committed (``docs/ablation/``)
and the plan names the folder holding them (``ablation.committed``). This module checks each axis's
``budgets.json``, keeps what the report needs (report.json's ``ablation_budgets``) and phrases every budget; the
claims table reads the **longest budget**, behind its own gate (the reference arm below the bigram on the same
tokens), in the rows ``readers_identical_budgets`` and ``selection_escapes_budgets``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from ema_boundary.io import read_json

AXES = ("predictor", "trace")  # one sub-folder per ablation axis, as eval.ablation names them
BUDGETS_FILE = "budgets.json"
BUDGETS_KIND = "budgets"  # budgets.json's "kind" (eval.ablation writes ablation.json for one budget)
TOOL = "eval.ablation"
KEYS = ("axis", "reference", "equivalence_margin", "seeds", "lrs", "scored_on", "parameters", "bigram_loss",
        "budgets", "longest")
BUDGET_KEYS = ("max_steps", "tokens", "mean_loss", "comparisons", "overall", "statement", "reference_loss",
               "reference_below_bigram")

__all__ = ["AXES", "budget_text", "budgets_block", "longest", "phrase", "read_budgets"]


def _read_axis(path: Path, axis: str, where: str) -> dict[str, Any]:
    found = read_json(path, BUDGETS_FILE, "an `eval.ablation --budgets` budgets.json",
                      name=f"{where}: {axis}/{BUDGETS_FILE}")
    if not isinstance(found, dict) or found.get("tool") != TOOL or found.get("kind") != BUDGETS_KIND:
        raise UsageError(f"{where}: {axis}/{BUDGETS_FILE} is not an `eval.ablation --budgets` summary (tool "
                         f"{found.get('tool') if isinstance(found, dict) else None!r}, kind "
                         f"{found.get('kind') if isinstance(found, dict) else None!r})")
    missing = [k for k in KEYS if k not in found]
    if missing:
        raise UsageError(f"{where}: {axis}/{BUDGETS_FILE} lacks {', '.join(missing)}")
    if found["axis"] != axis:
        raise UsageError(f"{where}: {axis}/{BUDGETS_FILE} holds the {found['axis']!r} ablation")
    budgets = found["budgets"]
    if not isinstance(budgets, list) or not budgets:
        raise UsageError(f"{where}: {axis}/{BUDGETS_FILE} holds no budgets")
    for i, b in enumerate(budgets):
        gone = [k for k in BUDGET_KEYS if not isinstance(b, dict) or k not in b]
        if gone:
            raise UsageError(f"{where}: {axis}/{BUDGETS_FILE} budgets[{i}] lacks {', '.join(gone)}")
    if found["longest"] != max(b["max_steps"] for b in budgets):
        raise UsageError(f"{where}: {axis}/{BUDGETS_FILE}: longest {found['longest']} is not its longest budget")
    return found


def read_budgets(folder: str | Path, name: str | None = None) -> dict[str, dict[str, Any]]:
    """Each axis's ``budgets.json`` in a committed ablation folder (``predictor/``, ``trace/``; at least one),
    checked: one line naming the folder (as ``name``, e.g. the path the plan wrote) when it cannot serve."""
    folder = Path(folder)
    where = f"ablation.committed: {name or folder}"
    if not folder.is_dir():
        raise UsageError(f"{where}: no such folder")
    found = {axis: _read_axis(folder / axis / BUDGETS_FILE, axis, where) for axis in AXES
             if (folder / axis / BUDGETS_FILE).exists()}
    if not found:
        raise UsageError(f"{where}: holds neither {' nor '.join(f'{a}/{BUDGETS_FILE}' for a in AXES)}")
    return found


def _axis_block(b: dict[str, Any]) -> dict[str, Any]:
    budgets = sorted(b["budgets"], key=lambda x: x["max_steps"])
    top = budgets[-1]
    return {
        "reference": b["reference"], "equivalence_margin": b["equivalence_margin"], "seeds": b["seeds"],
        "command": b.get("command"), "lrs": b["lrs"], "rates": b.get("rates"), "lr_grid": b.get("lr_grid"),
        "scored_on": b["scored_on"], "eval_tokens": b.get("eval_tokens"), "parameters": b["parameters"],
        "parameter_difference": b.get("parameter_difference"), "bigram_loss": b["bigram_loss"],
        "seconds": b.get("seconds"), "longest": b["longest"], "rates_moved_measure": b.get("rates_moved_measure"),
        "budgets": [{k: x[k] for k in (*BUDGET_KEYS, "final_loss", "rates_moved") if k in x} for x in budgets],
        # The longest budget in the shape of report.json's ``ablation`` block: the claims' rules read it as they
        # read the report's own ablations.
        "final_loss": top["mean_loss"], "comparisons": top["comparisons"], "overall": top["overall"],
        "statement": top["statement"],
        "regime": {"seeds": len(b["seeds"]), "steps": top["max_steps"], "train_tokens": top["tokens"]},
    }


def budgets_block(found: dict[str, dict[str, Any]], source: str) -> dict[str, Any]:
    """report.json's ``ablation_budgets``: per axis every budget's losses, comparisons and gate, the rates and
    parameters, and the longest budget in the shape the claims' rules read; ``source`` is the folder the plan
    named (as written there)."""
    return {"source": source, **{axis: _axis_block(b) for axis, b in found.items()}}


def longest(axis: dict[str, Any]) -> dict[str, Any]:
    """The longest budget of an axis block (the one its verdict reads)."""
    return max(axis["budgets"], key=lambda b: b["max_steps"])


def budget_text(axis: dict[str, Any], b: dict[str, Any]) -> str:
    """One budget in words: its tokens, the reference against the bigram, and each arm's paired difference."""
    ref, bigram = axis["reference"], axis["bigram_loss"]
    text = (f"{b['max_steps']:,} steps ({b['tokens']:,} tokens): `{ref}` {b['reference_loss']:.3f} vs bigram "
            f"{bigram:.3f} nats")
    if not b["reference_below_bigram"]:
        return text + ", not testable (the reference is not below the bigram)"
    arms = []
    for arm, c in b["comparisons"].items():
        lo, hi = c["ci95"]
        interval = f" [{lo:+.3f}, {hi:+.3f}]" if math.isfinite(lo) and math.isfinite(hi) else ""
        arms.append(f"`{arm}` {c['difference']:+.3f}{interval} {c['verdict']}")
    return text + "; " + ", ".join(arms)


def phrase(block: dict[str, Any], axis: str) -> str | None:
    """Where along the committed budgets the axis's claim can be read, with every budget's numbers (None when the
    committed folder has no such axis)."""
    a = block.get(axis)
    if not a:
        return None
    speak = [f"{b['max_steps']:,}" for b in a["budgets"] if b["reference_below_bigram"]]
    summary = (f"the reference below the bigram at {', '.join(speak)} steps" if speak
               else "the reference below the bigram at no budget")
    return (f"{summary} (committed ablation `{block['source']}/{axis}`, {len(a['seeds'])} paired seeds, each arm "
            f"minus `{a['reference']}` on the {a['scored_on']} blocks): "
            + "; ".join(budget_text(a, b) for b in a["budgets"]))
