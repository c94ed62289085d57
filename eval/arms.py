"""grammar_probe's arms as a sweep (trainer and analysis ``arms``): the analysis that writes ``arms.json`` as
``grammar_probe arms`` wrote it, from the runner's results (grammar_probe imports nothing of eval, so its reading of a
sweep lives here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval.plans import in_repo
from eval.results import Plan, Reads
from grammar_probe.arms import ARMS_SCHEMA, conditions_of, dataset_config, write_summary


def arms(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
    """grammar_probe's arms (trainer ``arms``): every paper row at every size and across the unseen-word protocol,
    as ``grammar_probe arms`` wrote ``arms.json`` (schema ``grammar_probe.arms/1``, which the report's structure
    conditions read); written beside results.json with ``arms.md`` and one figure per row
    (:func:`grammar_probe.arms.write_summary`), once every run is finished.

    Settings: ``size_arm`` (the arm whose budgets are the size arms ``size_<n>``: the protocol as fixed),
    ``protocol_size`` (the training sentences of the protocol 2 x 2) and ``protocol_arms`` (each cell of the 2 x 2
    -> the arm that ran it; the size arm where the cell is the fixed protocol: that run, not a second one)."""
    s = plan.settings
    size_arm, n_protocol = s.get("size_arm", "size"), s.get("protocol_size")
    cells = s.get("protocol_arms", {})
    seed = str(plan.seeds[0])
    if results["missing"]:
        return {"complete": False, "reason": f"{len(results['missing'])} run(s) still to run"}

    def run(arm: str, steps: int) -> dict[str, Any]:
        return results["arms"][arm]["budgets"][str(steps)][seed]

    def facts(r: dict[str, Any], axis: str, value: Any, same: str | None) -> dict[str, Any]:
        return {"axis": axis, "value": value, "train_sentences": r["train_sentences"], "protocol": r["protocol"],
                "seeds": r["seeds"], "train_subsets_disjoint": r["train_subsets_disjoint"],
                "seconds": 0.0 if same else r["seconds"], "same_run_as": same, "rows": r["rows"]}

    sizes = list(plan.budgets_of(plan.arm(size_arm)))
    out = {f"size_{n}": facts(run(size_arm, n), "train_sentences", n, None) for n in sizes}
    for cell, arm in cells.items():
        same = f"size_{n_protocol}" if arm == size_arm else None
        out[f"protocol_{cell}"] = facts(run(arm, n_protocol), "protocol", cell, same)
    base = run(size_arm, sizes[0])
    # The run sizes but the budget, as the protocol arms ran them (the size arms differ in training sentences only).
    size = run(next(iter(cells.values())), n_protocol)["size"] if cells else base["size"]
    summary = {
        "schema": ARMS_SCHEMA, "size": size, "sizes": sizes, "protocol_size": n_protocol,
        "protocol_arms": {cell: dict(plan.arm(arm).config.get("protocol") or {}) if arm != size_arm else {}
                          for cell, arm in cells.items()},
        "base_protocol": base["protocol"], "seed": plan.seeds[0],
        "dataset": _dataset(plan.config_of(plan.arm(size_arm))["dataset"]), "arms": out,
        "conditions": conditions_of(out), "seconds": results["seconds"]["runs"]}
    write_summary(folder, summary)
    return {"complete": True, "arms_json": "arms.json", **summary}


def _dataset(declared: str) -> dict[str, Any] | None:
    """The arms' corpus as ``grammar_probe build`` recorded it, its folder as the plan names it (repository-relative:
    the committed summary names no path of the machine it ran on)."""
    found = dataset_config(in_repo(declared))
    return found and {**found, "path": declared}


__all__ = ["arms"]
