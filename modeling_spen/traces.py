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

* :func:`ema_traces_naive` - the reference: a plain loop over time in float64. Tests only.
* :func:`ema_traces` - the training path, dispatching on the rates:

  - fixed rates ``(S,)`` (the production model): one pass over time in chunks of
    ``FIXED_RATE_CHUNK_SIZE`` steps, each chunk's S traces one small GEMM of the chunk's inputs
    stacked with the carried state, and a hand-written backward that is the same filter run
    backwards in time (:class:`_FixedRateEMA`; nothing but the rates saved for backward);
  - on CUDA with Triton importable, rates without gradient go to the fused kernel of
    :mod:`.traces_triton` (one pass over time per channel block, all S traces from one read);
  - learned rates ``(S,)``/``(S, D)`` with gradient: a two-level chunked Toeplitz form (a C x C
    decay matrix inside chunks, the chunk-end carries solved by the same operator one level
    up), differentiated by autograd;
  - input-dependent rates: a log-depth (Hillis-Steele) scan.

* :func:`ema_step` - one step, for decoding with a recurrent state.

Numerics: everything runs in float32 even under bf16 autocast (a bf16 Toeplitz gives ~1e-2
relative error), and only non-negative powers of ``lam`` are ever formed: ``lam**(-t)`` over
a whole sequence overflows float32 after ~128 steps for a = 0.5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # optional fused GPU kernel; a plain relative import so trust_remote_code copies the file
    from .traces_triton import ema_traces_triton as _ema_triton
except ImportError:  # pragma: no cover - depends on the environment
    _ema_triton = None

# Chunk length of the Toeplitz form used for learned rates (autograd through it).
DEFAULT_CHUNK_SIZE = 64
# Chunk length of the fixed-rate GEMM path. A chunk costs 2 * (C + S) flops per output and one
# trip of a Python loop: long chunks waste arithmetic, short ones pay the loop. On one CPU core
# C = 16 was fastest at B*T*D = 1e6 and within noise of 8 and 32 at 1e7, where C = 64 was ~30%
# slower forward+backward (`python -m benchmarks.run --only chunks`, BENCHMARKS.md).
FIXED_RATE_CHUNK_SIZE = 16

__all__ = ["ema_traces", "ema_traces_naive", "ema_step", "DEFAULT_CHUNK_SIZE", "FIXED_RATE_CHUNK_SIZE"]


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


def _fixed_rate_matrices(alpha: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two per-chunk transfer matrices of the fixed-rate filter, built in float64, cast to fp32.

    With ``S`` rates and chunk length ``C`` (rows and columns are flattened ``(step, rate)``):

    * forward ``(C*S, C+S)``: ``[h_i^(s)] = fwd @ [x_0 .. x_{C-1}; h_{-1}^(1) .. h_{-1}^(S)]``,
      entries ``a_s lam_s^(i-j)`` for ``j <= i`` and the carry column ``lam_s^(i+1)``;
    * backward ``(C+S, C*S+S)``: the adjoint, ``[dx_j; G_0^(s)] = bwd @ [dh_i^(s); G_C^(s)]``
      where ``G_t^(s) = sum_{i>=t} lam_s^(i-t) dh_i^(s)`` is the adjoint state run backwards in
      time; ``dx_j = sum_s a_s G_j^(s)``.

    Only non-negative powers of ``lam`` appear, so nothing overflows for any ``C``.
    """
    a = alpha.detach().double()
    lam = 1.0 - a
    S, C = a.shape[0], chunk
    steps = torch.arange(C, dtype=torch.float64, device=a.device)
    diff = steps[:, None] - steps[None, :]  # i - j
    toeplitz = torch.where(diff >= 0, lam[:, None, None] ** diff.clamp(min=0), 0.0)  # (S, i, j)
    eye = torch.eye(S, dtype=torch.float64, device=a.device)
    fwd = torch.cat(
        [
            (a[:, None, None] * toeplitz).permute(1, 0, 2),  # (i, s, j)
            lam[None, :, None] ** (steps[:, None, None] + 1) * eye,  # (i, s, s'): carry h_{-1}
        ],
        -1,
    ).reshape(C * S, C + S)
    # dx_j = sum_{i>=j, s} a_s lam_s^(i-j) dh_i^(s) + sum_s a_s lam_s^(C-j) G_C^(s)
    dx_rows = torch.cat(
        [
            (a[:, None, None] * toeplitz).permute(2, 0, 1).transpose(1, 2),  # (j, i, s)
            (a[None, :] * lam[None, :] ** (C - steps[:, None]))[:, None, :],  # (j, 1, s)
        ],
        1,
    ).reshape(C, C * S + S)
    # G_0^(s) = sum_i lam_s^i dh_i^(s) + lam_s^C G_C^(s)
    g_rows = torch.cat(
        [(lam[None, :] ** steps[:, None])[None] * eye[:, None, :], (lam**C * eye)[:, None, :]], 1
    ).reshape(S, C * S + S)
    return fwd.float(), torch.cat([dx_rows, g_rows], 0).float()


class _FixedRateEMA(torch.autograd.Function):
    """Fixed rates ``(S,)``: one pass over time in chunks, one small GEMM per chunk, exact.

    Each chunk's S traces come from one matrix product of the chunk's inputs stacked with the
    carried state (the previous chunk's last traces), written straight into the output. The
    working set of a chunk stays in cache, so memory traffic is close to the minimum: read x
    once, write the S traces once. The backward pass is the same filter run backwards in time
    (the adjoint), so nothing but the rates is saved: no activations, no recomputation.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None, chunk: int) -> torch.Tensor:
        B, T, D = x.shape
        S = alpha.shape[0]
        C = min(chunk, T)
        fwd, bwd = _fixed_rate_matrices(alpha, C)
        out = x.new_empty(B, T, S, D, dtype=torch.float32)
        xa = x.new_zeros(B, C + S, D, dtype=torch.float32)  # [chunk inputs; carried state]
        if h0 is not None:
            xa[:, C:].copy_(h0)
        for t0 in range(0, T, C):
            c = min(C, T - t0)
            # A short last chunk uses the first c*S rows: their columns j >= c are zero.
            xa[:, :c].copy_(x[:, t0 : t0 + c])
            torch.matmul(fwd[: c * S], xa, out=out[:, t0 : t0 + c].view(B, c * S, D))
            xa[:, C:].copy_(out[:, t0 + c - 1])
        ctx.save_for_backward(alpha)
        ctx.bwd, ctx.chunk, ctx.x_dtype, ctx.has_h0 = bwd, C, x.dtype, h0 is not None
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (alpha,) = ctx.saved_tensors
        bwd, C = ctx.bwd, ctx.chunk
        B, T, S, D = grad_out.shape
        grad_x = grad_out.new_empty(B, T, D, dtype=ctx.x_dtype)
        wa = grad_out.new_zeros(B, C * S + S, D, dtype=torch.float32)  # [chunk dh; G after chunk]
        ga = grad_out.new_empty(B, C + S, D, dtype=torch.float32)  # [chunk dx; G at chunk start]
        last = (T - 1) // C * C
        for t0 in range(last, -1, -C):
            c = min(C, T - t0)
            # Only the last chunk can be short, and it is the first one visited: G after it is 0,
            # and zeroing the unused rows of wa removes the steps past T.
            if c < C:
                wa[:, c * S : C * S].zero_()
            wa[:, : c * S].view(B, c, S, D).copy_(grad_out[:, t0 : t0 + c])
            torch.matmul(bwd, wa, out=ga)
            grad_x[:, t0 : t0 + c].copy_(ga[:, :c])
            wa[:, C * S :].copy_(ga[:, C:])
        grad_h0 = None
        if ctx.has_h0 and ctx.needs_input_grad[2]:
            grad_h0 = (1.0 - alpha.float())[:, None] * wa[:, C * S :]  # dh_{-1} = lam * G_0
        return grad_x, None, grad_h0, None


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
        ``(traces, h_last)``: float32 traces ``(B, T, S, D)`` with ``traces[:, t] = h_t``, and
        the final state ``(B, S, D)`` to continue from.
    """
    _check(x, alpha, h0)
    B, T, D = x.shape
    if chunk_size is not None and chunk_size < 2:  # a chunk of one step would not be a chunk
        raise ValueError(f"chunk_size must be >= 2, got {chunk_size}")
    if backend not in ("auto", "torch", "triton"):
        raise ValueError(f"backend must be 'auto', 'torch' or 'triton', got {backend!r}")
    S = alpha.shape[-2] if alpha.dim() == 4 else alpha.shape[0]
    h0f = h0.float() if h0 is not None else None
    if T == 0:
        return x.new_zeros(B, 0, S, D, dtype=torch.float32), (
            h0f if h0f is not None else x.new_zeros(B, S, D, dtype=torch.float32)
        )
    # The kernel has no backward for the rates: learned or input-dependent rates stay in PyTorch.
    kernel_fits = alpha.dim() in (1, 2) and not alpha.requires_grad
    if backend == "triton" or (backend == "auto" and x.is_cuda and kernel_fits and _ema_triton is not None):
        if _ema_triton is None or not kernel_fits:
            raise ValueError("backend='triton' needs Triton and (S,) or (S, D) rates without gradient")
        traces = _ema_triton(x, alpha, h0f)
        return traces, traces[:, -1]
    # Keep decays and accumulation in float32 whatever autocast says.
    with torch.autocast(device_type=x.device.type, enabled=False):
        a = alpha.float()
        if a.dim() == 1 and not alpha.requires_grad:
            # Fixed rates, the paper's traces: one GEMM per chunk with a hand-written backward.
            traces = _FixedRateEMA.apply(x, a, h0f, chunk_size or FIXED_RATE_CHUNK_SIZE)
        elif a.dim() == 4:
            xf = x.float()[:, :, None, :]
            traces = _scan_selective(a * xf, 1.0 - a, h0f)
        else:
            # Learned rates need d/d(alpha): autograd through the Toeplitz form gives it.
            a2 = a[:, None] if a.dim() == 1 else a
            xf = x.float()[:, :, None, :]
            traces = _chunked_lti(a2 * xf, torch.log1p(-a2), h0f, chunk_size or DEFAULT_CHUNK_SIZE)
    return traces, traces[:, -1]
