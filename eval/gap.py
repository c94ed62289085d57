"""Where the gap lives: two causal LMs' per-token loss on the same tokens, split by what the context offers.

Zoology (Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient Language Models") found that
most of the perplexity gap between attention and gated convolutions on the Pile falls on *associative-recall*
tokens: tokens that a model can predict by finding the previous token earlier in the context and copying what
followed it there. A model whose context is a fixed-decay summary (SPEN's EMA traces) should lose most there,
and little on tokens that no lookup can help with. This module measures that split for any two Hugging Face
causal LMs that share a tokenizer.

The text is cut into blocks exactly as train.py cuts it (documents joined with EOS, blocks of
``block_size + 1`` tokens sharing one token, every token after a block's first one is a target; the last,
shorter block is scored too). A block is one context: each target token ``x_t`` (``t >= 1`` in its block) is
in exactly one class (:func:`gap_classes`):

* **AR hit at distance d** (``ar_d`` for the log-spaced bin holding ``d``): the bigram ending at this token,
  ``(x_{t-1}, x_t)``, occurred earlier in the same block, ending at position ``s < t``; ``d = t - s`` for the
  most recent such ``s``. A model that can look up ``x_{t-1}`` in its context and copy its successor predicts
  these tokens; the distance says how far back it had to look.
* **other repeat** (``repeat``): ``x_t`` occurred earlier in the block, but never after ``x_{t-1}``.
* **first occurrence** (``first``): ``x_t`` did not occur earlier in the block.

Loss is also split by position in the block (the number of context tokens the model had, log-spaced bins).
Per class: the token count, each model's mean loss (nats), the difference B - A with a 95% interval and the
class's share of the whole gap (its tokens times its difference over all tokens times the mean difference).
The interval comes from a bootstrap over documents (each target token belongs to the document it is part of;
resampled documents keep all their tokens, so dependence within a document is respected) or, when several seed
folders are given per model (``--model_name_or_path A1,A2,A3 B1,B2,B3``), from the differences paired by seed
(t interval over seeds; documents then fixed). The paper's mechanism is the contrast ``ar_hit - first``: how much
larger B - A is on AR hits than on first occurrences, with its interval from the same resamples (or seeds).

    python -m eval.gap --model_name_or_path outputs/gpt2-f64/final outputs/spen-f64/final \\
        --labels gpt2 spen --text embedded --output_dir gap/      # b - a = SPEN minus GPT-2

writes ``gap/gap.json`` and ``gap/gap.png`` (and prints the tables). ``--window W`` adds the windowed
context-use control of :mod:`eval.context_use` (``context_use`` in gap.json): each model's cost of cutting a target's
context to its last W tokens, on AR hits beyond W against first occurrences, and the difference of the two.
A model is a checkpoint folder or a hub name; ``--config`` adds an *untrained* architecture (a config.json,
seeded by ``--seed``) as model B: what training buys per class.
Bad input (a missing folder, models whose vocabulary sizes differ, tokenizers that differ, no text, an output
folder that is a file) is one line naming it and exit status 2, before any scoring; nothing is written.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import modeling_spen  # noqa: F401  registers SPEN with the Auto classes
from ema_boundary import corpus, stats
from ema_boundary.figures import pyplot, save
from ema_boundary.io import atomic_dir, check_output_dir, write_json
from ema_boundary.usage import EXIT_USAGE, UsageError, UsageParser, first_line, non_negative_int, positive_int
from eval.context_use import cut_targets, model_losses, pair_from_losses, render_control
from eval.probes.models import ModelError, check_causal, load_causal_lm, resolve_config, resolve_model, split_name
from eval.recall import POSITION_FIELDS
from eval.token_classes import AR0, FIRST, MIN_DOCUMENTS, REPEAT, class_name, gap_classes, token_losses

PROG = "python -m eval.gap"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")
SPLITS = ("validation", "test", "train", "all")


class GapInputError(UsageError):
    """A model, text or flag eval.gap cannot use: one line naming it; nothing written."""


# ---------------------------------------------------------------------------------------------
# Bins (the token classes themselves: eval.token_classes)
# ---------------------------------------------------------------------------------------------


def log_bin(values: np.ndarray) -> np.ndarray:
    """floor(log2(v)) for v >= 1: bins 1, 2-3, 4-7, ..."""
    return np.floor(np.log2(values)).astype(np.int64)


def bin_name(k: int) -> str:
    lo = 2**k
    return str(lo) if lo == 1 else f"{lo}-{2 * lo - 1}"


# ---------------------------------------------------------------------------------------------
# Text -> scored tokens
# ---------------------------------------------------------------------------------------------


@dataclass
class Tokens:
    """The blocks to score and, per target token, its document, class and position (all flat, in order)."""

    blocks: list[torch.Tensor]  # each (L,) with L <= block_size + 1; targets are positions 1..L-1
    doc: np.ndarray
    cls: np.ndarray
    pos: np.ndarray
    documents: int


def read_documents(text: str, split: str = "validation", val_every: int = 10, test_every: int = 0,
                   root: Path | None = None) -> list[str]:
    """The documents of ``--text``: the embedded corpus (``embedded``, ``embedded:pydoc``, ``embedded:stdlib``)
    or a local .txt/.jsonl/.json/.parquet file cut as train.py cuts it (a relative path read under ``root``, default
    the working folder); then the split, held out as train.py holds out (:func:`ema_boundary.corpus.split_of`: every
    ``val_every``-th document, from the first, is validation; of the others every ``test_every``-th is test, when it
    is not 0)."""
    try:
        if text in corpus.EMBEDDED_SOURCES:
            docs = corpus.embedded_documents(text)
        else:
            path = (root or Path()) / Path(text).expanduser()
            if not path.exists():
                raise GapInputError(f"--text {text}: no such file (or give 'embedded')")
            if not path.is_file() or path.suffix not in corpus.SUFFIXES:
                raise GapInputError(f"--text {text}: not a {'/'.join(corpus.SUFFIXES)} file")
            docs = list(corpus.file_documents(path))
    except corpus.DataError as e:
        raise GapInputError(f"--text {e}") from None
    if not docs:
        raise GapInputError(f"--text {text}: contains no text")
    if split == "test" and not test_every:
        raise GapInputError("--split test: --test_every is 0, so no document is held out for testing")
    if split != "all":
        docs = [d for i, d in enumerate(docs) if corpus.split_of(i, val_every, test_every) == split]
        if not docs:
            raise GapInputError(f"--split {split}: no document of {text} is in it (val_every {val_every}, "
                                f"test_every {test_every})")
    return docs


def make_tokens(docs: Sequence[str], tokenizer: Any, block_size: int, max_tokens: int | None = None) -> Tokens:
    """Tokenize ``docs`` (EOS after each), pack them into train.py's blocks, classify every target."""
    stream: list[int] = []
    doc_of: list[int] = []
    for i, ids in enumerate(tokenizer(list(docs), add_special_tokens=False, verbose=False)["input_ids"]):
        ids = [*ids, tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else list(ids)
        stream += ids
        doc_of += [i] * len(ids)
        if max_tokens is not None and len(stream) > max_tokens:
            break
    if max_tokens is not None:
        stream, doc_of = stream[: max_tokens + 1], doc_of[: max_tokens + 1]
    if len(stream) < 2:
        raise GapInputError("--text: fewer than 2 tokens, nothing to score")
    blocks, docs_t, cls_t, pos_t = [], [], [], []
    for start in range(0, len(stream) - 1, block_size):  # consecutive blocks share one token
        block = stream[start : start + block_size + 1]
        blocks.append(torch.tensor(block))
        docs_t.append(doc_of[start + 1 : start + len(block)])
        cls_t.append(gap_classes(block)[1:])
        pos_t.append(np.arange(1, len(block)))
    return Tokens(blocks, np.concatenate(docs_t), np.concatenate(cls_t), np.concatenate(pos_t), len(set(doc_of)))


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


@dataclass
class Side:
    """One model of the comparison: one spec per seed (several seeds are paired by position)."""

    label: str
    specs: list[Any]  # eval.probes.models.ModelSpec
    seeds: list[int] = field(default_factory=list)  # init seeds of an untrained (--config) side
    root: Path | None = None  # the folder its relative paths were read under (None: the working folder)

    def describe(self) -> dict[str, Any]:
        first = self.specs[0]
        return {"label": self.label, "source": first.source,
                "locations": [_as_named(s.location, self.root) for s in self.specs],
                "model_type": first.model_type, "parameters": first.parameters,
                **({"init_seeds": self.seeds} if self.seeds else {})}


def resolve_side(entry: str, flag: str, trust_remote_code: bool = False, root: Path | None = None) -> Side:
    """``PATH_OR_NAME[,PATH_OR_NAME...]`` (one per seed) for ``--model_name_or_path``; a config for ``--config``.
    A relative path is read under ``root`` (default: the working folder)."""
    parts = [p for p in entry.split(",") if p]
    if not parts:
        raise GapInputError(f"{flag} {entry!r}: no model")
    resolve = resolve_config if flag == "--config" else resolve_model
    try:
        specs = [resolve(_under(root, p), trust_remote_code) for p in parts]
    except ModelError as e:
        raise GapInputError(f"{flag} {e}") from None
    types = {s.model_type for s in specs}
    if len(types) > 1:
        raise GapInputError(f"{flag} {entry}: the seeds of one model differ in model_type ({', '.join(sorted(types))})")
    return Side(specs[0].name, specs, root=root)


def _under(root: Path | None, entry: str) -> str:
    """``entry`` (``[NAME=]PATH`` or a hub name) with a relative PATH read under ``root``, where it exists there; a
    hub name, or a path found nowhere (then refused as given), stays as it is."""
    if root is None:
        return entry
    name, where = split_name(entry) if not (root / entry).exists() else (None, entry)
    path = root / Path(where).expanduser()
    if not path.exists():
        return entry
    return f"{name}={path}" if name else str(path)


def _as_named(location: str, root: Path | None) -> str:
    """A model's location as the command names it: relative to ``root`` where it was read under it (gap.json
    records the paths of the command that reproduces it)."""
    if root is None or not Path(location).is_relative_to(root):
        return location
    return str(Path(location).relative_to(root))


def context_length(config: Any) -> int | None:
    """The longest sequence ``config`` accepts, under whichever name it uses (None: no limit stated)."""
    for name in POSITION_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _tokenizer(spec: Any, trust_remote_code: bool) -> Any | None:
    if spec.source == "config" or (spec.source == "folder" and
                                   not any((Path(spec.location) / f).is_file() for f in TOKENIZER_FILES)):
        return None
    try:
        return AutoTokenizer.from_pretrained(spec.location, trust_remote_code=trust_remote_code)
    except Exception as e:
        raise GapInputError(f"--model_name_or_path {spec.location}: the tokenizer does not load "
                            f"({first_line(e)})") from None


def shared_tokenizer(sides: Sequence[Side], tokenizer: str | None, trust_remote_code: bool = False) -> Any:
    """The one tokenizer of the comparison: ``--tokenizer``, else the models' own, which must agree; checked
    against every model's vocabulary size (which must agree too)."""
    sizes = {f"{s.label} ({spec.location})": getattr(spec.config, "vocab_size", None)
             for s in sides for spec in s.specs}
    if len(set(sizes.values())) > 1:
        raise GapInputError("--model_name_or_path: vocabulary sizes differ ("
                            + ", ".join(f"{k}: {v}" for k, v in sizes.items()) + "); the models must share a tokenizer")
    if tokenizer is not None:
        try:
            tok = AutoTokenizer.from_pretrained(tokenizer, trust_remote_code=trust_remote_code)
        except Exception:
            raise GapInputError(f"--tokenizer {tokenizer}: not a tokenizer (folder or hub name)") from None
        where = f"--tokenizer {tokenizer}"
    else:
        found = [(spec.location, t) for s in sides for spec in s.specs[:1]
                 if (t := _tokenizer(spec, trust_remote_code)) is not None]
        if not found:
            raise GapInputError("--model_name_or_path: no model folder has a tokenizer; pass --tokenizer")
        (where, tok), others = found[0], found[1:]
        for other, t in others:
            if t.get_vocab() != tok.get_vocab():
                raise GapInputError(f"--model_name_or_path: the tokenizers of {where} and {other} differ; "
                                    "the models must share one (or pass --tokenizer)")
    vocab = next(iter(sizes.values()))
    if vocab is not None and len(tok) > vocab:
        raise GapInputError(f"{where}: {len(tok)} tokens, more than the models' vocab_size {vocab}")
    return tok


def load_model(spec: Any, seed: int, trust_remote_code: bool = False) -> torch.nn.Module:
    """Trained weights (folder, hub; weights that do not fit their config.json refused), or an untrained model
    of a config seeded with ``seed``."""
    if spec.source == "config":
        torch.manual_seed(seed)
        try:
            model = AutoModelForCausalLM.from_config(spec.config, trust_remote_code=trust_remote_code).eval()
        except Exception as e:
            raise GapInputError(f"--config {spec.location}: the model does not build ({first_line(e)})") from None
        try:
            check_causal(model, spec.location)  # an architecture that reads later tokens scores nothing true
        except ModelError as e:
            raise GapInputError(f"--config {e}") from None
        return model
    try:
        return load_causal_lm(spec.location, trust_remote_code=trust_remote_code)
    except ModelError as e:
        raise GapInputError(f"--model_name_or_path {e}") from None


def summarize(masks: dict[str, np.ndarray], loss_a: np.ndarray, loss_b: np.ndarray, docs: np.ndarray,
              bootstrap: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per mask: tokens, each model's mean loss, B - A with its 95% interval, the share of the gap.

    ``loss_a``/``loss_b`` are ``(seeds, N)``: with one seed the interval is a bootstrap over documents
    (``bootstrap`` resamples, the same resamples for every row; none for a class found in fewer than
    ``MIN_DOCUMENTS`` documents); with more, a t interval over the per-seed
    differences (paired by seed).
    """
    n_seeds, n = loss_a.shape
    doc_ids, weights = stats.document_resamples(docs, bootstrap, seed)
    total_gap = float((loss_b - loss_a).mean())
    rows = []
    for name, mask in masks.items():
        count = int(mask.sum())
        row: dict[str, Any] = {"class": name, "tokens": count, "share_of_tokens": count / n,
                               "documents": len(np.unique(docs[mask]))}
        if count == 0:
            rows.append({**row, "loss_a": None, "loss_b": None, "difference": None, "ci95": None,
                         "share_of_gap": 0.0})
            continue
        a, b = loss_a[:, mask].mean(1), loss_b[:, mask].mean(1)
        diff = float((b - a).mean())
        resampled = None if n_seeds > 1 else stats.resampled_means(doc_ids, loss_b[0] - loss_a[0], mask, weights,
                                                                   MIN_DOCUMENTS)
        ci = stats.seed_interval(b - a, resampled)
        if n_seeds > 1:
            row |= {"loss_a_per_seed": a.tolist(), "loss_b_per_seed": b.tolist()}
        rows.append({**row, "loss_a": float(a.mean()), "loss_b": float(b.mean()), "difference": diff, "ci95": ci,
                     "share_of_gap": count * diff / (n * total_gap) if total_gap else math.nan})
    return rows


def contrast(x: np.ndarray, y: np.ndarray, loss_a: np.ndarray, loss_b: np.ndarray, docs: np.ndarray,
             bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """How much larger the gap B - A is on tokens ``x`` than on tokens ``y`` (a difference of differences), with
    its 95% interval: the same document resamples for both (bootstrap), or paired by seed."""
    if not x.any() or not y.any():
        return {"value": None, "ci95": None}
    gaps = loss_b - loss_a
    per_seed = gaps[:, x].mean(1) - gaps[:, y].mean(1)
    resampled = None
    if len(per_seed) == 1:
        doc_ids, weights = stats.document_resamples(docs, bootstrap, seed)
        mx, my = (stats.resampled_means(doc_ids, gaps[0], m, weights, MIN_DOCUMENTS) for m in (x, y))
        resampled = None if mx is None or my is None else mx - my
    return {"value": float(per_seed.mean()), "ci95": stats.seed_interval(per_seed, resampled)}


def class_masks(cls: np.ndarray, block_size: int) -> dict[str, np.ndarray]:
    """Every class up to the longest distance a block allows (empty ones kept, so runs compare row by row)."""
    codes = [FIRST, REPEAT, *range(AR0, AR0 + int(math.log2(max(block_size - 1, 1))) + 1)]
    return {class_name(c): cls == c for c in codes}


def group_masks(cls: np.ndarray) -> dict[str, np.ndarray]:
    return {"ar_hit": cls >= AR0, "repeat": cls == REPEAT, "first": cls == FIRST}


def position_masks(pos: np.ndarray, block_size: int) -> dict[str, np.ndarray]:
    bins = log_bin(pos)
    return {bin_name(k): bins == k for k in range(int(math.log2(block_size)) + 1)}


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def run_gap(sides: Sequence[Side], tokens: Tokens, tokenizer_vocab: int, block_size: int, *, bootstrap: int = 1000,
            seed: int = 0, batch_size: int = 16, device: str = "cpu", trust_remote_code: bool = False,
            text: dict[str, Any] | None = None, window: int | None = None,
            window_max_tokens: int | None = None) -> dict[str, Any]:
    """Score both sides on ``tokens`` and build gap.json's content (classes sum to the token count); with
    ``window``, also the windowed context-use control (:mod:`eval.context_use`) on the first ``window_max_tokens``
    targets (default all), from the same document resamples."""
    cut = cut_targets(tokens.blocks, tokens.doc, window, window_max_tokens, bootstrap, seed) if window else None
    losses, windowed, cut_full = [], [], []
    for side in sides:
        per_seed, side_windowed, side_full = [], [], []
        for i, spec in enumerate(side.specs):
            model = load_model(spec, side.seeds[i] if side.seeds else seed, trust_remote_code)
            per_seed.append(token_losses(model, tokens.blocks, batch_size, device))
            if cut is not None:  # as many positions per forward as a batch of blocks
                w, f = model_losses(model, cut, per_seed[-1], max(1, batch_size * block_size // window), device)
                side_windowed.append(w)
                side_full.append(f)
            del model
        losses.append(np.stack(per_seed))
        if cut is not None:
            windowed.append(np.stack(side_windowed))
            cut_full.append(np.stack(side_full))
    loss_a, loss_b = losses
    n = len(tokens.cls)
    classes = summarize(class_masks(tokens.cls, block_size), loss_a, loss_b, tokens.doc, bootstrap, seed)
    groups = summarize(group_masks(tokens.cls), loss_a, loss_b, tokens.doc, bootstrap, seed)
    positions = summarize(position_masks(tokens.pos, block_size), loss_a, loss_b, tokens.doc, bootstrap, seed)
    total = summarize({"all": np.ones(n, dtype=bool)}, loss_a, loss_b, tokens.doc, bootstrap, seed)[0]
    for name, rows in (("classes", classes), ("groups", groups), ("positions", positions)):
        counted = sum(r["tokens"] for r in rows)
        assert counted == n, f"{name} hold {counted} tokens, not the {n} scored"  # every token in exactly one
    n_seeds = loss_a.shape[0]
    return {
        "models": {"a": sides[0].describe(), "b": sides[1].describe()},
        "difference": "b - a (nats per token; positive: model b is worse)",
        "interval": (f"95% t interval over {n_seeds} seeds, paired by seed" if n_seeds > 1 else
                     f"95% percentile bootstrap over documents ({bootstrap} resamples, seed {seed})"),
        "text": {**(text or {}), "documents": tokens.documents, "tokens": n, "blocks": len(tokens.blocks),
                 "block_size": block_size, "tokenizer_vocab": tokenizer_vocab},
        "total": {**total, "ppl_a": math.exp(total["loss_a"]), "ppl_b": math.exp(total["loss_b"])},
        "groups": groups,
        "classes": classes,
        "positions": positions,
        # The paper's mechanism as a testable row: is B's deficit larger on AR hits than elsewhere?
        "contrasts": {
            f"{x} - {y}": {**contrast(group[x], group[y], loss_a, loss_b, tokens.doc, bootstrap, seed),
                           "means": f"(b - a on {x}) - (b - a on {y})"}
            for group in [group_masks(tokens.cls)] for x, y in (("ar_hit", "first"), ("ar_hit", "repeat"))
        },
        **({"context_use": pair_from_losses(cut, windowed, cut_full, (sides[0].label, sides[1].label))}
           if cut is not None else {}),
        "definitions": {
            "ar_d": "the bigram (x[t-1], x[t]) ended earlier in the block; d = distance to its most recent end",
            "repeat": "x[t] occurred earlier in the block, never after x[t-1]",
            "first": "x[t] did not occur earlier in the block",
            "positions": "context tokens before the target in its block (log2 bins)",
        },
    }


def render_figure(result: dict[str, Any], path: Path) -> None:
    """Left: B - A per class with its interval (token share in the label). Right: each model's loss by position."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    a, b = result["models"]["a"]["label"], result["models"]["b"]["label"]
    rows = [r for r in result["classes"] if r["tokens"]]
    x = np.arange(len(rows))
    diffs = [r["difference"] for r in rows]
    lo = [r["difference"] - r["ci95"][0] if r["ci95"] and not math.isnan(r["ci95"][0]) else 0 for r in rows]
    hi = [r["ci95"][1] - r["difference"] if r["ci95"] and not math.isnan(r["ci95"][1]) else 0 for r in rows]
    left.bar(x, diffs, yerr=[lo, hi], color=["#888" if r["class"] in ("first", "repeat") else "#c44" for r in rows],
             capsize=3)
    left.axhline(0, color="k", lw=0.8)
    left.axhline(result["total"]["difference"], color="#448", ls="--", lw=1, label="all tokens")
    left.set_xticks(x, [f"{r['class']} ({100 * r['share_of_tokens']:.0f}%)" for r in rows], rotation=45, ha="right")
    left.set_ylabel(f"loss {b} - {a} (nats)")
    left.set_title("gap per class (share of tokens), 95% intervals")
    left.legend(fontsize=8)
    pos = [r for r in result["positions"] if r["tokens"]]
    px = np.arange(len(pos))
    right.plot(px, [r["loss_a"] for r in pos], "o-", label=a)
    right.plot(px, [r["loss_b"] for r in pos], "s-", label=b)
    right.set_xticks(px, [r["class"] for r in pos], rotation=45, ha="right")
    right.set_xlabel("position in the context (tokens before the target)")
    right.set_ylabel("mean loss (nats)")
    right.set_title("loss by position")
    right.legend(fontsize=8)
    fig.tight_layout()
    save(fig, path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """eval.gap's flags (SystemExit after a usage error, printed in one line, or --help)."""
    parser = UsageParser(prog=PROG, description=__doc__.split("\n\n")[0],
                         formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model_name_or_path", nargs="+", required=True, metavar="A[,A2,...]",
                        help="model A then model B: checkpoint folders or hub names; several comma-separated "
                             "folders for one model are its seeds, paired with B's by position")
    parser.add_argument("--config", default=None, metavar="CONFIG_JSON",
                        help="model B as an untrained architecture (config.json or a folder with one), one init "
                             "per seed of A, seeded from --seed; then give one --model_name_or_path")
    parser.add_argument("--text", required=True, metavar="FILE|embedded",
                        help="'embedded' (or embedded:pydoc / embedded:stdlib) or a .txt (paragraphs), .jsonl, "
                             ".parquet file, cut into documents as train.py cuts it")
    parser.add_argument("--split", choices=SPLITS, default="validation",
                        help="which documents: train.py's validation ones (every --val_every-th), its test ones "
                             "(with --test_every), its training ones, or all")
    parser.add_argument("--val_every", type=positive_int, default=10, help="as train.py's val_every")
    parser.add_argument("--test_every", type=non_negative_int, default=0,
                        help="as train.py's test_every (0: no test split; the training documents are then the "
                             "non-validation ones)")
    parser.add_argument("--output_dir", required=True, help="folder for gap.json and gap.png (written atomically)")
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="replace eval.gap's own earlier output in --output_dir (never another folder)")
    parser.add_argument("--block_size", type=positive_int, default=None,
                        help="tokens of context per block (default: the smaller context length of the two models)")
    parser.add_argument("--max_tokens", type=positive_int, default=None, help="score at most this many tokens")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder or hub name (default: the models')")
    parser.add_argument("--labels", nargs=2, default=None, metavar=("A", "B"), help="names in the table and figure")
    parser.add_argument("--bootstrap", type=positive_int, default=1000, help="bootstrap resamples over documents")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (and untrained --config inits)")
    parser.add_argument("--per_device_eval_batch_size", type=positive_int, default=16, help="blocks per forward")
    parser.add_argument("--window", type=positive_int, default=None, metavar="W",
                        help="add the windowed context-use control: rescore each target with only its last W tokens "
                             "of context (less than --block_size); the cost on AR hits whose earlier occurrence lies "
                             "W or more back minus that on first occurrences, per model and b - a (eval.context_use)")
    parser.add_argument("--window_max_tokens", type=positive_int, default=None,
                        help="compute the --window control on the first this many scored tokens only (default all)")
    parser.add_argument("--trust_remote_code", action="store_true", help="allow hub models' own code")
    return parser.parse_args(argv)


def command(argv: Sequence[str]) -> str:
    """The command line that reproduces a measure (gap.json's ``command``)."""
    return " ".join([PROG, *argv])


def measure(args: argparse.Namespace, command: str, root: Path | None = None) -> dict[str, Any]:
    """One pair of models (each one folder or several seed folders) measured on the same tokens, written to
    ``args.output_dir`` (gap.json and gap.png, whole or not at all) and returned: gap.json's record, with
    ``command``. Every path of ``args`` (the models, ``--config``, ``--text``, ``--tokenizer``, ``--output_dir``)
    is read under ``root`` where relative (default: the working folder) and recorded as the command names it. Bad
    input: :class:`GapInputError` (or ValueError) in one line, before any scoring; nothing is written."""
    n_sides = len(args.model_name_or_path) + (args.config is not None)
    if n_sides != 2:
        raise GapInputError(f"--model_name_or_path: give two models A B (or one and --config), got {n_sides}")
    output_dir = (root or Path()) / args.output_dir
    check_output_dir(output_dir, tool="eval.gap", overwrite=args.overwrite_output_dir)  # before any loading
    sides = [resolve_side(e, "--model_name_or_path", args.trust_remote_code, root) for e in args.model_name_or_path]
    if args.config is not None:
        b = resolve_side(args.config, "--config", args.trust_remote_code, root)
        k = len(sides[0].specs)
        b.specs, b.seeds = b.specs * k, [args.seed + i for i in range(k)]
        sides.append(b)
    if len(sides[0].specs) != len(sides[1].specs):
        raise GapInputError(f"--model_name_or_path: {len(sides[0].specs)} seed(s) for A but "
                            f"{len(sides[1].specs)} for B; give the same number (paired by seed)")
    if args.labels:
        sides[0].label, sides[1].label = args.labels
    elif sides[0].label == sides[1].label:
        sides[0].label, sides[1].label = f"a:{sides[0].label}", f"b:{sides[1].label}"
    tokenizer_name = _under(root, args.tokenizer) if args.tokenizer is not None else None
    tokenizer = shared_tokenizer(sides, tokenizer_name, args.trust_remote_code)
    limits = [c for s in sides for spec in s.specs if (c := context_length(spec.config)) is not None]
    block_size = args.block_size or (min(limits) if limits else 1024)
    if limits and block_size > min(limits):
        raise GapInputError(f"--block_size {block_size}: longer than a model's context length {min(limits)}")
    if args.window is not None and args.window >= block_size:
        raise GapInputError(f"--window {args.window}: must be less than the block size {block_size} "
                            "(else no target's context is cut)")
    if args.window_max_tokens is not None and args.window is None:
        raise GapInputError("--window_max_tokens: needs --window")
    docs = read_documents(args.text, args.split, args.val_every, args.test_every, root)
    tokens = make_tokens(docs, tokenizer, block_size, args.max_tokens)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    result = run_gap(sides, tokens, len(tokenizer), block_size, bootstrap=args.bootstrap, seed=args.seed,
                     batch_size=args.per_device_eval_batch_size, device=device,
                     trust_remote_code=args.trust_remote_code,
                     text={"source": args.text, "split": args.split, "val_every": args.val_every,
                           "test_every": args.test_every},
                     window=args.window, window_max_tokens=args.window_max_tokens)
    result["command"] = command
    with atomic_dir(output_dir, tool="eval.gap", overwrite=args.overwrite_output_dir) as tmp:
        write_json(tmp / "gap.json", result)
        render_figure(result, tmp / "gap.png")
    return result


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help: its status, returned
        return int(e.code or 0)
    try:
        result = measure(args, command(argv if argv is not None else sys.argv[1:]))
    except (ValueError, UsageError) as err:
        print(f"{PROG}: error: {first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    print(render_table(result))
    print(f"wrote {Path(args.output_dir) / 'gap.json'}")
    return 0


def render_table(result: dict[str, Any]) -> str:
    """gap.json's groups, classes and positions as markdown (the notes and the report quote it)."""
    a, b = result["models"]["a"]["label"], result["models"]["b"]["label"]
    lines = [f"model a = `{a}`, model b = `{b}`; {result['text']['tokens']:,} tokens from "
             f"{result['text']['documents']} documents; interval: {result['interval']}", ""]

    def fmt(v: float | None, spec: str = ".3f") -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)

    for title, rows in (("group", [{**result["total"], "class": "all"}, *result["groups"]]),
                        ("class", result["classes"]), ("position", result["positions"])):
        lines += [f"| {title} | tokens | share | loss a | loss b | b - a | 95% interval | share of gap |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            ci = r.get("ci95")
            interval = f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "-"
            share_gap = r.get("share_of_gap", 1.0 if r["class"] == "all" else None)
            lines.append(f"| {r['class']} | {r['tokens']:,} | {fmt(r['share_of_tokens'], '.1%')} | "
                         f"{fmt(r['loss_a'])} | {fmt(r['loss_b'])} | {fmt(r['difference'])} | {interval} | "
                         f"{fmt(share_gap, '.1%')} |")
        lines.append("")
    for name, c in result.get("contrasts", {}).items():
        ci = c["ci95"]
        interval = f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "-"
        lines.append(f"- contrast {name}: {c['means']} = {fmt(c['value'])}, 95% interval {interval}")
    if "context_use" in result:
        lines += ["", *render_control(result["context_use"])]
    return "\n".join(lines)


__all__ = ["class_masks", "group_masks", "position_masks", "make_tokens", "read_documents",
           "summarize", "contrast", "run_gap", "render_figure", "render_table", "command", "measure", "parse_args",
           "main", "GapInputError"]


if __name__ == "__main__":
    sys.exit(main())
