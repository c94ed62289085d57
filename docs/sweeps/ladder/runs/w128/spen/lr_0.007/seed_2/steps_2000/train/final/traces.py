"""The EMA trace operator: h_t = (1 - a) * h_{t-1} + a * x_t, several write rates at once.

Every trace variant of SPEN is the diagonal linear recurrence

    h_t = lam_t * h_{t-1} + b_t,        lam_t = 1 - a_t,   b_t = a_t * x_t,

run independently for each timescale ``s`` and channel ``d``. What differs is the shape of
the write rate ``a``:

* ``(S,)``        fixed decays, shared by all channels (the paper's EMA traces);
* ``(S, D)``      learned per-channel decays, still independent of the input (a linear
                  time-invariant filter);
* ``(B, T, S, D)`` input-dependent decays (a gated, "selective" recurrence).

The implementations live side by side, in the style of flash-linear-attention:

* :func:`.traces_naive.ema_traces_naive` - the reference: a plain loop over time in float64.
  Tests only.
* :func:`ema_traces` (this file) - the training path, dispatching on the rates:

  - fixed rates ``(S,)`` (the production model): one pass over time in chunks of
    ``FIXED_RATE_CHUNK_SIZE`` steps, each chunk's S traces one small GEMM of the chunk's inputs
    stacked with the carried state, and a hand-written backward that is the same filter run
    backwards in time (:mod:`.traces_fixed`; nothing but the rates saved for backward);
  - on CUDA with Triton importable, rates without gradient go to the fused kernel of
    :mod:`.traces_triton` (one pass over time per channel block, all S traces from one read);
  - learned rates ``(S,)``/``(S, D)`` with gradient: a two-level chunked Toeplitz form (a C x C
    decay matrix inside chunks, the chunk-end carries solved by the same operator one level
    up), differentiated by autograd (:mod:`.traces_chunk`);
  - input-dependent rates: a log-depth (Hillis-Steele) scan (:mod:`.traces_chunk`).

* :func:`ema_step` (this file) - one step, for decoding with a recurrent state.

Numerics: traces are computed and returned in :func:`accumulation_dtype` of the input, the wider
of float32 and the input's dtype: float32 for bf16/fp16 inputs and under autocast (a bf16
Toeplitz gives ~1e-2 relative error), float64 for float64 inputs (so a float64 model checks the
float32 one). Only non-negative powers of ``lam`` are ever formed: ``lam**(-t)`` over a whole
sequence overflows float32 after ~128 steps for a = 0.5.
"""

from __future__ import annotations

import torch

from .traces_chunk import DEFAULT_CHUNK_SIZE, chunked_lti, scan_selective
from .traces_fixed import FIXED_RATE_CHUNK_SIZE, ema_traces_fixed

try:  # optional fused GPU kernel; a plain relative import so trust_remote_code copies the file
    from .traces_triton import ema_traces_triton as _ema_triton
except ImportError:  # pragma: no cover - depends on the environment
    _ema_triton = None

__all__ = ["ema_traces", "ema_step", "accumulation_dtype", "check_inputs"]


def check_inputs(x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None) -> None:
    """Raise ValueError, naming the argument, unless the shapes fit ``x (B, T, D)`` and ``h0 (B, S, D)``."""
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


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype traces of ``dtype`` inputs are computed and kept in: float32, or float64 for float64."""
    return torch.promote_types(dtype, torch.float32)


def ema_step(x_t: torch.Tensor, alpha: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """One recurrent step: ``(1 - alpha) * h + alpha * x_t``, in ``accumulation_dtype(x_t.dtype)``.

    Args:
        x_t: the new input, ``(B, D)``.
        alpha: ``(S,)``, ``(S, D)`` or ``(B, S, D)`` write rates for this step.
        h: the previous state ``(B, S, D)``, as :func:`ema_traces` returns it.
    """
    acc = accumulation_dtype(x_t.dtype)
    a = alpha.to(acc)
    if a.dim() == 1:
        a = a[:, None]
    h = h.to(acc)
    return torch.lerp(h, x_t.to(acc)[:, None, :].expand_as(h), a.expand_as(h))


def ema_traces(
    x: torch.Tensor,
    alpha: torch.Tensor,
    h0: torch.Tensor | None = None,
    chunk_size: int | None = None,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """EMA traces of ``x`` for every write rate in ``alpha``: the parallel training path.

    Args:
        x: inputs ``(B, T, D)``, any float dtype.
        alpha: write rates in (0, 1): ``(S,)`` fixed, ``(S, D)`` per-channel, or
            ``(B, T, S, D)`` input-dependent.
        h0: state before the first step, ``(B, S, D)``; zeros when ``None``.
        chunk_size: chunk length of the chunked forms (time-invariant rates only); ``None``
            picks the path's tuned default.
        backend: ``"auto"`` (the fused Triton kernel for CUDA tensors with non-learned
            time-invariant rates when Triton is importable, else PyTorch), ``"torch"`` or
            ``"triton"`` (an error where the kernel cannot serve the call).

    Returns:
        ``(traces, h_last)``: traces ``(B, T, S, D)`` with ``traces[:, t] = h_t``, and the final
        state ``(B, S, D)`` to continue from, both in ``accumulation_dtype(x.dtype)`` (float32,
        or float64 for float64 inputs).
    """
    check_inputs(x, alpha, h0)
    B, T, D = x.shape
    if chunk_size is not None and chunk_size < 2:  # a chunk of one step would not be a chunk
        raise ValueError(f"chunk_size must be >= 2, got {chunk_size}")
    if backend not in ("auto", "torch", "triton"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'triton', got {backend!r}")
    S = alpha.shape[-2] if alpha.dim() == 4 else alpha.shape[0]
    acc = accumulation_dtype(x.dtype)
    h0a = h0.to(acc) if h0 is not None else None
    if T == 0:
        return x.new_zeros(B, 0, S, D, dtype=acc), (h0a if h0a is not None else x.new_zeros(B, S, D, dtype=acc))
    # The kernel keeps float32 state and has no backward for the rates: float64 inputs, learned and
    # input-dependent rates stay in PyTorch.
    kernel_fits = alpha.dim() in (1, 2) and not alpha.requires_grad and acc == torch.float32
    if backend == "triton" or (backend == "auto" and x.is_cuda and kernel_fits and _ema_triton is not None):
        if _ema_triton is None or not kernel_fits:
            raise ValueError(
                "backend='triton' needs Triton, inputs below float64 and (S,) or (S, D) rates without gradient"
            )
        traces = _ema_triton(x, alpha, h0a)
        return traces, traces[:, -1]
    # Decays and accumulation in the accumulation dtype whatever autocast says: each solver below
    # computes in the dtype of the tensors it is given.
    with torch.autocast(device_type=x.device.type, enabled=False):
        a = alpha.to(acc)
        if a.dim() == 1 and not alpha.requires_grad:
            # Fixed rates, the paper's traces: one GEMM per chunk with a hand-written backward.
            traces = ema_traces_fixed(x, a, h0a, chunk_size or FIXED_RATE_CHUNK_SIZE)
        elif a.dim() == 4:
            xa = x.to(acc)[:, :, None, :]
            traces = scan_selective(a * xa, 1.0 - a, h0a)
        else:
            # Learned rates need d/d(alpha): autograd through the Toeplitz form gives it.
            a2 = a[:, None] if a.dim() == 1 else a
            xa = x.to(acc)[:, :, None, :]
            traces = chunked_lti(a2 * xa, torch.log1p(-a2), h0a, chunk_size or DEFAULT_CHUNK_SIZE)
    return traces, traces[:, -1]
