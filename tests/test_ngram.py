"""eval.ngram on a toy corpus whose Kneser-Ney probabilities are computed by hand."""

import math

import pytest
import torch

from eval.ngram import KneserNey, ngram_perplexities

# "a b a b a c" with a, b, c = 0, 1, 2; D = 0.75.
STREAM = [0, 1, 0, 1, 0, 2]


def test_unigram_by_hand() -> None:
    # counts 3, 2, 1 of N = 6, 3 types: p(w) = (c - 0.75) / 6 + 0.75 * 3 / 6 * 1 / V.
    m = KneserNey(STREAM, 1, vocab_size=3)
    assert [m.prob(w, []) for w in range(3)] == pytest.approx([0.5, 1 / 3, 1 / 6])
    m4 = KneserNey(STREAM, 1, vocab_size=4)  # an unseen token gets the uniform share only
    assert m4.prob(3, []) == pytest.approx(0.375 / 4)
    assert sum(m4.prob(w, []) for w in range(4)) == pytest.approx(1.0)


def test_bigram_by_hand() -> None:
    # Bigrams ab x2, ba x2, ac x1. Continuation unigram: every token has one left neighbour type:
    # p1 = (1 - 0.75) / 3 + 0.75 * 3 / 3 / 3 = 1/3 each.
    m = KneserNey(STREAM, 2, vocab_size=3)
    # p(b | a) = (2 - .75) / 3 + .75 * 2 / 3 * 1/3 = 0.583333; p(c | a) = 0.25; p(a | a) = 1/6.
    assert [m.prob(w, [0]) for w in range(3)] == pytest.approx([1 / 6, 0.583333, 0.25], abs=1e-6)
    # p(a | b) = (2 - .75) / 2 + .75 / 2 / 3 = 0.75; an unseen context falls back to p1.
    assert m.prob(0, [1]) == pytest.approx(0.75)
    assert [m.prob(w, [2]) for w in range(3)] == pytest.approx([1 / 3] * 3)


def test_trigram_by_hand() -> None:
    # Trigrams aba x2, bab, bac. Order-2 continuation counts: ba, ab, ac once each, so
    # p2(b | a) = p2(c | a) = .25 / 2 + .75 * 2 / 2 / 3 = 0.375, p2(a | b) = .25 + .75 / 3 = 0.5.
    m = KneserNey(STREAM, 3, vocab_size=3)
    assert m.prob(1, [0]) == pytest.approx(0.375)  # only one token of context: the order-2 level
    # p(a | a b) = (2 - .75) / 2 + .75 / 2 * p2(a | b) = 0.8125
    assert m.prob(0, [0, 1]) == pytest.approx(0.8125)
    # p(c | b a) = (1 - .75) / 2 + .75 * 2 / 2 * p2(c | a) = 0.40625
    assert m.prob(2, [1, 0]) == pytest.approx(0.40625)
    for ctx in ([0, 1], [1, 0], [2, 2], [0]):
        assert sum(m.prob(w, ctx) for w in range(3)) == pytest.approx(1.0)


def test_perplexities_of_a_validation_block() -> None:
    # Block a b a c: targets b | a, a | a b, c | b a (context never crosses the block start; the
    # trigram line scores the first target, with one token of context, by the bigram model).
    r = ngram_perplexities(torch.tensor(STREAM), torch.tensor([[0, 1, 0, 2]]), vocab_size=3)
    assert r["unigram"] == pytest.approx((1 / 3 * 1 / 2 * 1 / 6) ** (-1 / 3))
    assert r["bigram"] == pytest.approx((0.583333 * 0.75 * 0.25) ** (-1 / 3), rel=1e-5)
    assert r["trigram"] == pytest.approx((0.583333 * 0.8125 * 0.40625) ** (-1 / 3), rel=1e-5)
    assert r["val_targets"] == 3 and r["train_tokens"] == 6


def test_more_context_helps_on_structured_text() -> None:
    g = torch.Generator().manual_seed(0)
    pattern = torch.randperm(50, generator=g)[:7]  # seven distinct tokens
    train = pattern.repeat(200)
    val = pattern.repeat(3)[None, :]
    r = ngram_perplexities(train, val, vocab_size=50)
    assert r["trigram"] <= r["bigram"] < r["unigram"] and r["bigram"] < 1.5
    assert math.isclose(r["unigram"], 7, rel_tol=0.1)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ngram_perplexities([0, 1], torch.tensor([0, 1]), 3), "shape"),
        (lambda: ngram_perplexities([0, 1], torch.tensor([[0, 5]]), 3), "validation tokens"),
        (lambda: ngram_perplexities([0, 7], torch.tensor([[0, 1]]), 3), "training tokens"),
    ],
)
def test_bad_input(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


def _documents_file(tmp_path):
    path = tmp_path / "docs.txt"
    words = "the cat sat on a mat and the dog ran to the big red house".split()
    path.write_text("\n\n".join(" ".join(words[(i + j) % len(words)] for j in range(40)) for i in range(30)))
    return path


def test_references_read_the_runs_streams_from_the_corpus(tmp_path) -> None:
    from ema_boundary import corpus, packing
    from eval.ngram import ngram_references

    data = [str(_documents_file(tmp_path))]
    tok = corpus.train_bpe(iter([d["text"] for d in corpus.documents(data, "train", 5)]), 300)
    r = ngram_references(data, 5, tok, 16, 4)
    stream = [t for d in corpus.documents(data, "train", 5) for t in [*tok(d["text"])["input_ids"], tok.eos_token_id]]
    expected = ngram_perplexities(stream, packing.validation_blocks(data, 5, tok, 16, 4), len(tok))
    assert {k: r[k] for k in expected} == expected
    assert r["split"] == "validation" and r["eval_tokens"] == 4 * 16 and r["train_split_tokens"] == len(stream)
    test = ngram_references(data, 5, tok, 16, None, split="test", test_every=3)
    assert test["split"] == "test" and test["eval_tokens"] == len(packing.test_blocks(data, 5, tok, 16)) * 16
    assert test["train_split_tokens"] < r["train_split_tokens"]  # the test documents are not counted
    # train.py's train_fraction: counted on the nested subset of the training documents only.
    half = ngram_references(data, 5, tok, 16, 4, train_fraction=0.5)
    subset = [t for d in corpus.train_documents(data, 5, 0, 0.5) for t in [*tok(d["text"])["input_ids"],
                                                                           tok.eos_token_id]]
    assert half["train_split_tokens"] == len(subset) < len(stream)
    assert half["trigram"] == ngram_perplexities(subset, packing.validation_blocks(data, 5, tok, 16, 4),
                                                 len(tok))["trigram"]


def test_command_line_writes_ngram_json_and_rejects_bad_input(tmp_path, capsys) -> None:
    import json

    from ema_boundary.io import output_owner
    from eval.ngram import main

    data = str(_documents_file(tmp_path))
    out = tmp_path / "out"
    argv = ["--data", data, "--val_every", "5", "--block_size", "16", "--vocab_size", "300", "--output_dir", str(out)]
    assert main(argv) == 0
    saved = json.loads((out / "ngram.json").read_text())
    assert output_owner(out) == "eval.ngram" and saved["data"] == [data] and saved["split"] == "validation"
    assert saved["unigram"] > saved["bigram"] > 1.0
    capsys.readouterr()
    assert main(argv) == 2 and "pass --overwrite_output_dir" in capsys.readouterr().err
    for bad, needle in ((["--data", str(tmp_path / "none.txt")], "--data"), (["--eval_blocks", "0"], "--eval_blocks"),
                        (["--split", "test"], "--test_every 0: give a positive N"),
                        (["--train_fraction", "0"], "--train_fraction 0: must be a number in (0, 1]"),
                        (["--tokenizer", str(tmp_path)], "--tokenizer")):
        assert main([*argv[:-1], str(tmp_path / "bad"), *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (bad, err)
        assert not (tmp_path / "bad").exists()
