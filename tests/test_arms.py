"""The arms command: every paper row across training sizes and the unseen-word protocol 2 x 2 (tiny sizes)."""

from __future__ import annotations

import json
import shutil

import pytest

from grammar_probe.__main__ import main
from grammar_probe.arms import (
    PROTOCOL_ARMS,
    ArmsFolderError,
    _row_values,
    render_arms_markdown,
    run_arms,
    summarize_arms,
)
from grammar_probe.dataset import build_dataset, compute_ceilings
from grammar_probe.protocol import RunSize
from grammar_probe.spcn import SPCNConfig

TINY = SPCNConfig(input_dim=64, input_active=4, level_sizes=(32, 32), level_active=(4, 4), epochs=1, batch_size=64)
TINY_RUN = RunSize(seeds=2, train_sentences=40, spcn_epochs=1, gru_epochs=2, probe_epochs=2, window_epochs=1,
                   eval_sentences=15, validation_sentences=15)


@pytest.fixture(scope="module")
def arms_dir(tmp_path_factory):
    corpus = build_dataset(seed=2, train_size=200, validation_size=15, test_size=15)
    ceilings = compute_ceilings(corpus, seed=2, ceiling_sentences=60, window_sentences=600)
    out = tmp_path_factory.mktemp("arms") / "out"
    run_arms(corpus, out, sizes=(20, 40), size=TINY_RUN, protocol_size=40, seed=0, workers=1, progress=False,
             ceilings=ceilings, spcn_config=TINY, splits=["test_within_a", "test_novel_words"])
    return out


def test_arms_cover_sizes_and_the_protocol_2x2(arms_dir):
    summary = json.loads((arms_dir / "arms.json").read_text())
    assert list(summary["arms"]) == ["size_20", "size_40", *(f"protocol_{p}" for p in PROTOCOL_ARMS)]
    protocols = {(a["protocol"]["word_dropout"], a["protocol"]["unseen"]) for n, a in summary["arms"].items()
                 if n.startswith("protocol_")}
    assert protocols == {(0.15, "unk"), (0.15, "random_codes"), (0.0, "unk"), (0.0, "random_codes")}
    assert {a["train_sentences"] for n, a in summary["arms"].items() if n.startswith("protocol_")} == {40}
    # the protocol arm at a size arm's size and protocol is that arm's run, not a second one
    assert summary["arms"]["protocol_dropout_unk"]["same_run_as"] == "size_40"
    assert summary["arms"]["protocol_dropout_unk"]["rows"] == summary["arms"]["size_40"]["rows"]
    assert summary["arms"]["protocol_no_dropout_unk"]["same_run_as"] is None
    for arm in summary["arms"].values():
        assert set(arm["rows"]) >= {"ratio_within_a", "novel_structural_spcn_minus_bigru"}
        assert len(arm["seeds"]) == 2
    for by_verdict in summary["conditions"].values():  # every arm is placed under exactly one verdict
        assert sorted(n for names in by_verdict.values() for n in names) == sorted(summary["arms"])


def test_arms_write_report_figures_and_each_arms_results(arms_dir):
    names = {p.name for p in arms_dir.iterdir()}
    assert {"arms.json", "arms.md", "arms_ratio_within_a.png", "arms_novel_structural_spcn_minus_bigru.png"} <= names
    assert (arms_dir / "arms" / "size_20" / "results.json").is_file()
    assert "### SPCN probe accuracy / BiGRU accuracy" in (arms_dir / "arms.md").read_text()


def test_protocol_arms_change_what_the_models_read(arms_dir):
    res = json.loads((arms_dir / "arms" / "protocol_dropout_random_codes" / "results.json").read_text())
    assert res["protocol"]["unseen"] == "random_codes" and res["protocol"]["word_dropout"] == 0.15
    off = json.loads((arms_dir / "arms" / "protocol_no_dropout_unk" / "results.json").read_text())
    assert all(log["unk_rate_train"] == 0 for log in off["logs"])
    assert not (arms_dir / "arms" / "protocol_dropout_unk" / "results.json").exists()
    on = json.loads((arms_dir / "arms" / "size_40" / "results.json").read_text())
    assert all(log["unk_rate_train"] > 0 for log in on["logs"])


def test_arms_refuse_a_foreign_folder(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="not an output of grammar_probe arms"):
        run_arms(build_dataset(seed=2, train_size=50, validation_size=5, test_size=5), mine, sizes=(10,),
                 size=TINY_RUN, progress=False)
    assert (mine / "notes.txt").read_text() == "mine"


def _value(mean: float) -> dict:
    return {"mean": mean, "ci95": [mean - 0.01, mean + 0.01]}


def _results(spcn_ratio: float = 0.9) -> dict:
    """A results.json with two paper rows: a ratio (whose causal GRU value lives under ``ratios``) and a
    paired "minus BiGRU" difference (computed for SPCN and the shortcuts only)."""
    shortcuts = {m: {"value": _value(0.5), "verdict": "refuted"} for m in ("majority_word", "window", "plain_ema",
                                                                         "spcn_frozen")}
    row = {"paper": 0.96, "target": 0.96, "verdict": "refuted", "reachable": True, "causal_cap": _value(0.99),
           "shortcuts": shortcuts}
    return {"paper": {"ratio_within_a": {**row, "description": "ratio", "ours": _value(spcn_ratio)},
                      "novel_structural_spcn_minus_bigru": {**row, "description": "novel", "paper": "above",
                                                            "target": 0.0, "ours": _value(-0.3)}},
            "ratios": {"spcn_over_bigru": _value(spcn_ratio), "causal_gru_over_bigru": _value(0.97)}}


def test_the_causal_gru_value_is_the_rows_own_measure_from_results_json():
    rows = _row_values(_results())
    assert rows["ratio_within_a"]["models"]["causal_gru"] == {"value": _value(0.97), "verdict": "met"}
    assert "causal_gru" not in rows["novel_structural_spcn_minus_bigru"]["models"]  # no paired difference for it
    # a lookup that does not give SPCN's value of the row is not the row's measure: nothing is recorded
    stale = _results()
    stale["ratios"]["spcn_over_bigru"] = _value(0.8)
    assert "causal_gru" not in _row_values(stale)["ratio_within_a"]["models"]


def test_arms_md_prints_no_column_that_is_empty_in_every_row():
    rows = _row_values(_results())
    arm = {"rows": rows}
    summary = {"size": {"seeds": 2}, "sizes": [20], "base_protocol": {"word_dropout": 0.15}, "protocol_size": 20,
               "seconds": 60.0, "arms": {"size_20": arm},
               "conditions": {r: {"refuted": ["size_20"]} for r in rows if r != "ratios"}}
    md = render_arms_markdown(summary)
    ratio, novel = md.split("### novel")
    assert "| arm | SPCN | verdict | plain_ema | window | causal_gru | causal cap |" in ratio
    assert "| 0.970 [0.960, 0.980] |" in ratio  # a ratio, printed as the row's SPCN value is
    assert "| arm | SPCN | verdict | plain_ema | window | causal cap |" in novel
    assert "No column for causal_gru" in novel
    assert "—" not in md


def test_arms_fill_the_causal_gru_column_from_each_arms_results(arms_dir):
    summary = json.loads((arms_dir / "arms.json").read_text())
    for name, arm in summary["arms"].items():
        res = json.loads((arms_dir / "arms" / (arm["same_run_as"] or name) / "results.json").read_text())
        assert arm["rows"]["ratio_within_a"]["models"]["causal_gru"]["value"] == res["ratios"]["causal_gru_over_bigru"]
        assert "causal_gru" not in arm["rows"]["novel_structural_spcn_minus_bigru"]["models"]
    assert "| plain_ema | window | causal_gru | causal cap |" in (arms_dir / "arms.md").read_text()


def test_summarize_rebuilds_a_runs_summary_from_its_results_without_training(arms_dir, tmp_path):
    copy = tmp_path / "arms"
    shutil.copytree(arms_dir, copy)
    summary = json.loads((copy / "arms.json").read_text())
    # keep only the run's own record: every row and the conditions must come back from the results
    record = {**summary, "arms": {n: {k: v for k, v in a.items() if k != "rows"} for n, a in summary["arms"].items()}}
    del record["conditions"]
    (copy / "arms.json").write_text(json.dumps(record))
    for png in copy.glob("arms_*.png"):
        png.unlink()
    (copy / "arms.md").unlink()
    (copy / "notes.txt").write_text("mine")

    assert main(["arms", "--summarize", str(copy)]) == 0
    assert json.loads((copy / "arms.json").read_text()) == summary
    assert (copy / "arms.md").read_text() == (arms_dir / "arms.md").read_text()
    assert {p.name for p in copy.glob("arms_*.png")} == {p.name for p in arms_dir.glob("arms_*.png")}
    assert (copy / "notes.txt").read_text() == "mine"
    assert not [p for p in copy.iterdir() if ".tmp-" in p.name or p.name.startswith(".arms-figures-")]


def test_summarize_refuses_a_bad_folder_in_one_line(arms_dir, tmp_path, capsys):
    assert main(["arms", "--summarize", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "arms.json: no such file" in err
    assert main(["arms", "--summarize", str(tmp_path), "--dataset", str(tmp_path)]) == 2
    assert main(["arms", "--output_dir", str(tmp_path / "out")]) == 2
    assert "--dataset is required" in capsys.readouterr().err

    copy = tmp_path / "arms"
    shutil.copytree(arms_dir, copy)
    before = (copy / "arms.json").read_text()
    results = copy / "arms" / "size_20" / "results.json"
    res = json.loads(results.read_text())
    results.write_text(json.dumps({**res, "seeds": [7, 8]}))  # another run's results under this arm
    with pytest.raises(ArmsFolderError, match="size_20/results.json: its seeds"):
        summarize_arms(copy)
    results.unlink()
    with pytest.raises(ArmsFolderError, match="size_20/results.json: no such file"):
        summarize_arms(copy)
    assert (copy / "arms.json").read_text() == before
