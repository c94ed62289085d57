"""eval.gap: the classes on sequences checked by hand; train.py's blocks; the statistics on known answers; any
two causal LMs in (tiny GPT-2 and SPEN folders, an untrained --config architecture, seeds paired); bad input
(one line, exit 2, nothing written); the fair pair it is first run on (hub_configs/{spen,gpt2}-f48, -f64)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from ema_boundary import corpus, packing
from eval.gap import (
    GapInputError,
    class_masks,
    contrast,
    group_masks,
    main,
    make_tokens,
    read_documents,
    summarize,
)
from eval.token_classes import AR0, FIRST, REPEAT, class_name, gap_classes, token_losses
from tests.test_generation import _tiny_tokenizer
from tests.test_modeling import tiny_model

PNG = b"\x89PNG\r\n\x1a\n"
WORDS = "the cat sat on a mat and dog ran to big red house".split()


# ---------------------------------------------------------------------------------------------
# Classes
# ---------------------------------------------------------------------------------------------


def test_classes_of_a_short_sequence_checked_by_hand() -> None:
    #        t: 0  1  2  3  4  5  6  7  8  9
    ids = [5, 6, 7, 5, 6, 8, 6, 8, 5, 6]
    # t=3: 5 seen, bigram (7,5) new -> repeat; t=4: (5,6) ended at 1 -> AR at 3; t=6: (8,6) new -> repeat;
    # t=7: (6,8) ended at 5 -> AR at 2; t=8: (8,5) new -> repeat; t=9: (5,6) ended at 4 (most recent) -> AR at 5.
    expected = [FIRST, FIRST, FIRST, REPEAT, AR0 + 1, FIRST, REPEAT, AR0 + 1, REPEAT, AR0 + 2]
    assert gap_classes(ids).tolist() == expected
    assert [class_name(c) for c in expected] == ["first"] * 3 + ["repeat", "ar_2-3", "first", "repeat", "ar_2-3",
                                                                 "repeat", "ar_4-7"]
    assert gap_classes(torch.tensor(ids)).tolist() == expected  # a tensor too


def test_a_run_of_one_token_is_an_ar_hit_at_distance_one() -> None:
    assert gap_classes([1, 1, 1, 1]).tolist() == [FIRST, REPEAT, AR0, AR0]
    assert class_name(AR0) == "ar_1" and class_name(AR0 + 3) == "ar_8-15"


def test_distance_is_to_the_most_recent_occurrence_and_bins_are_log_spaced() -> None:
    # (1, 2) ends at 1, again at 32, then at 102: distances 31 (bin 16-31) and 70 (64-127), not 101.
    filler = list(range(10, 40))
    ids = [1, 2, *filler[:29], 1, 2, *(filler + filler + filler[:8]), 1, 2]
    assert ids[31:33] == [1, 2] and ids[101:] == [1, 2]
    classes = gap_classes(ids)
    assert class_name(classes[32]) == "ar_16-31" and class_name(classes[102]) == "ar_64-127"
    assert class_name(classes[31]) == "repeat" and class_name(classes[101]) == "repeat"


def test_gap_classes_rejects_a_batch() -> None:
    with pytest.raises(ValueError, match="1-D"):
        gap_classes(np.zeros((2, 3), dtype=int))


# ---------------------------------------------------------------------------------------------
# Blocks and statistics
# ---------------------------------------------------------------------------------------------


def _paragraphs(tmp_path: Path, n_docs: int = 12, words: int = 60, seed: int = 4) -> Path:
    g = torch.Generator().manual_seed(seed)
    docs = [" ".join(WORDS[i] for i in torch.randint(0, len(WORDS), (words,), generator=g).tolist())
            for _ in range(n_docs)]
    path = tmp_path / "text.txt"
    path.write_text("\n\n".join(docs) + "\n")
    return path


def test_the_test_split_is_train_py_test_documents(tmp_path: Path) -> None:
    text, tok = _paragraphs(tmp_path), _tiny_tokenizer()
    docs = read_documents(str(text), "test", val_every=3, test_every=2)
    assert docs == [d["text"] for d in corpus.documents([str(text)], "test", 3, test_every=2)] and len(docs) == 4
    tokens = make_tokens(docs, tok, block_size=16)
    expected = packing.test_blocks([str(text)], 3, tok, 16, test_every=2)
    assert torch.equal(torch.stack(tokens.blocks[: len(expected)]), expected)
    assert read_documents(str(text), "validation", 3, 2) == read_documents(str(text), "validation", 3)
    with pytest.raises(GapInputError, match="--test_every is 0"):
        read_documents(str(text), "test", 3)


def test_blocks_are_train_py_validation_blocks_and_every_target_is_classified(tmp_path: Path) -> None:
    text, tok = _paragraphs(tmp_path), _tiny_tokenizer()
    docs = read_documents(str(text), "validation", val_every=3)
    assert len(docs) == 4  # documents 0, 3, 6, 9 of 12
    tokens = make_tokens(docs, tok, block_size=16)
    expected = packing.validation_blocks([str(text)], 3, tok, 16, n_blocks=1000)
    assert torch.equal(torch.stack(tokens.blocks[: len(expected)]), expected)  # then the shorter last block
    n_targets = sum(len(b) - 1 for b in tokens.blocks)
    # 60 words + EOS per document; the first token of all is no target
    assert len(tokens.cls) == len(tokens.doc) == len(tokens.pos) == n_targets == 4 * 61 - 1
    assert tokens.documents == 4 and np.all(np.diff(tokens.doc) >= 0)
    assert tokens.cls[:15].tolist() == gap_classes(tokens.blocks[0])[1:].tolist()[:15]
    assert tokens.pos.min() == 1 and tokens.pos.max() == 16


def test_token_losses_are_the_models_own_cross_entropy() -> None:
    model = GPT2LMHeadModel(_gpt2_config())
    blocks = [torch.randint(0, 15, (9,), generator=torch.Generator().manual_seed(i)) for i in range(5)]
    blocks.append(blocks[0][:4])  # a shorter last block
    losses = token_losses(model, blocks, batch_size=2)
    assert losses.shape == (5 * 8 + 3,)
    full = torch.stack(blocks[:5])
    with torch.no_grad():  # transformers' own loss: labels are the inputs, shifted inside the model
        expected = model(input_ids=full, labels=full).loss
        short = model(input_ids=blocks[5][None], labels=blocks[5][None]).loss
    assert losses[:40].mean() == pytest.approx(float(expected), abs=1e-5)
    assert losses[40:].mean() == pytest.approx(float(short), abs=1e-5)


def test_summarize_on_known_answers() -> None:
    rng = np.random.default_rng(0)
    n = 600
    docs = np.repeat(np.arange(30), 20)
    cls = rng.integers(0, 4, n)
    a = rng.normal(3.0, 0.5, n)
    b = a + np.where(cls >= AR0, 1.0, 0.2)  # B loses 1 nat on AR hits, 0.2 elsewhere
    rows = summarize(class_masks(cls, 8), a[None], b[None], docs, bootstrap=200)
    by = {r["class"]: r for r in rows}
    assert sum(r["tokens"] for r in rows) == n
    assert by["ar_1"]["difference"] == pytest.approx(1.0) and by["first"]["difference"] == pytest.approx(0.2)
    assert by["ar_1"]["ci95"][0] == pytest.approx(1.0) and by["ar_1"]["ci95"][1] == pytest.approx(1.0)
    assert by["ar_4-7"]["tokens"] == 0 and by["ar_4-7"]["difference"] is None  # kept, empty
    assert sum(r["share_of_gap"] for r in rows) == pytest.approx(1.0)
    groups = group_masks(cls)
    c = contrast(groups["ar_hit"], groups["first"], a[None], b[None], docs, bootstrap=200)
    assert c["value"] == pytest.approx(0.8) and c["ci95"] == pytest.approx([0.8, 0.8])
    # Noisy differences: the bootstrap interval holds the estimate and has width.
    noisy = summarize({"all": np.ones(n, bool)}, a[None], (a + rng.normal(0.1, 1.0, n))[None], docs)[0]
    assert noisy["ci95"][0] < noisy["difference"] < noisy["ci95"][1]
    # Seeds: a t interval over the per-seed differences, paired by seed.
    seeds = summarize({"all": np.ones(n, bool)}, np.stack([a, a + 0.1, a]), np.stack([a + 0.4, a + 0.6, a + 0.6]),
                      docs)[0]  # differences 0.4, 0.5, 0.6
    assert seeds["difference"] == pytest.approx(0.5) and seeds["loss_b_per_seed"][2] == pytest.approx(a.mean() + 0.6)
    assert seeds["ci95"][0] < 0.5 < seeds["ci95"][1]
    paired = contrast(groups["ar_hit"], groups["first"], np.stack([a, a]), np.stack([b, b + 0.1 * groups["ar_hit"]]),
                      docs)  # contrasts 0.8 and 0.9
    assert paired["value"] == pytest.approx(0.85) and paired["ci95"][0] < 0.8 and paired["ci95"][1] > 0.9
    # A class found in fewer than MIN_DOCUMENTS documents gets no bootstrap interval, however narrow it would look.
    rare = summarize({"rare": docs < 4}, a[None], b[None], docs)[0]
    assert rare["documents"] == 4 and all(np.isnan(rare["ci95"]))


# ---------------------------------------------------------------------------------------------
# Any two causal LMs
# ---------------------------------------------------------------------------------------------


def _gpt2_config(**overrides) -> GPT2Config:
    return GPT2Config(**{**dict(n_embd=16, n_layer=2, n_head=2, n_positions=32, vocab_size=len(_tiny_tokenizer()),
                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), **overrides})


def _save(model: torch.nn.Module, folder: Path, tokenizer: bool = True) -> Path:
    model.save_pretrained(folder)
    if tokenizer:
        _tiny_tokenizer().save_pretrained(folder)
    return folder


def _gpt2(folder: Path, seed: int = 0, **overrides) -> Path:
    torch.manual_seed(seed)
    return _save(GPT2LMHeadModel(_gpt2_config(**overrides)), folder)


def _spen(folder: Path, seed: int = 0) -> Path:
    return _save(tiny_model(seed, vocab_size=len(_tiny_tokenizer())), folder)


def _gap(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "out"
    assert main([*args, "--text", str(_paragraphs(tmp_path)), "--split", "all", "--output_dir", str(out),
                 "--bootstrap", "50"]) == 0
    assert (out / "gap.png").read_bytes()[:8] == PNG
    return json.loads((out / "gap.json").read_text())


def test_a_gpt2_folder_against_a_spen_folder(tmp_path: Path) -> None:
    gpt2, spen = _gpt2(tmp_path / "gpt2"), _spen(tmp_path / "spen")
    data = _gap(tmp_path, "--model_name_or_path", str(gpt2), str(spen))
    n = data["text"]["tokens"]
    assert n == 12 * 61 - 1 and data["text"]["documents"] == 12
    assert data["text"]["block_size"] == 32  # the smaller context: GPT-2's 32 positions
    for section in ("classes", "groups", "positions"):
        assert sum(r["tokens"] for r in data[section]) == n
    assert [r["class"] for r in data["groups"]] == ["ar_hit", "repeat", "first"]
    assert [r["class"] for r in data["classes"]][:3] == ["first", "repeat", "ar_1"]
    assert data["models"]["a"]["model_type"] == "gpt2" and data["models"]["b"]["model_type"] == "spen"
    assert data["models"]["a"]["label"] == "gpt2" and "bootstrap over documents" in data["interval"]
    total = data["total"]
    assert total["difference"] == pytest.approx(total["loss_b"] - total["loss_a"])
    weighted = sum(r["tokens"] * r["loss_a"] for r in data["classes"] if r["tokens"]) / n
    assert weighted == pytest.approx(total["loss_a"])  # the classes partition the tokens
    ar, first = data["groups"][0], data["groups"][2]
    assert ar["tokens"] > 0 and ar["ci95"][0] <= ar["difference"] <= ar["ci95"][1]
    assert data["contrasts"]["ar_hit - first"]["value"] == pytest.approx(ar["difference"] - first["difference"])


def test_an_untrained_config_architecture_and_seeds_paired(tmp_path: Path) -> None:
    a = [_gpt2(tmp_path / f"gpt2-s{i}", seed=i) for i in range(3)]
    config = tmp_path / "arch.json"
    _gpt2_config(n_embd=8).to_json_file(config)
    data = _gap(tmp_path, "--model_name_or_path", ",".join(map(str, a)), "--config", str(config),
                "--labels", "trained", "fresh", "--window", "8", "--window_max_tokens", "400")
    assert data["models"]["b"]["source"] == "config" and data["models"]["b"]["init_seeds"] == [0, 1, 2]
    c = data["context_use"]  # the control over seeds too, on the first 400 targets only
    assert "3 seeds, paired by seed" in c["interval"] and c["tokens"] == 400 and c["max_tokens"] == 400
    assert len(c["a"]["control_per_seed"]) == 3 and c["difference"]["ci95"][0] <= c["difference"]["value"]
    assert data["models"]["a"]["locations"] == [str(p) for p in a] and data["models"]["a"]["label"] == "trained"
    assert "3 seeds, paired by seed" in data["interval"]
    assert len(data["total"]["loss_a_per_seed"]) == 3 and len(set(data["total"]["loss_a_per_seed"])) == 3


# ---------------------------------------------------------------------------------------------
# Bad input: one line, exit 2, nothing written
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case, message", [
    ("missing", "no such folder"),
    ("vocab", "vocabulary sizes differ"),
    ("empty", "contains no text"),
    ("out_file", "exists and is not a folder"),
    ("three", "give two models"),
    ("seeds", "1 seed(s) for A but 2 for B"),
    ("no_file", "no such file"),
    ("misfit", "spen: the weights do not fit its config.json (model_type 'gpt2')"),
])
def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, case: str, message: str) -> None:
    gpt2, spen = _gpt2(tmp_path / "gpt2"), _spen(tmp_path / "spen")
    text, out = _paragraphs(tmp_path), tmp_path / "out"
    models = [str(gpt2), str(spen)]
    if case == "missing":
        models[1] = str(tmp_path / "nowhere")
    elif case == "vocab":
        models[1] = str(_save(GPT2LMHeadModel(_gpt2_config(vocab_size=40)), tmp_path / "big", tokenizer=False))
    elif case == "empty":
        text = tmp_path / "empty.txt"
        text.write_text("\n  \n")
    elif case == "out_file":
        out.write_text("mine")
    elif case == "three":
        models.append(str(gpt2))
    elif case == "seeds":
        models[1] = f"{spen},{spen}"
    elif case == "no_file":
        text = tmp_path / "nope.txt"
    elif case == "misfit":  # SPEN weights under a GPT-2 config.json: once scored as a random model, exit 0
        (spen / "config.json").write_bytes((gpt2 / "config.json").read_bytes())
    capsys.readouterr()  # the set-up's own output (save_pretrained's progress)
    assert main(["--model_name_or_path", *models, "--text", str(text), "--output_dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == "mine" if case == "out_file" else not out.exists()
    assert not list(tmp_path.glob(".out.tmp-*"))


def test_tokenizers_that_differ_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    gpt2 = _gpt2(tmp_path / "gpt2")
    other = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "other", tokenizer=False)
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))  # as the tiny tokenizer, the same size, other words
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = "one two three four five six seven eight nine ten eleven twelve thirteen".split()
    tok.train_from_iterator([" ".join(words)], trainers.WordLevelTrainer(special_tokens=["<eos>", "<unk>"]))
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>").save_pretrained(other)
    capsys.readouterr()
    assert main(["--model_name_or_path", str(gpt2), str(other), "--text", str(_paragraphs(tmp_path)),
                 "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "tokenizers of" in err and "differ" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------
# The fair pair eval.gap is first run on (hub_configs/*-f48, *-f64; docs/notes/issue20_regime.md)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [48, 64])
def test_the_fair_pair_configs(width: int) -> None:
    from transformers import AutoConfig, AutoModelForCausalLM

    import modeling_spen  # noqa: F401

    root = Path(__file__).resolve().parents[1] / "hub_configs"
    counts, yamls = {}, {}
    for arch in ("spen", "gpt2"):
        config = AutoConfig.from_pretrained(root / f"{arch}-f{width}")
        assert config.initializer_range == pytest.approx(width**-0.5)  # width-aware init for both
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        embedding = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
        counts[arch] = sum(p.numel() for p in model.parameters()) - embedding
        yamls[arch] = yaml.safe_load((root / f"{arch}-f{width}" / "train.yaml").read_text())
        assert yamls[arch].pop("model_name_or_path") == f"hub_configs/{arch}-f{width}"
        yamls[arch].pop("output_dir")
        if arch == "gpt2":
            assert config.n_positions == yamls[arch]["block_size"]  # no position that is never trained
            assert config.n_embd // config.n_head >= 16
        else:
            assert config.max_position_embeddings == yamls[arch]["block_size"]
    assert yamls["spen"] == yamls["gpt2"]  # the same data, batch and schedule
    assert abs(counts["spen"] - counts["gpt2"]) / counts["spen"] < 1e-3  # matched on non-embedding parameters


class _InductionLM(torch.nn.Module):
    """A hand-built copier: at position t it favours the token that followed the most recent earlier occurrence
    of the current token (an induction head, the mechanism Zoology's AR tokens reward); nothing else."""

    def __init__(self, vocab: int, boost: float = 4.0) -> None:
        super().__init__()
        self.vocab, self.boost = vocab, boost

    def forward(self, input_ids: torch.Tensor, **kwargs):
        logits = torch.zeros(*input_ids.shape, self.vocab)
        for b, row in enumerate(input_ids.tolist()):
            last: dict[int, int] = {}
            for t, tok in enumerate(row):
                if tok in last:
                    logits[b, t, row[last[tok] + 1]] = self.boost
                last[tok] = t
        return type("Out", (), {"logits": logits})()


def test_the_classes_find_what_a_copier_gains() -> None:
    # Random tokens with copied spans: a copier beats a uniform model on AR hits and loses on first occurrences.
    g = torch.Generator().manual_seed(0)
    blocks = []
    for _ in range(40):
        x = torch.randint(0, 50, (65,), generator=g)
        start = int(torch.randint(0, 20, (1,), generator=g))
        x[40:60] = x[start : start + 20]
        blocks.append(x)
    cls = np.concatenate([gap_classes(b)[1:] for b in blocks])
    docs = np.repeat(np.arange(40), 64)
    uniform = token_losses(_Uniform(50), blocks)
    copier = token_losses(_InductionLM(50), blocks)
    groups = group_masks(cls)
    rows = {r["class"]: r for r in summarize(groups, copier[None], uniform[None], docs)}
    assert rows["ar_hit"]["ci95"][0] > 1.0  # the uniform model is much worse where the copier can copy
    assert rows["first"]["ci95"][1] < 0  # and better where there is nothing to copy
    assert contrast(groups["ar_hit"], groups["first"], copier[None], uniform[None], docs)["ci95"][0] > 1.0


class _Uniform(torch.nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, input_ids: torch.Tensor, **kwargs):
        return type("Out", (), {"logits": torch.zeros(*input_ids.shape, self.vocab)})()


# ---------------------------------------------------------------------------------------------
# The windowed context-use control (eval.context_use; issue 33 item 3)
# ---------------------------------------------------------------------------------------------


class _BigramLM(torch.nn.Module):
    """Sees only the last token: logits are a table row of x[t-1], so cutting the context changes nothing."""

    def __init__(self, vocab: int, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.table = torch.nn.Embedding(vocab, vocab)

    def forward(self, input_ids: torch.Tensor, **kwargs):
        return type("Out", (), {"logits": self.table(input_ids)})()


def _copied_spans(n_blocks: int = 40, seed: int = 0) -> list[torch.Tensor]:
    """Random tokens (vocabulary 50) whose positions 40-59 copy an early span: AR hits 20 or more tokens back."""
    g = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(n_blocks):
        x = torch.randint(0, 50, (65,), generator=g)
        start = int(torch.randint(0, 20, (1,), generator=g))
        x[40:60] = x[start : start + 20]
        blocks.append(x)
    return blocks


def test_ar_distances_are_exact_and_agree_with_the_classes() -> None:
    from eval.context_use import ar_distances

    #        t: 0  1  2  3  4  5  6  7  8  9   (the hand-checked sequence above)
    assert ar_distances([5, 6, 7, 5, 6, 8, 6, 8, 5, 6]).tolist() == [0, 0, 0, 0, 3, 0, 0, 2, 0, 5]
    for block in _copied_spans(10):
        d, cls = ar_distances(block), gap_classes(block)
        hit = d > 0
        assert np.array_equal(cls[hit], AR0 + np.floor(np.log2(d[hit])).astype(int))
        assert np.isin(cls[~hit], [FIRST, REPEAT]).all()


def test_windowed_loss_is_the_full_loss_where_the_context_fits() -> None:
    from eval.context_use import windowed_losses

    model = GPT2LMHeadModel(_gpt2_config())
    g = torch.Generator().manual_seed(1)
    blocks = [torch.randint(0, 15, (17,), generator=g) for _ in range(4)] + [torch.randint(0, 15, (5,), generator=g)]
    pos = np.concatenate([np.arange(1, len(b)) for b in blocks])
    full = token_losses(model, blocks)
    windowed = windowed_losses(model, blocks, 6, batch_size=7)
    assert windowed[pos <= 6] == pytest.approx(full[pos <= 6], abs=1e-5)  # the same context: the same loss
    assert np.abs(windowed - full)[pos > 6].max() > 1e-3  # cut: another loss (the model does use its context)
    t = 11  # by hand: block 1's target 11 after its 6 tokens 5..10 alone, a fresh sequence
    with torch.no_grad():
        logits = model(input_ids=blocks[1][t - 6 : t][None]).logits[0, -1]
    expected = torch.nn.functional.cross_entropy(logits[None], blocks[1][t][None])
    assert windowed[16 + t - 1] == pytest.approx(float(expected), abs=1e-5)
    # A window no shorter than the blocks cuts nothing; only selected targets are rescored (the rest NaN).
    assert windowed_losses(model, blocks, 16) == pytest.approx(full, abs=1e-5)
    select = pos % 3 == 0
    part = windowed_losses(model, blocks, 6, select)
    assert np.isnan(part[~select]).all() and part[select] == pytest.approx(windowed[select], abs=1e-5)
    # SPEN too (its traces start fresh in a window), and a module without logits_to_keep.
    spen = tiny_model(0, vocab_size=15)
    assert windowed_losses(spen, blocks, 6)[pos <= 6] == pytest.approx(token_losses(spen, blocks)[pos <= 6], abs=1e-5)
    copier = _InductionLM(15)
    assert windowed_losses(copier, blocks, 20, batch_size=3) == pytest.approx(token_losses(copier, blocks))


def test_a_copier_retrieves_beyond_the_window_and_a_bigram_table_does_not() -> None:
    from eval.context_use import control_pair, cut_masks, windowed_control

    blocks = _copied_spans()
    docs = np.repeat(np.arange(40), 64)
    copier = windowed_control(_InductionLM(50), blocks, docs, 8, bootstrap=200)
    assert set(copier) == {"window", "ar_beyond", "first", "control", "ci95", "positive"}
    assert copier["window"] == 8 and copier["positive"] and copier["ci95"][0] > 1.0  # it copies from 20+ back
    assert copier["ci95"][0] < copier["control"] < copier["ci95"][1]
    ar, first = copier["ar_beyond"], copier["first"]
    assert ar["tokens"] > 400 and first["tokens"] > 400 and ar["documents"] == 40
    assert copier["control"] == pytest.approx(ar["cost"] - first["cost"])
    assert ar["cost"] == pytest.approx(ar["windowed_loss"] - ar["full_loss"])
    bigram = windowed_control(_BigramLM(50), blocks, docs, 8, bootstrap=200)
    assert bigram["ar_beyond"]["cost"] == 0 and bigram["first"]["cost"] == 0  # it never looked further back
    assert bigram["control"] == 0 and bigram["ci95"] == [0, 0] and not bigram["positive"]
    # The classes: context cut (t > 8); AR hits whose most recent earlier bigram is 8 or more back; firsts.
    masks = cut_masks(blocks, 8)
    pos = np.tile(np.arange(1, 65), 40)
    assert not (masks["ar_beyond"] & masks["first"]).any() and pos[masks["ar_beyond"] | masks["first"]].min() == 9
    # Two models: the difference of their controls, paired over the same resamples.
    pair = control_pair([_BigramLM(50), _InductionLM(50)], blocks, docs, 8, labels=("bigram", "copier"),
                        bootstrap=200)
    assert pair["a"]["label"] == "bigram" and pair["b"]["control"] == pytest.approx(copier["control"])
    assert pair["b"]["ci95"] == pytest.approx(copier["ci95"])  # the same resamples as one model alone
    d = pair["difference"]
    assert d["value"] == pytest.approx(copier["control"]) and d["ci95"] == pytest.approx(copier["ci95"])
    assert d["positive"] and "control of b (copier) - control of a (bigram)" == d["means"]
    # max_tokens: only the first targets count (here 10 blocks' worth).
    few = windowed_control(_InductionLM(50), blocks, docs, 8, max_tokens=640, bootstrap=200)
    assert few["ar_beyond"]["tokens"] == int(masks["ar_beyond"][:640].sum()) and few["ar_beyond"]["documents"] == 10


def test_seed_models_give_a_t_interval_paired_by_seed() -> None:
    from eval.context_use import control_pair

    blocks = _copied_spans(20)
    docs = np.repeat(np.arange(20), 64)
    copiers = [_InductionLM(50, boost) for boost in (3.0, 4.0, 5.0)]
    bigrams = [_BigramLM(50, seed) for seed in range(3)]
    pair = control_pair([bigrams, copiers], blocks, docs, 8, full_losses=(None, [token_losses(m, blocks)
                                                                                   for m in copiers]))
    assert "3 seeds, paired by seed" in pair["interval"] and len(pair["b"]["control_per_seed"]) == 3
    per_seed = pair["b"]["control_per_seed"]
    assert per_seed[0] < per_seed[1] < per_seed[2]  # a stronger copier loses more when its source is cut
    assert pair["b"]["ci95"][0] < pair["b"]["control"] < pair["b"]["ci95"][1]
    assert pair["a"]["control_per_seed"] == [0, 0, 0] and pair["difference"]["value"] == pytest.approx(
        np.mean(per_seed))


def test_the_window_flag_adds_the_control_to_gap_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    gpt2, spen = _gpt2(tmp_path / "gpt2"), _spen(tmp_path / "spen")
    capsys.readouterr()
    data = _gap(tmp_path, "--model_name_or_path", str(gpt2), str(spen), "--labels", "gpt2", "spen", "--window", "4")
    out = capsys.readouterr().out
    c = data["context_use"]
    assert c["window"] == 4 and c["tokens"] == data["text"]["tokens"] and "bootstrap over documents" in c["interval"]
    assert c["a"]["label"] == "gpt2" and c["b"]["label"] == "spen" and c["difference"]["means"].startswith("control")
    for side in ("a", "b"):
        r = c[side]
        assert r["ar_beyond"]["tokens"] > 0 and r["first"]["tokens"] > 0
        assert r["control"] == pytest.approx(r["ar_beyond"]["cost"] - r["first"]["cost"])
        assert r["ci95"][0] <= r["control"] <= r["ci95"][1] and r["positive"] == (r["ci95"][0] > 0)
    assert c["difference"]["value"] == pytest.approx(c["b"]["control"] - c["a"]["control"])
    assert "windowed context-use control, W = 4" in out and "| gpt2 |" in out and "| spen |" in out


def test_window_flag_help_and_bad_values(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        from eval.gap import parse_args

        parse_args(["--help"])
    assert "--window W" in capsys.readouterr().out
    gpt2, spen = _gpt2(tmp_path / "gpt2"), _spen(tmp_path / "spen")
    text, out = _paragraphs(tmp_path), tmp_path / "out"
    capsys.readouterr()
    for bad, message in ((["--window", "0"], "--window"), (["--window", "x"], "--window"),
                         (["--window", "32"], "--window 32: must be less than the block size 32"),
                         (["--window_max_tokens", "100"], "--window_max_tokens: needs --window")):
        assert main(["--model_name_or_path", str(gpt2), str(spen), "--text", str(text), "--output_dir", str(out),
                     *bad]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_measure_reads_its_paths_under_a_root_as_the_command_from_there(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # eval.gap as a per-run measure (a sweep's analysis): the paths relative to a folder, read there without a change
    # of working folder, give the record the command run from that folder gives, the command and paths as named.
    from eval.gap import command, measure, parse_args

    folder = tmp_path / "sweep"
    for i in range(2):
        _gpt2(folder / f"runs/gpt2/seed_{i}/final", seed=i)
        _spen(folder / f"runs/spen/seed_{i}/final", seed=i)
    (folder / "data").mkdir()
    _paragraphs(folder / "data")
    models = [",".join(f"runs/{m}/seed_{i}/final" for i in range(2)) for m in ("gpt2", "spen")]
    argv = ["--model_name_or_path", *models, "--labels", "gpt2", "spen", "--text", "data/text.txt", "--split", "all",
            "--bootstrap", "50", "--window", "8"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    measured = measure(parse_args([*argv, "--output_dir", "gap/a"]), command([*argv, "--output_dir", "gap/a"]),
                       root=folder)
    assert Path.cwd() == elsewhere and not (elsewhere / "gap").exists()
    written = json.loads((folder / "gap" / "a" / "gap.json").read_text())
    assert written == json.loads(json.dumps(measured))
    assert written["command"] == "python -m eval.gap " + " ".join([*argv, "--output_dir", "gap/a"])
    assert written["models"]["a"]["locations"] == ["runs/gpt2/seed_0/final", "runs/gpt2/seed_1/final"]
    assert written["text"]["source"] == "data/text.txt"
    monkeypatch.chdir(folder)  # the command as recorded, from the folder: the same record
    assert main([*argv, "--output_dir", "gap/b"]) == 0
    again = json.loads((folder / "gap" / "b" / "gap.json").read_text())
    assert {**again, "command": written["command"]} == written
