"""Supervised baseline: a bidirectional GRU role tagger over word embeddings.

The same tagger with ``bidirectional=False`` is the causal diagnostic: it sees exactly what the
SPCN traces see (the past and the current word), but through a learned, input-gated recurrence.

Vocabulary = the words of the training sentences it is given; any other word maps to ``<unk>``. The
experiment gives it the same word-dropped training copy as every other model (every token
replaced by ``<unk>`` at the protocol's rate), so the ``<unk>`` embedding is trained exactly as the
other models learn their ``<unk>`` code. Trained with Adam and cross-entropy; the epoch with the best
``validation`` accuracy is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from tqdm.auto import tqdm

from grammar_probe.protocol import PATIENCE, EarlyStopping, extended_embeddings

PAD, UNK = "<pad>", "<unk>"


class BiGRUTagger(nn.Module):
    def __init__(
        self,
        vocab: Sequence[str],
        n_classes: int,
        emb_dim: int = 64,
        hidden: int = 64,
        bidirectional: bool = True,
        unseen: str = "unk",
        code_seed: int = 0,
    ) -> None:
        super().__init__()
        self.unseen, self.code_seed = unseen, code_seed  # how never-seen words are read (grammar_probe.protocol)
        self.itos = [PAD, UNK, *sorted(set(vocab) - {PAD, UNK})]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.embed = nn.Embedding(len(self.itos), emb_dim, padding_idx=0)
        self.gru = nn.GRU(emb_dim, hidden, batch_first=True, bidirectional=bidirectional)
        self.out = nn.Linear((2 if bidirectional else 1) * hidden, n_classes)

    def encode(self, sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = [torch.tensor([self.stoi.get(w, 1) for w in s]) for s in sentences]
        return pad_sequence(ids, batch_first=True), torch.tensor([len(s) for s in sentences])

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        """``weight``: an embedding table extended with fresh rows for unseen words (the random-codes reading)."""
        emb = self.embed(ids) if weight is None else nn.functional.embedding(ids, weight, padding_idx=0)
        packed = pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = pad_packed_sequence(self.gru(packed)[0], batch_first=True, total_length=ids.shape[1])
        return self.out(hidden)

    @torch.no_grad()
    def predict(self, sentences: Sequence[Sequence[str]], batch_size: int = 256) -> torch.Tensor:
        """Predicted role ids, flattened over tokens in sentence order."""
        self.eval()
        preds = []
        for i in range(0, len(sentences), batch_size):
            batch = sentences[i : i + batch_size]
            if self.unseen == "random_codes":
                weight, rows = extended_embeddings(self.embed.weight, self.stoi, batch, seed=self.code_seed)
                ids, lengths = pad_sequence([torch.tensor(r) for r in rows], batch_first=True), \
                    torch.tensor([len(r) for r in rows])
                logits = self(ids, lengths, weight)
            else:
                ids, lengths = self.encode(batch)
                logits = self(ids, lengths)
            preds += [logits[b, : lengths[b]].argmax(-1) for b in range(len(lengths))]
        return torch.cat(preds) if preds else torch.zeros(0, dtype=torch.long)


def train_bigru(
    train: tuple[Sequence[Sequence[str]], Sequence[Sequence[int]]],
    validation: tuple[Sequence[Sequence[str]], Sequence[Sequence[int]]],
    n_classes: int,
    max_epochs: int = 30,
    patience: int = PATIENCE,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    bidirectional: bool = True,
    progress: bool = False,
    unseen: str = "unk",
) -> tuple[BiGRUTagger, dict]:
    """Train with early stopping on validation accuracy; returns the best model and a log. ``unseen``:
    how the trained model reads words it never saw (``"unk"`` or ``"random_codes"``)."""
    torch.manual_seed(seed)
    sentences, labels = train
    model = BiGRUTagger([w for s in sentences for w in s], n_classes, bidirectional=bidirectional,
                        unseen=unseen, code_seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    val_gold = torch.tensor([r for rs in validation[1] for r in rs])
    gen = torch.Generator().manual_seed(seed)
    stop = EarlyStopping(patience)
    desc = "BiGRU epochs" if bidirectional else "causal GRU epochs"
    for epoch in tqdm(range(max_epochs), desc=desc, disable=not progress):
        model.train()
        for idx in torch.randperm(len(sentences), generator=gen).split(batch_size):
            idx = idx.tolist()
            ids, lengths = model.encode([sentences[i] for i in idx])
            gold = pad_sequence([torch.tensor(labels[i]) for i in idx], batch_first=True, padding_value=-100)
            loss = nn.functional.cross_entropy(model(ids, lengths).flatten(0, 1), gold.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        if stop.update(epoch, (model.predict(validation[0]) == val_gold).float().mean().item(), model):
            break
    stop.restore(model)
    return model, stop.summary(max_epochs)
