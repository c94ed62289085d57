"""Bootstrap intervals over seeds and test sentences: inside [0, 1], paired, Holm within a family."""

from __future__ import annotations

import numpy as np
import pytest

from ema_boundary.stats import Bootstrap, bootstrap_difference, bootstrap_interval, holm_family


def _data(p: float, seeds: int = 5, sentences: int = 200, length: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    correct = rng.random((seeds, sentences * length)) < p
    sentence = np.repeat(np.arange(sentences), length)
    return correct, sentence


def test_accuracy_interval_stays_inside_0_1_even_at_the_edge():
    boot = Bootstrap(5, {"s": 200}, seed=1, replicates=500)
    correct, sentence = _data(0.995)
    lo, hi = bootstrap_interval(*boot.replicates_of("s", correct, sentence))["ci95"]
    assert 0.98 < lo <= hi <= 1.0
    perfect = bootstrap_interval(*boot.replicates_of("s", np.ones_like(correct), sentence))
    assert perfect["ci95"] == (1.0, 1.0) and perfect["mean"] == 1.0


def test_interval_includes_test_sentence_sampling():
    """One seed only: a seed-only t interval has no width at all; the bootstrap still sees the sentences."""
    boot = Bootstrap(1, {"s": 200}, seed=1, replicates=500)
    correct, sentence = _data(0.8, seeds=1)
    lo, hi = bootstrap_interval(*boot.replicates_of("s", correct, sentence))["ci95"]
    se = np.sqrt(0.8 * 0.2 / 2000)  # 200 sentences of 10 i.i.d. tokens
    assert 3 * se < hi - lo < 5 * se  # ≈ 3.92 se


def test_paired_difference_zero_variance_and_clear_difference():
    boot = Bootstrap(5, {"s": 200}, seed=2, replicates=500)
    correct, sentence = _data(0.7)
    a = boot.replicates_of("s", correct, sentence)
    same = bootstrap_difference(*a, *a, margin=0.01)
    assert same["ci95"] == (0.0, 0.0) and same["p_difference"] == 1.0 and same["conclusion"] == "equivalent"
    worse = boot.replicates_of("s", correct & (np.arange(correct.shape[1]) % 4 != 0), sentence)
    d = bootstrap_difference(*a, *worse, margin=0.01)
    assert d["conclusion"] == "higher" and d["ci95"][0] > 0.1 and d["p_difference"] < 0.01


def test_holm_adjusts_within_the_family_and_rederives_verdicts():
    comparisons = [{"mean": 0.02, "p_difference_raw": p, "p_equivalence_raw": None, "p_difference": p,
                    "p_equivalence": None} for p in (0.01, 0.02, 0.04)]
    holm_family(comparisons, "table")
    assert [c["p_difference"] for c in comparisons] == pytest.approx([0.03, 0.04, 0.04])
    assert [c["conclusion"] for c in comparisons] == ["higher", "higher", "higher"]
    comparisons = [{"mean": 0.02, "p_difference_raw": p, "p_equivalence_raw": None, "p_difference": p,
                    "p_equivalence": None} for p in (0.03, 0.04, 0.04, 0.04)]
    holm_family(comparisons, "table")
    assert all(c["conclusion"] == "not resolved at this budget" for c in comparisons)
    assert comparisons[0]["correction"] == {"method": "holm", "family": "table", "size": 4}


def test_shared_draws_make_splits_and_models_paired():
    boot = Bootstrap(3, {"a": 50, "b": 80}, seed=3, replicates=100)
    assert boot.weights["a"].shape == (100, 50) and boot.weights["b"].shape == (100, 80)
    assert (boot.weights["a"].sum(1) == 50).all() and boot.seed_draws.shape == (100, 3)


def test_a_clear_difference_survives_holm_in_a_large_family():
    """p-values from the bootstrap standard error are not floored at 2 / (B + 1)."""
    boot = Bootstrap(5, {"s": 200}, seed=4, replicates=500)
    correct, sentence = _data(0.7)
    a = boot.replicates_of("s", correct, sentence)
    b = boot.replicates_of("s", correct & (np.arange(correct.shape[1]) % 10 != 0), sentence)
    d = bootstrap_difference(*a, *b, margin=0.01)
    assert d["p_difference"] < 0.05 / 60 and d["p_difference"] < 2 / 501
    family = [dict(d) for _ in range(60)]
    holm_family(family, "big")
    assert all(c["conclusion"] == "higher" for c in family)
