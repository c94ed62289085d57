"""Intervals over seeds and the verdicts that follow from them.

Every number the experiment reports is a mean over seeds with a 95% Student-t interval
(mean ± t_{0.975, n-1} · sd / √n). Differences between two models are paired: both are computed
on the same seed (same training subset, same word dropout, same test tokens), the difference is
taken per seed, and the interval is that of the differences. "Equal" is only claimed from an
equivalence test (two one-sided tests at 5%: the 90% interval of the difference inside ±margin).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats as _st

__all__ = [
    "EQUIVALENCE_MARGIN",
    "MET",
    "NOT_RESOLVED",
    "REFUTED",
    "compare",
    "summary",
    "verdict",
]

MET, REFUTED, NOT_RESOLVED = "met", "refuted", "not resolved at this budget"
EQUIVALENCE_MARGIN = 0.01  # one accuracy point, fixed before any run


def _interval(values: Sequence[float], level: float) -> tuple[float, float, float, float]:
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan"), float("-inf"), float("inf")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(_st.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return mean, sd, mean - half, mean + half


def summary(values: Sequence[float]) -> dict:
    """``{"mean", "sd", "ci95": [lo, hi], "n", "per_seed"}`` of per-seed values."""
    mean, sd, lo, hi = _interval(list(values), 0.95)
    return {"mean": mean, "sd": sd, "ci95": [lo, hi], "n": len(values), "per_seed": list(values)}


def verdict(ci95: Sequence[float], target: float) -> str:
    """``met`` if the interval lies at or above the target, ``refuted`` if it lies below, else not resolved."""
    lo, hi = ci95
    if lo >= target:
        return MET
    if hi < target:
        return REFUTED
    return NOT_RESOLVED


def compare(a: Sequence[float], b: Sequence[float], margin: float = EQUIVALENCE_MARGIN) -> dict:
    """Paired, seed-blocked comparison of per-seed values ``a - b``.

    ``conclusion``: ``"higher"`` / ``"lower"`` when the 95% interval excludes 0; ``"equivalent"`` when
    the 90% interval lies inside ±margin (TOST at 5%); otherwise the budget did not resolve it.
    """
    diff = [x - y for x, y in zip(a, b, strict=True)]
    out = summary(diff)
    _, _, lo90, hi90 = _interval(diff, 0.90)
    out["ci90"] = [lo90, hi90]
    out["margin"] = margin
    lo, hi = out["ci95"]
    if lo > 0:
        out["conclusion"] = "higher"
    elif hi < 0:
        out["conclusion"] = "lower"
    elif -margin < lo90 and hi90 < margin:
        out["conclusion"] = "equivalent"
    else:
        out["conclusion"] = NOT_RESOLVED
    return out
