"""The reference trace operators: plain loops over time in float64. Tests and benchmarks only.

Every fast path in :mod:`.traces_fixed`, :mod:`.traces_chunk` and :mod:`.traces_triton` is checked
against :func:`ema_traces_naive`, :func:`.traces_ssm.selective_ssm` against :func:`selective_ssm_naive`
(``tests/test_traces*.py``), and :class:`.mixer_mamba.MambaMixer` against :func:`mamba_mixer_naive`
(``tests/test_mixer_mamba.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from .traces import check_inputs

__all__ = ["ema_traces_naive", "mamba_mixer_naive", "selective_ssm_naive"]


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


def selective_ssm_naive(
    u: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, h0: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference S6 recurrence (Mamba), a sequential loop over time in float64, written from the equations

        h_t[d, n] = exp(dt_t[d] A[d, n]) h_{t-1}[d, n] + dt_t[d] B_t[n] u_t[d]
        y_t^(s)[d] = sum_n C_t^(s)[n] h_t[d, n]

    Args:
        u: ``(B, T, D)``; dt: ``(B, T, D)``; A: ``(D, N)``; B: ``(B, T, N)``; C: ``(B, T, S, N)``;
        h0: ``(B, D, N)`` or ``None`` (zeros).

    Returns:
        ``(y, h_last)``: ``y`` ``(B, T, S, D)`` and the state after the last step ``(B, D, N)``, float64.
    """
    Bsz, T, D = u.shape
    N, S = A.shape[1], C.shape[2]
    u, dt, A, B, C = u.double(), dt.double(), A.double(), B.double(), C.double()
    h = torch.zeros(Bsz, D, N, dtype=torch.float64, device=u.device) if h0 is None else h0.double()
    ys = []
    for t in range(T):
        h = torch.exp(dt[:, t, :, None] * A) * h + dt[:, t, :, None] * B[:, t, None, :] * u[:, t, :, None]
        ys.append((C[:, t, :, None, :] * h[:, None]).sum(-1))  # (B, S, D)
    y = torch.stack(ys, 1) if ys else u.new_zeros(Bsz, 0, S, D)
    return y, h


def mamba_mixer_naive(
    u: torch.Tensor, params: Mapping[str, torch.Tensor], rank: int, read: str = "current"
) -> torch.Tensor:
    """Reference Mamba mixer, a loop over time in float64, written from the equations of
    :mod:`.mixer_mamba` (the gate is present when ``in_proj`` makes ``2 E`` outputs)::

        x_t, z_t = split(W_in u_t);   c_t = SiLU(sum_k w[:, k] x_{t-K+1+k} + b_conv)    (x_{<0} = 0)
        dt_t = softplus(W_dt (W_x c_t)[:R] + b_dt);   B_t, C_t = the next N and N outputs of W_x c_t
        h_t = exp(dt_t A) h_{t-1} + dt_t B_t c_t;   y_t = C_t . h_t + D c_t   (``read="lagged"``: C_{t-1} . h_{t-1})
        out_t = W_out (y_t * SiLU(z_t))

    Args:
        u: block input ``(B, T, D)``.
        params: the mixer's tensors by transformers' names (``in_proj.weight``, ``conv1d.weight``, ``conv1d.bias``,
            ``x_proj.weight``, ``dt_proj.weight``, ``dt_proj.bias``, ``A_log``, ``D``, ``out_proj.weight``).
        rank: ``R``, the rows of ``x_proj`` that make ``dt``.
        read: ``"current"`` or ``"lagged"``.

    Returns:
        The output ``(B, T, D)``, float64.
    """
    p = {k: v.double() for k, v in params.items()}
    Bsz, T, _ = u.shape
    E, N = p["A_log"].shape
    xz = u.double() @ p["in_proj.weight"].T
    x, z = (xz[..., :E], xz[..., E:]) if xz.shape[-1] == 2 * E else (xz, None)
    w = p["conv1d.weight"][:, 0]  # (E, K)
    K = w.shape[1]
    A = -torch.exp(p["A_log"])
    h = u.new_zeros(Bsz, E, N, dtype=torch.float64)
    previous = u.new_zeros(Bsz, E, dtype=torch.float64)
    outs = []
    for t in range(T):
        conv = p["conv1d.bias"].expand(Bsz, E).clone()
        for k in range(K):
            s = t - (K - 1) + k
            if s >= 0:
                conv = conv + w[:, k] * x[:, s]
        c = F.silu(conv)  # (B, E)
        proj = c @ p["x_proj.weight"].T
        dt = F.softplus(proj[:, :rank] @ p["dt_proj.weight"].T + p["dt_proj.bias"])
        B_t, C_t = proj[:, rank : rank + N], proj[:, rank + N :]
        h = torch.exp(dt[..., None] * A) * h + dt[..., None] * B_t[:, None, :] * c[..., None]
        now = (h * C_t[:, None, :]).sum(-1)
        y = (previous if read == "lagged" else now) + p["D"] * c
        previous = now
        if z is not None:
            y = y * F.silu(z[:, t])
        outs.append(y @ p["out_proj.weight"].T)
    return torch.stack(outs, 1)
