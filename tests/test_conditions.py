"""The structure rows across committed grammar_probe arms: reading arms.json, the report block, the sentence."""

from __future__ import annotations

from eval.report.conditions import conditions_block, phrase, structure_conditions
from grammar_probe.arms import ARMS_SCHEMA

ROWS = {"ratio_within_a": ("ratio", 0.96), "novel_structural_spcn_minus_bigru": ("novel", "> 0")}


def _arm(axis: str, value, n: int, verdicts: dict[str, str], means: dict[str, float]) -> dict:
    rows = {row: {"description": desc, "paper": paper, "target": 0.96 if row == "ratio_within_a" else 0.0,
                  "verdict": verdicts[row], "reachable": True, "causal_cap": None,
                  "models": {"spcn": {"value": {"mean": means[row], "ci95": [means[row] - 0.01, means[row] + 0.01]},
                                      "verdict": verdicts[row]}}}
            for row, (desc, paper) in ROWS.items()}
    rows["ratios"] = {}
    return {"axis": axis, "value": value, "train_sentences": n, "rows": rows}


def _arms() -> dict:
    arms = {
        "size_250": _arm("train_sentences", 250, 250, {"ratio_within_a": "met",
                                                       "novel_structural_spcn_minus_bigru": "met"},
                         {"ratio_within_a": 0.99, "novel_structural_spcn_minus_bigru": 0.05}),
        "size_2000": _arm("train_sentences", 2000, 2000, {"ratio_within_a": "refuted",
                                                          "novel_structural_spcn_minus_bigru": "refuted"},
                          {"ratio_within_a": 0.91, "novel_structural_spcn_minus_bigru": -0.30}),
        "protocol_no_dropout_unk": _arm("protocol", "no_dropout_unk", 2000,
                                        {"ratio_within_a": "refuted", "novel_structural_spcn_minus_bigru": "met"},
                                        {"ratio_within_a": 0.90, "novel_structural_spcn_minus_bigru": 0.12}),
    }
    conditions = {row: {} for row in ROWS}
    for name, arm in arms.items():
        for row in ROWS:
            conditions[row].setdefault(arm["rows"][row]["verdict"], []).append(name)
    return {"schema": ARMS_SCHEMA, "seed": 21, "size": {"seeds": 5}, "sizes": [250, 2000], "protocol_size": 2000,
            "base_protocol": {"word_dropout": 0.15, "unseen": "unk"}, "seconds": 600.0, "arms": arms,
            "conditions": conditions}


def test_block_keeps_every_arm_and_the_verdict_groups():
    block = conditions_block(_arms(), "docs/structure/arms/arms.json")
    assert set(block["rows"]) == set(ROWS)  # "ratios" is not a paper row
    novel = block["rows"]["novel_structural_spcn_minus_bigru"]
    assert novel["by_verdict"] == {"met": ["size_250", "protocol_no_dropout_unk"], "refuted": ["size_2000"]}
    assert novel["arms"]["size_2000"]["spcn"]["mean"] == -0.30


def test_phrase_names_each_arm_with_its_verdict_and_value_as_the_row_reads():
    block = conditions_block(_arms(), "docs/structure/arms/arms.json")
    ratio = phrase(block, "ratio_within_a")
    assert ratio.startswith("met in 1 of 3 arms (5 seeds per arm, committed arms `docs/structure/arms/arms.json`)")
    assert "250 met (0.990), 2,000 refuted (0.910)" in ratio  # sizes in order, ratios as ratios
    assert "dropout off, <unk> refuted (0.900)" in ratio
    novel = phrase(block, "novel_structural_spcn_minus_bigru")
    assert "2,000 refuted (-30.0 pts)" in novel and "dropout off, <unk> met (+12.0 pts)" in novel  # differences
    assert phrase(block, "deep_accuracy") is None


def test_the_conditions_come_from_the_committed_arms_sweep_else_an_older_report() -> None:
    swept = conditions_block(_arms(), "docs/sweeps/arms")
    older = conditions_block(_arms(), "docs/structure/arms/arms.json")
    assert structure_conditions({"sweeps": {"arms": {"analysis": {"kind": "arms", "conditions": swept}}},
                                 "structure_conditions": older}) is swept
    # an arms sweep still running names no conditions (its partial line says why), never the older block
    assert structure_conditions({"sweeps": {"arms": {"analysis": {"kind": "arms", "complete": False}}},
                                 "structure_conditions": older}) is None
    assert structure_conditions({"structure_conditions": older}) is older  # a report.json written before
    assert structure_conditions({"sweeps": {"ladder": {}}}) is None


def test_the_report_table_has_a_column_per_arm_and_a_cell_per_row():
    from eval.report.render import conditions_table

    lines = conditions_table(conditions_block(_arms(), "docs/structure/arms/arms.json"))
    assert lines[0] == "### The conditions each row holds in (committed arms)"
    assert "| row | 250 sent. | 2,000 sent. | dropout off, <unk> |" in lines
    assert "| novel | met (+5.0 pts) | refuted (-30.0 pts) | met (+12.0 pts) |" in lines
