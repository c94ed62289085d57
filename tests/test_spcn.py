"""SPCN (issues 5, 12): label-free, gradient-free learning, the PGHU and instar equations, the shared
unseen-word protocol, the experiment's results.json and its CLI."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import datasets
import pytest
import torch

from grammar_probe.dataset import DatasetFormatError, build_dataset, compute_ceilings, write_dataset
from grammar_probe.experiment import _one_seed, _prepare, run_experiment
from grammar_probe.grammar import RESERVE_LEXICON, UNK
from grammar_probe.names import MODELS
from grammar_probe.protocol import Protocol, RunSize, Vocab, word_dropout
from grammar_probe.render import render_structure_figures, render_structure_markdown
from grammar_probe.spcn import SPCN, SPCNConfig, _kwta, _standardise, _unit, word_code

TINY = SPCNConfig(input_dim=128, input_active=8, level_sizes=(64, 64), level_active=(4, 4), epochs=1, batch_size=64)
TINY_RUN = RunSize(seeds=2, train_sentences=100, spcn_epochs=1, gru_epochs=2, probe_epochs=2, window_epochs=1,
                   eval_sentences=40, validation_sentences=40)


@pytest.fixture(scope="module")
def corpus() -> datasets.DatasetDict:
    return build_dataset(seed=1, train_size=300, validation_size=40, test_size=40)


@pytest.fixture(scope="module")
def ceilings(corpus) -> dict:
    return compute_ceilings(corpus, seed=1, ceiling_sentences=150, window_sentences=1500)


@pytest.fixture(scope="module")
def run_dir(corpus, ceilings, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    run_experiment(corpus, out, seed=0, spcn_config=TINY, progress=False, ceilings=ceilings, size=TINY_RUN, workers=1)
    return out


def _prediction_error(net: SPCN, sentences) -> float:
    """Mean squared error of level-1 top-down predictions against the bottom-up codes."""
    errors = []
    original = net._pghu

    def spy(error, pre, valid):
        errors.append(error[valid].pow(2).mean().item())

    net._pghu = spy
    net._run(sentences, learn=True)
    net._pghu = original
    return sum(errors) / len(errors)


def test_fit_takes_tokens_only():
    assert list(inspect.signature(SPCN.fit).parameters) == ["self", "sentences", "progress"]


def test_learning_is_gradient_free_and_changes_only_the_learned_weights(corpus, monkeypatch):
    net = SPCN(TINY)
    projection, span = net.projection.clone(), net.span.clone()
    seen_grad_mode = []
    for name in ("_pghu", "_instar"):
        original = getattr(SPCN, name)

        def spy(self, *args, _original=original):
            seen_grad_mode.append(torch.is_grad_enabled())
            return _original(self, *args)

        monkeypatch.setattr(SPCN, name, spy)
    with torch.enable_grad():
        net.fit(list(corpus["train"]["tokens"]))
    assert seen_grad_mode and not any(seen_grad_mode)
    for t in net.tensors():
        assert not t.requires_grad and t.grad is None and t.grad_fn is None
    assert torch.equal(projection, net.projection)  # the frozen projection never changes
    assert net.feedback.abs().sum() > 0 and not torch.allclose(span, net.span)
    torch.testing.assert_close(net.span.norm(dim=1), torch.ones(len(net.span)))


def test_frozen_twin_is_the_initial_network():
    a, b = SPCN(TINY), SPCN(TINY)
    assert torch.equal(a.span, b.span) and torch.equal(a.projection, b.projection) and not a.feedback.any()
    sents = [["the", "dog", "slept", "."], ["a", "cat", "who", "ran", "saw", "the", "bird", "."]]
    assert torch.equal(a.traces(sents), b.traces(sents))


def test_pghu_learns_to_predict_a_predictable_language():
    """Where the next word follows from the past (a fixed word order), PGHU's expectation learns it:
    the prediction error on held-out sentences falls far below the untrained error (W = 0)."""
    import random

    rng = random.Random(0)
    order = ["p", "q", "r", "s", "t", "u", "."]
    sents = [order[: rng.randint(3, 7)] for _ in range(400)]
    held_out = [order[: rng.randint(3, 7)] for _ in range(50)]
    cfg = SPCNConfig(input_dim=128, input_active=8, level_sizes=(64, 64), level_active=(4, 4), epochs=3,
                     batch_size=32, hebb_rate=0.0)  # the span units' rule off: this tests PGHU alone
    untrained = _prediction_error(SPCN(cfg), held_out)
    trained = _prediction_error(SPCN(cfg).fit(sents), held_out)
    assert trained < 0.5 * untrained


def test_pghu_lowers_prediction_error_on_the_grammar(corpus):
    # Next-word codes of the grammar are mostly unpredictable (36 verbs, 45 nouns per slot), so the
    # achievable drop is small; it must still be a drop on held-out sentences.
    held_out = list(corpus["validation"]["tokens"])
    untrained = _prediction_error(SPCN(TINY), held_out)
    trained = _prediction_error(SPCN(TINY).fit(list(corpus["train"]["tokens"])), held_out)
    assert trained < untrained


def test_pghu_update_matches_the_equation():
    cfg = SPCNConfig(input_dim=16, input_active=2, level_sizes=(4, 2), level_active=(1, 1),
                     trace_rates=(0.5,), learning_rate=0.3, precision_rate=0.5)
    net = SPCN(cfg)
    error = torch.tensor([[1.0, -0.5, 0.0, 0.25], [0.0, 0.5, 1.0, -1.0]])
    pre = torch.tensor([[1.0, 2.0], [0.0, 1.0]])
    var = 0.5 * torch.ones(4) + 0.5 * error.pow(2).mean(0)
    precision = 1 / (var + cfg.eps)
    gated = error * precision / precision.mean()
    expected = 0.3 * (gated.T @ pre) / (2 * (pre.pow(2).sum(-1).mean() + cfg.eps))
    net._pghu(error, pre, torch.tensor([True, True]))
    torch.testing.assert_close(net.feedback, expected)
    torch.testing.assert_close(net.error_var, var)


def test_instar_update_matches_the_equation():
    cfg = SPCNConfig(input_dim=16, input_active=2, level_sizes=(2, 3), level_active=(1, 1), trace_rates=(0.5,),
                     hebb_rate=0.2)
    net = SPCN(cfg)
    before = net.span.clone()  # (3 units, 1 rate * (2 + 3) inputs)
    inputs = _unit(torch.tensor([[1.0, 0, 0, 0, 0], [0, 1.0, 0, 0, 1.0], [0, 0, 0, 3.0, 0]]))
    active = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 0, 1.0]])
    valid = torch.tensor([True, True, False])  # the padded third sentence changes nothing
    net._instar(active, inputs, valid)
    moved = before.clone()
    moved[0] += 0.2 * (inputs[0] + inputs[1] - 2 * before[0]) / 2
    torch.testing.assert_close(net.span, _unit(moved))
    torch.testing.assert_close(net.span[1:], before[1:])  # units that did not win keep their weights


def test_traces_are_emas_of_sparse_codes_and_match_a_direct_step():
    net = SPCN(TINY)
    sent = ["the", "dog", "slept", "."]
    feats = net.traces([sent])
    n1, k1 = TINY.level_sizes[0], TINY.level_active[0]
    fast = feats[:, :n1]  # rate 0.5 trace of level 1
    assert torch.equal(fast[0].unique(), torch.tensor([0.0, 0.5])) and int((fast[0] == 0.5).sum()) == k1
    slow = feats[:, 2 * n1 : 3 * n1]  # rate 0.02: every value a sum of 0.02 * 0.98^j terms
    assert 0 < slow.max() <= 0.02 * 4
    assert feats.shape == (4, net.feature_dim)
    # The drive table equals std(P x) of the dense code: level 1's first code from first principles.
    x = torch.zeros(TINY.input_dim)
    x[word_code("the", TINY.input_dim, TINY.input_active, TINY.seed)] = 1.0
    first = _kwta(_standardise(net.projection @ x), k1)
    torch.testing.assert_close(fast[0], 0.5 * first)


def test_traces_keep_sentence_order_whatever_the_batching():
    net = SPCN(TINY)
    sents = [["a"] * n + ["."] for n in (5, 1, 3, 7, 2)]
    whole = net.traces(sents, batch_size=500)
    assert torch.equal(whole, net.traces(sents, batch_size=2))
    assert torch.equal(whole[:6], net.traces(sents[:1]))


def test_word_code_is_stable_and_vocabulary_free():
    a = word_code("wug", 128, 8, seed=0)
    assert torch.equal(torch.as_tensor(a), torch.as_tensor(word_code("wug", 128, 8, seed=0)))
    assert len(set(a.tolist())) == 8 and not (a == word_code("dax", 128, 8, seed=0)).all()


def test_word_dropout_touches_every_word_at_the_protocol_rate(corpus):
    sents = list(corpus["train"]["tokens"])
    dropped = word_dropout(sents, Protocol().word_dropout, seed=4)
    n = changed = 0
    for s, d in zip(sents, dropped, strict=True):
        for w, v in zip(s, d, strict=True):
            assert v in (w, UNK)
            n += 1
            changed += v != w
    assert abs(changed / n - 0.15) < 0.03
    assert dropped == word_dropout(sents, 0.15, seed=4) != word_dropout(sents, 0.15, seed=5)
    assert Vocab(dropped).map([["wug", "the"]]) == [[UNK, "the"]]


@pytest.mark.slow
def test_every_model_sees_unseen_words_the_same_way(corpus, ceilings):
    """Swapping one nonce word for another changes no model's prediction: all read them as <unk>."""
    swap = {w: RESERVE_LEXICON[c][(i + 1) % len(RESERVE_LEXICON[c])]
            for c in RESERVE_LEXICON for i, w in enumerate(RESERVE_LEXICON[c])}
    novel = corpus["test_novel_words"].select(range(20))
    swapped = novel.map(lambda row: {"tokens": [swap.get(w, w) for w in row["tokens"]]})
    assert swapped["tokens"] != novel["tokens"]
    ds = datasets.DatasetDict({"train": corpus["train"], "validation": corpus["validation"],
                               "test_novel_words": novel, "swapped": swapped})
    preds, _ = _one_seed(_prepare(ds, ["test_novel_words", "swapped"], TINY_RUN), list(range(100)),
                         ["test_novel_words", "swapped"], 7, TINY_RUN, TINY, lambda _m: None)
    for model in MODELS:
        assert (preds["test_novel_words"][model] == preds["swapped"][model]).all(), model


@pytest.mark.slow
def test_run_writes_every_file_and_field(run_dir, corpus):
    names = {p.name for p in run_dir.iterdir()}
    assert {"results.json", "report.md", "structure_by_kind.png", "structure_per_role.png", "ceilings.png",
            "learning.png"} <= names
    res = json.loads((run_dir / "results.json").read_text())
    assert res["models"] == list(MODELS) == ["majority_word", "window", "plain_ema", "spcn_frozen", "spcn",
                                             "causal_gru", "bigru"]
    evaluated = [s for s in corpus if s.startswith("test_")]
    assert list(res["splits"]) == evaluated and "test_counterfactual" in res["splits"]
    for split in evaluated:
        for model in MODELS:
            r = res["splits"][split][model]
            for s in (r["accuracy"], *r["by_kind"].values()):
                assert len(s["per_seed"]) == 2 and s["ci95"][0] <= s["mean"] <= s["ci95"][1]
                assert 0 <= s["mean"] <= 1
            assert set(r["by_kind"]) <= {"structural", "local", "lexical", "ambiguous"}
    for c in res["ceilings"].values():
        assert {"causal", "bidirectional", "window_k", "kind"} <= set(c)
        assert set(c["window_k"]) == {str(k) for k in range(13)}  # every window size k = 0..12
        assert set(c["kind_by_cap"]) == {"6", "8", "12"} and c["kind_by_cap"]["12"] == c["kind"]
    assert res["counterfactual"]["models"].keys() == set(MODELS)
    assert set(res["paper"]) == {"ratio_within_a", "transfer_b_accuracy", "deep_accuracy",
                                 "novel_structural_spcn_minus_bigru", "counterfactual_spcn_minus_bigru"}
    assert res["paper"]["deep_accuracy"]["paper"] == 0.84 and res["protocol"]["word_dropout"] == 0.15
    assert len(set(res["seeds"])) == 2 and res["train_subsets_disjoint"]
    gap = res["window_gap"]
    assert set(gap["by_k"]) == {str(k) for k in range(13)} and gap["required_gap"] == 0.10
    assert set(res["training"]) >= set(MODELS) - {"majority_word"}
    for model, t in res["training"].items():
        if model != "rule":
            assert t["patience"] == TINY_RUN.patience and all(1 <= e <= t["max_epochs"] for e in t["epochs_run"])
    assert set(res["ratios"]) >= {"spcn_over_bigru", "spcn_over_causal_gru", "spcn_over_causal_ceiling",
                                  "causal_cap_over_bigru"}
    assert res["hebbian_learning"]["margin"] == 0.01


def _intervals(node, path=""):
    """Every (path, interval) in a results tree: dicts with both "mean" and "ci95"."""
    if isinstance(node, dict):
        if "mean" in node and "ci95" in node:
            yield path, node
        for k, v in node.items():
            yield from _intervals(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _intervals(v, f"{path}[{i}]")


@pytest.mark.slow
def test_no_accuracy_interval_leaves_0_100(run_dir):
    """Accuracies (everything but differences, ratios and the paper's ratio row) stay inside [0, 1]."""
    res = json.loads((run_dir / "results.json").read_text())
    checked = 0
    for path, s in _intervals({k: res[k] for k in ("splits", "per_role", "counterfactual")}):
        if path.endswith(("drop", ".value")) or "spcn_drop_minus" in path:
            continue
        lo, hi = s["ci95"]
        assert 0 <= lo <= hi <= 1, path
        checked += 1
    assert checked > 100


@pytest.mark.slow
def test_differences_are_holm_adjusted_within_their_table(run_dir):
    res = json.loads((run_dir / "results.json").read_text())
    family = [c for kinds in res["learning"].values() for by in kinds.values() for c in by.values()]
    assert all(c["correction"] == {"method": "holm", "family": "learning", "size": len(family)} for c in family)
    assert all(c["p_difference"] >= c["p_difference_raw"] for c in family)


@pytest.mark.slow
def test_verdicts_follow_from_the_intervals(run_dir):
    res = json.loads((run_dir / "results.json").read_text())
    for row in res["paper"].values():
        lo, hi = row["ours"]["ci95"]
        strict = isinstance(row["paper"], str)
        expected = ("met" if (lo > row["target"] if strict else lo >= row["target"])
                    else "refuted" if hi < row["target"] else "not resolved at this budget")
        assert row["verdict"] == (expected if row["reachable"] else "not reachable on this grammar")
        for shortcut in row["shortcuts"].values():  # the same rule for the shortcuts' values
            lo, hi = shortcut["value"]["ci95"]
            assert shortcut["verdict"] == ("met" if (lo > row["target"] if strict else lo >= row["target"])
                                           else "refuted" if hi < row["target"] else "not resolved at this budget")
    ratio = res["paper"]["ratio_within_a"]["ours"]["per_seed"]
    spcn = res["splits"]["test_within_a"]["spcn"]["accuracy"]["per_seed"]
    bigru = res["splits"]["test_within_a"]["bigru"]["accuracy"]["per_seed"]
    assert ratio == pytest.approx([s / b for s, b in zip(spcn, bigru, strict=True)])
    cap = res["paper"]["ratio_within_a"]["causal_cap"]
    assert res["paper"]["ratio_within_a"]["reachable"] == (cap["ci95"][1] >= res["paper"]["ratio_within_a"]["target"])
    window = res["splits"]["test_within_a"]["window"]["accuracy"]["per_seed"]
    assert res["paper"]["ratio_within_a"]["shortcuts"]["window"]["value"]["per_seed"] == pytest.approx(
        [w / b for w, b in zip(window, bigru, strict=True)])


@pytest.mark.slow
def test_learning_comparisons_are_paired_differences_of_the_reported_accuracies(run_dir):
    res = json.loads((run_dir / "results.json").read_text())
    for split, kinds in res["learning"].items():
        for kind, pairs in kinds.items():
            for name, (a, b) in {"spcn_minus_spcn_frozen": ("spcn", "spcn_frozen"),
                                 "spcn_frozen_minus_plain_ema": ("spcn_frozen", "plain_ema"),
                                 "spcn_minus_plain_ema": ("spcn", "plain_ema")}.items():
                acc = res["splits"][split]
                va = acc[a]["accuracy" if kind == "all" else "by_kind"]
                vb = acc[b]["accuracy" if kind == "all" else "by_kind"]
                va, vb = (va, vb) if kind == "all" else (va[kind], vb[kind])
                assert pairs[name]["per_seed"] == pytest.approx(
                    [x - y for x, y in zip(va["per_seed"], vb["per_seed"], strict=True)])


def test_training_subsets_are_disjoint_or_at_least_distinct():
    from grammar_probe.experiment import _subsets

    subsets, disjoint = _subsets(1000, 200, 5, base=3)
    assert disjoint and len({i for s in subsets for i in s}) == 1000 and all(len(s) == 200 for s in subsets)
    subsets, disjoint = _subsets(4000, 2000, 5, base=3)  # too small for disjoint subsets
    assert not disjoint and len({tuple(s) for s in subsets}) == 5 and all(len(set(s)) == 2000 for s in subsets)


def test_bootstrap_per_seed_accuracies_equal_the_role_accuracy_metric():
    """The experiment scores with numpy (speed); the evaluate metric is the reference it must equal."""
    import evaluate
    import numpy as np

    from ema_boundary.stats import Bootstrap

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 20, 500)
    pred = np.where(rng.random(500) < 0.7, gold, rng.integers(0, 20, 500))
    sentence = np.repeat(np.arange(50), 10)
    metric = evaluate.load(str(Path(__file__).parents[1] / "grammar_probe" / "metrics" / "role_accuracy"))
    ref = metric.compute(predictions=pred.tolist(), references=gold.tolist())
    boot = Bootstrap(1, {"s": 50}, replicates=10)
    per_seed, _ = boot.replicates_of("s", (pred == gold)[None], sentence)
    assert per_seed[0] == pytest.approx(ref["accuracy"])
    for r, v in ref["per_label"].items():
        assert boot.replicates_of("s", (pred == gold)[None], sentence, gold == int(r))[0][0] == pytest.approx(v)


@pytest.mark.slow
def test_render_functions_read_results_only(run_dir, tmp_path):
    res = json.loads((run_dir / "results.json").read_text())
    md = render_structure_markdown(res)
    assert md.startswith("## Structure")
    assert all(f"**{split}**" in md and f"### Per role: {split}" in md for split in res["splits"])
    for row in res["paper"].values():
        assert row["verdict"] in md and row["description"] in md
    for model in MODELS:
        assert f"| {model} |" in md
    assert "Quick run" not in md and "Quick run" in render_structure_markdown({**res, "quick": True})
    figures = render_structure_figures(res, tmp_path / "fig")
    assert set(figures) == {"structure_by_kind", "structure_per_role", "ceilings", "learning"}
    for path in figures.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_same_seed_same_results(run_dir, corpus, ceilings, tmp_path):
    again = run_experiment(corpus, tmp_path / "again", seed=0, spcn_config=TINY, progress=False, ceilings=ceilings,
                           size=TINY_RUN, workers=1)
    first = json.loads((run_dir / "results.json").read_text())
    for key in ("splits", "per_role", "paper", "learning"):
        assert json.loads(json.dumps(again[key])) == first[key]


def test_unknown_split_and_missing_folder_rejected(corpus, ceilings, tmp_path):
    with pytest.raises(DatasetFormatError, match="unknown split 'test_nope'"):
        run_experiment(corpus, tmp_path / "o", splits=["test_nope"], progress=False, ceilings=ceilings)
    with pytest.raises(DatasetFormatError, match="used for fitting"):
        run_experiment(corpus, tmp_path / "o", splits=["train"], progress=False, ceilings=ceilings)
    with pytest.raises(DatasetFormatError, match="does not exist"):
        run_experiment(tmp_path / "missing", tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_cli_run_bad_inputs_one_line_exit_2(corpus, ceilings, tmp_path, capsys):
    from grammar_probe.__main__ import main

    wrong = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a b"]})})
    wrong.save_to_disk(str(tmp_path / "wrong"))
    good, bare = tmp_path / "good", tmp_path / "bare"
    write_dataset(corpus, good, ceilings=ceilings)
    write_dataset(corpus, bare)  # no ceilings.json
    cases = [
        (["--dataset", str(tmp_path / "missing")], "does not exist"),
        (["--dataset", str(tmp_path / "wrong")], "split train has features"),
        (["--dataset", str(bare)], "ceilings.json is missing"),
        (["--dataset", str(good), "--splits", "test_nope"], "unknown split 'test_nope'"),
        (["--dataset", str(good), "--threads", "0"], "argument --threads: must be a positive integer"),
        (["--dataset", str(good), "--workers", "0"], "argument --workers: must be a positive integer"),
        (["--dataset", str(good), "--seed", "x"], "argument --seed: must be a non-negative integer"),
        (["--dataset", str(good), "--seed", "-1"], "argument --seed: must be a non-negative integer"),
        (["--dataset", str(good), "--seeds", "0"], "argument --seeds: must be a positive integer"),
        (["--dataset", str(good), "--train-sentences", "-3"],
         "argument --train_sentences/--train-sentences: must be a positive integer"),
        (["--dataset", str(good), "--word_dropout", "1.5"], "--word_dropout must be in [0, 1)"),
        (["--dataset", str(good), "--unseen", "zeros"], "argument --unseen: invalid choice"),
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


@pytest.mark.slow
def test_cli_run_sizes_override_the_preset(corpus, ceilings, tmp_path):
    from grammar_probe.__main__ import main

    write_dataset(corpus, tmp_path / "ds", ceilings=ceilings)
    assert main(["run", "--dataset", str(tmp_path / "ds"), "--out", str(tmp_path / "out"), "--quick", "--workers", "1",
                 "--seeds", "2", "--train-sentences", "40", "--eval-sentences", "10", "--splits", "test_within_a"]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["size"]["seeds"] == 2 and results["size"]["train_sentences"] == 40
    assert len(results["seeds"]) == 2
    assert results["splits"]["test_within_a"]["spcn"]["accuracy"]["n"] == 2
