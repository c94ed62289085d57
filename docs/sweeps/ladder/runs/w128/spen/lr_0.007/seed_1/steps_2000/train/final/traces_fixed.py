"""Fixed write rates ``(S,)``, the paper's traces: one GEMM per chunk and a hand-written adjoint.

Each chunk's S traces come from one matrix product of the chunk's inputs stacked with the carried
state; the backward pass is the same filter run backwards in time, so nothing but the rates is
saved for it. It computes in the dtype of the rates it is given (:func:`.traces.ema_traces` passes
them in its accumulation dtype: float32, or float64 for float64 inputs). The float64 reference is
:func:`.traces_naive.ema_traces_naive`.
"""

from __future__ import annotations

import torch

__all__ = ["FIXED_RATE_CHUNK_SIZE", "ema_traces_fixed"]

# Chunk length of the fixed-rate GEMM path. A chunk costs 2 * (C + S) flops per output and one
# trip of a Python loop: long chunks waste arithmetic, short ones pay the loop. On one CPU core
# C = 16 was fastest at B*T*D = 1e6 and within noise of 8 and 32 at 1e7, where C = 64 was ~30%
# slower forward+backward (`python -m benchmarks.run --only chunks`, BENCHMARKS.md).
FIXED_RATE_CHUNK_SIZE = 16


def _fixed_rate_matrices(alpha: torch.Tensor, chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The two per-chunk transfer matrices of the fixed-rate filter, built in float64, cast to ``alpha``'s dtype.

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
    return fwd.to(alpha.dtype), torch.cat([dx_rows, g_rows], 0).to(alpha.dtype)


class _FixedRateEMA(torch.autograd.Function):
    """Fixed rates ``(S,)``: one pass over time in chunks, one small GEMM per chunk, exact.

    Each chunk's S traces come from one matrix product of the chunk's inputs stacked with the
    carried state (the previous chunk's last traces), written straight into the output. The
    working set of a chunk stays in cache, so memory traffic is close to the minimum: read x
    once, write the S traces once. The backward pass is the same filter run backwards in time
    (the adjoint), so nothing but the rates is saved: no activations, no recomputation.
    """

    @staticmethod
    def forward(x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None,
                chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
        # Returns the traces and the adjoint's matrix, which backward needs: built once here beside the
        # forward's, instead of again in backward (setup_context sees no local of forward).
        B, T, D = x.shape
        S = alpha.shape[0]
        C = min(chunk, T)
        fwd, bwd = _fixed_rate_matrices(alpha, C)
        out = x.new_empty(B, T, S, D, dtype=alpha.dtype)
        xa = x.new_zeros(B, C + S, D, dtype=alpha.dtype)  # [chunk inputs; carried state]
        if h0 is not None:
            xa[:, C:].copy_(h0)
        for t0 in range(0, T, C):
            c = min(C, T - t0)
            # A short last chunk uses the first c*S rows: their columns j >= c are zero.
            xa[:, :c].copy_(x[:, t0 : t0 + c])
            torch.matmul(fwd[: c * S], xa, out=out[:, t0 : t0 + c].view(B, c * S, D))
            xa[:, C:].copy_(out[:, t0 + c - 1])
        return out, bwd

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: tuple[torch.Tensor, torch.Tensor]) -> None:
        # The setup_context form is what torch.func transforms (vmap: train.py --seeds) require.
        x, alpha, h0, chunk = inputs
        out, bwd = output
        ctx.mark_non_differentiable(bwd)
        ctx.save_for_backward(alpha)
        ctx.bwd, ctx.chunk, ctx.x_dtype, ctx.has_h0 = bwd, min(chunk, x.shape[1]), x.dtype, h0 is not None

    @staticmethod
    def vmap(info, in_dims: tuple, x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None, chunk: int):
        # Under vmap (an ensemble of models, one per seed) the mapped dimension folds into the batch: every
        # row runs the same filter, so one call serves all models. The rates are the same for every model.
        if in_dims[1] is not None:
            raise NotImplementedError("vmap over the fixed rates is not supported: they are the same for every model")
        n = info.batch_size

        def fold(t: torch.Tensor, dim: int | None) -> torch.Tensor:
            t = t.movedim(dim, 0) if dim is not None else t.expand(n, *t.shape)
            return t.flatten(0, 1)

        out, bwd = _FixedRateEMA.apply(fold(x, in_dims[0]), alpha, None if h0 is None else fold(h0, in_dims[2]), chunk)
        return (out.unflatten(0, (n, -1)), bwd), (0, None)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor, _grad_bwd: None):
        (alpha,) = ctx.saved_tensors
        bwd, C = ctx.bwd, ctx.chunk
        B, T, S, D = grad_out.shape
        grad_x = grad_out.new_empty(B, T, D, dtype=ctx.x_dtype)
        wa = grad_out.new_zeros(B, C * S + S, D, dtype=bwd.dtype)  # [chunk dh; G after chunk]
        ga = grad_out.new_empty(B, C + S, D, dtype=bwd.dtype)  # [chunk dx; G at chunk start]
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
            grad_h0 = (1.0 - alpha)[:, None] * wa[:, C * S :]  # dh_{-1} = lam * G_0
        return grad_x, None, grad_h0, None


def ema_traces_fixed(
    x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None = None, chunk: int = FIXED_RATE_CHUNK_SIZE
) -> torch.Tensor:
    """All traces ``(B, T, S, D)`` of ``x`` ``(B, T, D)`` for fixed rates ``alpha`` ``(S,)`` (no gradient).

    Computed and returned in ``alpha``'s dtype (float32 or float64); ``h0`` must have that dtype too.
    """
    return _FixedRateEMA.apply(x, alpha, h0, chunk)[0]
