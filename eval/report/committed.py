"""The committed sweeps a report plan names (``committed:``), read through one reader.

A claim the report's own budget cannot decide is decided by a longer experiment, run once with the experiment
runner (``ema-boundary sweep``, eval/sweep/), committed (``docs/sweeps/<name>/``) and named in the plan::

    committed:
      recall_map: docs/sweeps/recall-map          # selection_escapes_recall
      ladder: docs/sweeps/ladder                  # perplexity_gap_ladder
      ablation_predictor: docs/sweeps/ablation-predictor   # readers_identical_budgets
      ablation_trace: docs/sweeps/ablation-trace  # selection_escapes_budgets
      depth: docs/sweeps/depth                    # depth_selection_recovers

Each folder must hold a ``results.json`` of ``ema-boundary sweep`` (schema 1) whose analysis is the source's kind
(:data:`SOURCES`); it is checked once, when the plan is read, and kept in report.json's ``sweeps`` as the
claims read it (:func:`sweep_block`): the analysis as the sweep wrote it (its gates and verdicts come from
:mod:`eval.verdicts`; nothing is re-decided here), whether the sweep is complete and how many runs are still to
run (an incomplete sweep is read for what it has, and its row says so), each arm's budgets, parameters and
tokens, and the commands that reproduce it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from ema_boundary.io import read_json
from eval.plans import in_repo
from eval.sweep.runner import RESULTS, SCHEMA, TOOL

# A claim source of the plan's ``committed:`` -> the analysis kind its sweep must have (eval/sweep/analyses.py).
SOURCES: dict[str, str] = {"recall_map": "recall_map", "ladder": "ladder", "ablation_predictor": "ablation",
                           "ablation_trace": "ablation", "depth": "depth"}
KEYS = ("tool", "schema", "name", "complete", "missing", "arms", "analysis", "commands")

__all__ = ["SOURCES", "partial", "read_sweep", "sweep_block", "sweeps_block"]


def read_sweep(folder: str | Path, source: str, name: str | None = None) -> dict[str, Any]:
    """The ``results.json`` of the sweep folder a plan names for ``source``, checked: one line naming the source
    and the folder (as ``name``, e.g. the path the plan wrote) when it cannot serve."""
    folder = Path(folder)
    where = f"committed.{source}: {name or folder}"
    if source not in SOURCES:
        raise UsageError(f"committed.{source}: not a claim source ({', '.join(SOURCES)})")
    if not folder.is_dir():
        raise UsageError(f"{where}: no such folder")
    results = read_json(folder / RESULTS, RESULTS, f"a sweep folder holds {RESULTS}: run `ema-boundary sweep "
                        f"--summarize {name or folder}` on a sweep folder", name=f"{where}: {RESULTS}")
    if not isinstance(results, dict) or results.get("tool") != TOOL:
        raise UsageError(f"{where}: {RESULTS} is not an `{TOOL}` result (its tool is "
                         f"{results.get('tool') if isinstance(results, dict) else None!r})")
    if results.get("schema") != SCHEMA:
        raise UsageError(f"{where}: {RESULTS} has schema {results.get('schema')!r}, expected {SCHEMA}")
    missing = [k for k in KEYS if k not in results]
    if missing:
        raise UsageError(f"{where}: {RESULTS} lacks {', '.join(missing)}")
    kind = (results["analysis"] or {}).get("kind") if isinstance(results["analysis"], dict) else None
    if kind != SOURCES[source]:
        raise UsageError(f"{where}: {RESULTS} holds a {kind!r} analysis, {source} needs {SOURCES[source]!r}")
    return results


def _arms(results: dict[str, Any]) -> dict[str, Any]:
    """Per arm: its budgets (steps), the seeds finished at each, and the first finished run's parameters and
    tokens (what the claims need to say where a verdict was read)."""
    out = {}
    for arm, a in results["arms"].items():
        budgets = a.get("budgets") or {}
        first = next((r for seeds in budgets.values() for r in seeds.values()), {})
        out[arm] = {"budgets": sorted(int(b) for b in budgets), "seeds": {b: len(s) for b, s in budgets.items()},
                    "parameters": first.get("parameters"), "tokens": first.get("tokens")}
    return out


def _corpus(results: dict[str, Any]) -> str | None:
    """The corpus the sweep's runs read (its base ``data``), when it names one."""
    base = ((results.get("plan") or {}).get("declared") or {}).get("base") or {}
    data = base.get("data")
    return data if isinstance(data, str) else None


def sweep_block(results: dict[str, Any], source: str, folder: str) -> dict[str, Any]:
    """report.json's ``sweeps[source]``: what the claims read of one committed sweep; ``folder`` is the folder the
    plan named (as written there)."""
    return {"source": folder, "name": results["name"], "kind": results["analysis"]["kind"],
            "plan": (results.get("plan") or {}).get("path"), "scored_on": results.get("scored_on"),
            "corpus": _corpus(results), "complete": bool(results["complete"]), "missing": len(results["missing"]),
            "seconds": results.get("seconds"), "commands": results["commands"], "arms": _arms(results),
            "analysis": results["analysis"]}


def sweeps_block(committed: dict[str, str]) -> dict[str, Any]:
    """report.json's ``sweeps``: every committed sweep a plan names (source -> folder)."""
    return {source: sweep_block(read_sweep(in_repo(folder), source, folder), source, folder)
            for source, folder in committed.items()}


def partial(block: dict[str, Any]) -> str | None:
    """``"partial: 12 runs still to run"`` for an incomplete sweep (never read silently); None when complete."""
    if block.get("complete"):
        return None
    n = block.get("missing", 0)
    return (f"partial: {n} run{'s' * (n != 1)} still to run (committed sweep `{block['source']}`; continue with "
            f"`{(block.get('commands') or {}).get('resume', 'ema-boundary sweep --resume_from ' + block['source'])}`)")
