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
* the verdict (:data:`ema_boundary.verdicts.COMPARISON_VERDICTS`), one of:

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

Every other interval of the suite lives here too, each one staying inside the range of its quantity: an accuracy
over seeds (:func:`accuracy_interval`: the bootstrap of the mean over seeds, or one seed's Wilson interval), a
loss difference over documents (:func:`document_resamples`, :func:`resampled_means`, :func:`seed_interval`: eval.gap
and its context-use control) and the structure experiment's two-level bootstrap over seeds and test sentences
(:class:`Bootstrap`, :func:`bootstrap_interval`, :func:`bootstrap_difference`, :func:`holm_family`). The verdict
words are :mod:`ema_boundary.verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, special, stats
from statsmodels.stats.multitest import multipletests

from ema_boundary.verdicts import (
    DIFFERENT,
    EQUIVALENT,
    HIGHER,
    LOWER,
    MET,
    NOT_RESOLVED,
    REFUTED,
    UNRESOLVED,
)

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
        return conclusion(self.verdict, self.difference)

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
    """One of :data:`ema_boundary.verdicts.COMPARISON_VERDICTS` from the two p-values (see the module docstring)."""
    if p_equivalence is not None and p_equivalence < alpha:
        return EQUIVALENT
    if p_difference < alpha:  # nan compares False: "not resolved"
        return DIFFERENT
    return UNRESOLVED


def conclusion(verdict: str, difference: float) -> str:
    """A comparison's verdict for readers: "equivalent", "higher" / "lower" (the sign of ``difference``, a - b,
    when different), or "not resolved at this budget"."""
    if verdict == DIFFERENT:
        return HIGHER if difference > 0 else LOWER
    return EQUIVALENT if verdict == EQUIVALENT else NOT_RESOLVED


def describe(c: Comparison, a: str = "A", b: str = "B", unit: str = "") -> str:
    """A sentence for the report. "indistinguishable" appears only for an "equivalent" verdict."""
    u = f" {unit}" if unit else ""
    ci = f"95% CI [{c.ci95[0]:+.4f}, {c.ci95[1]:+.4f}]{u}, {c.n} seeds"
    if c.verdict == EQUIVALENT:
        return (f"{a} and {b} are indistinguishable within ±{c.equivalence_margin:g}{u} "
                f"(difference {c.difference:+.4f}{u}, {ci}; equivalence p = {c.p_equivalence:.3g})")
    if c.verdict == DIFFERENT:
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
    """Holm's step-down adjustment (family-wise error rate, statsmodels' ``multipletests``) over the p-values that
    are numbers; nan/None stay nan and do not count in the family."""
    p = np.array([math.nan if v is None else v for v in p_values], dtype=float)
    ok = np.flatnonzero(~np.isnan(p))
    adjusted = np.full_like(p, math.nan)
    if len(ok):
        adjusted[ok] = multipletests(p[ok], method="holm")[1]
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



# ---------------------------------------------------------------------------------------------
# Intervals that stay inside their range: accuracies over seeds or queries, bootstraps over documents
# ---------------------------------------------------------------------------------------------

ACCURACY_INTERVAL_METHODS = ("Wilson 95% over the evaluation queries (one seed: no seed-to-seed spread in it)",
                             "percentile bootstrap 95% of the mean over seeds (10,000 resamples)")


def accuracy_interval(per_seed: Sequence[float], queries: int, resamples: int = 10_000) -> tuple[float, float]:
    """A 95% interval of a mean accuracy that stays inside [0, 1] (:data:`ACCURACY_INTERVAL_METHODS`).

    Over two or more seeds, the percentile bootstrap of the mean over seeds (seeds resampled with
    replacement, a fixed generator): the seed-to-seed spread, which is what decides whether a lookup forms.
    With one seed, the Wilson score interval of its ``queries`` scored queries: evaluation noise only.
    """
    if len(per_seed) > 1:
        values = np.asarray(per_seed, dtype=float)
        picks = np.random.default_rng(0).integers(0, len(values), (resamples, len(values)))
        means = values[picks].mean(1)
        return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))
    return wilson(round(per_seed[0] * queries), queries)


def wilson(successes: int, trials: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval of ``successes / trials`` (95% by default); inside [0, 1] by construction."""
    if trials < 1:
        raise ValueError(f"wilson: trials must be a positive integer, got {trials!r}")
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def slope_interval(x: np.ndarray, y: np.ndarray) -> tuple[float, float, tuple[float, float], int]:
    """The least-squares line ``y = intercept + slope x`` with the 95% t interval of its slope (``n - 2`` degrees of
    freedom): ``(slope, intercept, (low, high), df)``."""
    reg = stats.linregress(x, y)
    df = len(y) - 2
    half = float(stats.t.ppf(0.975, df)) * float(reg.stderr)
    slope, intercept = float(reg.slope), float(reg.intercept)
    return slope, intercept, (slope - half, slope + half), df


def document_resamples(docs: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Document ids renumbered 0..D-1 and ``resamples`` multinomial resamples of the documents (R, D): how often
    each document is drawn in a resample of the same size."""
    doc_ids = np.unique(docs, return_inverse=True)[1]
    n_docs = int(doc_ids.max()) + 1
    rng = np.random.default_rng(seed)
    return doc_ids, rng.multinomial(n_docs, np.full(n_docs, 1.0 / n_docs), size=resamples).astype(np.float64)


def resampled_means(docs: np.ndarray, values: np.ndarray, mask: np.ndarray, weights: np.ndarray,
                    min_documents: int) -> np.ndarray | None:
    """The mean of ``values`` over the tokens in ``mask`` under each resample of documents (``weights`` (R, D)
    from :func:`document_resamples`, ``docs`` its renumbered ids); None for tokens found in fewer than
    ``min_documents`` documents."""
    n_docs = weights.shape[1]
    sums = np.bincount(docs[mask], weights=values[mask], minlength=n_docs)
    counts = np.bincount(docs[mask], minlength=n_docs).astype(np.float64)
    if (counts > 0).sum() < min_documents:
        return None
    num, den = weights @ sums, weights @ counts
    return np.divide(num, den, out=np.full_like(num, np.nan), where=den > 0)


def percentile_interval(means: np.ndarray | None) -> list[float]:
    """The 95% percentile interval of resampled means (nan, nan when there are none)."""
    if means is None or np.isnan(means).all():
        return [math.nan, math.nan]
    return [float(np.nanpercentile(means, 2.5)), float(np.nanpercentile(means, 97.5))]


def seed_interval(per_seed: np.ndarray, resampled: np.ndarray | None) -> list[float]:
    """A 95% interval of a mean: the t interval over seeds when there are several (:func:`mean_ci`), else the
    percentiles of the one seed's document resamples (:func:`percentile_interval`)."""
    if len(per_seed) > 1:
        return [float(v) for v in mean_ci(per_seed.tolist())["ci95"]]
    return percentile_interval(resampled)


# ---------------------------------------------------------------------------------------------
# A two-level bootstrap over seeds and test sentences (the structure experiment, grammar_probe)
# ---------------------------------------------------------------------------------------------
#
# Every seed is scored on the same test sentences, so two things vary between a run and its repetition:
# the seeds (training subset, initialisations, word dropout) and the test sentences (one sample of the
# grammar). A t interval over seeds sees only the first and can leave [0, 1]. Here every number comes
# with a two-level bootstrap: each replicate draws the seeds with replacement and, independently, the
# test sentences of each split with replacement (one draw of the seeds per replicate is shared by all
# splits, one draw of each split's sentences by all models), then recomputes the quantity. The interval
# is the replicates' 2.5-97.5 percentile: an accuracy stays inside [0, 1] because every replicate is one,
# and a paired difference is paired at both levels (the same seeds and sentences for both models).
#
# Tests of a paired difference use the replicates' standard deviation as its standard error (normal
# theory): "no difference" has the two-sided p-value ``2 Phi(-|d| / se)``; equivalence within a declared
# margin is the two one-sided tests, ``max(Phi((d - margin) / se), Phi((-margin - d) / se))``. (Counting
# replicates instead would floor every p-value at 2 / (B + 1), too coarse for Holm over a table of 60.)
# A difference with no variance at all (every replicate equal) is 0 with p = 1 when it is exactly 0, and
# otherwise decided by its sign. :func:`holm_family` adjusts the p-values of one table (its family of
# comparisons) and re-derives the verdicts.

BOOTSTRAP_REPLICATES = 2000
BOOTSTRAP_METHOD = (f"bootstrap over seeds and test sentences ({BOOTSTRAP_REPLICATES} replicates, percentile 95%; "
                    "seeds and each split's sentences drawn with replacement)")


class Bootstrap:
    """Shared replicate draws for one run: seed draws for all splits, sentence weights per split."""

    def __init__(self, n_seeds: int, sentences_per_split: Mapping[str, int], seed: int = 0,
                 replicates: int = BOOTSTRAP_REPLICATES) -> None:
        rng = np.random.default_rng(seed)
        self.n_seeds = n_seeds
        self.replicates = replicates
        self.seed_draws = rng.integers(0, n_seeds, size=(replicates, n_seeds))
        # Multinomial counts == how often each sentence is drawn in a resample of the same size.
        self.weights = {split: rng.multinomial(n, np.full(n, 1.0 / n), size=replicates).astype(np.float64)
                        for split, n in sorted(sentences_per_split.items())}

    def replicates_of(self, split: str, correct: np.ndarray, sentence: np.ndarray, mask: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Per-seed accuracies (seeds,) and bootstrap replicates (replicates,) of the accuracy over the
        tokens in ``mask``; ``correct`` is (seeds, tokens), ``sentence`` the sentence index of each token."""
        w = self.weights[split]
        n_sent = w.shape[1]
        if mask is not None:
            correct, sentence = correct[:, mask], sentence[mask]
        den = np.bincount(sentence, minlength=n_sent).astype(np.float64)
        num = np.stack([np.bincount(sentence, weights=c.astype(np.float64), minlength=n_sent) for c in correct])
        per_seed = num.sum(1) / max(den.sum(), 1.0)
        tokens = w @ den  # (replicates,)
        by_seed = (w @ num.T) / np.maximum(tokens, 1.0)[:, None]  # (replicates, seeds)
        rep = np.take_along_axis(by_seed, self.seed_draws, axis=1).mean(1)
        return per_seed, rep


def bootstrap_interval(per_seed: np.ndarray, rep: np.ndarray) -> dict:
    """A :func:`summary`-shaped dict whose ``ci95`` is the percentile interval of the replicates ``rep``."""
    lo, hi = np.percentile(rep, [2.5, 97.5])
    sd = float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else float("nan")
    return {"mean": float(np.mean(per_seed)), "ci95": (float(lo), float(hi)), "sd": sd, "n": len(per_seed),
            "per_seed": [float(v) for v in per_seed], "method": BOOTSTRAP_METHOD}


def bootstrap_difference(a_seed: np.ndarray, a_rep: np.ndarray, b_seed: np.ndarray, b_rep: np.ndarray,
                         margin: float | None, alpha: float = ALPHA) -> dict:
    """The paired difference a - b: :func:`bootstrap_interval` plus ``ci90``, the bootstrap p-values and a
    verdict."""
    d_seed, d_rep = a_seed - b_seed, a_rep - b_rep
    out = bootstrap_interval(d_seed, d_rep)
    lo90, hi90 = np.percentile(d_rep, [5, 95])
    out["ci90"] = (float(lo90), float(hi90))
    out["margin"] = margin
    b = len(d_rep)
    if np.all(d_rep == d_rep[0]):  # no variance at all: decided by the value itself
        p_diff = 1.0 if d_rep[0] == 0 else 1.0 / (b + 1)
        p_eq = None if margin is None else (1.0 / (b + 1) if abs(d_rep[0]) < margin else 1.0)
    else:
        # Normal theory with the bootstrap standard error: unlike counting replicates (whose smallest
        # p-value is 2 / (B + 1)), these p-values can be small enough to survive Holm in a large family.
        mean, se = float(np.mean(d_seed)), float(np.std(d_rep, ddof=1))
        p_diff = float(2 * special.ndtr(-abs(mean) / se))
        p_eq = None if margin is None else float(max(special.ndtr((mean - margin) / se),
                                                      special.ndtr((-margin - mean) / se)))
    out["p_difference"], out["p_equivalence"] = float(p_diff), None if p_eq is None else float(p_eq)
    out["p_difference_raw"], out["p_equivalence_raw"] = out["p_difference"], out["p_equivalence"]
    _set_verdict(out, alpha)
    return out


def holm_family(comparisons: Sequence[dict], family: str, alpha: float = ALPHA) -> None:
    """Holm-adjust, in place, the p-values of one table's comparisons (its family, from
    :func:`bootstrap_difference`) and re-derive the verdicts; each comparison records the family's name and size."""
    p_diff = holm([c["p_difference_raw"] for c in comparisons])
    p_eq = holm([c["p_equivalence_raw"] for c in comparisons])
    for c, pd, pe in zip(comparisons, p_diff, p_eq, strict=True):
        c["p_difference"] = pd
        c["p_equivalence"] = None if c["p_equivalence_raw"] is None else pe
        c["correction"] = {"method": "holm", "family": family, "size": len(comparisons)}
        _set_verdict(c, alpha)


def _set_verdict(out: dict, alpha: float) -> None:
    out["verdict"] = verdict(out["p_difference"], out["p_equivalence"], alpha)
    out["conclusion"] = conclusion(out["verdict"], out["mean"])

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
    "conclusion",
    "ACCURACY_INTERVAL_METHODS",
    "accuracy_interval",
    "wilson",
    "slope_interval",
    "document_resamples",
    "resampled_means",
    "percentile_interval",
    "seed_interval",
    "BOOTSTRAP_REPLICATES",
    "BOOTSTRAP_METHOD",
    "Bootstrap",
    "bootstrap_interval",
    "bootstrap_difference",
    "holm_family",
]
