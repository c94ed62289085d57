"""The cheap shortcuts every structure claim must beat, read through the same :class:`Vocab`.

- :class:`MajorityWord`: the majority role of each word in training (``<unk>`` included): a pure
  word->role memoriser.
- :class:`WindowTagger`: a feed-forward tagger over the current word and the k previous words
  (position-specific embeddings, one hidden layer), k in :data:`WINDOW_KS` (up to 12) chosen on
  validation accuracy, each k trained with the same early stopping as every other model: the best a
  window can do when learned from the training data.
- :func:`ema_features`: a plain three-rate EMA of the hashed word codes, no network at all; read by
  the same linear probe as SPCN's traces (the ``plain_ema`` model).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch
from torch import nn

from ema_boundary.seeding import window_tagger_seed
from grammar_probe.grammar import UNK
from grammar_probe.protocol import EarlyStopping, Vocab, extended_embeddings
from grammar_probe.spcn import word_code

__all__ = ["WINDOW_KS", "MajorityWord", "WindowTagger", "ema_features", "fit_window_tagger"]

WINDOW_KS: tuple[int, ...] = (1, 2, 4, 8, 12)  # the trained window tagger's candidate k (ceilings cover every k)


class MajorityWord:
    """``unseen="random_codes"``: a never-seen word is a fresh code with no table entry, so it gets the
    overall majority role; with ``"unk"`` it gets ``<unk>``'s majority role."""

    def __init__(self, vocab: Vocab, sentences: Sequence[Sequence[str]], roles: Sequence[Sequence[int]],
                 unseen: str = "unk") -> None:
        counts: dict[str, Counter] = {}
        overall: Counter = Counter()
        for s, rs in zip(sentences, roles, strict=True):
            for w, r in zip(s, rs, strict=True):
                counts.setdefault(w, Counter())[r] += 1
                overall[r] += 1
        fallback = overall.most_common(1)[0][0]
        # Ties go to the smaller role id: deterministic.
        self.table = {w: min(c, key=lambda r: (-c[r], r)) for w, c in counts.items()}
        self.vocab = vocab
        self.fallback = fallback if unseen == "random_codes" else self.table.get(UNK, fallback)

    def predict(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        known = self.vocab.index
        return torch.tensor([self.table.get(w, self.fallback) if w in known else self.fallback
                             for s in sentences for w in s], dtype=torch.long)


class WindowTagger(nn.Module):
    """Embeddings of the current word and the k previous ones (0 = before the sentence), an MLP, roles."""

    def __init__(self, vocab: Vocab, k: int, n_classes: int, emb: int = 32, hidden: int = 128,
                 unseen: str = "unk", code_seed: int = 0) -> None:
        super().__init__()
        self.vocab, self.k = vocab, k
        self.unseen, self.code_seed = unseen, code_seed  # how never-seen words are read (grammar_probe.protocol)
        self.embed = nn.Embedding(len(vocab) + 1, emb)  # id 0: before the sentence
        self.mlp = nn.Sequential(nn.Linear((k + 1) * emb, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def windows(self, sentences: Sequence[Sequence[str]], ids: Sequence[Sequence[int]] | None = None
                ) -> torch.Tensor:
        """(tokens, k + 1) embedding rows of each token's window (0 = before the sentence)."""
        rows = []
        for n, s in enumerate(sentences):
            padded = [0] * self.k + (list(ids[n]) if ids is not None else [i + 1 for i in self.vocab.ids(s)])
            rows += [padded[t : t + self.k + 1] for t in range(len(s))]
        return torch.tensor(rows, dtype=torch.long).view(-1, self.k + 1)

    def forward(self, windows: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        emb = self.embed(windows) if weight is None else nn.functional.embedding(windows, weight)
        return self.mlp(emb.flatten(1))

    def inputs(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The windows of ``sentences`` and, for the random-codes reading, the extended embedding table."""
        if self.unseen == "random_codes":
            weight, ids = extended_embeddings(self.embed.weight.detach(), self.vocab.index, sentences,
                                              self.code_seed, offset=1)
            return self.windows(sentences, ids), weight
        return self.windows(sentences), None

    @torch.no_grad()
    def predict(self, sentences: Sequence[Sequence[str]] | None = None,
                inputs: tuple[torch.Tensor, torch.Tensor | None] | None = None) -> torch.Tensor:
        """Role ids of every token of ``sentences`` (or of precomputed :meth:`inputs`)."""
        self.eval()
        if inputs is None:
            if not sentences:
                return torch.zeros(0, dtype=torch.long)
            inputs = self.inputs(sentences)
        windows, weight = inputs
        if weight is not None:  # rows of the trained table may have moved since the inputs were made
            weight = torch.cat([self.embed.weight, weight[self.embed.num_embeddings :]])
        return self(windows, weight).argmax(-1)


def fit_window_tagger(
    vocab: Vocab,
    train: tuple[Sequence[Sequence[str]], Sequence[Sequence[int]]],
    validation: tuple[Sequence[Sequence[str]], Sequence[Sequence[int]]],
    n_classes: int,
    ks: Sequence[int] = WINDOW_KS,
    epochs: int = 30,
    seed: int = 0,
    patience: int = 3,
    unseen: str = "unk",
) -> tuple[WindowTagger, dict]:
    """Fit one tagger per k (early stopping on validation accuracy: at most ``epochs``, stop after
    ``patience`` epochs without a new best, keep the best epoch) and keep the k with the best validation
    accuracy."""
    gold = torch.tensor([r for rs in train[1] for r in rs])
    val_gold = torch.tensor([r for rs in validation[1] for r in rs])
    best: tuple[float, WindowTagger | None] = (-1.0, None)
    log: dict = {"validation_accuracy_by_k": {}, "epochs_by_k": {}}
    for k in ks:
        torch.manual_seed(window_tagger_seed(seed, k))
        model = WindowTagger(vocab, k, n_classes, unseen=unseen, code_seed=seed)
        x = model.windows(train[0])
        val_inputs = model.inputs(validation[0])  # built once: the windows do not change between epochs
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(window_tagger_seed(seed, k))
        stop = EarlyStopping(patience)
        for epoch in range(epochs):
            model.train()
            for idx in torch.randperm(len(x), generator=gen).split(512):
                loss = nn.functional.cross_entropy(model(x[idx]), gold[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if stop.update(epoch, (model.predict(inputs=val_inputs) == val_gold).float().mean().item(), model):
                break
        stop.restore(model)
        log["validation_accuracy_by_k"][k] = stop.best
        log["epochs_by_k"][k] = stop.summary(epochs)
        if stop.best > best[0]:
            best = (stop.best, model)
    assert best[1] is not None
    log["k"] = best[1].k
    log.update(log["epochs_by_k"][best[1].k])
    return best[1], log


def ema_features(sentences: Sequence[Sequence[str]], rates: Sequence[float], dim: int, active: int,
                 seed: int) -> torch.Tensor:
    """(tokens, len(rates) * dim): h_t = (1 - a) h_{t-1} + a x_t of the hashed word codes x_t, per rate a.

    Words are used as given (map unseen words to ``<unk>`` first); traces restart at each sentence.
    The recurrence is linear, so per sentence h = D X C with the decay matrix
    D[t, j] = a (1 - a)^(t - j) (j <= t), X the one-hot word ids and C the words' codes.
    """
    vocab = sorted({w for s in sentences for w in s})
    index = {w: i for i, w in enumerate(vocab)}
    codes = torch.zeros(len(vocab), dim)
    for w, i in index.items():
        codes[i, word_code(w, dim, active, seed)] = 1.0
    longest = max((len(s) for s in sentences), default=0)
    lag = torch.arange(longest).view(-1, 1) - torch.arange(longest).view(1, -1)
    decays = [torch.where(lag >= 0, a * (1 - a) ** lag.clamp_min(0).double(), 0.0).float() for a in rates]
    out = []
    for s in sentences:
        T = len(s)
        x = codes[[index[w] for w in s]]  # (T, dim)
        out.append(torch.cat([d[:T, :T] @ x for d in decays], dim=1))
    return torch.cat(out) if out else torch.zeros(0, len(rates) * dim)
