"""The windowed context-use control: does a causal LM retrieve from context beyond its last W tokens?

eval.gap splits two models' loss by what the context offers; this asks whether a model *uses* that context. Each
target ``x_t`` of eval.gap's blocks (train.py's blocks) is rescored with only its last ``W`` tokens of context:
the model sees ``x_{t-W} .. x_{t-1}`` as a fresh sequence (positions from 0, no state carried in) and the loss of
``x_t`` after it is the *windowed loss*. Its excess over the full-context loss is the *cost* of cutting the
context. The cost is compared between two classes of targets whose context is actually cut (``t > W``):

* **AR hit beyond W** (``ar_beyond``): the bigram ``(x_{t-1}, x_t)`` ended earlier in the block, most recently
  at ``s`` with ``t - s >= W``: the window no longer holds that occurrence (its ``x_{s-1}``), so a model that
  copied ``x_s`` from there cannot any more;
* **first occurrence** (``first``): ``x_t`` did not occur earlier in the block: no lookup helps, whatever the
  window; its cost is what distant context is worth otherwise (topic, style).

The **control** is ``mean cost on ar_beyond - mean cost on first`` (nats), with a 95% percentile interval from
eval.gap's bootstrap over documents (or a t interval over seeds). A model that retrieves from context beyond W
has it positive (``positive``: the interval's lower bound above 0); a model that sees only the last few tokens
(an n-gram, a bigram table) has its windowed and full losses equal and the control 0. For two models the
difference of their controls is paired over the same resamples (or seeds).

    from eval.context_use import windowed_control
    result = windowed_control(model, tokens.blocks, tokens.doc, window=16, max_tokens=100_000)

and ``python -m eval.gap ... --window 16`` adds both models' controls and their difference to gap.json.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ema_boundary import stats
from eval.token_classes import FIRST, MIN_DOCUMENTS, gap_classes, token_losses

DEFINITION = ("windowed loss: the target's loss when the model sees only its last W tokens (a fresh sequence); "
              "cost: windowed - full loss; control: mean cost on AR hits whose most recent earlier bigram lies "
              "W or more tokens back, minus mean cost on first occurrences; both over targets with more than "
              "W tokens of context (the only ones whose context is cut)")
CLASSES = ("ar_beyond", "first")


# ---------------------------------------------------------------------------------------------
# Which targets
# ---------------------------------------------------------------------------------------------


def ar_distances(ids: Sequence[int] | np.ndarray | torch.Tensor) -> np.ndarray:
    """Per position of one context: ``t - s`` for the most recent ``s < t`` where the bigram ``(x_{t-1}, x_t)``
    ended before (an AR hit at that distance; eval.gap's class ``ar_d`` is its log2 bin), 0 for no AR hit."""
    tokens = (ids.tolist() if isinstance(ids, torch.Tensor) else np.asarray(ids).tolist())
    out = np.zeros(len(tokens), dtype=np.int64)
    bigram_end: dict[tuple[int, int], int] = {}
    for t in range(1, len(tokens)):
        bigram = (tokens[t - 1], tokens[t])
        if (s := bigram_end.get(bigram)) is not None:
            out[t] = t - s
        bigram_end[bigram] = t
    return out


def cut_masks(blocks: Sequence[torch.Tensor], window: int) -> dict[str, np.ndarray]:
    """Over the flat targets of ``blocks`` (eval.gap's order): ``ar_beyond`` and ``first`` (module docstring),
    both only where the target has more than ``window`` tokens of context."""
    ar, first = [], []
    for block in blocks:
        cut = np.arange(1, len(block)) > window
        d = ar_distances(block)[1:]
        ar.append(cut & (d >= window))
        first.append(cut & (gap_classes(block)[1:] == FIRST))
    return {"ar_beyond": np.concatenate(ar), "first": np.concatenate(first)}


# ---------------------------------------------------------------------------------------------
# Windowed losses
# ---------------------------------------------------------------------------------------------


def _keeps_last(model: torch.nn.Module) -> bool:
    """Whether ``model.forward`` takes ``logits_to_keep`` (transformers' models do): then only the last
    position's logits are computed, which is all a window needs."""
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


@torch.no_grad()
def windowed_losses(model: torch.nn.Module, blocks: Sequence[torch.Tensor], window: int,
                    select: np.ndarray | None = None, batch_size: int = 512,
                    device: str | torch.device = "cpu") -> np.ndarray:
    """The loss (nats) of each selected target of ``blocks`` (flat, eval.gap's order) when the model sees only
    its last ``window`` tokens, ``x[max(0, t - window) : t]``, as a fresh sequence; NaN where not selected
    (``select``: a boolean mask over the targets, default all). A target with ``t <= window`` sees its whole
    block prefix, so its windowed loss is its full loss. ``batch_size`` windows per forward."""
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    n = sum(len(b) - 1 for b in blocks)
    select = np.ones(n, dtype=bool) if select is None else np.asarray(select, dtype=bool)
    if select.shape != (n,):
        raise ValueError(f"select has shape {select.shape}, the blocks have {n} targets")
    # Windows (with their target as the last token) grouped by length: every cut target's window has length
    # window + 1 and comes from one unfold of its block; only targets near a block's start are shorter.
    by_length: dict[int, tuple[list[torch.Tensor], list[np.ndarray]]] = {}
    start = 0
    for block in blocks:
        block = torch.as_tensor(block)
        t = np.flatnonzero(select[start : start + len(block) - 1]) + 1  # target positions in the block
        cut = t[t > window]
        if len(cut):
            wins, idx = by_length.setdefault(window + 1, ([], []))
            wins.append(block.unfold(0, window + 1, 1)[torch.from_numpy(cut - window)])
            idx.append(start + cut - 1)
        for p in t[t <= window]:
            wins, idx = by_length.setdefault(int(p) + 1, ([], []))
            wins.append(block[None, : p + 1])
            idx.append(np.array([start + p - 1]))
        start += len(block) - 1
    model.eval().to(device)
    keep = {"logits_to_keep": 1} if _keeps_last(model) else {}
    out = np.full(n, np.nan)
    for length, (wins, idx) in by_length.items():
        windows, flat = torch.cat(wins), np.concatenate(idx)
        # Without logits_to_keep every position's logits are computed: as many positions per forward as with it.
        step = batch_size if keep else max(1, batch_size // length)
        for i in range(0, len(windows), step):
            batch = windows[i : i + step].to(device)
            logits = model(input_ids=batch[:, :-1], use_cache=False, **keep).logits[:, -1].float()
            loss = F.cross_entropy(logits, batch[:, -1], reduction="none")
            out[flat[i : i + step]] = loss.double().cpu().numpy()
    return out


# ---------------------------------------------------------------------------------------------
# The control and its interval
# ---------------------------------------------------------------------------------------------


@dataclass
class Cut:
    """The targets a control is computed on: the blocks holding the first ``max_tokens`` targets, the class masks
    and documents of those targets, and eval.gap's document resamples of them."""

    window: int
    blocks: list[torch.Tensor]
    masks: dict[str, np.ndarray]
    docs: np.ndarray
    bootstrap: int
    seed: int
    max_tokens: int | None = None
    doc_ids: np.ndarray = field(init=False)
    weights: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.doc_ids, self.weights = stats.document_resamples(self.docs, self.bootstrap, self.seed)

    @property
    def select(self) -> np.ndarray:
        """The targets to rescore, over all targets of ``blocks`` (the first ``len(docs)`` can be selected)."""
        out = np.zeros(sum(len(b) - 1 for b in self.blocks), dtype=bool)
        out[: len(self.docs)] = self.masks["ar_beyond"] | self.masks["first"]
        return out


def _resampled_control(cost: np.ndarray, cut: Cut) -> np.ndarray | None:
    """The control under each of ``cut``'s resamples of documents (None when a class is in too few documents)."""
    m_ar, m_first = (stats.resampled_means(cut.doc_ids, cost, cut.masks[c], cut.weights, MIN_DOCUMENTS)
                     for c in CLASSES)
    return None if m_ar is None or m_first is None else m_ar - m_first


def cut_targets(blocks: Sequence[torch.Tensor], docs_of_targets: np.ndarray, window: int,
                max_tokens: int | None = None, bootstrap: int = 1000, seed: int = 0) -> Cut:
    """:class:`Cut` of eval.gap's ``blocks`` (``docs_of_targets``: ``Tokens.doc``) for a window of ``window``."""
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    docs = np.asarray(docs_of_targets)
    n = sum(len(b) - 1 for b in blocks)
    if len(docs) != n:
        raise ValueError(f"docs_of_targets has {len(docs)} entries, the blocks have {n} targets")
    if max_tokens is not None and max_tokens < n:  # only the first max_tokens targets count (and are rescored)
        kept, count = [], 0
        for b in blocks:
            if count >= max_tokens:
                break
            kept.append(b)
            count += len(b) - 1
        blocks, docs = kept, docs[:max_tokens]
    masks = {c: m[: len(docs)] for c, m in cut_masks(blocks, window).items()}
    return Cut(window, list(blocks), masks, docs, bootstrap, seed, max_tokens)


def model_losses(model: torch.nn.Module, cut: Cut, full_losses: np.ndarray | None = None, batch_size: int = 512,
                 device: str | torch.device = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """One model's windowed and full losses on ``cut``'s targets (NaN windowed where not selected);
    ``full_losses`` (eval.gap's :func:`token_losses` of the same blocks, at least ``len(cut.docs)`` of them)
    saves the full-context pass."""
    n = len(cut.docs)
    windowed = windowed_losses(model, cut.blocks, cut.window, cut.select, batch_size, device)[:n]
    if full_losses is None:
        full_losses = token_losses(model, cut.blocks, 16, device)
    full = np.asarray(full_losses, dtype=np.float64)
    if full.ndim != 1 or len(full) < n:
        raise ValueError(f"full_losses has shape {full.shape}, need at least {n} losses (one model)")
    return windowed, full[:n]


def control_from_losses(cut: Cut, windowed: np.ndarray, full: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
    """One model's control from its windowed and full losses, ``(N,)`` or ``(seeds, N)``; also its cost per seed
    and target (for pairing)."""
    windowed, full = np.atleast_2d(windowed), np.atleast_2d(full)
    cost = windowed - full
    masks, docs = cut.masks, cut.docs
    row: dict[str, Any] = {"window": cut.window}
    for c in CLASSES:
        m = masks[c]
        count = int(m.sum())
        row[c] = {"tokens": count, "documents": len(np.unique(docs[m])),
                  **({"cost": float(cost[:, m].mean()), "windowed_loss": float(windowed[:, m].mean()),
                      "full_loss": float(full[:, m].mean())} if count else
                     {"cost": None, "windowed_loss": None, "full_loss": None})}
    if not all(masks[c].any() for c in CLASSES):
        return {**row, "control": None, "ci95": None, "positive": False}, cost
    per_seed = cost[:, masks["ar_beyond"]].mean(1) - cost[:, masks["first"]].mean(1)
    resampled = _resampled_control(cost[0], cut) if len(per_seed) == 1 else None
    ci = stats.seed_interval(per_seed, resampled)
    row |= {"control": float(per_seed.mean()), "ci95": ci, "positive": bool(ci[0] > 0)}  # NaN > 0 is False
    if len(per_seed) > 1:
        row["control_per_seed"] = per_seed.tolist()
    return row, cost


def pair_from_losses(cut: Cut, windowed: Sequence[np.ndarray], full: Sequence[np.ndarray],
                     labels: Sequence[str] = ("a", "b")) -> dict[str, Any]:
    """Two models' controls (each ``(seeds, N)`` windowed and full losses, seeds paired by position) and the
    difference ``b - a`` of their controls, paired over the same document resamples (or seeds)."""
    sides, costs = {}, []
    for key, w, f, label in zip("ab", windowed, full, labels, strict=True):
        row, cost = control_from_losses(cut, w, f)
        sides[key] = {"label": label, **row}
        costs.append(cost)
    n_seeds = costs[0].shape[0]
    if costs[1].shape[0] != n_seeds:
        raise ValueError(f"{n_seeds} seed(s) for a but {costs[1].shape[0]} for b; give the same number")
    difference: dict[str, Any] = {"value": None, "ci95": None, "positive": False,
                                  "means": f"control of b ({labels[1]}) - control of a ({labels[0]})"}
    if sides["a"]["control"] is not None and sides["b"]["control"] is not None:
        per_seed = np.array([sides[k].get("control_per_seed", [sides[k]["control"]]) for k in "ab"])
        resampled = None
        if n_seeds == 1:
            ra, rb = (_resampled_control(c[0], cut) for c in costs)
            resampled = None if ra is None or rb is None else rb - ra
        ci = stats.seed_interval(per_seed[1] - per_seed[0], resampled)
        difference |= {"value": float((per_seed[1] - per_seed[0]).mean()), "ci95": ci, "positive": bool(ci[0] > 0)}
    return {"window": cut.window, "definition": DEFINITION,
            "interval": (f"95% t interval over {n_seeds} seeds, paired by seed" if n_seeds > 1 else
                         f"95% percentile bootstrap over documents ({cut.bootstrap} resamples, seed {cut.seed})"),
            "tokens": len(cut.docs), "max_tokens": cut.max_tokens, **sides, "difference": difference}


def _as_seeds(model: Any) -> list[torch.nn.Module]:
    return list(model) if isinstance(model, (list, tuple)) else [model]


def _seed_losses(model: Any, cut: Cut, full_losses: np.ndarray | None, batch_size: int,
                 device: str | torch.device) -> tuple[np.ndarray, np.ndarray]:
    models = _as_seeds(model)
    fulls = [None] * len(models) if full_losses is None else list(np.atleast_2d(full_losses))
    if len(fulls) != len(models):
        raise ValueError(f"full_losses holds {len(fulls)} seed(s), the model {len(models)}")
    pairs = [model_losses(m, cut, f, batch_size, device) for m, f in zip(models, fulls, strict=True)]
    return np.stack([w for w, _ in pairs]), np.stack([f for _, f in pairs])


def windowed_control(model: torch.nn.Module | Sequence[torch.nn.Module], blocks: Sequence[torch.Tensor],
                     docs_of_targets: np.ndarray, window: int, *, full_losses: np.ndarray | None = None,
                     max_tokens: int | None = None, bootstrap: int = 1000, seed: int = 0, batch_size: int = 512,
                     device: str | torch.device = "cpu") -> dict[str, Any]:
    """One causal LM's windowed context-use control (module docstring) on eval.gap's ``blocks``.

    ``docs_of_targets``: the document of each target (``Tokens.doc``), for the bootstrap over documents (eval.gap's
    resamples: ``bootstrap`` of them from ``seed``). ``model`` may be a list of seed models: the control is then
    their mean with a t interval over seeds. ``full_losses`` (``(N,)`` or ``(seeds, N)``, eval.gap's
    :func:`token_losses`) saves the full-context pass. ``max_tokens``: only the first that many targets count.
    ``batch_size``: windows per forward.

    Returns ``{"window", "ar_beyond": {"tokens", "documents", "cost", "windowed_loss", "full_loss"}, "first":
    {...}, "control", "ci95", "positive"}`` (``control``/``ci95`` None when a class is empty; ``positive``: the
    interval's lower bound is above 0; ``control_per_seed`` with several seeds).
    """
    cut = cut_targets(blocks, docs_of_targets, window, max_tokens, bootstrap, seed)
    return control_from_losses(cut, *_seed_losses(model, cut, full_losses, batch_size, device))[0]


def control_pair(models: Sequence[Any], blocks: Sequence[torch.Tensor], docs_of_targets: np.ndarray, window: int,
                 *, full_losses: Sequence[np.ndarray | None] = (None, None), labels: Sequence[str] = ("a", "b"),
                 max_tokens: int | None = None, bootstrap: int = 1000, seed: int = 0, batch_size: int = 512,
                 device: str | torch.device = "cpu") -> dict[str, Any]:
    """Two models' controls (:func:`windowed_control` each; a model may be a list of seed models, paired by
    position) and the difference ``b - a`` of their controls with an interval paired over the same document
    resamples (or seeds). Returns ``{"window", "definition", "interval", "tokens", "max_tokens", "a": {"label",
    ...control}, "b": {...}, "difference": {"value", "ci95", "positive", "means"}}``."""
    cut = cut_targets(blocks, docs_of_targets, window, max_tokens, bootstrap, seed)
    losses = [_seed_losses(m, cut, f, batch_size, device) for m, f in zip(models, full_losses, strict=True)]
    return pair_from_losses(cut, [w for w, _ in losses], [f for _, f in losses], labels)


def render_control(result: dict[str, Any]) -> list[str]:
    """gap.json's ``context_use`` as a few markdown lines (eval.gap prints them under its tables)."""

    def fmt(v: float | None) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"

    def interval(ci: list[float] | None) -> str:
        return f"[{fmt(ci[0])}, {fmt(ci[1])}]" if ci else "-"

    w = result["window"]
    lines = [f"windowed context-use control, W = {w}: cost of cutting each target's context to its last {w} tokens "
             f"on AR hits beyond {w} minus on first occurrences (nats; {result['interval']})", "",
             "| model | AR beyond W: tokens | cost | first: tokens | cost | control | 95% interval | retrieves |",
             "|---|---|---|---|---|---|---|---|"]
    for k in "ab":
        r = result[k]
        lines.append(f"| {r['label']} | {r['ar_beyond']['tokens']:,} | {fmt(r['ar_beyond']['cost'])} | "
                     f"{r['first']['tokens']:,} | {fmt(r['first']['cost'])} | {fmt(r['control'])} | "
                     f"{interval(r['ci95'])} | {'yes' if r['positive'] else 'not shown'} |")
    d = result["difference"]
    lines += ["", f"- {d['means']} = {fmt(d['value'])}, 95% interval {interval(d['ci95'])}"]
    return lines


__all__ = ["ar_distances", "cut_masks", "windowed_losses", "Cut", "cut_targets", "model_losses", "control_from_losses",
           "pair_from_losses", "windowed_control", "control_pair", "render_control", "DEFINITION"]
