"""The grammar corpus as a Hugging Face ``DatasetDict``, its ceilings, its on-disk layouts and its loader.

Splits (all sentences unique; no sentence occurs in two splits, so every test split is disjoint from
``train``):

- ``train``, ``validation``, ``test_within_a``: grammar A, clause depth <= ``max_depth``;
- ``validation_novel_words``: grammar A with every open-class slot (nouns, verbs) filled by a
  *development* nonce word: for choices about unseen words; never the test's nonce words;
- ``test_transfer_b``: grammar B (same roles and words, other constituent order);
- ``test_deep``: grammar A with depth in (``max_depth``, ``deep_depth``]: deeper than any training
  sentence;
- ``test_novel_words``: grammar A with every open-class slot filled by a *test* nonce word;
- ``test_counterfactual``: grammar A with the word->role correlation of training reversed (in
  training 85% of subjects are persons and 85% of objects animals; here every subject is an animal
  and every object a person), so a word->role memoriser loses and a structure reader does not.

``write_dataset`` stores the ``save_to_disk`` layout and, in the same folder, a hub layout
(``data/<split>.parquet`` plus a ``README.md`` card whose YAML header lists the files), so both
``datasets.load_from_disk(DIR)`` and ``datasets.load_dataset(DIR)`` read it, and ``ceilings.json``
(:func:`compute_ceilings`): each role's decidability ceilings and derived kind.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import datasets
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from ema_boundary.io import atomic_dir, write_json
from grammar_probe import ceilings as ceil
from grammar_probe.card import dataset_card
from grammar_probe.grammar import (
    DEV_RESERVE_LEXICON,
    OPEN_CLASSES,
    RESERVE_LEXICON,
    ROLE_NAMES,
    Grammar,
    Sentence,
    grammar_a,
    grammar_b,
)

__all__ = [
    "FEATURES",
    "SPLITS",
    "TEST_SPLITS",
    "DatasetFormatError",
    "SplitSpec",
    "available_memory",
    "build_dataset",
    "build_memory",
    "compute_ceilings",
    "load_ceilings",
    "load_grammar_dataset",
    "split_specs",
    "write_dataset",
]

SPLITS: tuple[str, ...] = (
    "train",
    "validation",
    "validation_novel_words",
    "test_within_a",
    "test_transfer_b",
    "test_deep",
    "test_novel_words",
    "test_counterfactual",
)
TEST_SPLITS: tuple[str, ...] = tuple(s for s in SPLITS if s.startswith("test_"))
FEATURES = Features(
    {
        "tokens": Sequence(Value("string")),
        "roles": Sequence(ClassLabel(names=list(ROLE_NAMES))),
        "depth": Value("int32"),
        "grammar": Value("string"),
    }
)
BUILDER_VERSION = "2"
CEILINGS_FILE = "ceilings.json"
UNSEEN = frozenset(OPEN_CLASSES)


class DatasetFormatError(ValueError):
    """A dataset folder is missing, unreadable or does not have the grammar corpus features."""


@dataclass(frozen=True)
class SplitSpec:
    """How a split is generated, and what a reader sees of it (for its exact ceilings)."""

    grammar: Grammar
    label: str  # the ``grammar`` column
    lexicon: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # nonce-word overrides
    min_depth: int = 0  # keep only sentences at least this deep
    unseen: frozenset[str] = frozenset()  # word classes a model sees as <unk> in this split

    def draw(self, rng: random.Random) -> Sentence:
        return self.grammar.sample(rng, lexicon=self.lexicon)


def split_specs(max_depth: int = 2, deep_depth: int | None = None) -> dict[str, SplitSpec]:
    """The generator and reader protocol of every split."""
    deep_depth = max_depth + 1 if deep_depth is None else deep_depth
    a, b, deep = grammar_a(max_depth), grammar_b(max_depth), grammar_a(deep_depth)
    counterfactual = grammar_a(max_depth, agent_bias=0.0, name="A_counterfactual")
    return {
        "train": SplitSpec(a, "A"),
        "validation": SplitSpec(a, "A"),
        "validation_novel_words": SplitSpec(a, "A", DEV_RESERVE_LEXICON, unseen=UNSEEN),
        "test_within_a": SplitSpec(a, "A"),
        "test_transfer_b": SplitSpec(b, "B"),
        "test_deep": SplitSpec(deep, "A", min_depth=max_depth + 1),
        "test_novel_words": SplitSpec(a, "A", RESERVE_LEXICON, unseen=UNSEEN),
        "test_counterfactual": SplitSpec(counterfactual, "A_counterfactual"),
    }


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_depths(max_depth: object, deep_depth: object) -> int:
    _positive("max_depth", max_depth)
    deep = max_depth + 1 if deep_depth is None else deep_depth  # type: ignore[operator]
    if isinstance(deep, bool) or not isinstance(deep, int) or deep <= max_depth:  # type: ignore[operator]
        raise ValueError(f"deep_depth must be an integer > max_depth ({max_depth}), got {deep!r}")
    return deep


# Peak memory of `python -m grammar_probe build`, measured as peak RSS (/usr/bin/time -f %M) of two builds that
# differ by 40,000 sentences (--ceiling_sentences 100 --window_sentences 1000 unless varied):
#   --train-size 1000 vs 41000: 196 -> 426 MB at max_depth 2 (32.2 tokens a sentence: 183 bytes a token),
#   191 -> 482 MB at --max-depth 4 (37.8 tokens: 197 bytes a token): rows, the dedup set, columns, fingerprint, Arrow;
#   --window_sentences 1000 vs 41000: 196 -> 623 MB (340 bytes a token of the ceilings' fresh sample, held with it).
SPLIT_BYTES_PER_TOKEN = 200
WINDOW_BYTES_PER_TOKEN = 340
BUILD_BASE_BYTES = 200 * 2**20  # the interpreter, torch, datasets and a 1000-sentence build


def _mean_tokens(spec: SplitSpec, n: int = 64) -> float:
    """Tokens a sentence of ``spec`` has on average, from ``n`` draws (milliseconds; fixed seed)."""
    rng = random.Random("grammar-probe/memory-estimate")
    return sum(len(spec.draw(rng).tokens) for _ in range(n)) / n


def build_memory(train_size: int = 10000, validation_size: int = 1000, test_size: int = 1000, max_depth: int = 2,
                 deep_depth: int | None = None, ceiling_sentences: int = 3000,
                 window_sentences: int = 200_000) -> dict[str, int]:
    """Bytes a build (:func:`build_dataset`, :func:`compute_ceilings`, :func:`write_dataset`) needs at its peak,
    by the setting they grow with (``train_size``, ``validation_size``, ``test_size``, ``window_sentences``) and
    ``base``: the measured bytes per token above times each split's sentences and their mean length."""
    deep_depth = _check_depths(max_depth, deep_depth)
    specs = split_specs(max_depth, deep_depth)
    sizes = {"train_size": train_size, "validation_size": validation_size, "test_size": test_size}
    out = dict.fromkeys(sizes, 0)
    for split, spec in specs.items():
        key = "train_size" if split == "train" else "validation_size" if split.startswith("validation") else "test_size"
        out[key] += int(sizes[key] * _mean_tokens(spec) * SPLIT_BYTES_PER_TOKEN)
    fresh = max(ceiling_sentences, window_sentences)
    out["window_sentences"] = int(fresh * _mean_tokens(specs["train"]) * WINDOW_BYTES_PER_TOKEN)
    out["base"] = BUILD_BASE_BYTES
    return out


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup (a container's, a Slurm job's) may still allocate, or None without a limit."""
    v1 = "/sys/fs/cgroup/memory/memory."
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         (f"{v1}limit_in_bytes", f"{v1}usage_in_bytes")):
        try:
            cap, used = Path(limit).read_text().strip(), int(Path(usage).read_text())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and int(cap) < 2**60:  # "max" (v2) or a page-rounded 2^63 (v1): no limit
            return max(0, int(cap) - used)
    return None


def available_memory() -> int | None:
    """Bytes of memory a new allocation can get without swapping: psutil's ``available`` if installed, else
    MemAvailable of /proc/meminfo, else free physical pages; never more than the cgroup's room. None: unknown."""
    free: int | None = None
    try:
        import psutil  # optional: not a declared dependency (accelerate brings it); /proc/meminfo otherwise

        free = int(psutil.virtual_memory().available)
    except Exception:  # not installed, or no /proc: the kernel's own figure
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        if free is None:
            try:
                free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (ValueError, OSError, AttributeError):
                pass
    room = _cgroup_room()
    return room if free is None else free if room is None else min(free, room)


def build_dataset(
    seed: int = 0,
    train_size: int = 10000,
    validation_size: int = 1000,
    test_size: int = 1000,
    max_depth: int = 2,
    deep_depth: int | None = None,
) -> DatasetDict:
    """Sample every split deterministically from ``seed``; see the module docstring for the splits.

    ``validation_size`` applies to both validation splits, ``test_size`` to every test split.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    sizes = {"train": _positive("train_size", train_size)}
    for split in SPLITS[1:]:
        sizes[split] = (_positive("validation_size", validation_size) if split.startswith("validation")
                        else _positive("test_size", test_size))
    deep_depth = _check_depths(max_depth, deep_depth)
    specs = split_specs(max_depth, deep_depth)

    config = dict(version=BUILDER_VERSION, seed=seed, sizes=sizes, max_depth=max_depth, deep_depth=deep_depth)
    seen: set[tuple[str, ...]] = set()
    splits = {}
    for split in SPLITS:
        spec = specs[split]
        rng = random.Random(f"grammar-probe/{seed}/{split}")  # str seeds are hashed stably (sha512)
        rows: list[Sentence] = []
        attempts, budget = 0, 200 * sizes[split] + 10_000
        while len(rows) < sizes[split]:
            attempts += 1
            if attempts > budget:
                raise ValueError(f"{split}: the grammar yields too few distinct sentences for {sizes[split]} rows")
            s = spec.draw(rng)
            if s.tokens in seen or s.depth < spec.min_depth:
                continue
            seen.add(s.tokens)
            rows.append(s)
        columns = {
            "tokens": [list(s.tokens) for s in rows],
            "roles": [[spec.grammar.role_index[r] for r in s.roles] for s in rows],
            "depth": [s.depth for s in rows],
            "grammar": [spec.label] * len(rows),
        }
        # A content fingerprint (not datasets' random one) makes equal builds byte-identical on disk.
        digest = hashlib.sha256(json.dumps([config, split, columns], sort_keys=True).encode())
        table = datasets.table.InMemoryTable.from_pydict(columns, schema=FEATURES.arrow_schema)
        info = datasets.DatasetInfo(features=FEATURES, config_name="default")
        splits[split] = Dataset(table, info=info, split=datasets.NamedSplit(split),
                                fingerprint=digest.hexdigest()[:16])
    return DatasetDict(splits)


def _sentences(part: Dataset, grammar: Grammar) -> list[Sentence]:
    """Dataset rows back as sentences with word classes (a nonce word's class is its slot's class)."""
    names = part.features["roles"].feature.names
    reserve = {w: c for lex in (RESERVE_LEXICON, DEV_RESERVE_LEXICON) for c, ws in lex.items() for w in ws}
    out = []
    for toks, roles, depth in zip(part["tokens"], part["roles"], part["depth"], strict=True):
        classes = tuple(grammar.word_class.get(w) or reserve[w] for w in toks)
        out.append(Sentence(tuple(toks), tuple(names[r] for r in roles), classes, depth))
    return out


def compute_ceilings(
    dataset: DatasetDict,
    seed: int = 0,
    ceiling_sentences: int = 3000,
    window_sentences: int = 200_000,
    max_depth: int = 2,
    deep_depth: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Each role's ceilings and kind from a fresh grammar-A sample, and exact ceilings per split.

    The fresh sample (``ceiling_sentences`` for the exact posteriors, ``window_sentences`` for the
    window tables; drawn from grammar A as in training, independent of every split) gives the
    ``roles`` block: ``causal``, ``bidirectional``, ``causal_unseen`` (nouns and verbs as <unk>),
    ``window_k`` (k = 0..12, held out), ``window_k_se`` (its sampling error) and ``window_k_in_sample``,
    ``window_best`` (at ``best_k``), the identification values, the derived ``kind`` (window cap 12) and
    ``kind_by_cap`` (the kind at caps 6, 8 and 12). ``splits`` holds, for every evaluation split,
    the exact causal and bidirectional ceilings of its own sentences, read the way models read
    them (<unk> for nonce words), and for ``test_within_a`` also the window tagger's accuracy at every
    k = 0..12 (``window_k``; tables fitted on the whole fresh sample) and at ``best_k`` (``window_best``).
    """
    _positive("ceiling_sentences", ceiling_sentences)
    _positive("window_sentences", window_sentences)
    deep_depth = _check_depths(max_depth, deep_depth)
    specs = split_specs(max_depth, deep_depth)
    a = specs["train"].grammar
    say = progress or (lambda _msg: None)
    say(f"ceilings: sampling {window_sentences} fresh grammar-A sentences")
    rng = random.Random(f"grammar-probe/{seed}/ceilings")
    fresh = [a.sample(rng) for _ in range(max(ceiling_sentences, window_sentences))]
    say("ceilings: exact posteriors and window tables")
    within = _sentences(dataset["test_within_a"], a) if "test_within_a" in dataset else []
    roles, best_k, scored = ceil.estimate_ceilings(a, fresh[:ceiling_sentences], fresh[:window_sentences],
                                                   unseen=UNSEEN, score={"test_within_a": within})
    del fresh
    out: dict = {
        "config": {"seed": seed, "ceiling_sentences": ceiling_sentences, "window_sentences": window_sentences,
                   "max_depth": max_depth, "deep_depth": deep_depth, "unseen_classes": sorted(UNSEEN)},
        "thresholds": {"high": ceil.HIGH, "gap": ceil.GAP, "word_tol": ceil.WORD_TOL, "max_window": ceil.MAX_WINDOW,
                       "kind_caps": list(ceil.KIND_CAPS)},
        "best_k": best_k,
        "roles": {r: {**asdict(roles[r]), "kind": roles[r].kind, "kind_by_cap": roles[r].kinds_by_cap()}
                  for r in ROLE_NAMES if r in roles},
        "splits": {},
    }
    for split in SPLITS:
        if split in ("train", "validation") or split not in dataset:
            continue
        say(f"ceilings: {split}")
        spec = specs[split]
        sents = _sentences(dataset[split], spec.grammar)
        causal, bidir = ceil.exact_tallies(spec.grammar, sents, spec.unseen)
        (c_acc, _), (b_acc, _) = causal.mean(), bidir.mean()
        per_role = {r: {"tokens": int(causal.count[r]), "causal": c_acc[r], "bidirectional": b_acc[r]}
                    for r in ROLE_NAMES if r in causal.count}
        if split == "test_within_a":
            for r in per_role:
                per_role[r]["window_k"] = {k: scored["test_within_a"][k].get(r, 0.0) for k in scored["test_within_a"]}
                per_role[r]["window_best"] = per_role[r]["window_k"][best_k]
        out["splits"][split] = per_role
    return out


BUILD_TOOL = "grammar_probe build"  # the output-folder marker's tool name (ema_boundary.io)


def write_dataset(
    dataset: DatasetDict, out: str | os.PathLike, build_args: dict | None = None, ceilings: dict | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``save_to_disk`` output, ``data/<split>.parquet``, ``ceilings.json`` and the card atomically.

    ``out`` must be new, empty, or (with ``overwrite``) an earlier output of ``grammar_probe build``:
    a folder the user made is never replaced (:func:`ema_boundary.io.atomic_dir`)."""
    out = Path(out)
    with atomic_dir(out, tool=BUILD_TOOL, overwrite=overwrite) as tmp:
        dataset.save_to_disk(str(tmp))
        (tmp / "data").mkdir()
        for split, ds in dataset.items():
            ds.to_parquet(str(tmp / "data" / f"{split}.parquet"))
        if ceilings is not None:
            write_json(tmp / CEILINGS_FILE, ceilings)
        (tmp / "README.md").write_text(dataset_card(dataset, build_args or {}, ceilings), encoding="utf-8")
    return out


def load_ceilings(path: str | os.PathLike) -> dict:
    """``ceilings.json`` of a dataset folder written by ``python -m grammar_probe build``."""
    file = Path(path) / CEILINGS_FILE
    if not file.is_file():
        raise DatasetFormatError(f"{file} is missing: build the dataset with `python -m grammar_probe build`")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DatasetFormatError(f"{file} is not readable JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("roles"), dict) or set(data["roles"]) - set(ROLE_NAMES):
        raise DatasetFormatError(f"{file} does not hold ceilings of the 20 grammar roles")
    return data


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
