"""The reference EMA trace operator: a plain loop over time in float64. Tests and benchmarks only.

Every fast path in :mod:`.traces_fixed`, :mod:`.traces_chunk` and :mod:`.traces_triton` is checked
against it (``tests/test_traces*.py``).
"""

from __future__ import annotations

import torch

from .traces import check_inputs

__all__ = ["ema_traces_naive"]


def ema_traces_naive(
    x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference implementation: a sequential loop over time, in float64.

    Args:
        x: inputs, ``(B, T, D)``.
        alpha: write rates, ``(S,)``, ``(S, D)`` or ``(B, T, S, D)``, each in (0, 1).
        h0: initial state ``(B, S, D)``; zeros when ``None``.

    Returns:
        ``(traces, h_last)``: ``traces[:, t]`` is ``h_t`` with shape ``(B, T, S, D)``; ``h_last``
        is ``h_{T-1}`` (or ``h0`` when ``T == 0``), both float64.
    """
    check_inputs(x, alpha, h0)
    B, T, D = x.shape
    x64 = x.double()
    a = alpha.double()
    S = a.shape[-2] if a.dim() == 4 else a.shape[0]
    h = torch.zeros(B, S, D, dtype=torch.float64, device=x.device) if h0 is None else h0.double()
    out = []
    for t in range(T):
        a_t = a[:, t] if a.dim() == 4 else (a[:, None] if a.dim() == 1 else a)
        h = (1 - a_t) * h + a_t * x64[:, t, None, :]
        out.append(h)
    traces = torch.stack(out, 1) if out else x64.new_zeros(B, 0, S, D)
    return traces, h
