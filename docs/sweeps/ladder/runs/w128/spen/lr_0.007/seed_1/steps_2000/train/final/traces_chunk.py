"""Chunked solvers of ``h_t = lam_t * h_{t-1} + b_t`` differentiated by autograd.

* :func:`chunked_lti` - time-invariant ``lam`` (learned rates, which need d/d(alpha)): a two-level
  chunked Toeplitz form, a C x C decay matrix inside chunks and the chunk-end carries solved by the
  same operator one level up;
* :func:`scan_selective` - input-dependent ``lam_t`` (selective rates): a log-depth
  (Hillis-Steele) scan.

Both compute in the dtype of the tensors they are given (:func:`.traces.ema_traces` passes its
accumulation dtype: float32, or float64 for float64 inputs). Only non-negative powers of ``lam``
are ever formed: ``lam**(-t)`` over a whole sequence overflows float32 after ~128 steps for a = 0.5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["DEFAULT_CHUNK_SIZE", "chunked_lti", "scan_selective"]

# Chunk length of the Toeplitz form used for learned rates (autograd through it).
DEFAULT_CHUNK_SIZE = 64


def chunked_lti(b: torch.Tensor, log_lam: torch.Tensor, h0: torch.Tensor | None, chunk: int) -> torch.Tensor:
    """Solve ``h_t = lam * h_{t-1} + b_t`` for time-invariant ``lam`` given as ``log(lam)``.

    b: (B, T, S, D) float32 or float64; log_lam: (S, 1) or (S, D), same dtype. Returns all states
    (B, T, S, D) in that dtype.
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
        ends_true = chunked_lti(ends, log_lam * C, h0, chunk)  # (B, n, S, D), decay lam^C
        prev = ends_true[:, :-1]
        first = h0[:, None] if h0 is not None else torch.zeros_like(prev[:, :1])
        carry_in = torch.cat([first, prev], 1)
    out = local if carry_in is None else local + lam_pow[None, None] * carry_in[:, :, None]
    return out.reshape(B, n * C, S, D)[:, :T]


def scan_selective(b: torch.Tensor, lam: torch.Tensor, h0: torch.Tensor | None) -> torch.Tensor:
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
