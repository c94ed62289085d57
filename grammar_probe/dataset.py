"""The grammar corpus as a Hugging Face ``DatasetDict``, its on-disk layouts and its loader.

Splits (all sentences unique; no sentence of a later split occurs in an earlier one, so every test
split is disjoint from ``train``):

- ``train``, ``validation``, ``test_within_a``: grammar A, clause depth <= ``max_depth``;
- ``test_transfer_b``: grammar B (same roles and words, other constructions and word order);
- ``test_deep``: grammar A with depth in (``max_depth``, ``deep_depth``]: deeper than any training sentence;
- ``test_novel_words``: grammar A with every open-class slot filled by a reserve (never trained) word.

``write_dataset`` stores the ``save_to_disk`` layout and, in the same folder, a hub layout
(``data/<split>.parquet`` plus a ``README.md`` card whose YAML header lists the files), so both
``datasets.load_from_disk(DIR)`` and ``datasets.load_dataset(DIR)`` read it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import datasets
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from ema_boundary.io import atomic_dir
from grammar_probe.card import dataset_card
from grammar_probe.grammar import RESERVE_LEXICON, ROLE_NAMES, Grammar, Sentence, grammar_a, grammar_b

__all__ = [
    "FEATURES",
    "SPLITS",
    "DatasetFormatError",
    "build_dataset",
    "load_grammar_dataset",
    "write_dataset",
]

SPLITS: tuple[str, ...] = (
    "train",
    "validation",
    "test_within_a",
    "test_transfer_b",
    "test_deep",
    "test_novel_words",
)
FEATURES = Features(
    {
        "tokens": Sequence(Value("string")),
        "roles": Sequence(ClassLabel(names=list(ROLE_NAMES))),
        "depth": Value("int32"),
        "grammar": Value("string"),
    }
)
BUILDER_VERSION = "1"


class DatasetFormatError(ValueError):
    """A dataset folder is missing, unreadable or does not have the grammar corpus features."""


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def build_dataset(
    seed: int = 0,
    train_size: int = 4000,
    validation_size: int = 500,
    test_size: int = 1000,
    max_depth: int = 2,
    deep_depth: int | None = None,
) -> DatasetDict:
    """Sample every split deterministically from ``seed``; see the module docstring for the splits."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    sizes = {
        "train": _positive("train_size", train_size),
        "validation": _positive("validation_size", validation_size),
    }
    for split in SPLITS[2:]:
        sizes[split] = _positive("test_size", test_size)
    _positive("max_depth", max_depth)
    deep_depth = max_depth + 2 if deep_depth is None else deep_depth
    if isinstance(deep_depth, bool) or not isinstance(deep_depth, int) or deep_depth <= max_depth:
        raise ValueError(f"deep_depth must be an integer > max_depth ({max_depth}), got {deep_depth!r}")

    a, b = grammar_a(max_depth), grammar_b(max_depth)
    deep = grammar_a(deep_depth)
    samplers: dict[str, tuple[Grammar, Callable[[random.Random], Sentence]]] = {
        "train": (a, lambda r: a.sample(r)),
        "validation": (a, lambda r: a.sample(r)),
        "test_within_a": (a, lambda r: a.sample(r)),
        "test_transfer_b": (b, lambda r: b.sample(r)),
        "test_deep": (deep, lambda r: deep.sample(r)),
        "test_novel_words": (a, lambda r: a.sample(r, lexicon=RESERVE_LEXICON)),
    }
    accept: dict[str, Callable[[Sentence], bool]] = {"test_deep": lambda s: s.depth > max_depth}

    config = dict(
        version=BUILDER_VERSION, seed=seed, sizes=sizes, max_depth=max_depth, deep_depth=deep_depth
    )
    seen: set[tuple[str, ...]] = set()
    splits = {}
    for split in SPLITS:
        grammar, draw = samplers[split]
        keep = accept.get(split, lambda s: True)
        rng = random.Random(f"grammar-probe/{seed}/{split}")  # str seeds are hashed stably (sha512)
        rows: list[Sentence] = []
        attempts, budget = 0, 200 * sizes[split] + 10_000
        while len(rows) < sizes[split]:
            attempts += 1
            if attempts > budget:
                raise ValueError(
                    f"{split}: the grammar yields too few distinct sentences for {sizes[split]} rows"
                )
            s = draw(rng)
            if s.tokens in seen or not keep(s):
                continue
            seen.add(s.tokens)
            rows.append(s)
        columns = {
            "tokens": [list(s.tokens) for s in rows],
            "roles": [[grammar.role_index[r] for r in s.roles] for s in rows],
            "depth": [s.depth for s in rows],
            "grammar": [grammar.name] * len(rows),
        }
        # A content fingerprint (not datasets' random one) makes equal builds byte-identical on disk.
        digest = hashlib.sha256(json.dumps([config, split, columns], sort_keys=True).encode())
        table = datasets.table.InMemoryTable.from_pydict(columns, schema=FEATURES.arrow_schema)
        info = datasets.DatasetInfo(features=FEATURES, config_name="default")
        splits[split] = Dataset(table, info=info, split=datasets.NamedSplit(split),
                                fingerprint=digest.hexdigest()[:16])
    return DatasetDict(splits)


def write_dataset(dataset: DatasetDict, out: str | os.PathLike, build_args: dict | None = None) -> Path:
    """Write ``save_to_disk`` output, ``data/<split>.parquet`` and the ``README.md`` card atomically."""
    out = Path(out)
    with atomic_dir(out) as tmp:
        dataset.save_to_disk(str(tmp))
        (tmp / "data").mkdir()
        for split, ds in dataset.items():
            ds.to_parquet(str(tmp / "data" / f"{split}.parquet"))
        (tmp / "README.md").write_text(dataset_card(dataset, build_args or {}), encoding="utf-8")
    return out


def load_grammar_dataset(path: str | os.PathLike | DatasetDict) -> DatasetDict:
    """Load a folder written by :func:`write_dataset` (or check a ``DatasetDict``) and verify its features."""
    if isinstance(path, DatasetDict):
        ds = path
        where = "dataset"
    else:
        where = str(path)
        if not Path(path).exists():
            raise DatasetFormatError(f"dataset folder {where} does not exist")
        if not Path(path).is_dir():
            raise DatasetFormatError(f"dataset folder {where} is a file, not a folder")
        try:
            ds = datasets.load_from_disk(where)
        except Exception as err:  # datasets raises several types for foreign folders
            raise DatasetFormatError(f"dataset folder {where} is not a saved DatasetDict ({err})") from None
        if not isinstance(ds, DatasetDict):
            raise DatasetFormatError(f"dataset folder {where} holds a single Dataset, not a DatasetDict")
    for split, part in ds.items():
        if part.features != FEATURES:
            raise DatasetFormatError(
                f"{where}: split {split} has features {sorted(part.features)} with types that differ from "
                "the grammar corpus (tokens, roles with the 20 role names, depth, grammar)"
            )
    return ds
