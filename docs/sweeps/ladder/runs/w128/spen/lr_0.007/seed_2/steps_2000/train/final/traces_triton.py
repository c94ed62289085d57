"""Fused Triton kernels for time-invariant EMA traces (GPU path of :func:`.traces.ema_traces`).

The recurrence ``h_t = (1 - a) h_{t-1} + a x_t`` is memory-bound: 2 flops per output. The
bandwidth-optimal form is one program per (batch row, block of channels) that walks time once,
keeps the S states in registers in float32, reads each ``x_t`` once and writes all S traces:
4 + 4 S bytes per token-channel forward in fp32 inputs (2 + 4 S for bf16), the floor of any
implementation that returns float32 traces.

The backward pass is the same filter run backwards in time (the adjoint),

    G_t = dL/dh_t + lam * G_{t+1},        dL/dx_t = sum_s a_s G_t^(s),     dL/dh_{-1} = lam * G_0,

so it saves nothing but the rates: one reverse pass reads the S trace gradients once and writes
``dx`` once. Gradients for the rates are not provided; :func:`.traces.ema_traces` keeps learned
rates on its PyTorch path.

Triton is optional: without it this module still imports, and :func:`ema_traces_triton` is
``None``-safe to reference but raises when called. Correctness is tested on CPU through Triton's
interpreter (``TRITON_INTERPRET=1``, ``tests/test_traces_triton.py``); speed needs a GPU
(``benchmarks/gpu.sh``).
"""

from __future__ import annotations

import torch

try:  # optional dependency: only relative imports are followed for trust_remote_code
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the environment
    triton = None

__all__ = ["ema_traces_triton", "HAS_TRITON"]

HAS_TRITON = triton is not None

if HAS_TRITON:

    @triton.jit
    def _ema_fwd_kernel(
        x_ptr, alpha_ptr, h0_ptr, out_ptr,
        T, D,
        stride_xb, stride_xt,
        stride_ob, stride_ot,
        S: tl.constexpr, S_PAD: tl.constexpr, BLOCK_D: tl.constexpr, HAS_H0: tl.constexpr,
    ):  # fmt: skip
        # 64-bit row offsets: B*T*S*D passes 2**31 elements at realistic sizes.
        b = tl.program_id(0).to(tl.int64)
        d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        s = tl.arange(0, S_PAD)
        mask_d = d < D
        mask = (s[:, None] < S) & mask_d[None, :]
        sd = s[:, None] * D + d[None, :]  # offsets inside one (S, D) slab
        a = tl.load(alpha_ptr + sd, mask=mask, other=0.0)
        lam = 1.0 - a
        if HAS_H0:
            h = tl.load(h0_ptr + b * S * D + sd, mask=mask, other=0.0).to(tl.float32)
        else:
            h = tl.zeros([S_PAD, BLOCK_D], dtype=tl.float32)
        x_ptrs = x_ptr + b * stride_xb + d
        o_ptrs = out_ptr + b * stride_ob + sd
        for _ in range(T):
            x_t = tl.load(x_ptrs, mask=mask_d, other=0.0).to(tl.float32)
            h = lam * h + a * x_t[None, :]
            tl.store(o_ptrs, h, mask=mask)
            x_ptrs += stride_xt  # pointer increments: 64-bit, no t * stride products
            o_ptrs += stride_ot

    @triton.jit
    def _ema_bwd_kernel(
        dout_ptr, alpha_ptr, dx_ptr, dh0_ptr,
        T, D,
        stride_gb, stride_gt, stride_gs,
        stride_xb, stride_xt,
        S: tl.constexpr, S_PAD: tl.constexpr, BLOCK_D: tl.constexpr, WRITE_DH0: tl.constexpr,
    ):  # fmt: skip
        b = tl.program_id(0).to(tl.int64)
        d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
        s = tl.arange(0, S_PAD)
        mask_d = d < D
        mask = (s[:, None] < S) & mask_d[None, :]
        sd = s[:, None] * D + d[None, :]
        a = tl.load(alpha_ptr + sd, mask=mask, other=0.0)
        lam = 1.0 - a
        g = tl.zeros([S_PAD, BLOCK_D], dtype=tl.float32)
        # int64 from b: T may arrive as a compile-time constant (Triton specialises ints == 1).
        last = b * 0 + (T - 1)
        g_ptrs = dout_ptr + b * stride_gb + last * stride_gt + s[:, None] * stride_gs + d[None, :]
        dx_ptrs = dx_ptr + b * stride_xb + last * stride_xt + d
        for _ in range(T):  # t = T-1 .. 0
            dh = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
            g = lam * g + dh
            dx = tl.sum(a * g, axis=0)
            tl.store(dx_ptrs, dx.to(dx_ptr.dtype.element_ty), mask=mask_d)
            g_ptrs -= stride_gt
            dx_ptrs -= stride_xt
        if WRITE_DH0:
            tl.store(dh0_ptr + b * S * D + sd, lam * g, mask=mask)


def _launch_config(B: int, D: int, S: int) -> tuple[int, int]:
    """Channel block width and warps per program.

    Each program walks all of T serially, so the only parallelism is B * D / BLOCK_D programs:
    blocks of 128 channels (512 B per fp32 trace row, full coalesced transactions) while that
    still gives enough programs to keep every SM busy with loads in flight, narrower blocks (down
    to 32 channels, 128 B rows) when B * D is small.
    """
    block_d = min(128, triton.next_power_of_2(D))
    while block_d > 32 and B * triton.cdiv(D, block_d) < 1024:
        block_d //= 2
    warps = max(1, min(4, block_d * triton.next_power_of_2(S) // 128))
    return block_d, warps


class _EMATriton(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None) -> torch.Tensor:
        B, T, D = x.shape
        S = alpha.shape[0]
        x = x if x.stride(-1) == 1 else x.contiguous()
        out = torch.empty(B, T, S, D, device=x.device, dtype=torch.float32)
        block_d, warps = _launch_config(B, D, S)
        grid = (B, triton.cdiv(D, block_d))
        h0c = h0.contiguous() if h0 is not None else out  # dummy pointer when absent
        _ema_fwd_kernel[grid](
            x, alpha, h0c, out, T, D,
            x.stride(0), x.stride(1), out.stride(0), out.stride(1),
            S=S, S_PAD=triton.next_power_of_2(S), BLOCK_D=block_d, HAS_H0=h0 is not None,
            num_warps=warps,
        )  # fmt: skip
        ctx.save_for_backward(alpha)
        ctx.x_dtype, ctx.has_h0 = x.dtype, h0 is not None
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        (alpha,) = ctx.saved_tensors
        B, T, S, D = grad_out.shape
        if grad_out.stride(-1) != 1:
            grad_out = grad_out.contiguous()
        dx = torch.empty(B, T, D, device=grad_out.device, dtype=ctx.x_dtype)
        write_dh0 = ctx.has_h0 and ctx.needs_input_grad[2]
        dh0 = torch.empty(B, S, D, device=grad_out.device, dtype=torch.float32) if write_dh0 else dx
        block_d, warps = _launch_config(B, D, S)
        grid = (B, triton.cdiv(D, block_d))
        _ema_bwd_kernel[grid](
            grad_out, alpha, dx, dh0, T, D,
            grad_out.stride(0), grad_out.stride(1), grad_out.stride(2),
            dx.stride(0), dx.stride(1),
            S=S, S_PAD=triton.next_power_of_2(S), BLOCK_D=block_d, WRITE_DH0=write_dh0,
            num_warps=warps,
        )  # fmt: skip
        return dx, None, dh0 if write_dh0 else None


def ema_traces_triton(x: torch.Tensor, alpha: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """All S EMA traces of ``x`` from the fused kernel: float32 ``(B, T, S, D)``.

    Args:
        x: inputs ``(B, T, D)``, fp32/bf16/fp16, on a CUDA device (or any device under
            ``TRITON_INTERPRET=1``).
        alpha: time-invariant write rates ``(S,)`` or ``(S, D)``; no gradient flows to them.
        h0: state before the first step ``(B, S, D)``, or ``None`` for zeros.
    """
    if not HAS_TRITON:
        raise RuntimeError("ema_traces_triton needs the triton package")
    if alpha.dim() not in (1, 2):
        raise ValueError(f"ema_traces_triton takes (S,) or (S, D) rates, got {tuple(alpha.shape)}")
    D = x.shape[-1]
    # One (S, D) slab of rates serves both shapes; it is tiny next to x.
    a = alpha.detach().float()
    a = (a[:, None] if a.dim() == 1 else a).expand(-1, D).contiguous()
    return _EMATriton.apply(x, a, h0.float() if h0 is not None else None)
