"""Comparisons that can say "equal": paired seed-blocked differences, equivalence tests, verdicts.

Every comparison in the report goes through this module: the structure experiment
(``grammar_probe``) and the content side (``eval``) alike. The design is blocked by seed: two
arms trained with the same seed share the data order and (where shapes allow) the initialisation
stream, so the unit of analysis is the per-seed difference ``d_s = a_s - b_s``, not two
independent samples.

For the differences of ``n`` seeds (mean ``d̄``, standard deviation ``s``, standard error
``s / sqrt(n)``), :func:`compare` reports:

* the 95% t interval of the mean difference, ``d̄ ± t_{0.975, n-1} s / sqrt(n)``;
* the paired t-test of "no difference" (two-sided);
* the two one-sided tests (TOST, Schuirmann 1987) of equivalence against a margin ``δ`` declared
  before the run: ``H0: |mean| >= δ`` is rejected at level ``α`` when both one-sided tests reject,
  i.e. when the ``1 - 2α`` (90%) t interval lies inside ``(-δ, δ)``; ``p = max(p_lower, p_upper)``;
* the smallest detectable difference: the true mean difference that the two-sided paired t-test
  at ``α`` would detect with 80% power if the seed-to-seed standard deviation were the one
  observed (solved exactly with the noncentral t distribution). It says what the run could have
  seen; it is not an estimate of anything;
* the verdict (:data:`VERDICTS`), one of:

  - ``"equivalent"``: the equivalence test passes (whatever the difference test says: a real
    difference smaller than the margin counts as equivalence at that margin);
  - ``"different"``: the difference test rejects and the equivalence test does not;
  - ``"not resolved"``: neither test rejects: the interval is too wide for this budget.

Only ``"equivalent"`` licenses the words "identical" or "indistinguishable" (:func:`describe`).
Zero variance (every seed gives the same difference) is taken as the limit ``s -> 0``: the
interval is the point ``d̄``, the difference test rejects iff ``d̄ != 0`` and the equivalence test
passes iff ``|d̄| < δ``. With fewer than two seeds nothing can be tested: "not resolved".

Several arms against one reference (:func:`compare_arms`) use the same seed blocks; the p-values
of each family (differences, equivalences) are Holm-adjusted across the arms before the verdicts.
The intervals are per comparison (unadjusted) 95% intervals.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, stats

VERDICTS = ("equivalent", "different", "not resolved")
# Verdicts on a claim with a target (the paper's numbers): the 95% interval at or above it, below it, or across.
MET, REFUTED, NOT_RESOLVED = "met", "refuted", "not resolved at this budget"
ALPHA = 0.05
POWER = 0.8

Samples = Mapping[int | str, float] | Sequence[float]


@dataclass(frozen=True)
class Comparison:
    """One paired comparison ``a - b`` over seeds. Fields are JSON-ready (``asdict``)."""

    n: int
    difference: float
    sd: float
    ci95: tuple[float, float]
    ci90: tuple[float, float]
    p_difference: float
    equivalence_margin: float | None
    p_equivalence: float | None
    detectable: float
    verdict: str
    direction: str  # "a lower", "a higher" or "none" (zero mean difference)
    seeds: tuple[int | str, ...] = ()

    @property
    def conclusion(self) -> str:
        """For readers: "equivalent", "higher" / "lower" (a - b, when different), or "not resolved at this budget"."""
        if self.verdict == "different":
            return "higher" if self.difference > 0 else "lower"
        return "equivalent" if self.verdict == "equivalent" else NOT_RESOLVED

    def as_dict(self) -> dict:
        return {**asdict(self), "conclusion": self.conclusion}


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean of ``values`` (e.g. one metric over seeds) with its t interval.

    Returns ``{"mean", "ci95" (low, high), "sd", "n"}``; the interval is ``(nan, nan)`` for one value.
    """
    x = _finite_array(values, "values")
    n = len(x)
    mean = float(x.mean())
    if n < 2:
        return {"mean": mean, "ci95": (math.nan, math.nan), "sd": math.nan, "n": n}
    sd = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return {"mean": mean, "ci95": (mean - half, mean + half), "sd": sd, "n": n}


def summary(values: Sequence[float]) -> dict:
    """:func:`mean_ci` of per-seed values, keeping them: ``{"mean", "ci95", "sd", "n", "per_seed"}``."""
    return {**mean_ci(values), "per_seed": list(values)}


def paired_summary(a: Samples, b: Samples, margin: float | None = None) -> dict:
    """:func:`compare` of ``a - b`` flattened for a results file: the :func:`summary` of the per-seed
    differences with ``ci90``, ``margin``, ``verdict`` and ``conclusion`` beside it."""
    d, _ = paired_differences(a, b)
    c = compare(a, b, margin)
    return {**summary(d.tolist()), "ci90": c.ci90, "margin": margin, "p_difference": c.p_difference,
            "p_equivalence": c.p_equivalence, "verdict": c.verdict, "conclusion": c.conclusion}


def target_verdict(ci95: Sequence[float], target: float, strictly_above: bool = False) -> str:
    """:data:`MET` if the 95% interval lies at or above ``target`` (strictly above with ``strictly_above``),
    :data:`REFUTED` if it lies below, else :data:`NOT_RESOLVED`."""
    lo, hi = ci95
    if lo > target if strictly_above else lo >= target:
        return MET
    return REFUTED if hi < target else NOT_RESOLVED


def paired_differences(a: Samples, b: Samples) -> tuple[np.ndarray, tuple]:
    """``a_s - b_s`` for the seeds both have. Mappings are paired by seed (key); sequences by
    position (they must have the same length)."""
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise ValueError("a and b must both be mappings seed -> value or both sequences")
    if isinstance(a, Mapping):
        seeds = tuple(s for s in a if s in b)
        if not seeds:
            raise ValueError(f"a and b share no seed (a: {sorted(a, key=str)}, b: {sorted(b, key=str)})")
        xa, xb = [a[s] for s in seeds], [b[s] for s in seeds]
    else:
        if len(a) != len(b):
            raise ValueError(f"a and b must have the same length to pair by position, got {len(a)} and {len(b)}")
        seeds, xa, xb = tuple(range(len(a))), list(a), list(b)
    return _finite_array(xa, "a") - _finite_array(xb, "b"), seeds


def compare(
    a: Samples,
    b: Samples,
    margin: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> Comparison:
    """Paired seed-blocked comparison of ``a - b`` with an equivalence test against ``margin``
    (declared before the run; ``None``: no equivalence test, so no "equivalent" verdict)."""
    _check_level(alpha, "alpha")
    _check_level(power, "power")
    if margin is not None and not (isinstance(margin, (int, float)) and 0 < margin < math.inf):
        raise ValueError(f"margin must be a positive number, got {margin!r}")
    d, seeds = paired_differences(a, b)
    n, mean = len(d), float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else math.nan
    if n < 2:
        p_diff, p_eq, ci95, ci90, detectable = math.nan, (math.nan if margin else None), _nan2(), _nan2(), math.nan
    elif sd == 0.0:  # the limit s -> 0 (see the module docstring)
        p_diff = 0.0 if mean != 0.0 else 1.0
        p_eq = None if margin is None else (0.0 if abs(mean) < margin else 1.0)
        ci95 = ci90 = (mean, mean)
        detectable = 0.0
    else:
        se = sd / math.sqrt(n)
        df = n - 1
        p_diff = float(2 * stats.t.sf(abs(mean) / se, df))
        p_eq = None if margin is None else tost_p(mean, se, df, margin)
        ci95 = _interval(mean, se, df, 0.95)
        ci90 = _interval(mean, se, df, 1 - 2 * alpha)
        detectable = detectable_difference(sd, n, alpha, power)
    return Comparison(
        n=n, difference=mean, sd=sd, ci95=ci95, ci90=ci90, p_difference=p_diff, equivalence_margin=margin,
        p_equivalence=p_eq, detectable=detectable, verdict=verdict(p_diff, p_eq, alpha),
        direction="none" if mean == 0 else ("a lower" if mean < 0 else "a higher"), seeds=seeds,
    )


def tost_p(mean: float, se: float, df: int, margin: float) -> float:
    """p-value of the two one-sided tests of ``H0: |true mean| >= margin`` (the larger of the two)."""
    p_lower = stats.t.sf((mean + margin) / se, df)  # H0: mean <= -margin
    p_upper = stats.t.cdf((mean - margin) / se, df)  # H0: mean >= +margin
    return float(max(p_lower, p_upper))


def detectable_difference(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest true mean difference the two-sided paired t-test at ``alpha`` detects with
    probability ``power``, for ``n`` pairs whose differences have standard deviation ``sd``."""
    if n < 2 or not sd > 0:
        return math.nan if n < 2 else 0.0
    df = n - 1
    crit = stats.t.ppf(1 - alpha / 2, df)

    def shortfall(effect: float) -> float:  # power at standardised effect `effect` minus the target
        nc = effect * math.sqrt(n)
        # The far tail as sf at -nc (by symmetry): scipy's cdf(-crit, df, nc) is nan for large nc.
        return stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc) - power

    hi = 1.0
    while shortfall(hi) < 0:
        hi *= 2
    return float(optimize.brentq(shortfall, 0.0, hi, xtol=1e-10)) * sd


def verdict(p_difference: float, p_equivalence: float | None, alpha: float = ALPHA) -> str:
    """One of :data:`VERDICTS` from the two p-values (see the module docstring)."""
    if p_equivalence is not None and p_equivalence < alpha:
        return "equivalent"
    if p_difference < alpha:  # nan compares False: "not resolved"
        return "different"
    return "not resolved"


def describe(c: Comparison, a: str = "A", b: str = "B", unit: str = "") -> str:
    """A sentence for the report. "indistinguishable" appears only for an "equivalent" verdict."""
    u = f" {unit}" if unit else ""
    ci = f"95% CI [{c.ci95[0]:+.4f}, {c.ci95[1]:+.4f}]{u}, {c.n} seeds"
    if c.verdict == "equivalent":
        return (f"{a} and {b} are indistinguishable within ±{c.equivalence_margin:g}{u} "
                f"(difference {c.difference:+.4f}{u}, {ci}; equivalence p = {c.p_equivalence:.3g})")
    if c.verdict == "different":
        side = "lower" if c.difference < 0 else "higher"
        return f"{a} is {side} than {b} by {abs(c.difference):.4f}{u} ({ci}; p = {c.p_difference:.3g})"
    margin = "" if c.equivalence_margin is None else f" nor shown within ±{c.equivalence_margin:g}{u}"
    return (f"not resolved at this budget: {a} - {b} = {c.difference:+.4f}{u} ({ci}), neither shown different"
            f"{margin}; the run could detect about {c.detectable:.3g}{u}")


def compare_arms(
    arms: Mapping[str, Samples],
    reference: str,
    margin: float | None = None,
    alpha: float = ALPHA,
    power: float = POWER,
) -> dict[str, Comparison]:
    """Each arm minus ``reference``, paired by seed; verdicts on Holm-adjusted p-values (per family:
    the difference tests, the equivalence tests). The reported p-values are the adjusted ones."""
    if reference not in arms:
        raise ValueError(f"reference {reference!r} is not among the arms {sorted(arms)}")
    others = [name for name in arms if name != reference]
    raw = {name: compare(arms[name], arms[reference], margin, alpha, power) for name in others}
    p_diff = holm([raw[name].p_difference for name in others])
    p_eq = holm([raw[name].p_equivalence for name in others]) if margin is not None else [None] * len(others)
    out = {}
    for name, pd, pe in zip(others, p_diff, p_eq, strict=True):
        c = raw[name]
        out[name] = Comparison(**{**asdict(c), "p_difference": pd, "p_equivalence": pe,
                                  "verdict": verdict(pd, pe, alpha), "ci95": c.ci95, "ci90": c.ci90})
    return out


def holm(p_values: Sequence[float | None]) -> list[float]:
    """Holm's step-down adjustment (family-wise error rate); nan/None stay nan."""
    p = np.array([math.nan if v is None else v for v in p_values], dtype=float)
    ok = np.flatnonzero(~np.isnan(p))
    adjusted = np.full_like(p, math.nan)
    m = len(ok)
    running = 0.0
    for rank, i in enumerate(ok[np.argsort(p[ok], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted.tolist()


def blocked_f_test(arms: Mapping[str, Samples]) -> dict:
    """Two-way ANOVA without replication (arms x seed blocks): does any arm differ?

    Returns ``{"F", "df": (arms - 1, (arms - 1)(seeds - 1)), "p", "seeds"}`` over the seeds every arm has.
    """
    names = list(arms)
    if len(names) < 2:
        raise ValueError("need at least two arms")
    first = arms[names[0]]
    if isinstance(first, Mapping):
        seeds = [s for s in first if all(s in arms[k] for k in names)]
        table = np.array([[arms[k][s] for s in seeds] for k in names], dtype=float)
    else:
        lengths = {len(arms[k]) for k in names}
        if len(lengths) != 1:
            raise ValueError(f"arms given as sequences must have the same length, got {sorted(lengths)}")
        seeds = list(range(lengths.pop()))
        table = np.array([list(arms[k]) for k in names], dtype=float)
    k, n = table.shape
    if n < 2:
        raise ValueError(f"need at least two seeds shared by every arm, got {n}")
    if not np.isfinite(table).all():
        raise ValueError("arms contain non-finite values")
    grand = table.mean()
    ss_arm = n * ((table.mean(1) - grand) ** 2).sum()
    ss_block = k * ((table.mean(0) - grand) ** 2).sum()
    ss_err = ((table - grand) ** 2).sum() - ss_arm - ss_block
    df1, df2 = k - 1, (k - 1) * (n - 1)
    if ss_err <= 1e-300:
        f, p = (math.inf, 0.0) if ss_arm > 0 else (math.nan, math.nan)
    else:
        f = float((ss_arm / df1) / (ss_err / df2))
        p = float(stats.f.sf(f, df1, df2))
    return {"F": f, "df": (df1, df2), "p": p, "seeds": seeds}


def _interval(mean: float, se: float, df: int, level: float) -> tuple[float, float]:
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return (mean - half, mean + half)


def _nan2() -> tuple[float, float]:
    return (math.nan, math.nan)


def _finite_array(values: Sequence[float], name: str) -> np.ndarray:
    x = np.asarray(list(values), dtype=float)
    if x.ndim != 1 or len(x) == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} contains non-finite values: {x.tolist()}")
    return x


def _check_level(value: float, name: str) -> None:
    if not (isinstance(value, (int, float)) and 0 < value < 1):
        raise ValueError(f"{name} must lie in (0, 1), got {value!r}")


__all__ = [
    "VERDICTS",
    "MET",
    "REFUTED",
    "NOT_RESOLVED",
    "Comparison",
    "mean_ci",
    "summary",
    "paired_summary",
    "target_verdict",
    "paired_differences",
    "compare",
    "tost_p",
    "detectable_difference",
    "verdict",
    "describe",
    "compare_arms",
    "holm",
    "blocked_f_test",
]
