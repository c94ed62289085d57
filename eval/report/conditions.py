"""The conditions each structure claim holds in, read from the committed grammar arms sweep.

The report's structure stage trains SPCN and its baselines at one labelled data size under one unseen-word
protocol. The arms repeat that whole experiment at several sizes (250 to 4,000 labelled sentences per seed) and
across the 2 x 2 protocol ({word dropout on, off} x {never-seen words as ``<unk>``, as fresh random codes}),
5 seeds each: too long for the report's budget, so they run once as a sweep (``hub_configs/sweeps/arms.yaml``),
are committed (``docs/sweeps/arms``) and named in the plan like every committed sweep (``committed: arms``, read
by :mod:`eval.report.committed`). This module keeps what the claims need of the sweep's ``arms`` analysis
(:func:`conditions_block`) and phrases, per paper row, where the row is met and where it is not.
"""

from __future__ import annotations

import math
from typing import Any

from ema_boundary.verdicts import MET

PROTOCOL_NAMES = {  # the protocol arms as a reader names them
    "protocol_dropout_unk": "dropout on, <unk>",
    "protocol_dropout_random_codes": "dropout on, random codes",
    "protocol_no_dropout_unk": "dropout off, <unk>",
    "protocol_no_dropout_random_codes": "dropout off, random codes",
}

__all__ = ["PROTOCOL_NAMES", "conditions_block", "phrase", "structure_conditions", "value_text"]


def structure_conditions(report: dict[str, Any]) -> dict[str, Any] | None:
    """The structure conditions a report reads: those of the committed arms sweep its plan names (report.json's
    ``sweeps.arms``; None while that sweep is incomplete), else the ``structure_conditions`` of a report.json
    written before the arms ran as a sweep."""
    block = (report.get("sweeps") or {}).get("arms")
    if block is not None:
        return (block.get("analysis") or {}).get("conditions")
    return report.get("structure_conditions")


def conditions_block(arms: dict[str, Any], source: str) -> dict[str, Any]:
    """The structure conditions: per paper row, every arm's SPCN value and verdict, and the arms grouped by verdict,
    from an ``arms`` summary (schema ``grammar_probe.arms/1``: the sweep's analysis, or its arms.json). ``source``
    is the folder the plan named (as written in the plan)."""
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
    met = r["by_verdict"].get(MET, [])
    summary = ("met in every arm" if len(met) == len(r["arms"]) else "met in no arm" if not met
               else f"met in {len(met)} of {len(r['arms'])} arms")
    return (f"{summary} ({block['seeds']} seeds per arm, committed arms `{block['source']}`): "
            + "; ".join(parts))
