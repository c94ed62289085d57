"""The conditions each structure claim holds in, read from a committed ``python -m grammar_probe arms`` run.

The report's structure stage trains SPCN and its baselines at one labelled data size under one unseen-word
protocol. The arms repeat that whole experiment at several sizes (250 to 4,000 labelled sentences per seed) and
across the 2 x 2 protocol ({word dropout on, off} x {never-seen words as ``<unk>``, as fresh random codes}),
5 seeds each: too long for the report's budget, so they run once, are committed (``docs/structure/``), and the
plan names their ``arms.json`` (``grammar.arms``). This module checks that file, keeps what the report needs
(report.json's ``structure_conditions``) and phrases, per paper row, where the row is met and where it is not.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from ema_boundary.io import read_json

ARMS_SCHEMA = "grammar_probe.arms/1"  # grammar_probe/arms.py's summary
PROTOCOL_NAMES = {  # the protocol arms as a reader names them
    "protocol_dropout_unk": "dropout on, <unk>",
    "protocol_dropout_random_codes": "dropout on, random codes",
    "protocol_no_dropout_unk": "dropout off, <unk>",
    "protocol_no_dropout_random_codes": "dropout off, random codes",
}

__all__ = ["ARMS_SCHEMA", "PROTOCOL_NAMES", "conditions_block", "phrase", "read_arms", "value_text"]


def read_arms(path: str | Path) -> dict[str, Any]:
    """A committed ``arms.json``, checked: one line naming the file when it cannot serve."""
    arms = read_json(path, "arms.json", "a `python -m grammar_probe arms` arms.json", name=f"grammar.arms: {path}")
    if not isinstance(arms, dict) or arms.get("schema") != ARMS_SCHEMA:
        raise UsageError(f"grammar.arms: {path}: schema {arms.get('schema') if isinstance(arms, dict) else None!r}, "
                         f"expected {ARMS_SCHEMA!r}")
    if not arms.get("arms"):
        raise UsageError(f"grammar.arms: {path}: holds no arms")
    return arms


def conditions_block(arms: dict[str, Any], source: str) -> dict[str, Any]:
    """report.json's ``structure_conditions``: per paper row, every arm's SPCN value and verdict, and the
    arms grouped by verdict. ``source`` is the arms.json the plan named (as written in the plan)."""
    first = next(iter(arms["arms"].values()))["rows"]
    rows: dict[str, Any] = {}
    for row, r in first.items():
        if row == "ratios":
            continue
        by_arm = {}
        for name, arm in arms["arms"].items():
            a = arm["rows"][row]
            by_arm[name] = {"axis": arm["axis"], "value": arm["value"], "train_sentences": arm["train_sentences"],
                            "verdict": a["verdict"], "reachable": a.get("reachable", True),
                            "spcn": a["models"]["spcn"]["value"]}
        rows[row] = {"description": r["description"], "paper": r["paper"], "target": r["target"],
                     "arms": by_arm, "by_verdict": arms["conditions"][row]}
    return {"source": source, "seed": arms["seed"], "seeds": arms["size"]["seeds"], "sizes": arms["sizes"],
            "protocol_size": arms["protocol_size"], "base_protocol": arms["base_protocol"],
            "seconds": arms["seconds"], "rows": rows}


def value_text(row: str, paper: Any, v: dict[str, Any] | None) -> str:
    """SPCN's mean as the row reads: a ratio, points (rows whose paper value is a sentence: differences) or %."""
    if not v or not math.isfinite(v.get("mean", math.nan)):
        return "–"
    if row == "ratio_within_a":
        return f"{v['mean']:.3f}"
    return f"{100 * v['mean']:+.1f} pts" if isinstance(paper, str) else f"{100 * v['mean']:.1f}%"


def phrase(block: dict[str, Any], row: str) -> str | None:
    """Where ``row`` holds, in one sentence with SPCN's value in every arm: by labelled sentences (the size arms),
    then across the unseen-word protocol. None when the block has no such row."""
    r = block["rows"].get(row)
    if r is None:
        return None
    sizes = [(a["value"], a) for a in r["arms"].values() if a["axis"] == "train_sentences"]
    protocol = [(name, a) for name, a in r["arms"].items() if a["axis"] == "protocol"]
    def cell(name: str, a: dict[str, Any]) -> str:
        return f"{name} {a['verdict']} ({value_text(row, r['paper'], a['spcn'])})"

    parts = []
    if sizes:
        parts.append("by labelled sentences per seed: "
                     + ", ".join(cell(f"{n:,}", a) for n, a in sorted(sizes, key=lambda x: x[0])))
    if protocol:
        parts.append(f"by unseen-word protocol at {block['protocol_size']:,} sentences: "
                     + ", ".join(cell(PROTOCOL_NAMES.get(name, name), a) for name, a in protocol))
    met = r["by_verdict"].get("met", [])
    summary = ("met in every arm" if len(met) == len(r["arms"]) else "met in no arm" if not met
               else f"met in {len(met)} of {len(r['arms'])} arms")
    return (f"{summary} ({block['seeds']} seeds per arm, committed arms `{block['source']}`): "
            + "; ".join(parts))
