"""The unseen-word protocol reads no label: ``<unk>`` in training says nothing about the role."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from scipy import stats as sps

from grammar_probe.grammar import UNK, grammar_a
from grammar_probe.protocol import PROTOCOL, Vocab, word_dropout


@pytest.fixture(scope="module")
def corpus() -> list:
    rng = random.Random("test-protocol")
    a = grammar_a()
    return [a.sample(rng) for _ in range(3000)]


def _mask(dropped: list[list[str]]) -> list[list[bool]]:
    return [[w == UNK for w in s] for s in dropped]


def test_which_tokens_drop_depends_on_position_only(corpus):
    """Exact, by construction: replacing every word by another (any mapping) leaves the dropped positions unchanged."""
    words = [list(s.tokens) for s in corpus]
    roles = [list(s.roles) for s in corpus]  # the labels themselves as the "words": still the same mask
    constant = [["x"] * len(s) for s in words]
    mask = _mask(word_dropout(words, 0.15, seed=3))
    assert mask == _mask(word_dropout(roles, 0.15, seed=3)) == _mask(word_dropout(constant, 0.15, seed=3))
    assert mask != _mask(word_dropout(words, 0.15, seed=4))


def test_unk_role_distribution_equals_the_marginal(corpus):
    """The roles at <unk> positions follow the overall role distribution (chi-square, and total variation)."""
    words = [list(s.tokens) for s in corpus]
    dropped = word_dropout(words, PROTOCOL.word_dropout, seed=0)
    at_unk, overall = Counter(), Counter()
    for s, d in zip(corpus, dropped, strict=True):
        for role, w in zip(s.roles, d, strict=True):
            overall[role] += 1
            at_unk[role] += w == UNK
    n_unk, n = sum(at_unk.values()), sum(overall.values())
    assert abs(n_unk / n - PROTOCOL.word_dropout) < 0.01
    roles = sorted(overall)
    observed = [at_unk[r] for r in roles]
    expected = [overall[r] * n_unk / n for r in roles]
    assert sps.chisquare(observed, expected).pvalue > 1e-3
    total_variation = 0.5 * sum(abs(at_unk[r] / n_unk - overall[r] / n) for r in roles)
    assert total_variation < 0.03
    # Every role, closed-class ones included, is dropped: <unk> is not "a noun or a verb".
    assert all(at_unk[r] > 0 for r in roles)


def test_the_old_class_based_rule_would_fail_this_test(corpus):
    """The check has power: dropping nouns and verbs only puts a very different role mix at <unk>."""
    open_roles = {"SUBJ_MAIN", "SUBJ_EMB", "OBJ_MAIN", "OBJ_EMB", "VERB_MAIN", "VERB_EMB", "LOC_MAIN", "LOC_EMB"}
    rng = random.Random(0)
    at_unk, overall = Counter(), Counter()
    for s in corpus:
        for role in s.roles:
            overall[role] += 1
            at_unk[role] += role in open_roles and rng.random() < 0.15
    n_unk, n = sum(at_unk.values()), sum(overall.values())
    roles = sorted(overall)
    assert sps.chisquare([at_unk[r] for r in roles], [overall[r] * n_unk / n for r in roles]).pvalue < 1e-6


def test_dropout_rate_zero_and_bad_rate():
    sents = [["the", "dog", "ran", "."]]
    assert word_dropout(sents, 0.0, seed=1) == sents
    with pytest.raises(ValueError, match="word_dropout rate"):
        word_dropout(sents, 1.0, seed=1)
    assert word_dropout(sents, 0.5, seed=1) == word_dropout(sents, 0.5, seed=1)


def test_vocab_maps_unknown_words_to_unk():
    vocab = Vocab([["the", "dog", UNK]])
    assert vocab.map([["wug", "the"]]) == [[UNK, "the"]]
    assert vocab.ids(["the", "blick"]) == [vocab.index["the"], vocab.index[UNK]]


def test_fresh_codes_are_per_word_and_reproducible():
    import torch

    from grammar_probe.protocol import extended_embeddings, fresh_code

    assert torch.equal(fresh_code("wug", 16, seed=1), fresh_code("wug", 16, seed=1))
    assert not torch.equal(fresh_code("wug", 16, seed=1), fresh_code("dax", 16, seed=1))
    weight = torch.zeros(3, 16)
    extended, ids = extended_embeddings(weight, {"the": 0, "dog": 1}, [["the", "wug", "dog", "wug", "dax"]], seed=1)
    assert ids == [[0, 3, 1, 3, 4]] and extended.shape == (5, 16)
    assert torch.equal(extended[3], fresh_code("wug", 16, seed=1))
    _, shifted = extended_embeddings(weight, {"the": 0}, [["the", "wug"]], offset=1)
    assert shifted == [[1, 3]]


def test_protocol_rejects_unknown_readings():
    from grammar_probe.protocol import Protocol

    with pytest.raises(ValueError, match="unseen must be one of"):
        Protocol(unseen="zeros")
    with pytest.raises(ValueError, match="word_dropout"):
        Protocol(word_dropout=1.5)
