"""eval.verdicts: every gate and every interval -> verdict rule, on numbers chosen so that each could go either way."""

from __future__ import annotations

import pytest

from ema_boundary import stats
from ema_boundary import verdicts as w
from eval import verdicts as v

PASSED = v.control_gate("gpt2", 0.999, 0.95)
FAILED = v.control_gate("gpt2", 0.40, 0.95)


def seeds(*values: float) -> dict[str, float]:
    return {str(i): x for i, x in enumerate(values)}


def test_gates_hold_fail_or_cannot_be_read() -> None:
    assert v.ngram_gate({"spen": 3.4, "gpt2": 3.5}, 3.6).holds is True
    g = v.ngram_gate({"spen": 3.4, "gpt2": 3.7}, 3.6, "Kneser-Ney trigram")
    assert g.holds is False and "trigram" in g.why and "3.700" in g.why
    assert v.ngram_gate({}, 3.6).holds is None
    # A sweep's cached lines at its declared order; a sweep without them is not measured (never a pass).
    lines = {"loss": {"bigram": 4.1, "trigram": 3.6}}
    assert v.sweep_ngram_gate({"spen": 3.4, "gpt2": 3.7}, lines, "bigram").holds is True
    assert v.sweep_ngram_gate({"spen": 3.4, "gpt2": 3.7}, lines, "trigram").holds is False
    missing = v.sweep_ngram_gate({"spen": 3.4}, None, "trigram")
    assert missing.holds is None and missing.why.startswith("no Kneser-Ney trigram line")
    assert PASSED.holds and not FAILED.holds and v.control_gate("gpt2", None, 0.95).holds is None
    assert v.reference_gate("gpt2", 3.47, 3.454, 0.03).holds is True
    under = v.reference_gate("gpt2", 3.97, 3.454, 0.03)
    assert under.holds is False and "worse than its plain reference" in under.why
    assert v.reference_gate("gpt2", 3.47, None, 0.03).holds is None
    assert v.interior_gate({"a": {"chosen": 0.01, "interior": True}}).holds is True
    assert v.interior_gate({"a": {"chosen": 0.01, "interior": False}}).holds is False
    assert v.decidability_gate(0.97, 0.9, 3).holds is False
    control = {"window": 16, "control": 0.2, "ci95": [0.1, 0.3], "positive": True}
    assert v.context_gate("gpt2", control).holds is True
    assert v.context_gate("gpt2", {**control, "ci95": [-0.1, 0.3], "positive": False}).holds is False
    assert v.context_gate("gpt2", None).holds is None


def test_a_failed_gate_makes_any_verdict_not_testable() -> None:
    assert v.gated(w.MET, [PASSED])[0] == w.MET
    verdict, why = v.gated(w.MET, [PASSED, FAILED])
    assert verdict == w.NOT_TESTABLE and "0.400" in why
    assert v.gated(w.REFUTED, [v.control_gate("gpt2", None, 0.95)])[0] == w.NOT_RUN


def test_difference_verdict_needs_seeds_and_clips_to_the_range() -> None:
    c = stats.compare(seeds(0.9, 0.92, 0.91, 0.93, 0.9), seeds(0.1, 0.12, 0.11, 0.1, 0.13), 0.05)
    kind, ci, _ = v.difference_verdict(c, 5, (-1.0, 1.0))
    assert kind == "a higher" and -1 <= ci[0] <= ci[1] <= 1
    assert v.difference_verdict(c, 6)[0] == w.NOT_RESOLVED  # fewer seeds than the rule asks
    same = stats.compare(seeds(0.5, 0.51, 0.49, 0.5, 0.5), seeds(0.5, 0.5, 0.5, 0.51, 0.49), 0.05)
    assert v.difference_verdict(same, 5)[0] == w.EQUIVALENT


@pytest.mark.parametrize(("selective", "fixed", "control", "verdict"), [
    # selective well above copying level and 5+ points above the bank: it escapes
    ((0.60, 0.62, 0.58, 0.61, 0.59), (0.10, 0.11, 0.10, 0.12, 0.11), PASSED, w.MET),
    # a resolved difference, but both at copying level (1/16 + 5 points = 0.1125): neither escapes
    ((0.105, 0.108, 0.107, 0.106, 0.109), (0.100, 0.101, 0.099, 0.100, 0.102), PASSED, w.NEITHER_ESCAPES),
    # the fixed bank escapes just as well: refuted
    ((0.80, 0.81, 0.79, 0.80, 0.80), (0.80, 0.80, 0.81, 0.79, 0.80), PASSED, w.REFUTED),
    # equivalent, but only the selective mean above the bar (N = 64 at 2,000 steps): the bank has not escaped
    ((0.130, 0.111, 0.102, 0.101, 0.178), (0.108, 0.107, 0.105, 0.108, 0.109), PASSED, w.NOT_RESOLVED),
    # the fixed bank higher, above copying level: refuted
    ((0.10, 0.11, 0.10, 0.12, 0.11), (0.60, 0.62, 0.58, 0.61, 0.59), PASSED, w.REFUTED),
    # without the positive control nothing is read
    ((0.60, 0.62, 0.58, 0.61, 0.59), (0.10, 0.11, 0.10, 0.12, 0.11), FAILED, w.NOT_TESTABLE),
    # a difference smaller than the declared effect
    ((0.52, 0.53, 0.51, 0.52, 0.53), (0.50, 0.50, 0.49, 0.50, 0.51), PASSED, w.NOT_RESOLVED),
])
def test_escape_cannot_be_won_at_copying_level(selective, fixed, control, verdict) -> None:
    out = v.escape_verdict(seeds(*selective), seeds(*fixed), copying=1 / 16, min_effect=0.05, copy_margin=0.05,
                           margin=0.05, control=control)
    assert out["verdict"] == verdict, out["reason"]
    assert out["copy_bar"] == pytest.approx(1 / 16 + 0.05)
    assert out["selective_mean"] == pytest.approx(sum(selective) / 5)


def test_a_mean_above_the_bar_with_an_interval_across_it_does_not_escape() -> None:
    # escape-routes' lagged S6 against the bank at 16 pairs (its five seeds as measured): the mean 0.178 sits above the
    # bar 0.123 + 0.05, its interval over seeds [0.159, 0.198] holds it; the plan declares escaping as the interval
    # wholly above the bar, as the per-arm reading does, so the pair is not resolved, not "selective escapes".
    lagged, bank = seeds(0.168, 0.178, 0.173, 0.205, 0.167), seeds(0.112, 0.112, 0.112, 0.114, 0.112)
    out = v.escape_verdict(lagged, bank, copying=0.1232, min_effect=0.05, copy_margin=0.05, margin=0.05,
                           control=PASSED)
    assert out["selective_mean"] > out["copy_bar"] and out["selective_ci95"][0] < out["copy_bar"]
    assert out["verdict"] == w.NOT_RESOLVED and "holds the floor" in out["reason"], out["reason"]
    assert (out["selective_escape"], out["fixed_escape"]) == (w.UNRESOLVED, w.DOES_NOT_ESCAPE)
    assert v.arm_escape(list(lagged.values()), out["copy_bar"]) == (w.UNRESOLVED, out["selective_ci95"])
    assert v.arm_escape([0.95, 0.96, 0.94, 0.97, 0.95], 0.173)[0] == w.ESCAPES
    assert v.arm_escape([0.95, 0.96, 0.94, 0.97], 0.173)[0] == w.UNRESOLVED  # under the declared five seeds
    assert v.arm_escape([0.95], 0.173) == (w.UNRESOLVED, None)
