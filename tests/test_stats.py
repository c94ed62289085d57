"""ema_boundary.stats on cases with known answers."""

import math

import numpy as np
import pytest

from ema_boundary.stats import (
    blocked_f_test,
    compare,
    compare_arms,
    conclusion,
    describe,
    detectable_difference,
    document_resamples,
    holm,
    mean_ci,
    percentile_interval,
    resampled_means,
    seed_interval,
    tost_p,
)

# Student's sleep data (Cushny & Peebles; Student 1908; R's `sleep`): extra hours of sleep of ten
# patients under two drugs. R: t.test(extra ~ group, data = sleep, paired = TRUE) gives
# t = -4.0621, df = 9, p-value = 0.002833, 95% CI (-2.4598858, -0.7001142), mean difference -1.58.
DRUG1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
DRUG2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_textbook_paired_t_test() -> None:
    c = compare(DRUG1, DRUG2)
    assert c.n == 10
    assert c.difference == pytest.approx(-1.58)
    assert c.p_difference == pytest.approx(0.002833, abs=5e-7)
    assert c.ci95 == pytest.approx((-2.4598858, -0.7001142), abs=1e-7)
    assert c.verdict == "different" and c.direction == "a lower"
    assert c.p_equivalence is None  # no margin declared: no equivalence test


def test_tost_by_hand() -> None:
    # Differences of the sleep data: mean 1.58, sd 1.229995, se = sd / sqrt(10) = 0.3889587.
    # Against a margin of 2: the upper one-sided test t = (1.58 - 2) / se = -1.07981, df 9,
    # p = P(T9 < -1.07981) = 0.15415; the lower one t = (1.58 + 2) / se = 9.2041, p ~ 3.6e-6.
    se = 1.229995 / math.sqrt(10)
    assert tost_p(1.58, se, 9, 2.0) == pytest.approx(0.15415, abs=5e-5)
    c = compare(DRUG2, DRUG1, margin=2.0)
    assert c.p_equivalence == pytest.approx(0.15415, abs=5e-5)
    assert c.verdict == "different"  # shown different, not shown within ±2
    # The equivalence test passes exactly when the 90% interval lies inside the margin.
    wide = compare(DRUG2, DRUG1, margin=c.ci90[1] + 1e-6)
    narrow = compare(DRUG2, DRUG1, margin=c.ci90[1] - 1e-6)
    assert wide.p_equivalence < 0.05 < narrow.p_equivalence


def test_identical_samples() -> None:
    a = {0: 3.21, 1: 3.05, 2: 3.40, 3: 3.11, 4: 3.30}
    c = compare(a, dict(a), margin=0.02)
    assert c.difference == 0 and c.sd == 0 and c.ci95 == (0.0, 0.0)
    assert c.verdict == "equivalent"
    assert "indistinguishable" in describe(c)
    # Without a declared margin nothing can be called equal, even identical samples.
    no_margin = compare(a, dict(a))
    assert no_margin.verdict == "not resolved"
    assert "indistinguishable" not in describe(no_margin) and "identical" not in describe(no_margin)


def test_constant_shift_is_a_zero_variance_difference() -> None:
    a = [3.0, 3.2, 2.9, 3.1, 3.05]
    b = [x + 0.1 for x in a]
    c = compare(a, b, margin=0.02)
    assert c.difference == pytest.approx(-0.1) and c.sd == pytest.approx(0, abs=1e-12)
    assert c.verdict == "different" and c.direction == "a lower"
    # The same shift is inside a margin of 0.2: equivalent at that margin.
    assert compare(a, b, margin=0.2).verdict == "equivalent"


@pytest.mark.parametrize(
    "shift, expected",
    [(0.005, "equivalent"), (0.05, "different"), (-0.05, "different")],
)
def test_shift_inside_and_outside_the_margin(shift: float, expected: str) -> None:
    # Differences shift ± 0.002 over six seeds: sd = 0.002 * sqrt(6 / 5), 90% CI about shift ± 0.0018.
    base = [3.1, 3.3, 3.0, 3.2, 3.4, 3.15]
    noise = [0.002, -0.002] * 3
    b = [x + shift + e for x, e in zip(base, noise, strict=True)]
    c = compare(b, base, margin=0.02)
    assert c.difference == pytest.approx(shift)
    assert c.sd == pytest.approx(0.002 * math.sqrt(6 / 5))
    assert c.verdict == expected
    if expected == "different":
        assert c.direction == ("a higher" if shift > 0 else "a lower")
        assert "higher" in describe(c) if shift > 0 else "lower" in describe(c)


def test_noisy_small_difference_is_not_resolved() -> None:
    d = [0.03, -0.03, 0.02, -0.01, 0.04]
    c = compare(d, [0.0] * 5, margin=0.02)
    assert c.verdict == "not resolved"
    assert c.ci95[0] < 0 < c.ci95[1] and c.ci90[1] > 0.02
    assert "not resolved at this budget" in describe(c)
    assert "indistinguishable" not in describe(c)


def test_one_seed_cannot_resolve_anything() -> None:
    c = compare([1.0], [2.0], margin=5.0)
    assert c.verdict == "not resolved" and math.isnan(c.ci95[0])


def test_seeds_pair_by_key_not_by_order() -> None:
    a = {1: 2.0, 0: 1.0, 7: 9.0}
    b = {0: 1.0, 1: 2.0, 3: 5.0}  # seed 7 and 3 are unpaired and left out
    c = compare(a, b, margin=0.1)
    assert c.n == 2 and c.difference == 0 and set(c.seeds) == {0, 1}


def test_detectable_difference() -> None:
    # A two-sided paired t-test at alpha 0.05 with n = 10 reaches 80% power at a standardised effect
    # of 0.996 (checked by simulation: 400,000 samples of 10 N(0.996, 1) draws reject |t| > t_{0.975,9}
    # 80.00% of the time; at 0.994 the power is 79.84%).
    assert detectable_difference(1.0, 10) == pytest.approx(0.996, abs=2e-4)
    # Scales with sd and shrinks like 1/sqrt(n); large n approaches (z_0.975 + z_0.8) sd / sqrt(n).
    assert detectable_difference(0.5, 10) == pytest.approx(0.498, abs=2e-4)
    assert detectable_difference(1.0, 10_000) == pytest.approx(2.8016 / 100, rel=2e-3)


def test_mean_ci() -> None:
    r = mean_ci([1, 2, 3, 4, 5])  # mean 3, sd sqrt(2.5), t_{0.975,4} = 2.776445
    assert r["mean"] == 3 and r["n"] == 5
    assert r["ci95"] == pytest.approx((3 - 1.963243, 3 + 1.963243), abs=1e-6)
    assert math.isnan(mean_ci([4.0])["ci95"][0])


def test_holm_by_hand() -> None:
    # Sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> running max.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, None]) == pytest.approx([0.5, math.nan], nan_ok=True)
    # The family is the p-values that are numbers: a missing one neither counts nor moves the others.
    assert holm([0.01, None, 0.04, math.nan]) == pytest.approx([0.02, math.nan, 0.04, math.nan], nan_ok=True)
    assert holm([0.02, 0.02, 0.9]) == pytest.approx([0.06, 0.06, 0.9])  # ties share the larger factor
    assert holm([0.6, 0.7]) == [1.0, 1.0] and holm([]) == []


def test_conclusion_reads_a_comparison_verdict() -> None:
    assert conclusion("different", 0.3) == "higher" and conclusion("different", -0.3) == "lower"
    assert conclusion("equivalent", 0.3) == "equivalent"
    assert conclusion("not resolved", 0.3) == "not resolved at this budget"


def test_seed_interval_is_t_over_seeds_or_the_documents_bootstrap() -> None:
    per_seed = np.array([0.1, 0.3, 0.2])
    assert seed_interval(per_seed, None) == pytest.approx(list(mean_ci(per_seed.tolist())["ci95"]))
    docs = np.repeat(np.arange(20), 10)
    values = np.tile(np.linspace(0.0, 1.0, 10), 20) + docs * 0.01
    ids, weights = document_resamples(docs, 300, seed=0)
    assert weights.shape == (300, 20) and (weights.sum(1) == 20).all()
    means = resampled_means(ids, values, np.ones(len(docs), bool), weights, min_documents=5)
    lo, hi = seed_interval(np.array([values.mean()]), means)
    assert lo < values.mean() < hi and [lo, hi] == percentile_interval(means)
    # Too few documents for a bootstrap: no interval.
    few = docs < 3
    assert resampled_means(ids, values, few, weights, min_documents=5) is None
    assert all(math.isnan(x) for x in seed_interval(np.array([0.5]), None))


def test_compare_arms_uses_holm_adjusted_p_values() -> None:
    ref = {s: 3.0 + 0.1 * s for s in range(5)}
    noise = [0.004, -0.004, 0.002, -0.002, 0.0]
    arms = {
        "ref": ref,
        "same": {s: v + 0.001 + noise[s] for s, v in ref.items()},
        "worse": {s: v + 0.2 + noise[s] for s, v in ref.items()},
    }
    out = compare_arms(arms, "ref", margin=0.02)
    assert set(out) == {"same", "worse"}
    assert out["same"].verdict == "equivalent" and out["worse"].verdict == "different"
    raw = compare(arms["same"], ref, margin=0.02)
    assert out["same"].p_equivalence == pytest.approx(min(1.0, 2 * max(raw.p_equivalence, 0)), rel=1e-9) or (
        out["same"].p_equivalence >= raw.p_equivalence
    )
    with pytest.raises(ValueError, match="reference 'nope'"):
        compare_arms(arms, "nope")


def test_blocked_f_test_with_two_arms_is_the_squared_paired_t() -> None:
    r = blocked_f_test({"a": DRUG1, "b": DRUG2})
    assert r["df"] == (1, 9)
    assert r["F"] == pytest.approx(4.0621**2, rel=1e-4)
    assert r["p"] == pytest.approx(0.002833, abs=5e-7)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: compare({0: 1.0}, {1: 1.0}), "share no seed"),
        (lambda: compare([1.0, 2.0], [1.0]), "same length"),
        (lambda: compare([1.0, math.nan], [1.0, 2.0]), "non-finite"),
        (lambda: compare([1.0, 2.0], [1.0, 2.0], margin=-0.1), "margin must be a positive number"),
        (lambda: compare([1.0, 2.0], [1.0, 2.0], alpha=1.5), "alpha must lie in"),
        (lambda: compare({0: 1.0}, [1.0]), "must both be mappings"),
        (lambda: mean_ci([]), "non-empty"),
    ],
)
def test_bad_input_one_clear_message(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def test_summary_target_verdicts_and_paired_conclusions():
    # The structure experiment's use of the module (moved here from tests/test_spcn.py, same assertions).
    from ema_boundary import stats

    s = stats.summary([0.80, 0.82, 0.84])
    half = 4.302652729911275 * 0.02 / math.sqrt(3)  # t(0.975, df=2) * sd / sqrt(n)
    assert s["mean"] == pytest.approx(0.82) and s["ci95"] == pytest.approx([0.82 - half, 0.82 + half])
    assert s["per_seed"] == [0.80, 0.82, 0.84]
    assert stats.target_verdict([0.85, 0.9], 0.84) == "met" and stats.target_verdict([0.7, 0.83], 0.84) == "refuted"
    assert stats.target_verdict([0.8, 0.9], 0.84) == "not resolved at this budget"
    assert stats.target_verdict([0.84, 0.9], 0.84) == "met"
    assert stats.target_verdict([0.84, 0.9], 0.84, strictly_above=True) == "not resolved at this budget"
    margin = 0.01
    assert stats.paired_summary([0.5, 0.6, 0.7], [0.4, 0.5, 0.6], margin)["conclusion"] == "higher"
    tiny = stats.paired_summary([0.5001, 0.5002, 0.4999, 0.5], [0.5, 0.5, 0.5, 0.5], margin)
    assert tiny["conclusion"] == "equivalent"
    noisy = stats.paired_summary([0.55, 0.45, 0.5], [0.5, 0.5, 0.5], margin)
    assert noisy["conclusion"] == "not resolved at this budget"
    assert stats.compare([0.4, 0.5, 0.6], [0.5, 0.6, 0.7]).conclusion == "lower"
