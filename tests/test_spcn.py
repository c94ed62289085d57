"""SPCN (issue 5): label-free and gradient-free learning, the PGHU equations, the probe evaluator."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import datasets
import pytest
import torch

from grammar_probe.dataset import DatasetFormatError, build_dataset, write_dataset
from grammar_probe.experiment import run_experiment
from grammar_probe.spcn import SPCN, SPCNConfig, word_code

TINY = SPCNConfig(input_dim=128, input_active=8, level_sizes=(128, 128), level_active=(8, 8),
                  epochs=1, batch_size=64)


@pytest.fixture(scope="module")
def corpus() -> datasets.DatasetDict:
    return build_dataset(seed=1, train_size=300, validation_size=30, test_size=40)


@pytest.fixture(scope="module")
def run_dir(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    run_experiment(corpus, out, quick=True, seed=0, spcn_config=TINY, progress=False)
    return out


def _prediction_error(net: SPCN, sentences) -> float:
    """Mean squared error of level-1 top-down predictions against the bottom-up codes."""
    errors = []
    original = net._pghu

    def spy(lvl, error, pre, valid):
        errors.append(error[valid].pow(2).mean().item())

    net._pghu = spy
    net._run(sentences, learn=True)
    net._pghu = original
    return sum(errors) / len(errors)


def test_fit_takes_tokens_only():
    assert list(inspect.signature(SPCN.fit).parameters) == ["self", "sentences", "progress"]


def test_learning_is_gradient_free_and_changes_only_feedback(corpus, monkeypatch):
    net = SPCN(TINY)
    projections = [p.clone() for p in net.projections]
    seen_grad_mode = []
    original = SPCN._pghu

    def spy(self, *args):
        seen_grad_mode.append(torch.is_grad_enabled())
        return original(self, *args)

    monkeypatch.setattr(SPCN, "_pghu", spy)
    with torch.enable_grad():
        net.fit(list(corpus["train"]["tokens"]))
    assert seen_grad_mode and not any(seen_grad_mode)
    for t in net.tensors():
        assert not t.requires_grad and t.grad is None and t.grad_fn is None
    assert all(torch.equal(a, b) for a, b in zip(projections, net.projections, strict=True))
    assert net.feedback[0].abs().sum() > 0


def test_pghu_reduces_prediction_error_on_held_out_sentences(corpus):
    held_out = list(corpus["validation"]["tokens"])
    untrained = _prediction_error(SPCN(TINY), held_out)
    trained = _prediction_error(SPCN(TINY).fit(list(corpus["train"]["tokens"])), held_out)
    assert trained < 0.9 * untrained


def test_pghu_update_matches_the_equation():
    cfg = SPCNConfig(input_dim=16, input_active=2, level_sizes=(4, 4), level_active=(1, 1),
                     trace_rates=(0.5,), learning_rate=0.3, precision_rate=0.5)
    net = SPCN(cfg)
    error = torch.tensor([[1.0, -0.5, 0.0, 0.25], [0.0, 0.5, 1.0, -1.0]])
    pre = torch.tensor([[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, 1.0]])
    var = 0.5 * torch.ones(4) + 0.5 * error.pow(2).mean(0)
    precision = 1 / (var + cfg.eps)
    gated = error * precision / precision.mean()
    expected = 0.3 * (gated.T @ pre) / (2 * (pre.pow(2).sum(-1).mean() + cfg.eps))
    net._pghu(0, error, pre, torch.tensor([True, True]))
    torch.testing.assert_close(net.feedback[0], expected)
    torch.testing.assert_close(net.error_var[0], var)


def test_traces_are_ema_of_sparse_codes():
    net = SPCN(TINY)
    feats = net.traces([["the", "dog", "slept", "."]])
    n1, k1 = TINY.level_sizes[0], TINY.level_active[0]
    fast = feats[:, :n1]  # alpha = 0.5 trace of level 1
    assert torch.equal(fast[0].unique(), torch.tensor([0.0, 0.5]))
    assert int((fast[0] == 0.5).sum()) == k1
    slow = feats[:, 2 * n1 : 3 * n1]  # alpha = 0.02: every value a sum of 0.02 * 0.98^j terms
    assert 0 < slow.max() <= 0.02 * 4
    assert feats.shape == (4, net.feature_dim)


def test_word_code_is_stable_and_vocabulary_free():
    a = word_code("wug", 128, 8, seed=0)
    assert torch.equal(torch.as_tensor(a), torch.as_tensor(word_code("wug", 128, 8, seed=0)))
    assert len(set(a.tolist())) == 8 and not (a == word_code("dax", 128, 8, seed=0)).all()


def test_run_writes_every_file_and_field(run_dir, corpus):
    names = {p.name for p in run_dir.iterdir()}
    assert {"results.json", "report.md", "structural_vs_lexical.png"} <= names
    assert {f"per_role_{s}.png" for s in corpus} <= names
    res = json.loads((run_dir / "results.json").read_text())
    for split in corpus:
        for model in ("spcn_probe", "bigru", "control", "causal_gru"):
            assert 0 <= res["splits"][split][model]["accuracy"] <= 1
        assert res["ratio_spcn_over_bigru"][split] == pytest.approx(
            res["splits"][split]["spcn_probe"]["accuracy"] / res["splits"][split]["bigru"]["accuracy"]
        )
        for role in res["per_role"][split].values():
            assert role["kind"] in ("structural", "lexical")
            assert {"spcn_probe", "bigru", "control", "causal_gru"} <= set(role)
    assert isinstance(res["seed"], int) and res["seconds"] > 0
    assert "| test_within_a |" in (run_dir / "report.md").read_text()


def test_traces_beat_the_control_on_structural_roles(run_dir):
    res = json.loads((run_dir / "results.json").read_text())
    structural = res["by_kind"]["test_within_a"]["structural"]
    assert structural["spcn_probe"] > structural["control"] + 0.2
    # The control sees only the current word: it cannot tell DET_PATIENT from DET_AGENT.
    assert res["per_role"]["test_within_a"]["DET_PATIENT"]["control"] < 0.5


def test_same_seed_same_results(run_dir, corpus, tmp_path):
    again = run_experiment(corpus, tmp_path / "again", quick=True, seed=0, spcn_config=TINY, progress=False)
    first = json.loads((run_dir / "results.json").read_text())
    for key in ("splits", "per_role", "by_kind", "ratio_spcn_over_bigru"):
        assert json.loads(json.dumps(again[key])) == first[key]


def test_unknown_split_and_missing_folder_rejected(corpus, tmp_path):
    with pytest.raises(DatasetFormatError, match="unknown split 'test_nope'"):
        run_experiment(corpus, tmp_path / "o", splits=["test_nope"], progress=False)
    with pytest.raises(DatasetFormatError, match="does not exist"):
        run_experiment(tmp_path / "missing", tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_cli_run_bad_inputs_one_line_exit_2(corpus, tmp_path, capsys):
    from grammar_probe.__main__ import main

    wrong = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a b"]})})
    wrong.save_to_disk(str(tmp_path / "wrong"))
    good = tmp_path / "good"
    write_dataset(corpus, good)
    cases = [
        (["--dataset", str(tmp_path / "missing")], "does not exist"),
        (["--dataset", str(tmp_path / "wrong")], "split train has features"),
        (["--dataset", str(good), "--splits", "test_nope"], "unknown split 'test_nope'"),
        (["--dataset", str(good), "--threads", "0"], "--threads must be a positive integer"),
        (["--dataset", str(good), "--seed", "x"], "argument --seed: invalid int value"),
    ]
    for args, needle in cases:
        capsys.readouterr()
        try:
            code = main(["run", "--out", str(tmp_path / "out"), *args])
        except SystemExit as exit_:
            code = exit_.code
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and needle in lines[0], (args, lines)
    assert not (tmp_path / "out").exists()
