"""The EMA trace operator: h_t = (1 - a) * h_{t-1} + a * x_t, several write rates at once.

Every trace variant of SPEN is the diagonal linear recurrence

    h_t = lam_t * h_{t-1} + b_t,        lam_t = 1 - a_t,   b_t = a_t * x_t,

run independently for each timescale ``s`` and channel ``d``. What differs is the shape of
the write rate ``a``:

* ``(S,)``        fixed decays, shared by all channels (the paper's EMA traces);
* ``(S, D)``      learned per-channel decays, still independent of the input (a linear
                  time-invariant filter);
* ``(B, T, S, D)`` input-dependent decays (a gated, "selective" recurrence).

Three implementations live side by side, in the style of flash-linear-attention:

* :func:`ema_traces_naive` - the reference: a plain loop over time in float64. Tests only.
* :func:`ema_traces` - the training path. Time-invariant rates use a two-level chunked
  Toeplitz form (a C x C decay matrix inside chunks, the chunk-end carries solved by the same
  operator one level up); input-dependent rates use a log-depth (Hillis-Steele) scan. No
  Python loop over time steps.
* :func:`ema_step` - one step, for decoding with a recurrent state.

Numerics: everything runs in float32 even under bf16 autocast (a bf16 Toeplitz gives ~1e-2
relative error), and only non-negative powers of ``lam`` are ever formed: ``lam**(-t)`` over
a whole sequence overflows float32 after ~128 steps for a = 0.5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

DEFAULT_CHUNK_SIZE = 64

__all__ = ["ema_traces", "ema_traces_naive", "ema_step", "DEFAULT_CHUNK_SIZE"]


def _check(x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None) -> None:
    if x.dim() != 3:
        raise ValueError(f"x must have shape (batch, time, channels), got {tuple(x.shape)}")
    B, T, D = x.shape
    if alpha.dim() == 1:
        pass
    elif alpha.dim() == 2:
        if alpha.shape[1] not in (1, D):
            raise ValueError(f"alpha of shape (S, D) must have D={D}, got {tuple(alpha.shape)}")
    elif alpha.dim() == 4:
        if alpha.shape[0] != B or alpha.shape[1] != T or alpha.shape[3] != D:
            raise ValueError(f"input-dependent alpha must be (B={B}, T={T}, S, D={D}), got {tuple(alpha.shape)}")
    else:
        raise ValueError(f"alpha must be (S,), (S, D) or (B, T, S, D), got {tuple(alpha.shape)}")
    S = alpha.shape[-2] if alpha.dim() == 4 else alpha.shape[0]
    if h0 is not None and tuple(h0.shape) != (B, S, D):
        raise ValueError(f"h0 must have shape (B, S, D)={(B, S, D)}, got {tuple(h0.shape)}")


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
    _check(x, alpha, h0)
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


def ema_step(x_t: torch.Tensor, alpha: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """One recurrent step: ``(1 - alpha) * h + alpha * x_t``.

    Args:
        x_t: the new input, ``(B, D)``.
        alpha: ``(S,)``, ``(S, D)`` or ``(B, S, D)`` write rates for this step.
        h: the previous state ``(B, S, D)``, float32.
    """
    a = alpha.float()
    if a.dim() == 1:
        a = a[:, None]
    return torch.lerp(h, x_t.float()[:, None, :].expand_as(h), a.expand_as(h))


def _chunked_lti(b: torch.Tensor, log_lam: torch.Tensor, h0: torch.Tensor | None, chunk: int) -> torch.Tensor:
    """Solve ``h_t = lam * h_{t-1} + b_t`` for time-invariant ``lam`` given as ``log(lam)``.

    b: (B, T, S, D) float32; log_lam: (S, 1) or (S, D). Returns all states (B, T, S, D).
    Powers are formed as exp(k * log_lam) with k >= 0: lam^C of a fast decay underflows to 0
    one level up, while its log stays finite, so values and gradients stay finite.
    """
    B, T, S, D = b.shape
    C = min(chunk, T)
    n = -(-T // C)
    if n * C != T:
        b = F.pad(b, (0, 0, 0, 0, 0, n * C - T))
    bc = b.view(B, n, C, S, D)
    idx = torch.arange(C, device=b.device)
    diff = idx[:, None] - idx[None, :]  # i - j
    causal = diff >= 0
    # decay[s, d', i, j] = lam^(i-j) for j <= i, else 0: only non-negative powers are formed.
    expo = diff.clamp(min=0).to(b.dtype)
    decay = torch.exp(log_lam[:, :, None, None] * expo) * causal
    if log_lam.shape[1] == 1:
        local = torch.einsum("sij,bnjsd->bnisd", decay[:, 0], bc)
    else:
        local = torch.einsum("sdij,bnjsd->bnisd", decay, bc)
    # Carry into chunk k is the true state at the end of chunk k-1; the chunk ends follow the
    # same recurrence with decay lam^C, so solve them with this very operator, one level up.
    lam_pow = torch.exp(log_lam[None, :, :] * (idx + 1).to(b.dtype)[:, None, None])  # (C, S, D') = lam^(i+1)
    if n == 1:
        carry_in = h0[:, None] if h0 is not None else None
    else:
        ends = local[:, :, -1]  # (B, n, S, D)
        ends_true = _chunked_lti(ends, log_lam * C, h0, chunk)  # (B, n, S, D), decay lam^C
        prev = ends_true[:, :-1]
        first = h0[:, None] if h0 is not None else torch.zeros_like(prev[:, :1])
        carry_in = torch.cat([first, prev], 1)
    out = local if carry_in is None else local + lam_pow[None, None] * carry_in[:, :, None]
    return out.reshape(B, n * C, S, D)[:, :T]


def _scan_selective(b: torch.Tensor, lam: torch.Tensor, h0: torch.Tensor | None) -> torch.Tensor:
    """Solve ``h_t = lam_t * h_{t-1} + b_t`` with input-dependent ``lam_t`` by a log-depth scan.

    Composition of steps is associative: (l1, b1) then (l2, b2) = (l1 * l2, l2 * b1 + b2), so
    ceil(log2 T) vectorised doubling steps give every prefix (Hillis-Steele). Only products of
    factors in (0, 1) are formed, which can underflow to zero but never overflow.
    """
    T = b.shape[1]
    A, X = lam, b
    step = 1
    while step < T:
        X = X + A * F.pad(X[:, :-step], (0, 0, 0, 0, step, 0))
        A = A * F.pad(A[:, :-step], (0, 0, 0, 0, step, 0), value=1.0)
        step *= 2
    if h0 is not None:
        X = X + A * h0[:, None]
    return X


def ema_traces(
    x: torch.Tensor,
    alpha: torch.Tensor,
    h0: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> tuple[torch.Tensor, torch.Tensor]:
    """EMA traces of ``x`` for every write rate in ``alpha``: the parallel training path.

    Args:
        x: inputs ``(B, T, D)``, any float dtype.
        alpha: write rates in (0, 1): ``(S,)`` fixed, ``(S, D)`` per-channel, or
            ``(B, T, S, D)`` input-dependent.
        h0: state before the first step, ``(B, S, D)``; zeros when ``None``.
        chunk_size: chunk length of the Toeplitz form (time-invariant rates only).

    Returns:
        ``(traces, h_last)``: float32 traces ``(B, T, S, D)`` with ``traces[:, t] = h_t``, and
        the final state ``(B, S, D)`` to continue from.
    """
    _check(x, alpha, h0)
    B, T, D = x.shape
    if chunk_size < 2:  # a chunk of one step would never shorten the carry recursion
        raise ValueError(f"chunk_size must be >= 2, got {chunk_size}")
    # Keep decays and accumulation in float32 whatever autocast says.
    with torch.autocast(device_type=x.device.type, enabled=False):
        xf = x.float()[:, :, None, :]
        a = alpha.float()
        S = a.shape[-2] if a.dim() == 4 else a.shape[0]
        h0f = h0.float() if h0 is not None else None
        if T == 0:
            empty = xf.new_zeros(B, 0, S, D)
            return empty, (h0f if h0f is not None else xf.new_zeros(B, S, D))
        if a.dim() == 4:
            traces = _scan_selective(a * xf, 1.0 - a, h0f)
        else:
            a2 = a[:, None] if a.dim() == 1 else a
            traces = _chunked_lti(a2 * xf, torch.log1p(-a2), h0f, chunk_size)
    return traces, traces[:, -1]
