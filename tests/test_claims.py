"""The claims table (eval/report/claims.py): verdicts behind preconditions, explanations only beside the numbers of
the experiment that tested them, disagreement from the verdict enum, never from a claim's words."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path

import pytest

from ema_boundary.verdicts import Verdict
from eval.report.claim_checks import EXPERIMENTS
from eval.report.claim_rows import evaluate, one_screen
from eval.report.claim_rules import get
from eval.report.claims import CLAIMS
from eval.report.plan import REPO
from eval.report.render import claim_detail, claims_table, readme_results
from eval.report.schema import migrate


@pytest.fixture(scope="module")
def committed() -> dict:
    """The committed report without the committed ladder, depth and ablation sweeps its plan names: these tests
    read the report's own blocks; the sweep readers are tested in tests/test_committed.py."""
    report = migrate(json.loads((REPO / "docs/report/report.json").read_text()))
    report["sweeps"] = {k: v for k, v in (report.get("sweeps") or {}).items()
                        if k not in ("ladder", "depth", "ablation_trace", "ablation_predictor")}
    return report


def _row(report: dict, claim_id: str, claims=CLAIMS) -> dict:
    return next(r for r in evaluate(report, claims) if r["id"] == claim_id)


def _in_schema(path: tuple[str, ...]) -> bool:
    import json

    from eval.report import schema

    node = json.loads(Path(schema.__file__).with_name("report.schema.json").read_text())
    for key in path:
        if "properties" not in node:  # an open block (grammar_probe's results): its own schema governs
            return True
        if key not in node["properties"]:
            return False
        node = node["properties"][key]
    return True


def _full() -> dict:
    """The committed report with every committed sweep its plan names (the ladder's included)."""
    return migrate(json.loads((REPO / "docs/report/report.json").read_text()))


def test_the_table_is_consistent() -> None:
    committed = _full()
    ids = [c.id for c in CLAIMS]
    assert len(set(ids)) == len(ids)
    for claim in CLAIMS:
        assert claim.side in ("structure", "content") and claim.sentence and claim.rule_text
        assert _in_schema(claim.measurement), claim.key  # every measurement is a key of report.json's schema
        # ... and of the committed run, unless its experiment came after that run (then the row says "not run")
        later = ("selection_escapes_recall", "hebbian_learning", "depth_selection_recovers", "depth_selection_loss",
                 "gap_on_recall", "gap_on_recall_ladder")
        assert get(committed, claim.measurement) is not None or claim.id in later, claim.key
        for e in claim.explanations:
            assert e.experiment in EXPERIMENTS, (claim.id, e.experiment)
    assert {"perplexity_gap", "readers_identical", "selection_escapes", "recall_lost"} <= set(ids)


def test_perplexity_claim_is_not_testable_above_the_bigram_line(committed: dict) -> None:
    # The committed run (shuffled, 500 steps at width 48): SPEN 46.7 below the bigram's 59.2 on the test blocks,
    # GPT-2 68.5 above it: the baseline cannot speak, so the pair says nothing.
    row = _row(committed, "perplexity_gap")
    assert row["verdict"] == Verdict.NOT_TESTABLE.value
    assert row["preconditions"][0]["holds"] is False
    assert "46.7" in row["detail"] and "68.5" in row["detail"] and "59.2" in row["detail"]
    assert "0.68x" in row["ours"]  # what the rule alone would say stays visible


def test_perplexity_claim_gets_its_verdict_below_the_bigram_line(committed: dict) -> None:
    report = copy.deepcopy(committed)
    report["content"]["ngram"]["bigram"] = 1000.0  # both models now below the reference line
    row = _row(report, "perplexity_gap")
    assert row["preconditions"][0]["holds"] is True
    # 124,032 parameters on the embedded corpus, the claim 130M on C4: not "refuted", the direction and where.
    assert row["verdict"] == Verdict.OPPOSITE.value and row["detail"] == "SPEN better"
    assert row["outside"] == ("at 0.12M parameters, 0.68M tokens x 1.5 epochs (embedded corpus), outside the "
                              "claim's regime (130M parameters on C4)")
    report["content"]["comparison"]["difference"] = 0.3  # SPEN worse, still "different"
    met = _row(report, "perplexity_gap")
    assert met["verdict"] == Verdict.MET.value and "outside the claim's regime" in met["outside"]


def test_refuted_is_kept_for_a_test_inside_the_claims_regime(committed: dict) -> None:
    report = copy.deepcopy(committed)
    report["content"]["ngram"]["bigram"] = 1000.0
    report["plan"]["corpus"] = "c4"
    report["content"]["regime"]["parameters"] = 133_000_000  # the paper's size, on its corpus
    row = _row(report, "perplexity_gap")
    assert row["verdict"] == Verdict.REFUTED.value and "outside" not in row
    # Claims that name no regime (recall, the structure rows on the paper's grammar) are refuted as ever.
    assert all(c.regime is None for c in CLAIMS if c.side == "structure" or c.id.startswith("recall"))
    assert _row(committed, "ratio_within_a")["verdict"] == Verdict.REFUTED.value


def test_ablation_claims_are_gated_on_the_reference_arm(committed: dict) -> None:
    for claim_id in ("readers_identical", "selection_escapes"):
        row = _row(committed, claim_id)
        assert row["verdict"] == Verdict.NOT_TESTABLE.value, claim_id
        reference = committed["ablation" if claim_id == "readers_identical" else "traces"]["final_loss"]["linear"]
        assert f"{reference:.3f} nats" in row["detail"] and "4.081 nats" in row["detail"]
    report = copy.deepcopy(committed)
    report["content"]["ngram"]["bigram"] = math.exp(6.0)
    # the F test rejects equality (p = 0.0001), on a model and corpus other than the paper's ablation's: "not
    # reproduced"
    assert _row(report, "readers_identical")["verdict"] == Verdict.NOT_REPRODUCED.value
    # the selective arm's interval reaches both sides of zero at 100 steps: the rule decides nothing
    assert _row(report, "selection_escapes")["verdict"] == Verdict.NOT_RESOLVED.value
    # ... and where it is equivalent to the fixed arm within the margin: no escape on language modelling
    report["traces"]["comparisons"]["linear-selective"].update(difference=0.001, ci95=[-0.005, 0.007],
                                                               verdict="equivalent")
    assert _row(report, "selection_escapes")["verdict"] == Verdict.REFUTED.value


def _at_16(report: dict, arm: str) -> str:
    """How the claims print an arm's recall at 16 pairs, from the report's own probe numbers."""
    return f"`{arm}` {100 * report['probes']['recall'][arm]['accuracy']['16']:.1f}%"


def test_recall_explanation_comes_with_the_recall_maps_numbers(committed: dict) -> None:
    row = _row(committed, "recall_lost")
    assert row["verdict"] == Verdict.PARTLY_REFUTED.value
    (explanation,) = row["explanations"]
    assert explanation["experiment"] == "recall_by_scope"
    assert "invertible" in explanation["text"]
    assert _at_16(committed, "softmax_attention-sequence") in explanation["numbers"]
    assert _at_16(committed, "linear") in explanation["numbers"]
    # ... and read against the no-lookup floor of the very sequences the readers were scored on
    assert ("every state-scope reader ≤ 10.9% (the no-lookup floor on these sequences, most frequent value in the "
            "context: 12.3%)") in row["ours"]


def test_an_explanation_the_experiment_does_not_support_is_not_printed(committed: dict) -> None:
    report = copy.deepcopy(committed)
    # A state-scope reader that solves recall: the claim is refuted outright, and "only sequence-scope readers
    # escape" is no longer what the map shows.
    for acc in report["probes"]["recall"]["linear"]["accuracy"]:
        report["probes"]["recall"]["linear"]["accuracy"][acc] = 0.99
    row = _row(report, "recall_lost")
    assert row["verdict"] == Verdict.REFUTED.value and row["explanations"] == []
    # The control fails: nothing is testable, and nothing is explained.
    report = copy.deepcopy(committed)
    control = report["probes"]["positive_control"]
    report["probes"]["recall"][control]["accuracy"] = {k: 0.2 for k in report["probes"]["recall"][control]["accuracy"]}
    row = _row(report, "recall_lost")
    assert row["verdict"] == Verdict.NOT_TESTABLE.value and row["explanations"] == []
    assert f"control `{control}` 20.0%" in row["detail"]


def test_rewording_a_claim_keeps_its_tested_explanation_in_its_section(committed: dict) -> None:
    reworded = tuple(dataclasses.replace(c, sentence="Recall cannot be read back from fixed traces (reworded)")
                     if c.id == "recall_lost" else c for c in CLAIMS)
    report = {**committed, "claims": evaluate(committed, reworded)}
    row = next(r for r in report["claims"] if r["id"] == "recall_lost")
    text = "\n".join(claim_detail(report, row))
    line = next(ln for ln in text.splitlines() if ln.startswith("| tested explanation |"))
    assert "invertible" in line and _at_16(committed, "softmax_attention-sequence") in line
    assert "(reworded)" in text and "**partly refuted" in text


def test_a_reading_whose_conditions_the_row_holds_prints_them_once(committed: dict) -> None:
    rows = {r["id"]: r for r in evaluate(committed)}
    ladder = "committed ladder `docs/sweeps/ladder`: w192 gap -0.175"
    row = {**rows["perplexity_gap"], "conditions": f"{ladder}; along the data axis: w192-e6 narrows"}
    also = {**rows["perplexity_gap"], "conditions": ladder}
    cells = [ln for ln in claim_detail(committed, row, also) if ln.startswith("| conditions |")]
    assert cells == [f"| conditions | {row['conditions']} |"]
    other = {**also, "conditions": "another sweep's conditions"}
    assert len([ln for ln in claim_detail(committed, row, other) if ln.startswith("| conditions |")]) == 2


def test_disagreement_is_the_verdict_enum_not_the_words(committed: dict) -> None:
    assert {v for v in Verdict if v.disagrees} == {Verdict.REFUTED, Verdict.PARTLY_REFUTED, Verdict.OPPOSITE,
                                                    Verdict.NOT_REPRODUCED}
    report = copy.deepcopy(committed)
    report["claims"] = [{**r, "short": "refuted refuted recover it", "verdict": Verdict.MET.value, "detail": "",
                         "verdict_short": ""} for r in report["claims"]]
    table = "\n".join(claims_table(report))
    assert "**refuted**" not in table and "refuted refuted recover it" in table


def test_the_one_screen_table_has_one_row_per_claim(committed: dict) -> None:
    rows = evaluate(_full())  # the ladder sweep carries the perplexity row
    screen = one_screen(rows)
    shorts = [r["short"] for r, _ in screen]
    assert len(shorts) == len(set(shorts)) == len({c.short for c in CLAIMS})
    # A claim read by this run and by a committed run is one row: the committed reading where it decides.
    shown = {r["id"]: (other["id"] if other else None) for r, other in screen}
    assert shown["perplexity_gap_ladder"] == "perplexity_gap" and "perplexity_gap" not in shown
    assert shown["selection_escapes_budgets"] == "selection_escapes"
    # the reader ablation sweep decides nothing yet while it runs in parts: this run's reading is the row, the
    # sweep's beside it (either way round, one row)
    pairs = {frozenset((r["id"], other["id"] if other else None)) for r, other in screen}
    assert frozenset(("readers_identical_budgets", "readers_identical")) in pairs
    # Without the committed runs, this run's reading is the row.
    ids = {r["id"] for r, _ in one_screen(evaluate(committed))}  # the fixture holds no ladder or ablation sweep
    assert {"perplexity_gap", "readers_identical", "selection_escapes"} <= ids
    for claim in CLAIMS:
        assert 0 < len(claim.short.split()) <= 12, claim.short


def test_structure_rows_read_grammar_probes_results_defensively(committed: dict) -> None:
    report = copy.deepcopy(committed)
    del report["structure"]["window_gap"]
    row = _row(report, "ratio_within_a")
    assert row["verdict"] == Verdict.NOT_TESTABLE.value and row["preconditions"][0]["holds"] is None
    del report["structure"]["paper"]["deep_accuracy"]
    assert _row(report, "deep_accuracy")["verdict"] == Verdict.NOT_RUN.value
    report["structure"]["window_gap"] = {"passes": False}  # a results.json with fewer keys than today's
    assert "fails" in _row(report, "transfer_b_accuracy")["detail"]


def test_shortcut_explanation_only_when_a_shortcut_meets_the_row(committed: dict) -> None:
    met = _row(committed, "transfer_b_accuracy")
    assert met["verdict"] == Verdict.MET.value
    window, plain = met["explanations"]  # the window meets it, and so does a plain EMA
    assert "k-token window" in window["text"] and "window 85.2" in window["numbers"]
    assert "plain EMA" in plain["text"] and "plain_ema 89.4" in plain["numbers"]
    refuted = _row(committed, "ratio_within_a")
    assert refuted["verdict"] == Verdict.REFUTED.value and refuted["explanations"] == []


def test_readme_block_is_rendered_from_the_claims(committed: dict) -> None:
    block = readme_results(committed)
    for row, _ in one_screen(committed["claims"]):
        assert f"| {row['short']} |" in block and f"**{row['verdict_short']}**" in block
        assert f"(docs/report/index.md#claim-{row['id']})" in block
    assert "Likely reason" not in block


def test_the_escape_rule_reads_the_recall_maps_verdicts():
    from eval.recall_arms import ESCAPE_VERDICTS
    from eval.report.claims import CLAIMS

    claim = next(c for c in CLAIMS if c.id == "selection_escapes_recall")
    expected = {"selective higher": Verdict.MET, "fixed higher": Verdict.REFUTED, "equivalent": Verdict.REFUTED,
                "not resolved": Verdict.NOT_RESOLVED}
    assert set(expected) == set(ESCAPE_VERDICTS)
    for verdict, want in expected.items():
        escape = {"headline": "16", "comparisons": {"16": {
            "selective": "linear-selective_ssm", "fixed": "linear-ema16", "pairs": 16, "difference": 0.3,
            "ci95": [0.2, 0.4], "state_numbers": {"selective": 1216, "fixed": 1024}, "seeds": [0, 1, 2, 3, 4],
            "verdict": verdict, "reason": ""}}}
        assert claim.rule({}, escape).verdict is want
    assert claim.rule({}, {"headline": None, "comparisons": {}}).verdict is Verdict.NOT_RUN


def test_structure_rows_read_reachability_and_the_hebbian_row() -> None:
    results = json.loads((REPO / "docs/structure/default_seed21/results.json").read_text())
    rows = {r["id"]: r for r in evaluate({"structure": results})}
    within = rows["ratio_within_a"]
    assert [p["id"] for p in within["preconditions"]] == ["no_short_window", "reachable"]
    assert within["preconditions"][1]["holds"] is True and "causal cap 0.99" in within["preconditions"][1]["numbers"]
    assert within["verdict"] == Verdict.REFUTED.value  # reachable, and SPCN/BiGRU 0.907 is below 0.96
    hebb = rows["hebbian_learning"]
    assert "SPCN − frozen twin +0.2 points" in hebb["ours"] and hebb["verdict"] == Verdict.NOT_RESOLVED.value
    unreachable = copy.deepcopy(results)
    unreachable["paper"]["ratio_within_a"]["reachable"] = False
    row = next(r for r in evaluate({"structure": unreachable}) if r["id"] == "ratio_within_a")
    assert row["verdict"] == Verdict.NOT_TESTABLE.value and "out of reach" in row["detail"]


def test_structure_rows_carry_their_conditions_across_the_committed_arms() -> None:
    from eval.report.conditions import conditions_block
    from tests.test_conditions import _arms

    results = json.loads((REPO / "docs/structure/default_seed21/results.json").read_text())
    report = {"structure": results, "structure_conditions": conditions_block(_arms(), "docs/x/arms.json")}
    rows = {r["id"]: r for r in evaluate(report)}
    assert rows["ratio_within_a"]["conditions"].startswith("met in 1 of 3 arms")
    assert "conditions" not in rows["deep_accuracy"]  # no arm measured it
    assert "conditions" not in rows["perplexity_gap"]  # content rows have no arms
    assert "conditions" not in {r["id"]: r for r in evaluate({"structure": results})}["ratio_within_a"]
    lines = "\n".join(claim_detail(report, rows["ratio_within_a"]))
    assert "| conditions | met in 1 of 3 arms" in lines


def test_the_depth_rows_split_the_probe_part_from_the_loss_behind_its_gate(committed: dict) -> None:
    """Issue 34 item 5: token identity and the stream's growth need no language-model gate; the loss does."""
    from tests.test_depth import experiment_result

    # No depth section in the plan: no depth block, both rows are "not run".
    for claim in ("depth_selection_recovers", "depth_selection_loss"):
        assert _row(committed, claim)["verdict"] == Verdict.NOT_RUN.value
    met = _row({**committed, "depth": experiment_result()}, "depth_selection_recovers")
    assert met["verdict"] == "met" and not met.get("preconditions")
    assert "token identity at the last layer, attention − add: +10.1 points" in met["ours"]
    assert "majority token 10.0%" in met["ours"] and "attention 1.4x" in met["ours"]
    loss = _row({**committed, "depth": experiment_result()}, "depth_selection_loss")
    assert loss["verdict"] == "met" and loss["preconditions"][0]["holds"] is True
    assert "attention − add -0.099 [-0.105, -0.094] nats (add 3.520, attention 3.421" in loss["ours"]
    refuted = _row({**committed, "depth": experiment_result(gain=-0.1)}, "depth_selection_recovers")
    assert refuted["verdict"] == "refuted" and Verdict(refuted["verdict"]).disagrees
    worse = _row({**committed, "depth": experiment_result(loss_gap=0.1)}, "depth_selection_loss")
    assert worse["verdict"] == "refuted" and "attention's loss higher" in worse["detail"]
    # Both arms above the bigram line: the loss row is not read; the probe row still is.
    above = {**committed, "depth": experiment_result(val_loss=4.5)}
    assert _row(above, "depth_selection_recovers")["verdict"] == "met"
    row = _row(above, "depth_selection_loss")
    assert row["verdict"] == Verdict.NOT_TESTABLE.value and "bigram 4.000 nats" in row["detail"]
    assert "attention − add -0.099" in row["ours"]


def _with_gap(report: dict, value: float, ci: list[float]) -> dict:
    report = copy.deepcopy(report)
    row = lambda name, diff, n: {"class": name, "tokens": n, "difference": diff, "ci95": [diff - 0.1, diff + 0.1]}  # noqa: E731
    report["gap"] = {"models": {"a": {}, "b": {}}, "interval": "95% t interval over 5 seeds, paired by seed",
                     "text": {"tokens": 1000, "documents": 120, "split": "test"},
                     "total": {"loss_a": 4.0, "loss_b": 4.1, "difference": 0.1},
                     "groups": [row("ar_hit", 0.1 + value, 150), row("repeat", 0.1, 250), row("first", 0.1, 600)],
                     "contrasts": {"ar_hit - first": {"value": value, "ci95": ci}}}
    return report


def test_the_gap_row_reads_the_contrast_behind_the_bigram_gate(committed: dict) -> None:
    below = copy.deepcopy(committed)
    below["content"]["ngram"]["bigram"] = 1000.0
    met = _row(_with_gap(below, 0.2, [0.05, 0.35]), "gap_on_recall")
    assert met["verdict"] == Verdict.MET.value and "+0.200 nats [+0.050, +0.350]" in met["ours"]
    assert "on AR hits +0.300 (150 tokens)" in met["ours"] and "120 documents" in met["ours"]
    # smaller on AR hits, at 0.12M parameters on the embedded corpus (the claim: 130M on C4)
    assert _row(_with_gap(below, -0.2, [-0.35, -0.05]), "gap_on_recall")["verdict"] == Verdict.OPPOSITE.value
    assert _row(_with_gap(below, 0.01, [-0.05, 0.07]), "gap_on_recall")["verdict"] == Verdict.NOT_RESOLVED.value
    # Above the bigram line (the committed run): no verdict, the rule's numbers and the gate's shown instead.
    gated = _row(_with_gap(committed, 0.2, [0.05, 0.35]), "gap_on_recall")
    assert gated["verdict"] == Verdict.NOT_TESTABLE.value and "59.2" in gated["detail"] and "+0.200" in gated["ours"]
    assert _row(committed, "gap_on_recall")["verdict"] == Verdict.NOT_TESTABLE.value  # the committed run: gated
    old = copy.deepcopy(committed)
    del old["gap"]
    assert _row(old, "gap_on_recall")["verdict"] == Verdict.NOT_RUN.value  # a report from before the stage


def test_the_bigram_gate_names_the_blocks_it_reads(committed: dict) -> None:
    report = copy.deepcopy(committed)
    report["content"]["scored_on"] = "validation"  # a run without a test split
    assert "validation (the blocks that also chose the rates)" in _row(report, "perplexity_gap")["detail"]
    row = _row(committed, "perplexity_gap")  # the committed run: every seed scored on test blocks
    assert "test (272,768 tokens of 133 documents apart from validation) perplexity" in row["detail"]
    assert row["ours"].endswith("on test blocks")
