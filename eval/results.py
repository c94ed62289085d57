"""A sweep's results as an experiment's analysis reads them: plain data the runner hands over, never the runner.

Every analysis is ``analysis(plan, results, folder, reads)`` and returns a JSON-ready dict (the registry:
``eval/sweep/analyses.py``). ``plan`` is the sweep's plan (:class:`Plan`: what the analysis reads of it),
``results`` the runner's ``arms`` with each seed's ``score`` at each budget and each arm's rate choices, ``folder``
the sweep folder, and ``reads`` (:class:`Reads`) what only the runner knows how to find: the n-gram lines of the
blocks the sweep scores, the score of any run of the folder, and an arm's train.py settings. The arrows run one way
(runner -> experiments): an analysis imports nothing of ``eval.sweep``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ema_boundary import stats


class Arm(Protocol):
    name: str
    config: dict[str, Any]


class Plan(Protocol):
    """What an analysis reads of a sweep plan (``eval.sweep.plan.SweepPlan`` is one)."""

    name: str
    trainer: str
    arms: Sequence[Any]  # each an Arm
    seeds: Sequence[int]
    score: str
    settings: dict[str, Any]

    def arm(self, name: str) -> Any: ...

    def config_of(self, arm: Any) -> dict[str, Any]: ...

    def budgets_of(self, arm: Any) -> Sequence[int]: ...

    def grid_of(self, arm: Any) -> Sequence[float]: ...


class Reads(Protocol):
    """What the runner reads for an analysis (``eval.sweep.runner.SweepReads``)."""

    def ngram_lines(self, train_tokens: int, arm: str | None = None) -> dict[str, Any] | None:
        """Kneser-Ney lines (with each line's ``loss`` in nats) on the blocks the sweep scores, counted on what a run
        of ``train_tokens`` of ``arm`` (default: the first) read; None where the sweep has none."""

    def score_of(self, arm: str, lr: float, seed: int, steps: int) -> Any | None:
        """The score of one run of the folder (any rate, chosen or not); None where it has not run."""

    def train_settings(self, arm: str, relative_to: Path | None = None) -> dict[str, Any]:
        """An arm's train.py settings with train.py's defaults, its ``data`` a list of paths (named corpora as they
        are; files relative to ``relative_to`` where given)."""


Analysis = Any  # Callable[[Plan, dict[str, Any], Path, Reads], dict[str, Any]]


def scores(results: dict[str, Any], arm: str, steps: int | str | None = None) -> dict[str, Any]:
    """``{seed: score}`` of an arm at a budget (its longest by default)."""
    budgets = results["arms"][arm]["budgets"]
    key = str(steps) if steps is not None else max(budgets, key=int)
    return {s: r["score"] for s, r in budgets.get(key, {}).items()}


def interval(values: list[float]) -> dict[str, Any]:
    """Mean, 95% t interval (two or more values), count and the values themselves."""
    m = stats.mean_ci(values) if values else {"mean": math.nan, "n": 0, "ci95": (math.nan, math.nan)}
    ci = None if m["n"] < 2 else [float(x) for x in m["ci95"]]
    return {"mean": m["mean"] if values else None, "ci95": ci, "n": m["n"], "per_seed": values}


def train_tokens(results: dict[str, Any], arm: str, steps: str) -> int | None:
    """The training tokens a run of ``arm`` at ``steps`` read (the first seed's that recorded them)."""
    seeds = results["arms"][arm]["budgets"].get(steps, {})
    return next((r.get("tokens") for r in seeds.values() if r.get("tokens")), None)


def none(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
    """No experiment-specific reading: each arm's scores at each budget with their interval."""
    out = {}
    for arm, a in results["arms"].items():
        out[arm] = {}
        for steps, seeds in a["budgets"].items():
            values = [r["score"] for r in seeds.values()]
            out[arm][steps] = interval(values) if values and isinstance(values[0], (int, float)) else {
                "per_seed": values}
    return {"scores": out}


__all__ = ["Analysis", "Plan", "Reads", "interval", "none", "scores", "train_tokens"]
