"""Data for train.py: documents -> tokens -> packed blocks, with an exact, resumable position.

Every source is a `datasets` streaming IterableDataset of {"text": ...} documents, so C4 on the hub, local
files and the embedded corpus all go through the same code:

- ``c4``: ``load_dataset("allenai/c4", "en", streaming=True)``; validation is C4's own validation split.
- local files (.txt: one document per paragraph, .jsonl/.json: one JSON object per line with a "text" field,
  .parquet: a "text" column); every ``val_every``-th document is held out for validation.
- ``embedded``: the Python help topics (``pydoc_data.topics``) that ship with every CPython, one document per
  topic: 79 topics, 464,970 characters of English prose and code examples (CPython 3.11.7; the count varies
  a little between Python versions). Held out as above.

Documents are joined with EOS and cut into blocks of ``block_size + 1`` tokens (inputs and shifted targets);
consecutive blocks share one token so that every token is a target exactly once. The position of the next
block is ``(epoch, document, token offset in that document)``: resuming re-reads the stream from that document
(``IterableDataset.skip``, no tokenization of the skipped documents) and reproduces the same blocks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

C4 = "c4"
EMBEDDED = "embedded"
EOS = "<|endoftext|>"
SUFFIXES = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
Position = tuple[int, int, int]  # (epoch, document index in the epoch, token offset in that document)


class DataError(Exception):
    """A bad input: the message is one line naming the file (and line); nothing has been written yet."""


# ----------------------------------------------------------------------------------------------- sources
def embedded_documents() -> list[str]:
    """The embedded corpus: Python's help topics, one document per topic, in a fixed (sorted) order."""
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


def check_data(data: list[str], val_every: int) -> None:
    """Validate local files before anything is written: raise DataError naming the file (and line)."""
    if data == [EMBEDDED]:
        return
    if data == [C4]:  # fail now, in one line, rather than with a traceback from the data loader
        try:
            next(iter(documents(data, "validation", val_every)))
        except Exception as e:  # network, hub and dataset errors all mean "cannot stream"
            raise DataError(f"allenai/c4: cannot stream it from the hub ({str(e).splitlines()[0]})") from None
        return
    n_docs = 0
    for name in data:
        path = Path(name)
        if not path.exists():
            raise DataError(f"{name}: no such file")
        if path.is_dir() or path.suffix not in SUFFIXES:
            raise DataError(f"{name}: unsupported data file (expected .txt, .jsonl, .json or .parquet)")
        if path.stat().st_size == 0:
            raise DataError(f"{name}: file is empty")
        n_docs += _check_parquet(path) if path.suffix == ".parquet" else _check_text(path)
    if n_docs < 2:
        # One document cannot be split into training and validation documents.
        raise DataError(f"{data[0]}: {n_docs} document(s) in the data; need at least 2 (train + validation)")


def _check_text(path: Path) -> int:
    """Check UTF-8 line by line (to name the line) and, for JSON lines, the "text" field; count documents."""
    n_docs, in_paragraph = 0, False
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start})") from None
            if path.suffix == ".txt":  # paragraphs are separated by blank lines, as `datasets` splits them
                n_docs += bool(line.strip()) and not in_paragraph
                in_paragraph = bool(line.strip())
                continue
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise DataError(f'{path}:{lineno}: JSON line without a "text" string field')
            n_docs += 1
    if n_docs == 0:
        raise DataError(f"{path}: contains no text")
    return n_docs


def _check_parquet(path: Path) -> int:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=None)
    except Exception as e:  # pyarrow raises several types for a corrupt file
        raise DataError(f"{path}: not a readable parquet file ({str(e).splitlines()[0]})") from None
    if "text" not in table.column_names:
        raise DataError(f'{path}: no "text" column (columns: {", ".join(table.column_names)})')
    column = table.column("text")
    if str(column.type) not in ("string", "large_string"):
        raise DataError(f'{path}: "text" column has type {column.type}, expected string')
    if column.null_count:
        row = column.to_pylist().index(None)
        raise DataError(f'{path}: row {row}: "text" is null')
    if table.num_rows == 0:
        raise DataError(f"{path}: contains no rows")
    return table.num_rows


def documents(data: list[str], split: str, val_every: int):
    """The documents of one split as a `datasets` streaming IterableDataset of {"text": str}."""
    from datasets import Dataset, concatenate_datasets, load_dataset

    if data == [C4]:
        return load_dataset("allenai/c4", "en", split=split, streaming=True).select_columns(["text"])
    if data == [EMBEDDED]:
        ds = Dataset.from_dict({"text": embedded_documents()}).to_iterable_dataset()
    else:
        parts = []
        for name in data:
            builder = SUFFIXES[Path(name).suffix]
            kwargs = {"sample_by": "paragraph"} if builder == "text" else {}
            part = load_dataset(builder, data_files=[name], split="train", streaming=True, **kwargs)
            part = part.select_columns(["text"])
            if builder == "text":  # a paragraph is the text between blank lines, edges and extra blanks aside
                part = part.map(lambda ex: {"text": ex["text"].strip()}).filter(lambda ex: bool(ex["text"]))
            parts.append(part)
        ds = parts[0] if len(parts) == 1 else concatenate_datasets(parts)
    # Local data has no validation split: hold out every `val_every`-th document, deterministically.
    held_out = split == "validation"
    return ds.filter(lambda _, i: (i % val_every == 0) == held_out, with_indices=True)


# --------------------------------------------------------------------------------------------- tokenizer
def load_tokenizer(name: str | None, data: list[str], val_every: int, vocab_size: int, max_docs: int,
                   model_config: str) -> tuple[PreTrainedTokenizerBase, str]:
    """A hub name or local folder; if it is None or cannot be loaded (offline), a byte-level BPE trained on
    the first `max_docs` training documents with `vocab_size` tokens. Returns it and how the model card names
    it. Raises DataError if it does not fit the model."""
    tokenizer = None
    if name is not None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as e:
            if Path(name).exists():  # a local folder that is not a tokenizer is a mistake, not "offline"
                raise DataError(f"{name}: not a tokenizer folder ({str(e).splitlines()[0]})") from None
            print(f"train.py: tokenizer {name!r} is not available (offline?); training a byte-level BPE")
    if tokenizer is None:
        name = "byte-level BPE trained on the training data"
        texts = (ex["text"] for ex in documents(data, "train", val_every).take(max_docs))
        tokenizer = train_bpe(texts, vocab_size)
    if len(tokenizer) > vocab_size:
        raise DataError(f"{name}: tokenizer vocabulary of {len(tokenizer)} tokens exceeds the model's "
                        f"vocab_size {vocab_size} ({model_config}/config.json)")
    if tokenizer.eos_token_id is None:
        raise DataError(f"{name}: tokenizer has no EOS token to separate documents")
    return tokenizer, name


def train_bpe(texts: Iterator[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE as GPT-2's (every byte is a token, so no text is unknown), EOS is id 0."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=EOS)


# ------------------------------------------------------------------------------------------------ blocks
def batched(items: Iterable, n: int) -> Iterator[list]:
    """itertools.batched, which needs Python 3.12."""
    it = iter(items)
    while chunk := list(islice(it, n)):
        yield chunk


class PackedBlocks(torch.utils.data.IterableDataset):
    """Endless stream of {"input_ids": LongTensor[block_size + 1], "pos": LongTensor[3]}, where "pos" is the
    Position of the block that follows. Finite sources repeat (epochs) in the same order."""

    def __init__(self, data: list[str], split: str, val_every: int, tokenizer: PreTrainedTokenizerBase,
                 block_size: int, start: Position = (0, 0, 0), repeat: bool = True):
        super().__init__()
        self.data, self.split, self.val_every, self.tokenizer = data, split, val_every, tokenizer
        self.block_size, self.start, self.repeat = block_size, tuple(start), repeat

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        epoch, doc, offset = self.start
        buf: list[int] = []
        while True:
            stream = documents(self.data, self.split, self.val_every).skip(doc)
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


def validation_blocks(data: list[str], val_every: int, tokenizer: PreTrainedTokenizerBase, block_size: int,
                      n_blocks: int) -> torch.Tensor:
    """The first `n_blocks` validation blocks, fixed for the whole run: [n, block_size + 1]."""
    stream = PackedBlocks(data, "validation", val_every, tokenizer, block_size, repeat=False)
    blocks = [b["input_ids"] for _, b in zip(range(n_blocks), stream, strict=False)]
    if not blocks:
        raise DataError(f"{data[0]}: the validation split has fewer than block_size + 1 = {block_size + 1} "
                        "tokens; lower val_every or block_size, or add data")
    return torch.stack(blocks)


def parse_data(value: str | list[str]) -> list[str]:
    """The `data` setting: "c4", "embedded", or local paths (a list, or one string)."""
    data = [value] if isinstance(value, str) else list(value)
    if len(data) > 1 and any(d in (C4, EMBEDDED) for d in data):
        raise DataError(f"data: {C4!r} and {EMBEDDED!r} cannot be mixed with other sources")
    return data


def short_name(data: list[str]) -> str:
    """How the model card and logs name the data."""
    if data == [C4]:
        return "C4 (allenai/c4, en), streamed"
    if data == [EMBEDDED]:
        return "embedded corpus: CPython's pydoc_data.topics (Python help topics)"
    return ", ".join(data)

