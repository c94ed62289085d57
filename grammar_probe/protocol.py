"""The unseen-word protocol and run sizes, fixed before any model was run and written into results.json.

Every model sees words through the same :class:`Vocab`: the words of its (dropped-out) training
sentences; any other word becomes ``<unk>``. While fitting, *every* token of the training sentences,
whatever its word, is replaced by ``<unk>`` with the same probability ``word_dropout``, drawn
independently of the word and of its role. The rule reads no gold label and no word class, so in
training ``<unk>`` carries no information about the role beyond its marginal: the role distribution
at ``<unk>`` positions is the overall role distribution, up to sampling error (tests/test_protocol.py).
(Dropping only nouns and verbs, the earlier rule, made ``<unk>`` mean "noun or verb": a part-of-speech
label leaked into every model's input.) One dropped-out copy per seed is shared by every model, so all
models fit on identical inputs. Choices that concern unseen words are made on
``validation_novel_words`` (development nonce words), never on the test's nonce words.
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from grammar_probe.grammar import UNK

__all__ = ["EQUIVALENCE_MARGIN", "PATIENCE", "PROTOCOL", "QUICK", "FULL", "UNSEEN_READINGS", "EarlyStopping",
           "Protocol", "RunSize", "Vocab", "extended_embeddings", "fresh_code", "word_dropout"]


UNSEEN_READINGS: tuple[str, ...] = ("unk", "random_codes")


@dataclass(frozen=True)
class Protocol:
    unk: str = UNK
    word_dropout: float = 0.15  # fixed in advance (the example rate); never tuned
    dropout_rule: str = "every token, one rate, independent of word and role"  # no label or class is read
    # How a word never seen in training is read: "unk" (the <unk> symbol, trained through the dropout)
    # or "random_codes" (a fresh random code per word: a new embedding vector drawn like the initial
    # ones for the taggers, the word's own hashed code for SPCN and the plain EMA; no table entry for
    # the majority-word baseline). The protocol arms (grammar_probe.arms) vary this and the dropout.
    unseen: str = "unk"

    def __post_init__(self) -> None:
        if not 0.0 <= self.word_dropout < 1.0:
            raise ValueError(f"word_dropout must be in [0, 1), got {self.word_dropout!r}")
        if self.unseen not in UNSEEN_READINGS:
            raise ValueError(f"unseen must be one of {', '.join(UNSEEN_READINGS)}, got {self.unseen!r}")


PROTOCOL = Protocol()
# "Equivalent" for two models' accuracies: the 90% interval of their paired difference inside ±1 point.
EQUIVALENCE_MARGIN = 0.01


# Every fitted model (probes, GRU taggers, window taggers) stops the same way: at most its budget of
# epochs, stopping after PATIENCE epochs without a better validation accuracy, keeping the best epoch.
PATIENCE = 3


@dataclass(frozen=True)
class RunSize:
    """How much one ``run`` does. Seeds vary grammar sampling (a disjoint training subset per seed),
    every initialisation (SPCN, word codes, probes, taggers) and the word dropout. The ``*_epochs`` of
    the supervised models are budgets: each stops on validation with the same ``patience``; results.json
    records, per model and seed, how many epochs ran and whether the budget was reached."""

    seeds: int
    train_sentences: int  # per seed
    spcn_epochs: int  # SPCN's own (label-free) Hebbian passes: fixed, not early-stopped
    gru_epochs: int  # at most; early stopping on validation
    probe_epochs: int  # at most; early stopping on validation
    window_epochs: int  # at most, per k; early stopping on validation
    eval_sentences: int | None = None  # per evaluation split; None = all of it
    validation_sentences: int = 500  # the first ones of `validation`: early stopping and k choice
    patience: int = PATIENCE


# The default evaluates the first 500 sentences of each test split: the bootstrap intervals include the
# test-sentence sampling, so fewer sentences widen them honestly instead of hiding it (and save time).
FULL = RunSize(seeds=5, train_sentences=2000, spcn_epochs=2, gru_epochs=30, probe_epochs=40, window_epochs=30,
               eval_sentences=500)
QUICK = RunSize(seeds=5, train_sentences=600, spcn_epochs=1, gru_epochs=30, probe_epochs=40, window_epochs=30,
                eval_sentences=300)


class EarlyStopping:
    """The one stopping rule of every supervised model: remember the epoch with the best validation
    accuracy (its weights too), and stop once ``patience`` epochs in a row brought no new best."""

    def __init__(self, patience: int = PATIENCE) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience!r}")
        self.patience = patience
        self.best = -1.0
        self.best_epoch = -1
        self.state: dict | None = None
        self.history: list[float] = []

    def update(self, epoch: int, accuracy: float, module) -> bool:
        """Record one epoch's validation accuracy; True when training should stop."""
        self.history.append(accuracy)
        if accuracy > self.best:
            self.best, self.best_epoch, self.state = accuracy, epoch, copy.deepcopy(module.state_dict())
        return epoch - self.best_epoch >= self.patience

    def restore(self, module) -> None:
        if self.state is not None:
            module.load_state_dict(self.state)

    def summary(self, max_epochs: int) -> dict:
        return {"best_epoch": self.best_epoch + 1, "epochs_run": len(self.history), "max_epochs": max_epochs,
                "patience": self.patience, "budget_reached": len(self.history) >= max_epochs,
                "validation_accuracy": self.best, "history": self.history}


def word_dropout(sentences: Sequence[Sequence[str]], rate: float, seed: int) -> list[list[str]]:
    """A copy of ``sentences`` with every token replaced by ``<unk>`` with probability ``rate``.

    One coin per token, drawn before the token is looked at: which tokens drop depends on nothing
    but ``seed`` and the token's position, never on the word, its class or its role.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"word_dropout rate must be in [0, 1), got {rate!r}")
    rng = random.Random(f"word-dropout/{seed}")
    return [[UNK if rng.random() < rate else w for w in s] for s in sentences]


class Vocab:
    """The words a model knows (those of its training sentences); everything else is ``<unk>``."""

    def __init__(self, sentences: Sequence[Sequence[str]]) -> None:
        self.words = sorted({w for s in sentences for w in s} | {UNK})
        self.index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    def map(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        return [[w if w in self.index else UNK for w in s] for s in sentences]

    def ids(self, sentence: Sequence[str]) -> list[int]:
        return [self.index.get(w, self.index[UNK]) for w in sentence]


def fresh_code(word: str, dim: int, seed: int = 0) -> torch.Tensor:
    """A random vector for a word never seen in training, drawn like ``nn.Embedding``'s initial rows
    (standard normal); the same word and seed give the same vector."""
    digest = int.from_bytes(hashlib.sha256(f"{seed}/{word}".encode()).digest()[:8], "little")
    return torch.randn(dim, generator=torch.Generator().manual_seed(digest))


def extended_embeddings(weight: torch.Tensor, known: dict[str, int], sentences: Sequence[Sequence[str]],
                        seed: int = 0, offset: int = 0) -> tuple[torch.Tensor, list[list[int]]]:
    """The "random_codes" reading for a tagger with an embedding table: ``weight`` with one fresh row per
    unseen word of ``sentences`` appended, and every sentence's ids into it (``known`` maps a training word
    to its row; ``offset`` is added to every id, e.g. 1 when row 0 is padding)."""
    extra: dict[str, int] = {}
    ids = []
    for s in sentences:
        row = []
        for w in s:
            if w in known:
                row.append(known[w] + offset)
            else:
                row.append(extra.setdefault(w, weight.shape[0] + len(extra)))
        ids.append(row)
    rows = [fresh_code(w, weight.shape[1], seed) for w in extra]
    return (torch.cat([weight, torch.stack(rows)]) if rows else weight), ids
