"""The arms command: every paper row across training sizes and the unseen-word protocol 2 x 2 (tiny sizes)."""

from __future__ import annotations

import json

import pytest

from grammar_probe.arms import PROTOCOL_ARMS, run_arms
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
