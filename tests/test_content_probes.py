"""Content probes on inputs where the answer is known."""

import json
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config

from eval.content_probes import (
    ProbeSettings,
    RecallTask,
    associative_recall,
    fit_lag_probes,
    identity_at_lag,
    main,
    run_content_probes,
)
from tests.test_modeling import tiny_model


def _copy_features(tokens: torch.Tensor, vocab: int, lag: int) -> torch.Tensor:
    """Hidden states of a model that holds exactly the token at t - lag (one-hot) and nothing else."""
    shifted = torch.roll(tokens, lag, dims=1)
    return F_one_hot(shifted, vocab)


def F_one_hot(x: torch.Tensor, n: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(x, n).float()


def test_identity_recoverable_exactly_at_the_lag_the_model_copies() -> None:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 8, (40, 50), generator=g)
    feats = _copy_features(tokens, 8, lag=1)
    res = fit_lag_probes(feats, tokens, lags=[1, 2, 5], num_classes=8)
    assert res["accuracy"][0] > 0.99  # the copied token
    assert res["accuracy"][1] < 0.3 and res["accuracy"][2] < 0.3  # i.i.d. tokens: nothing to read
    assert all(0.1 < c < 0.2 for c in res["chance"])  # 8 equiprobable classes


def test_blurred_state_loses_identity_with_lag() -> None:
    # An EMA of one-hot tokens: recent tokens are recoverable, distant ones fade toward chance.
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 8, (60, 80), generator=g)
    onehot = F_one_hot(tokens, 8)
    h, out = torch.zeros(60, 8), []
    for t in range(80):
        h = 0.5 * h + 0.5 * onehot[:, t]
        out.append(h.clone())
    feats = torch.stack(out, 1)
    res = fit_lag_probes(feats, tokens, lags=[0, 1, 8], num_classes=8)
    assert res["accuracy"][0] > 0.95
    assert res["accuracy"][0] > res["accuracy"][1] > res["accuracy"][2]
    assert res["accuracy"][2] < 0.3


def test_fit_lag_probes_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="disagree"):
        fit_lag_probes(torch.zeros(2, 5, 3), torch.zeros(2, 4, dtype=torch.long), [1])
    with pytest.raises(ValueError, match="largest lag"):
        fit_lag_probes(torch.zeros(2, 5, 3), torch.zeros(2, 5, dtype=torch.long), [5])


def test_identity_at_lag_on_a_model_covers_every_layer() -> None:
    model = tiny_model()
    ids = torch.randint(0, 61, (10, 24), generator=torch.Generator().manual_seed(2))
    res = identity_at_lag(model, ids, max_lag=4, num_classes=8)
    assert res["lags"] == [1, 2, 3, 4]
    assert sorted(res["layers"]) == ["0", "1", "2"]  # embeddings + 2 blocks
    assert len(res["best"]) == 4 and all(0.0 <= a <= 1.0 for a in res["best"])


def test_recall_task_targets_are_the_values_of_the_queried_keys() -> None:
    task = RecallTask(vocab_size=64, pairs=(3, 5))
    ids, targets = task.sample(16, 5, torch.Generator().manual_seed(3))
    assert ids.shape == (16, task.seq_len)
    for row, tgt in zip(ids, targets, strict=True):
        pairs = dict(zip(row[0:10:2].tolist(), row[1:10:2].tolist(), strict=True))
        assert len(pairs) == 5 and all(1 <= k < 32 for k in pairs) and all(32 <= v < 64 for v in pairs.values())
        positions = (tgt != -100).nonzero().flatten().tolist()
        assert positions == [10, 12, 14, 16, 18]
        assert sorted(row[positions].tolist()) == sorted(pairs)  # every key is asked once
        for p in positions:
            assert tgt[p] == pairs[int(row[p])] and row[p + 1] == tgt[p]


def test_associative_recall_runs_and_reports_best_lr() -> None:
    config = GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=64, vocab_size=64)
    res = associative_recall(config, RecallTask(vocab_size=64, pairs=(2, 4)), lrs=(1e-3, 3e-3), steps=15,
                             eval_batches=1)
    assert res["pairs"] == [2, 4] and len(res["accuracy"]) == 2
    assert res["best_lr"] in (1e-3, 3e-3) and set(res["sweep"]) == {"0.001", "0.003"}
    assert res["chance"] == pytest.approx(1 / 32)


def test_cli_end_to_end_on_a_saved_checkpoint(tmp_path: Path) -> None:
    from tests.test_generation import _tiny_tokenizer

    tokenizer = _tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer))
    ckpt = tmp_path / "ckpt"
    model.save_pretrained(ckpt)
    tokenizer.save_pretrained(ckpt)
    words = "the cat sat on a mat and dog ran to big red house".split()
    g = torch.Generator().manual_seed(4)
    text = " ".join(words[i] for i in torch.randint(0, len(words), (2000,), generator=g).tolist())
    settings = ProbeSettings(max_lag=4, seq_len=32, num_sequences=10, num_classes=8,
                             recall_pairs=(2,), recall_steps=5, recall_lrs=(1e-3,))
    res = run_content_probes({"spen": ckpt}, text, tmp_path / "out", settings)
    data = json.loads((tmp_path / "out" / "content_probes.json").read_text())
    assert data["identity_at_lag"]["spen"]["lags"] == [1, 2, 3, 4]
    assert data["recall"]["spen"]["pairs"] == [2] == res["recall"]["spen"]["pairs"]
    for png in ("identity_at_lag.png", "recall.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_a_folder_without_checkpoint(tmp_path: Path, capsys) -> None:
    assert main(["--models", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "--models" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
