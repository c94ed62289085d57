"""Token blocks from a corpus' documents (:mod:`ema_boundary.corpus`): packed ``block_size + 1`` ids sharing one
token with the next block, the training stream shuffled each epoch with an exact, resumable position, and the
validation and test blocks every tool scores on."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from ema_boundary.corpus import C4, DEFAULT_TEST_EVERY, DataError, Position, check_split, documents, train_documents


def batched(items: Iterable, n: int) -> Iterator[list]:
    """itertools.batched, which needs Python 3.12."""
    it = iter(items)
    while chunk := list(itertools.islice(it, n)):
        yield chunk


DEFAULT_SHUFFLE_BUFFER = 10_000  # streamed documents; about 10 optimizer steps of C4 at the 130M recipe's batch


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator of one epoch's order: a function of the seed and the epoch alone."""
    return np.random.default_rng([seed, epoch])


class PackedBlocks(torch.utils.data.IterableDataset):
    """Endless stream of {"input_ids": LongTensor[block_size + 1], "pos": LongTensor[3]}, where "pos" is the
    Position of the block that follows. Finite sources repeat (epochs) in the same order; with ``shuffle_seed``
    the documents of each epoch pass through a shuffle buffer of ``shuffle_buffer`` documents first (for
    streamed data, C4), drawn from :func:`epoch_rng`."""

    def __init__(self, data: list[str], split: str, val_every: int, tokenizer: PreTrainedTokenizerBase,
                 block_size: int, start: Position = (0, 0, 0), repeat: bool = True, test_every: int = 0,
                 shuffle_seed: int | None = None, shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                 train_fraction: float = 1.0):
        super().__init__()
        check_split(split, test_every)
        self.data, self.split, self.val_every, self.tokenizer = data, split, val_every, tokenizer
        self.test_every, self.train_fraction = test_every, train_fraction
        self.block_size, self.start, self.repeat = block_size, tuple(start), repeat
        self.shuffle_seed, self.shuffle_buffer = shuffle_seed, shuffle_buffer

    def _documents(self, epoch: int, skip: int) -> Iterable[dict]:
        stream = (train_documents(self.data, self.val_every, self.test_every, self.train_fraction)
                  if self.split == "train" else documents(self.data, self.split, self.val_every, self.test_every))
        if self.shuffle_seed is None:
            return stream.skip(skip)
        stream = stream.shuffle(generator=epoch_rng(self.shuffle_seed, epoch), buffer_size=self.shuffle_buffer)
        # Skipped after the buffer, by reading (not tokenizing): the position counts shuffled documents.
        return itertools.islice(stream, skip, None)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        epoch, doc, offset = self.start
        buf: list[int] = []
        while True:
            stream = self._documents(epoch, doc)
            # Tokenize in chunks: the fast tokenizer encodes a list in parallel.
            for texts in batched((ex["text"] for ex in stream), 64):
                encoded = self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
                for ids in encoded:
                    ids = (ids + [self.tokenizer.eos_token_id])[offset:]
                    start_offset, offset = offset, 0
                    buf.extend(ids)
                    while len(buf) > self.block_size:
                        block, buf = buf[: self.block_size + 1], buf[self.block_size :]
                        # What is left in buf is the tail of this document, so the next block starts there.
                        pos = (epoch, doc, start_offset + len(ids) - len(buf))
                        yield {"input_ids": torch.tensor(block), "pos": torch.tensor(pos)}
                    doc += 1
            if not self.repeat:
                return
            if doc == 0:
                raise DataError(f"{self.data[0]}: the {self.split} split has no documents")
            epoch, doc = epoch + 1, 0


class SplitTokens:
    """One split's tokens, read and tokenized once: its documents in order, each followed by EOS, as one
    int32 tensor (:class:`ShuffledBlocks` cuts it; several streams, e.g. an ensemble's seeds, can share it)."""

    def __init__(self, data: list[str], split: str, val_every: int, tokenizer: PreTrainedTokenizerBase,
                 test_every: int = 0, train_fraction: float = 1.0):
        check_split(split, test_every)
        self.data, self.split, self.val_every, self.tokenizer = data, split, val_every, tokenizer
        self.test_every, self.train_fraction = test_every, train_fraction

    @functools.cached_property
    def ids(self) -> torch.Tensor:
        eos = self.tokenizer.eos_token_id
        stream = (train_documents(self.data, self.val_every, self.test_every, self.train_fraction)
                  if self.split == "train" else documents(self.data, self.split, self.val_every, self.test_every))
        chunks = [np.asarray(ids + [eos], dtype=np.int32)
                  for texts in batched((ex["text"] for ex in stream), 64)
                  for ids in self.tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]
        if not chunks:
            raise DataError(f"{self.data[0]}: the {self.split} split has no documents")
        return torch.from_numpy(np.concatenate(chunks))


class ShuffledBlocks(torch.utils.data.IterableDataset):
    """Endless stream of a split's blocks in a new order each epoch: {"input_ids": LongTensor[block_size + 1],
    "pos": LongTensor[3]}. The split's tokens (:class:`SplitTokens`) are cut into ``(len - 1) // block_size``
    blocks of ``block_size + 1`` tokens, consecutive blocks sharing one token (the tokens after the last whole
    block are not read); epoch ``e`` reads every block once, in the order ``epoch_rng(seed, e).permutation``.
    "pos" is the Position of the block that follows: ``(epoch, blocks read in that epoch, 0)``."""

    def __init__(self, tokens: SplitTokens, block_size: int, seed: int, start: Position = (0, 0, 0)):
        super().__init__()
        self.tokens, self.block_size, self.seed, self.start = tokens, block_size, seed, tuple(start)

    @property
    def blocks_per_epoch(self) -> int:
        return (len(self.tokens.ids) - 1) // self.block_size

    def order(self, epoch: int) -> np.ndarray:
        """The block indices of ``epoch`` in the order they are read."""
        return epoch_rng(self.seed, epoch).permutation(self.blocks_per_epoch)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        ids, size, n = self.tokens.ids, self.block_size, self.blocks_per_epoch
        if n == 0:
            raise DataError(f"{self.tokens.data[0]}: the {self.tokens.split} split has fewer than block_size + 1 = "
                            f"{size + 1} tokens; lower block_size or add data")
        epoch, done, _ = self.start
        while True:
            for i, block in enumerate(self.order(epoch)[done:].tolist(), done + 1):
                pos = (epoch, i, 0) if i < n else (epoch + 1, 0, 0)
                yield {"input_ids": ids[block * size: block * size + size + 1].long(), "pos": torch.tensor(pos)}
            epoch, done = epoch + 1, 0


def training_blocks(data: list[str], val_every: int, tokenizer: PreTrainedTokenizerBase, block_size: int, *,
                    seed: int, shuffle: bool = True, shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
                    start: Position = (0, 0, 0), test_every: int = 0,
                    tokens: SplitTokens | None = None, train_fraction: float = 1.0) -> torch.utils.data.IterableDataset:
    """The training stream of a run: :class:`ShuffledBlocks` for local and embedded data (``tokens``: an already
    read :class:`SplitTokens` of the training split to share), :class:`PackedBlocks` through a shuffle buffer
    for streamed C4, or, with ``shuffle`` False, :class:`PackedBlocks` in document order. Resumes at ``start``.
    ``train_fraction``: the nested subset of the training documents to read (:func:`train_documents`)."""
    if not shuffle:
        return PackedBlocks(data, "train", val_every, tokenizer, block_size, start=start, test_every=test_every,
                            train_fraction=train_fraction)
    if data == [C4]:
        return PackedBlocks(data, "train", val_every, tokenizer, block_size, start=start, test_every=test_every,
                            shuffle_seed=seed, shuffle_buffer=shuffle_buffer, train_fraction=train_fraction)
    tokens = tokens or SplitTokens(data, "train", val_every, tokenizer, test_every, train_fraction)
    return ShuffledBlocks(tokens, block_size, seed, start)


def validation_blocks(data: list[str], val_every: int, tokenizer: PreTrainedTokenizerBase, block_size: int,
                      n_blocks: int, test_every: int = 0) -> torch.Tensor:
    """The first `n_blocks` validation blocks, fixed for the whole run: [n, block_size + 1]. For local and
    embedded data they do not depend on `test_every` (the test documents come out of the training split)."""
    return _blocks(data, "validation", val_every, tokenizer, block_size, n_blocks, test_every)


def test_blocks(data: list[str], val_every: int, tokenizer: PreTrainedTokenizerBase, block_size: int,
                n_blocks: int | None = None, test_every: int = DEFAULT_TEST_EVERY) -> torch.Tensor:
    """The first `n_blocks` blocks of the test split (None: all of them): [n, block_size + 1]. Documents no
    run with the same `val_every` and `test_every` trained on, and that chose nothing: score every seed here."""
    return _blocks(data, "test", val_every, tokenizer, block_size, n_blocks, test_every)


test_blocks.__test__ = False  # a corpus function, not a pytest test


def split_blocks(data: list[str], split: str, val_every: int, tokenizer: PreTrainedTokenizerBase, block_size: int,
                 n_blocks: int | None, test_every: int = 0, train_fraction: float = 1.0) -> tuple[torch.Tensor, int]:
    """The first `n_blocks` blocks of one split (None: all of them), [n, block_size + 1], and how many of the
    split's documents their targets come from (the report states both for its test blocks); the training split's
    nested subset with ``train_fraction`` < 1 (:func:`train_documents`)."""
    stream = PackedBlocks(data, split, val_every, tokenizer, block_size, repeat=False, test_every=test_every,
                          train_fraction=train_fraction)
    blocks, last = [], None
    for b in itertools.islice(stream, n_blocks):
        blocks.append(b["input_ids"])
        last = b["pos"]
    if not blocks:
        raise DataError(f"{data[0]}: the {split} split has fewer than block_size + 1 = {block_size + 1} "
                        f"tokens; lower val_every{' or test_every' if split == 'test' else ''} or block_size, "
                        "or add data")
    # The position after the last block is in the document that holds the last block's last token: documents
    # 0..pos[1] of the split gave targets (each document ends in EOS, so none is skipped).
    return torch.stack(blocks), int(last[1]) + 1


def _blocks(data: list[str], split: str, val_every: int, tokenizer: PreTrainedTokenizerBase, block_size: int,
            n_blocks: int | None, test_every: int) -> torch.Tensor:
    return split_blocks(data, split, val_every, tokenizer, block_size, n_blocks, test_every)[0]


__all__ = ["DEFAULT_SHUFFLE_BUFFER", "PackedBlocks", "ShuffledBlocks", "SplitTokens", "batched", "epoch_rng",
           "split_blocks", "test_blocks", "training_blocks", "validation_blocks"]
