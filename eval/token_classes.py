"""A context's token classes and each target's loss: what :mod:`eval.gap` splits the gap by and what
:mod:`eval.context_use`'s control reads too (its own module so that gap imports context_use and nothing imports gap
back). The classes are described in :mod:`eval.gap`'s docstring."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

FIRST, REPEAT = 0, 1  # class codes; an AR hit at distance d is AR0 + floor(log2(d))
AR0 = 2
# A bootstrap over fewer documents than this gives an interval that only looks narrow: none is reported.
MIN_DOCUMENTS = 5


def gap_classes(ids: Sequence[int] | np.ndarray | torch.Tensor) -> np.ndarray:
    """The class code of every position of one context ``ids`` (module docstring): ``FIRST`` (0),
    ``REPEAT`` (1), or ``AR0 + floor(log2(d))`` for an AR hit at distance ``d``. Position 0 has no context
    and is ``FIRST``. Linear time: the last position of each token and of each bigram, kept as we go."""
    ids = np.asarray(ids.tolist() if isinstance(ids, torch.Tensor) else ids, dtype=np.int64)
    if ids.ndim != 1:
        raise ValueError(f"ids must be one sequence (1-D), got shape {ids.shape}")
    out = np.empty(len(ids), dtype=np.int64)
    seen: set[int] = set()
    bigram_end: dict[tuple[int, int], int] = {}
    tokens = ids.tolist()
    for t, tok in enumerate(tokens):
        bigram = (tokens[t - 1], tok) if t >= 1 else None
        if (s := bigram_end.get(bigram)) is not None:
            out[t] = AR0 + (t - s).bit_length() - 1  # floor(log2(t - s))
        else:
            out[t] = REPEAT if tok in seen else FIRST
        if bigram is not None:
            bigram_end[bigram] = t
        seen.add(tok)
    return out


def class_name(code: int) -> str:
    """``first``, ``repeat``, or ``ar_1``, ``ar_2-3``, ``ar_4-7``, ... (the distances of the bin)."""
    if code == FIRST:
        return "first"
    if code == REPEAT:
        return "repeat"
    lo = 2 ** (code - AR0)
    return f"ar_{lo}" if lo == 1 else f"ar_{lo}-{2 * lo - 1}"


@torch.no_grad()
def token_losses(model: torch.nn.Module, blocks: Sequence[torch.Tensor], batch_size: int = 16,
                 device: str | torch.device = "cpu") -> np.ndarray:
    """Next-token loss (nats) of every target of ``blocks``, flat, in order (float64)."""
    model.eval().to(device)
    out: list[np.ndarray] = []
    i = 0
    while i < len(blocks):
        length = len(blocks[i])  # blocks of one length go together; only the last can be shorter
        j = i
        while j < len(blocks) and j - i < batch_size and len(blocks[j]) == length:
            j += 1
        batch = torch.stack(list(blocks[i:j])).to(device)
        logits = model(input_ids=batch[:, :-1], use_cache=False).logits.float()
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten(), reduction="none")
        out.append(loss.double().cpu().numpy())
        i = j
    return np.concatenate(out)


__all__ = ["AR0", "FIRST", "MIN_DOCUMENTS", "REPEAT", "class_name", "gap_classes", "token_losses"]
