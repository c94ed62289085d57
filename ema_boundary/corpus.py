"""The corpus layer of the project: documents -> tokens -> packed blocks, with an exact, resumable position.

Training (train.py) and evaluation (the report's n-gram references, the probes' text, the task data) read
their documents, splits and blocks from here, so that a document means the same thing everywhere.

Every source is a `datasets` streaming IterableDataset of {"text": ...} documents, so C4 on the hub, local
files and the embedded corpus all go through the same code:

- ``c4``: ``load_dataset("allenai/c4", "en", streaming=True)``; validation is C4's own validation split.
- local files (.txt, .jsonl/.json: one JSON object per line with a "text" field, .parquet: a "text" column),
  cut into documents by `file_documents`, the one definition that `check_data` and the reader share:

  1. a .txt file is read as UTF-8 (a byte-order mark is dropped, lines end in LF or CRLF) and split into
     paragraphs at lines that are empty or hold only whitespace; a JSON line or a parquet row is one text;
  2. a text longer than MAX_DOC_CHARS characters is cut into pieces of at most that many: each piece takes as
     many whole lines as fit, and a longer line is cut after its last whitespace that fits (or, with none,
     after MAX_DOC_CHARS characters);
  3. a file that is still one document is cut in two at the whitespace nearest its middle, so that it gives
     both a training and a validation document.

  Documents are stripped of surrounding whitespace, and empty ones dropped. Every ``val_every``-th document
  (0, val_every, 2 val_every, ...) is held out for validation, so with two or more documents both splits have
  one. With ``test_every`` = m > 0, every m-th of the other documents (the first of them, then every m-th) is
  held out for testing too (`split_of`): rates and checkpoints are chosen on validation blocks and scored on
  test blocks from other documents. ``test_every`` = 0 (the default) holds out no test documents, so the
  training split is what it always was. A run may read a nested subset of its training documents
  (``train_fraction``, :func:`train_documents`); validation and test stay the same.
- ``embedded``: English prose that ships with every CPython, read offline (see `embedded_documents`):
  ``embedded:pydoc``, Python's help topics, then ``embedded:stdlib``, the docstrings and comments of the
  standard library's modules. Held out as above.

Documents are joined with EOS and cut into blocks of ``block_size + 1`` tokens (inputs and shifted targets);
consecutive blocks share one token so that every token is a target exactly once. Training reads them shuffled
(:func:`ema_boundary.packing.training_blocks`: the blocks live in :mod:`ema_boundary.packing`), as language models
are trained:

- local and embedded data (:class:`~ema_boundary.packing.ShuffledBlocks`): the training split is tokenized once,
  cut into blocks, and each epoch reads every block once in the order of a permutation drawn from ``(seed, epoch)``.
  A block may span a document boundary (the EOS between them keeps the documents apart), as in GPT-2's and
  nanoGPT's training data. The position of the next block is ``(epoch, blocks read in the epoch, 0)``.
- streamed C4: the documents pass through a shuffle buffer (``IterableDataset.shuffle`` with a generator seeded
  by ``(seed, epoch)``, which also shuffles the order of C4's files) and are then packed as below.

Unshuffled (``shuffle: false``, and the validation and test blocks), :class:`~ema_boundary.packing.PackedBlocks`
reads the documents in order; the position of the next block is ``(epoch, document, token offset in that
document)``. Either way the order is a function of the seed, the epoch and the position: a resumed stream
reproduces the same blocks.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import itertools
import json
import os
import re
import sys
import sysconfig
import tokenize
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from pydoc_data.topics import topics

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from ema_boundary.io import write_text
from ema_boundary.usage import first_line

SPLITS = ("train", "validation", "test")
# With val_every 10, every 3rd of the other documents is a test document: of the embedded corpus's 444 documents
# (Python 3.11), 133 with 271k tokens of the report's 1,024-token BPE (>= 100 documents and >= 50k tokens). Every
# 4th would give exactly 100, too close to the bar for a corpus that follows the Python version.
DEFAULT_TEST_EVERY = 3
C4 = "c4"
EMBEDDED = "embedded"  # all of the embedded corpus: the two parts below, help topics first
EMBEDDED_PYDOC = "embedded:pydoc"
EMBEDDED_STDLIB = "embedded:stdlib"
EMBEDDED_SOURCES = (EMBEDDED, EMBEDDED_PYDOC, EMBEDDED_STDLIB)
EOS = "<|endoftext|>"
SUFFIXES = (".txt", ".jsonl", ".json", ".parquet")
# A document this short (a heading, a one-line speech) may repeat in a text as it comes: an exact copy of it in
# training and held out is kept out of the held-out splits, not refused as a leak (WikiText-2's longest repeated
# heading has 36 characters; TinyShakespeare repeats short speeches).
SHORT_DOC_CHARS = 200
# About 5,000 GPT-2 tokens of English: rarely cuts a real paragraph (the longest of WikiText-2 valid has 9,397
# characters), and a book without blank lines becomes many documents rather than one.
MAX_DOC_CHARS = 20_000
Position = tuple[int, int, int]  # (epoch, document index in the epoch, token offset in that document)


class DataError(Exception):
    """A bad input: the message is one line naming the file (and line); nothing has been written yet."""


# ------------------------------------------------------------------------------------- local files
def file_documents(path: Path) -> Iterator[str]:
    """The documents of one local file, in file order (rules 1-3 of the module docstring). Raises DataError
    naming the file (and line or row) on unreadable content."""
    path = Path(path)
    read = {".txt": _txt_paragraphs, ".parquet": _parquet_texts}.get(path.suffix, _json_texts)
    pieces = (piece.strip() for lines in read(path) for piece in _pack_lines(lines))
    docs = (piece for piece in pieces if piece)
    first, second = next(docs, None), next(docs, None)
    if second is None:  # the whole file is one document (or none)
        yield from _halves(first) if first else ()
        return
    yield first
    yield second
    yield from docs


def _text_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 file without their LF or CRLF, the byte-order mark dropped; a bad byte is
    reported with its line. A line is read whole: memory grows with the longest line, not the file."""
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataError(f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start})") from None
            yield (line.removeprefix("\ufeff") if lineno == 1 else line).rstrip("\r\n")


def _txt_paragraphs(path: Path) -> Iterator[Iterable[str]]:
    """The paragraphs of a text file, each as a lazy iterator of its lines (a paragraph can be the whole
    file): runs of lines that hold a non-whitespace character."""
    for blank, lines in itertools.groupby(_text_lines(path), key=lambda line: not line.strip()):
        if not blank:
            yield lines


def _json_texts(path: Path) -> Iterator[list[str]]:
    for lineno, line in enumerate(_text_lines(path), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise DataError(f'{path}:{lineno}: JSON line without a "text" string field')
        yield obj["text"].replace("\r\n", "\n").split("\n")


def _parquet_texts(path: Path) -> Iterator[list[str]]:
    def unreadable(e: Exception) -> DataError:
        return DataError(f"{path}: not a readable parquet file ({first_line(e)})")

    try:
        file = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a corrupt file
        raise unreadable(e) from None
    schema = file.schema_arrow
    if "text" not in schema.names:
        raise DataError(f'{path}: no "text" column (columns: {", ".join(schema.names)})')
    kind = schema.field("text").type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise DataError(f'{path}: "text" column has type {kind}, expected string')
    if file.metadata.num_rows == 0:
        raise DataError(f"{path}: contains no rows")
    row = 0
    try:
        for batch in file.iter_batches(batch_size=256, columns=["text"]):  # a row group need not fit in memory
            for text in batch.column(0).to_pylist():
                if text is None:
                    raise DataError(f'{path}: row {row}: "text" is null')
                yield text.replace("\r\n", "\n").split("\n")
                row += 1
    except (pa.ArrowException, OSError) as e:
        raise unreadable(e) from None


_LAST_SPACE = re.compile(r".*\s", re.DOTALL)  # matches up to and including the last whitespace


def _pack_lines(lines: Iterable[str], max_chars: int = MAX_DOC_CHARS) -> Iterator[str]:
    """One text (its lines) as pieces of at most `max_chars` characters: as many whole lines as fit in each, and
    a longer line cut after its last whitespace that fits (or after `max_chars` characters if it has none)."""
    piece: list[str] = []
    size = -1  # the characters of "\n".join(piece)
    for line in lines:
        if piece and size + 1 + len(line) > max_chars:
            yield "\n".join(piece)
            piece, size = [], -1
        if len(line) <= max_chars:
            piece.append(line)
            size += 1 + len(line)
            continue
        start = 0  # a line longer than a document: indices, not slices of the rest, to stay linear
        while len(line) - start > max_chars:
            space = _LAST_SPACE.match(line, start + 1, start + max_chars + 1)
            end = space.end() if space else start + max_chars
            yield line[start:end]
            start = end
        yield line[start:]
    yield "\n".join(piece)


def _halves(text: str) -> list[str]:
    """A file that is one document, cut at the whitespace nearest its middle: validation gets the first half.
    A text without whitespace (one word) stays whole."""
    spaces = [m.start() for m in re.finditer(r"\s", text)]
    if not spaces:
        return [text]
    cut = min(spaces, key=lambda i: abs(2 * i - len(text)))
    return [text[:cut].strip(), text[cut:].strip()]


def _local_records(paths: list[str]) -> Iterator[dict[str, str]]:
    for path in paths:
        for text in file_documents(Path(path)):
            yield {"text": text}


# ---------------------------------------------------------------------------------- embedded corpus
# Parts of the standard library that are not prose (encodings' codec tables), that hold test code, or that
# distributions ship as separate packages (Debian: idle, python3-tk, python3-lib2to3, python3-venv, ...).
STDLIB_SKIP = {"test", "tests", "idlelib", "turtledemo", "tkinter", "lib2to3", "distutils", "ensurepip",
               "encodings", "pydoc_data", "site-packages", "dist-packages", "__pycache__"}
PROSE_MIN_CHARS = 40  # shorter docstrings and comments are mostly "Return self." or a variable's unit
PROSE_MIN_LETTERS = 0.6  # of the non-space characters: drops tables, ASCII art and doctests without prose


def embedded_documents(name: str = EMBEDDED) -> list[str]:
    """The embedded corpus, read offline from this Python installation, in a fixed order:

    - ``embedded:pydoc``: Python's help topics (``pydoc_data.topics``), one document per topic, by topic;
    - ``embedded:stdlib``: the standard library's prose, one document per module, by path (`stdlib_prose`);
    - ``embedded``: both, the help topics first.
    """
    if name not in EMBEDDED_SOURCES:
        raise DataError(f"{name}: not an embedded corpus (choose one of {', '.join(EMBEDDED_SOURCES)})")
    docs: list[str] = []
    if name in (EMBEDDED, EMBEDDED_PYDOC):
        docs += [topics[k] for k in sorted(topics)]
    if name in (EMBEDDED, EMBEDDED_STDLIB):
        docs += stdlib_prose()
    return docs


@functools.cache
def stdlib_prose() -> tuple[str, ...]:
    """The docstrings and comments of the standard library's Python modules that read as prose, one document
    per module (in source order within it), modules sorted by path. Parsed with `ast` and `tokenize`, nothing
    imported; that takes seconds, so the result is also kept in a file under the `datasets` cache, named by
    the Python version, the sizes and times of the source files and the text of this file (the extraction)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, dirs, names in os.walk(root):
        # config-3.X-<platform>/ holds the build's Makefile and scripts
        dirs[:] = [d for d in dirs if d not in STDLIB_SKIP and not d.startswith("config-")]
        files += [Path(folder, n) for n in names if n.endswith(".py") and not n.startswith("test_")]
    files.sort(key=lambda f: f.relative_to(root).as_posix())
    stamp = [(f.relative_to(root).as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    key = json.dumps([Path(__file__).read_text(encoding="utf-8"), sys.version, str(root), stamp])
    version = ".".join(map(str, sys.version_info[:3]))
    cache = _cache_dir() / f"stdlib-prose-{version}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    try:
        return tuple(json.loads(cache.read_text(encoding="utf-8")))
    except (OSError, ValueError):  # not built yet, or unreadable: build it
        pass
    docs = tuple(doc for f in files if (doc := module_prose(f.read_bytes())))
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_text(cache, json.dumps(docs))  # atomic: a concurrent reader sees the whole file or none
    except OSError:  # a read-only cache only costs the rebuild next time
        pass
    return docs


def _cache_dir() -> Path:
    return Path(datasets.config.HF_DATASETS_CACHE) / "ema_boundary"


def module_prose(source: bytes) -> str:
    """One module's docstrings (module, classes, functions) and comment blocks (whole-line comments on
    consecutive lines; a comment after code stands alone), in source order, those that read as prose,
    separated by blank lines."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an old escape sequence's SyntaxWarning is not ours to report
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):  # not this Python's syntax: nothing to read
            return ""
    texts = [(node.body[0].lineno, doc) for node in ast.walk(tree)
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
             and (doc := ast.get_docstring(node))]
    try:
        tokens = list(tokenize.tokenize(io.BytesIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        tokens = []
    blocks: list[tuple[int, list[str]]] = []  # (first line, comment texts)
    last = -2  # the line of the last whole-line comment
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        line, text = tok.start[0], tok.string.lstrip("#").strip()
        whole_line = tok.line.lstrip().startswith("#")  # a comment after code speaks for that line alone
        if whole_line and line == last + 1:
            blocks[-1][1].append(text)
        else:
            blocks.append((line, [text]))
        last = line if whole_line else -2
    for line, comments in blocks:
        texts.append((line, "\n".join(c for c in comments if any(ch.isalpha() for ch in c))))  # not "# ----"
    return "\n\n".join(text for _, text in sorted(texts) if _reads_as_prose(text))


def _reads_as_prose(text: str) -> bool:
    chars = [c for c in text if not c.isspace()]
    return len(text) >= PROSE_MIN_CHARS and sum(c.isalpha() for c in chars) >= PROSE_MIN_LETTERS * len(chars)


# ------------------------------------------------------------------------------------------- splits
def split_of(index: int, val_every: int, test_every: int = 0) -> str:
    """The split of local or embedded document ``index``: "validation" every ``val_every``-th document from the
    first; of the others, "test" every ``test_every``-th from the first (none when ``test_every`` is 0);
    "train" the rest."""
    if index % val_every == 0:
        return "validation"
    others_before = index - index // val_every - 1  # documents before this one that are not validation
    return "test" if test_every and others_before % test_every == 0 else "train"


def split_sizes(n_docs: int, val_every: int, test_every: int = 0) -> dict[str, int]:
    """How many of ``n_docs`` local or embedded documents each split holds."""
    sizes = dict.fromkeys(SPLITS, 0)
    for i in range(n_docs):
        sizes[split_of(i, val_every, test_every)] += 1
    return sizes


def train_documents(data: list[str], val_every: int, test_every: int = 0, train_fraction: float = 1.0):
    """The training split's documents a run reads (:func:`documents`), or with ``train_fraction`` < 1 a nested
    subset of whole documents: taken in the order of the SHA-256 of their text (ties by position) until their
    characters reach ``train_fraction`` of the split's. That order depends on the texts alone (not the seed, not the
    tokenizer), so a smaller fraction's documents lie inside every larger one's (1/8 ⊂ 1/4 ⊂ 1/2 ⊂ all), and it
    draws from the whole split (a prefix in corpus order would be the embedded corpus's help topics alone).
    The subset is read in corpus order; validation and test are untouched (they come from other documents).
    Streamed C4 has no fixed training split to take a fraction of: refused, one line."""
    if train_fraction == 1:
        return documents(data, "train", val_every, test_every)
    if not 0 < train_fraction < 1:
        raise DataError(f"train_fraction must be a number in (0, 1], got {train_fraction!r}")
    if data == [C4]:
        raise DataError(f"train_fraction {train_fraction:g}: streamed C4 has no fixed training split to take a "
                        "fraction of; use local or embedded data, or train_fraction 1")
    docs = documents(data, "train", val_every, test_every)
    texts = [ex["text"] for ex in docs]
    order = sorted(range(len(texts)), key=lambda i: (_digest(texts[i]), i))
    target, read, keep = train_fraction * sum(map(len, texts)), 0, set()
    for i in order:
        if read >= target:
            break
        keep.add(i)
        read += len(texts[i])
    return docs.filter(lambda _, i: i in keep, with_indices=True)  # indices count the training split's documents


def check_split(split: str, test_every: int) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if isinstance(test_every, bool) or not isinstance(test_every, int) or test_every < 0:
        raise DataError(f"test_every must be a non-negative integer, got {test_every!r}")
    if split == "test" and not test_every:
        raise DataError(f"test_every: 0 holds out no test documents; set it (e.g. {DEFAULT_TEST_EVERY}) to read "
                        "the test split")


# ------------------------------------------------------------------------------------------ sources
def check_data(data: list[str], val_every: int, test_every: int = 0) -> int:
    """Validate the data before anything is written: raise DataError naming the file (and line). Returns the
    number of documents of local or embedded data (0 for C4, which is not counted)."""
    check_split("train", test_every)
    if data[0] in EMBEDDED_SOURCES:
        n_docs = len(embedded_documents(data[0]))
        if n_docs < 2:  # e.g. an installation that ships the standard library compiled only (.pyc)
            raise DataError(f"{data[0]}: {n_docs} document(s) in this Python installation; need at least 2")
        _check_split_sizes(data[0], n_docs, val_every, test_every)
        return n_docs
    if data == [C4]:  # fail now, in one line, rather than with a traceback from the data loader
        try:
            next(iter(documents(data, "validation", val_every)))
        except Exception as e:  # network, hub and dataset errors all mean "cannot stream"
            raise DataError(f"allenai/c4: cannot stream it from the hub ({first_line(e)})") from None
        return 0
    n_docs = 0
    for name in data:
        path = Path(name)
        if not path.exists():
            raise DataError(f"{name}: no such file")
        if path.is_dir() or path.suffix not in SUFFIXES:
            raise DataError(f"{name}: unsupported data file (expected .txt, .jsonl, .json or .parquet)")
        if path.stat().st_size == 0:
            raise DataError(f"{name}: file is empty")
        n = sum(1 for _ in file_documents(path))  # the reader itself, to the end: its errors name the line
        if n == 0:
            raise DataError(f"{name}: contains no text")
        n_docs += n
    if n_docs < 2:  # one word: nothing to cut into a training and a validation document
        raise DataError(f"{data[0]}: {n_docs} document(s) in the data; need at least 2 (train + validation)")
    _check_split_sizes(data[0], n_docs, val_every, test_every)
    return n_docs


def _check_split_sizes(name: str, n_docs: int, val_every: int, test_every: int) -> None:
    if test_every and {split_of(i, val_every, test_every) for i in range(n_docs)} != set(SPLITS):
        raise DataError(f"{name}: {n_docs} document(s) do not give a train, a validation and a test document with "
                        f"val_every {val_every} and test_every {test_every}; add data")


def documents(data: list[str], split: str, val_every: int, test_every: int = 0):
    """The documents of one split as a `datasets` streaming IterableDataset of {"text": str}.

    C4 has its own validation split; with ``test_every`` > 0 its even documents are the validation split and
    its odd ones the test split. Local and embedded data are split by index (`split_of`)."""
    check_split(split, test_every)
    if data == [C4]:
        if split == "train" or not test_every:
            return datasets.load_dataset("allenai/c4", "en", split=split, streaming=True).select_columns(["text"])
        held_out = datasets.load_dataset("allenai/c4", "en", split="validation", streaming=True)
        held_out = held_out.select_columns(["text"])
        return held_out.filter(lambda _, i: i % 2 == (split == "test"), with_indices=True)
    if data[0] in EMBEDDED_SOURCES:
        ds = datasets.Dataset.from_dict({"text": embedded_documents(data[0])}).to_iterable_dataset()
    else:  # the list of files is the shards, as `datasets` shards file lists
        ds = datasets.IterableDataset.from_generator(
            _local_records, features=datasets.Features({"text": datasets.Value("string")}),
                                            gen_kwargs={"paths": list(data)})
    # Local and embedded data have no validation or test split: held out by index, from the first document.
    if not test_every:  # the two-way split, as every run before the test split read it
        held_out = split == "validation"
        ds = ds.filter(lambda _, i: (i % val_every == 0) == held_out, with_indices=True)
    else:
        ds = ds.filter(lambda _, i: split_of(i, val_every, test_every) == split, with_indices=True)
    if data[0] not in EMBEDDED_SOURCES:  # local files: text shared across the splits (see shared_documents)
        digests = _split_digests(tuple(data), val_every, test_every, _stamp(data))
        if split == "train" and digests.leaked:  # never train on a held-out document's text
            ds = ds.filter(lambda ex: _digest(ex["text"]) not in digests.held)
        elif split != "train" and digests.repeated:  # never score a heading the model trained on
            ds = ds.filter(lambda ex: _digest(ex["text"]) not in digests.repeated)
    return ds


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stamp(data: list[str]) -> tuple:
    """What the cached reading of local files depends on: their paths, sizes and times."""
    return tuple((d, *((st := os.stat(d)).st_size, st.st_mtime_ns)) for d in data)


@dataclass(frozen=True)
class SplitDigests:
    """The local files' documents by text: what is shared between training and the held-out splits."""

    rows: list[tuple[int, str, str, str, int]]  # (index, file, digest, split, characters) of every document
    repeated: frozenset[str]  # short texts (<= SHORT_DOC_CHARS) in training and held out: kept out of the held-out
    held: frozenset[str]  # the texts of the held-out documents that stay held out
    leaked: int  # training documents with the text of one of them (substantial: a file given twice, a copy)


@functools.lru_cache(maxsize=8)
def _split_digests(data: tuple[str, ...], val_every: int, test_every: int, stamp: tuple) -> SplitDigests:
    """The local files' documents as :class:`SplitDigests` (``stamp``: the files' sizes and times, for the cache)."""
    rows = []
    index = 0
    for path in data:
        for text in file_documents(Path(path)):
            rows.append((index, path, _digest(text), split_of(index, val_every, test_every), len(text)))
            index += 1
    trained = {digest for _, _, digest, split, _ in rows if split == "train"}
    held_out = {digest for _, _, digest, split, _ in rows if split != "train"}
    repeated = {digest for _, _, digest, _, size in rows if size <= SHORT_DOC_CHARS and digest in trained & held_out}
    held = held_out - repeated
    leaked = sum(1 for _, _, digest, split, _ in rows if split == "train" and digest in held)
    return SplitDigests(rows, frozenset(repeated), frozenset(held), leaked)


def shared_documents(data: list[str], val_every: int, test_every: int = 0) -> tuple[int, str | None]:
    """How many training documents of local files have the text of a validation or test document that is more than
    a short line (a file passed twice, a paragraph copied: a leak), and the first of them ("FILE: document N, also
    document M (validation)"). Training never reads them (:func:`documents` drops them from the training split);
    train.py refuses such data unless told to drop them. Short repeats (:func:`repeated_documents`) are not counted
    here: they leave the held-out splits instead. C4 and the embedded corpus: (0, None), not checked."""
    if data == [C4] or data[0] in EMBEDDED_SOURCES:
        return 0, None
    digests = _split_digests(tuple(data), val_every, test_every, _stamp(data))
    if not digests.leaked:
        return 0, None
    first_held = {}
    for index, _, digest, split, _ in digests.rows:
        if split != "train":
            first_held.setdefault(digest, (index, split))
    index, path, (other, split) = next((index, path, first_held[digest]) for index, path, digest, split, _
                                       in digests.rows if split == "train" and digest in digests.held)
    return digests.leaked, f"{path}: document {index}, also document {other} ({split})"


def repeated_documents(data: list[str], val_every: int, test_every: int = 0) -> tuple[int, int, str | None]:
    """Short documents (at most SHORT_DOC_CHARS characters: a heading such as WikiText's ``= = History = =``, a
    one-line speech) whose exact text is both in training and held out: ``(held-out documents left out of
    validation and test, training documents of those texts, the first such text)``. :func:`documents` reads the
    held-out splits without them, so that no score counts a line the model trained on; training keeps them. C4 and
    the embedded corpus: (0, 0, None), not checked."""
    if data == [C4] or data[0] in EMBEDDED_SOURCES:
        return 0, 0, None
    digests = _split_digests(tuple(data), val_every, test_every, _stamp(data))
    if not digests.repeated:
        return 0, 0, None
    rows = [row for row in digests.rows if row[2] in digests.repeated]
    held_out = sum(1 for row in rows if row[3] != "train")
    first = next(row for row in rows if row[3] != "train")
    return held_out, len(rows) - held_out, _document_text(first[1], first[0], digests.rows)


def _document_text(path: str, index: int, rows: list) -> str:
    """The text of document ``index`` (counted over every file), read again from ``path``."""
    offset = next(i for i, file, *_ in rows if file == path)
    return next(itertools.islice(file_documents(Path(path)), index - offset, None))


# --------------------------------------------------------------------------------------------- tokenizer
def load_tokenizer(name: str | None, data: list[str], val_every: int, vocab_size: int, max_docs: int,
                   model_config: str, test_every: int = 0) -> tuple[PreTrainedTokenizerBase, str]:
    """A hub name or local folder; if it is None or cannot be loaded (offline), a byte-level BPE trained on
    the first `max_docs` training documents with `vocab_size` tokens. Returns it and how the model card names
    it. Raises DataError if it does not fit the model."""
    tokenizer = None
    if name is not None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as e:
            if Path(name).exists():  # a local folder that is not a tokenizer is a mistake, not "offline"
                raise DataError(f"{name}: not a tokenizer folder ({first_line(e)})") from None
            print(f"train.py: tokenizer {name!r} is not available (offline?); training a byte-level BPE")
    if tokenizer is None:
        name = "byte-level BPE trained on the training data"
        texts = (ex["text"] for ex in documents(data, "train", val_every, test_every).take(max_docs))
        tokenizer = train_bpe(texts, vocab_size)
    if len(tokenizer) > vocab_size:
        raise DataError(f"{name}: tokenizer vocabulary of {len(tokenizer)} tokens exceeds the model's "
                        f"vocab_size {vocab_size} ({model_config}/config.json)")
    if tokenizer.eos_token_id is None:
        raise DataError(f"{name}: tokenizer has no EOS token to separate documents")
    return tokenizer, name


def train_bpe(texts: Iterator[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE as GPT-2's (every byte is a token, so no text is unknown), EOS is id 0."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=EOS)


def parse_data(value: str | list[str]) -> list[str]:
    """The `data` setting: "c4", "embedded" (or one of its parts), or local paths (a list, or one string)."""
    data = [value] if isinstance(value, str) else list(value)
    if not data:
        raise DataError("data: no source given")
    special = (C4, *EMBEDDED_SOURCES)
    if len(data) > 1 and any(d in special for d in data):
        raise DataError(f"data: {', '.join(map(repr, special))} cannot be mixed with other sources")
    if data[0].startswith(f"{EMBEDDED}:") and data[0] not in EMBEDDED_SOURCES:
        raise DataError(f"data: {data[0]!r} is not an embedded corpus (choose one of {', '.join(EMBEDDED_SOURCES)})")
    return data


def short_name(data: list[str]) -> str:
    """How the model card and logs name the data."""
    if data == [C4]:
        return "C4 (allenai/c4, en), streamed"
    if data[0] in EMBEDDED_SOURCES:
        parts = {EMBEDDED: "help topics (pydoc_data.topics), then its standard library's docstrings and comments",
                 EMBEDDED_PYDOC: "help topics (pydoc_data.topics)",
                 EMBEDDED_STDLIB: "standard library's docstrings and comments"}
        return f"{data[0]} corpus: Python {'.'.join(map(str, sys.version_info[:3]))}'s {parts[data[0]]}"
    return ", ".join(data)
