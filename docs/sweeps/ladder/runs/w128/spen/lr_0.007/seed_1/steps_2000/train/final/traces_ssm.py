"""The selective state space trace (Mamba's S6) as a SPEN trace kind: ``trace="selective_ssm"``.

Per channel ``d`` a state of ``N`` numbers (``trace_state_size``), written with an input-dependent
step and key and read with input-dependent read vectors:

    dt_t        = softplus(W_up W_down u_t + b)                    (B, T, D)   low rank, as Mamba's dt_rank
    B_t         = W_B u_t,  C_t^(s) = W_C^(s) u_t                  (B, T, N), S read vectors of (B, T, N)
    A           = -exp(A_log)                                      (D, N)      S4D-real init A[d, n] = -(n + 1)
    h_t[d, n]   = exp(dt_t[d] A[d, n]) h_{t-1}[d, n] + dt_t[d] B_t[n] u_t[d]
    y_t^(s)[d]  = sum_n C_t^(s)[n] h_t[d, n]

The write ``B_t[n] u_t[d]`` is an outer product of an input-dependent key and the value: a binding
memory of D x N numbers per layer, which neither fixed-rate traces (any number of rates) nor the
input-gated diagonal ``selective`` trace have.

Slots: the predictor and the context mix of a SPEN block read ``S = len(trace_rates)`` slots of width
``D`` from the strictly past state. Here slot ``s`` at position ``t`` is ``y_{t-1}^(s)``, the ``s``-th
readout of the previous step (Mamba's output at ``t - 1`` when ``S = 1``): it depends on
``u_{<t}`` only, so predicting ``u_t`` from it stays a real prediction. (Reading ``h_{t-1}`` with
``C_t`` would let ``u_t`` into the slots through the read vector.)

Three implementations of the recurrence:

* :func:`.traces_naive.selective_ssm_naive` - the float64 reference, a plain loop over time;
* :func:`selective_scan` (here) under :func:`selective_ssm` - a two-level chunked scan of
  ``h_t = lam_t * h_{t-1} + b_t`` over ``(B, T, D, N)`` (a loop over the ``~sqrt(T)`` steps of a chunk,
  vectorised over all chunks, then the chunk-end carries solved by the same scan one level up) with a
  hand-written backward that is the same scan run backwards in time. Only products of factors in
  (0, 1] are formed: nothing overflows. Few operator calls, but several passes over ``(B, T, D, N)``
  tensors in memory;
* :class:`_FusedSelectiveSSM` (here) under :func:`selective_ssm` - one time step at a time, discretise,
  write and read out on a ``(B, D, N)`` slice that stays in cache, keeping only the states; backward
  recomputes each step's decays. ~16 operator calls per step. :func:`selective_ssm` takes it where it
  measured faster (:func:`use_fused_scan`: large ``B x D x N`` slices, on CPU).

Decoding (:meth:`SelectiveSSMTraces.forward` with ``T == 1``) keeps the ``(B, D, N)`` state and the
``(B, S, D)`` slots of the last step: constant size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_spen import SPENConfig
from .traces import accumulation_dtype

__all__ = ["selective_scan", "selective_ssm", "selective_ssm_step", "SelectiveSSMTraces", "dt_init_range",
           "use_fused_scan"]


def _chunk_length(T: int) -> int:
    """About ``sqrt(T)`` (the in-chunk loop and the number of chunks balance), a divisor of ``T`` when one is near."""
    root = math.isqrt(T - 1) + 1 if T > 1 else 1
    for C in range(root, min(T, 2 * root) + 1):
        if T % C == 0:
            return C
    return root


def _solve(lam: torch.Tensor, b: torch.Tensor, carry: torch.Tensor | None, reverse: bool = False) -> torch.Tensor:
    """All states of a first-order linear recurrence over dim 1 of ``lam, b`` ``(B, T, *F)``, no autograd.

    Forward: ``h_t = lam_t h_{t-1} + b_t`` from ``h_{-1} = carry``. Reverse: ``h_t = lam_t h_{t+1} + b_t`` from
    ``h_T = carry`` (the adjoint's direction). ``carry`` ``(B, *F)`` or ``None`` (zeros).

    Two levels: the ``C ~ sqrt(T)`` steps of every chunk at once (a loop of ``C`` vectorised steps over
    strided views, no copies), then the ``T / C`` chunk boundaries by this same function, then each
    chunk's states corrected by its incoming boundary state times the running product of ``lam``.
    """
    B, T = b.shape[:2]
    feat = b.shape[2:]
    C = _chunk_length(T)
    n = -(-T // C)
    if n * C != T:
        # Padding at the end with lam = 1, b = 0 leaves every state before it unchanged, and passes
        # the reverse carry through unchanged to step T - 1.
        lam = torch.cat([lam, lam.new_ones(B, n * C - T, *feat)], 1)
        b = torch.cat([b, b.new_zeros(B, n * C - T, *feat)], 1)
    lam_c, b_c = lam.reshape(B, n, C, *feat), b.reshape(B, n, C, *feat)
    local = torch.empty_like(b_c)  # states within each chunk from a zero boundary state
    decay = torch.empty_like(lam_c)  # products of lam from the chunk's boundary to each step
    order = range(C - 1, -1, -1) if reverse else range(C)
    first = order[0]
    local[:, :, first].copy_(b_c[:, :, first])
    decay[:, :, first].copy_(lam_c[:, :, first])
    for prev, i in zip(order, order[1:], strict=False):
        torch.addcmul(b_c[:, :, i], lam_c[:, :, i], local[:, :, prev], out=local[:, :, i])
        torch.mul(decay[:, :, prev], lam_c[:, :, i], out=decay[:, :, i])
    zero = carry[:, None] if carry is not None else None
    if n > 1:
        # The boundary states follow the same recurrence, with the chunks' products of lam as factors.
        last = order[-1]
        bounds = _solve(decay[:, :, last], local[:, :, last], carry, reverse)  # (B, n, *F)
        zero = zero if zero is not None else bounds.new_zeros(B, 1, *feat)
        incoming = torch.cat([bounds[:, 1:], zero], 1) if reverse else torch.cat([zero, bounds[:, :-1]], 1)
        local.addcmul_(decay, incoming[:, :, None])
    elif zero is not None:
        local.addcmul_(decay, zero[:, :, None])
    return local.reshape(B, n * C, *feat)[:, :T]


class _SelectiveScan(torch.autograd.Function):
    """``h_t = lam_t * h_{t-1} + b_t`` with the adjoint as the backward: the same scan, reversed in time.

    With ``G_t = dL/dh_t`` summed over every path, ``G_t = g_t + lam_{t+1} G_{t+1}``; then
    ``db_t = G_t``, ``dlam_t = G_t h_{t-1}`` and ``dh0 = lam_0 G_0``. Saves ``lam`` and the states.
    """

    @staticmethod
    def forward(ctx, lam: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None) -> torch.Tensor:
        h = _solve(lam, b, h0)
        ctx.save_for_backward(lam, h, h0)
        return h

    @staticmethod
    def backward(ctx, grad_h: torch.Tensor):
        lam, h, h0 = ctx.saved_tensors
        # The readout's backward can hand over a permuted layout; the in-chunk loop wants contiguous steps.
        grad_h = grad_h.contiguous()
        # lam_{t+1} for each t (the last step's is never used: nothing follows it).
        lam_next = torch.cat([lam[:, 1:], lam.new_zeros(lam[:, :1].shape)], 1)
        G = _solve(lam_next, grad_h, None, reverse=True)
        grad_lam = None
        if ctx.needs_input_grad[0]:
            grad_lam = torch.empty_like(G)
            torch.mul(G[:, 1:], h[:, :-1], out=grad_lam[:, 1:])
            if h0 is not None:
                torch.mul(G[:, 0], h0, out=grad_lam[:, 0])
            else:
                grad_lam[:, 0].zero_()
        grad_h0 = lam[:, 0] * G[:, 0] if h0 is not None and ctx.needs_input_grad[2] else None
        return grad_lam, G, grad_h0


def selective_scan(lam: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """All states ``(B, T, *F)`` of ``h_t = lam_t * h_{t-1} + b_t`` (``h_{-1} = h0``, zeros when ``None``).

    ``lam`` in (0, 1]; computed in the dtype of the inputs (all three must share it).
    """
    if lam.shape != b.shape or lam.dim() < 2:
        raise ValueError(f"lam and b must have one shape (B, T, ...), got {tuple(lam.shape)} and {tuple(b.shape)}")
    if h0 is not None and (h0.shape[0], *h0.shape[1:]) != (b.shape[0], *b.shape[2:]):
        raise ValueError(f"h0 must have shape {(b.shape[0], *b.shape[2:])}, got {tuple(h0.shape)}")
    if b.shape[1] == 0:
        return b.clone()
    return _SelectiveScan.apply(lam, b, h0)


class _FusedSelectiveSSM(torch.autograd.Function):
    """The S6 recurrence one time step at a time: discretise, write and read out on a ``(B, D, N)`` slice.

    Every per-step tensor is one state's size (cache-sized at the widths trained on CPU), where the
    chunked path makes several passes over ``(B, T, D, N)`` tensors (``lam``, ``b``, states, decay
    products) in memory. Forward saves the states and its own inputs, nothing else of size ``(B, T, D, N)``;
    backward recomputes ``lam_t = exp(dt_t A)`` per step while it runs the adjoint
    ``G_t = C_t^T gy_t + lam_{t+1} G_{t+1}`` backwards in time.

    Inputs are in one accumulation dtype; ``u, dt (B, T, D)``, ``A (D, N)``, ``Bk (B, T, N)``,
    ``C (B, T, S, N)``, ``h0 (B, D, N)`` or ``None``. Returns ``y (B, T, S, D)`` and ``h_last (B, D, N)``.
    """

    @staticmethod
    def forward(ctx, u, dt, A, Bk, C, h0):
        Bsz, T, D = u.shape
        N, S = A.shape[1], C.shape[2]
        # Time-major copies: each step's slice is contiguous.
        dt_t, dtu_t = dt.transpose(0, 1).contiguous(), (dt * u).transpose(0, 1).contiguous()
        Bk_t, C_t = Bk.transpose(0, 1).contiguous(), C.transpose(0, 1).contiguous()
        h = u.new_empty(T, Bsz, D, N)
        y = u.new_empty(T, Bsz, S, D)
        lam, write = u.new_empty(Bsz, D, N), u.new_empty(Bsz, D, N)
        for t in range(T):
            torch.mul(dt_t[t, :, :, None], A, out=lam).exp_()
            torch.mul(dtu_t[t, :, :, None], Bk_t[t, :, None, :], out=write)
            prev = h[t - 1] if t > 0 else h0
            if prev is None:
                h[t].copy_(write)
            else:
                torch.addcmul(write, lam, prev, out=h[t])
            torch.bmm(C_t[t], h[t].transpose(1, 2), out=y[t])
        ctx.save_for_backward(u, dt, A, Bk, C, h0, h)
        return y.transpose(0, 1), h[-1].clone()

    @staticmethod
    def backward(ctx, gy, g_last):
        # The per-step matmuls must stay in the accumulation dtype if backward runs under autocast.
        saved = ctx.saved_tensors
        with torch.autocast(device_type=saved[0].device.type, enabled=False):
            return _fused_backward(saved, gy, g_last)


def _fused_backward(saved: tuple[torch.Tensor, ...], gy: torch.Tensor | None, g_last: torch.Tensor | None):
    """The gradients of :class:`_FusedSelectiveSSM` wrt ``u, dt, A, Bk, C, h0``: the adjoint, one step at a time."""
    u, dt, A, Bk, C, h0, h = saved
    T, Bsz, D, N = h.shape
    S = C.shape[2]
    dt_t, dtu_t = dt.transpose(0, 1).contiguous(), (dt * u).transpose(0, 1).contiguous()
    Bk_t, C_t = Bk.transpose(0, 1).contiguous(), C.transpose(0, 1).contiguous()
    gy_t = gy.transpose(0, 1).contiguous() if gy is not None else u.new_zeros(T, Bsz, S, D)
    # carry = lam_{t+1} G_{t+1}: what reaches h_t from the steps after it (the final state's gradient first).
    carry = g_last.clone(memory_format=torch.contiguous_format) if g_last is not None else u.new_zeros(Bsz, D, N)
    G, lam, q = u.new_empty(Bsz, D, N), u.new_empty(Bsz, D, N), u.new_empty(Bsz, D, N)
    dA_acc = u.new_zeros(Bsz, D, N)
    g_write = u.new_empty(T, Bsz, D)  # dL/d(dt_t u_t)
    g_lam_A = u.new_zeros(T, Bsz, D)  # sum_n dL/d(dt_t A)[d, n] A[d, n]
    dBk, dC = u.new_empty(T, Bsz, N), u.new_empty(T, Bsz, S, N)
    for t in range(T - 1, -1, -1):
        torch.baddbmm(carry, gy_t[t].transpose(1, 2), C_t[t], out=G)  # G_t
        torch.bmm(gy_t[t], h[t], out=dC[t])
        torch.bmm(G, Bk_t[t, :, :, None], out=g_write[t, :, :, None])
        torch.bmm(dtu_t[t, :, None, :], G, out=dBk[t, :, None, :])
        torch.mul(dt_t[t, :, :, None], A, out=lam).exp_()
        torch.mul(lam, G, out=carry)  # lam_t G_t, for step t - 1 (and dh0 after the last)
        prev = h[t - 1] if t > 0 else h0
        if prev is not None:
            # q = dL/d(dt_t A) = G_t h_{t-1} lam_t
            torch.mul(carry, prev, out=q)
            dA_acc.addcmul_(q, dt_t[t, :, :, None])
            torch.mul(q, A, out=G)
            torch.sum(G, -1, out=g_lam_A[t])
    g_write, g_lam_A = g_write.transpose(0, 1), g_lam_A.transpose(0, 1)
    du = dt * g_write
    ddt = g_lam_A + u * g_write
    dA = dA_acc.sum(0)
    dh0 = carry if h0 is not None else None
    return du, ddt, dA, dBk.transpose(0, 1), dC.transpose(0, 1), dh0


def _check_ssm_inputs(
    u: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor, h0: torch.Tensor | None
) -> None:
    """Raise ValueError, naming the argument, unless the shapes fit one another (see :func:`selective_ssm`)."""
    if u.dim() != 3:
        raise ValueError(f"u must have shape (batch, time, channels), got {tuple(u.shape)}")
    Bsz, T, D = u.shape
    if A.dim() != 2 or A.shape[0] != D:
        raise ValueError(f"A must have shape (D={D}, N), got {tuple(A.shape)}")
    N = A.shape[1]
    if tuple(dt.shape) != (Bsz, T, D):
        raise ValueError(f"dt must have shape {(Bsz, T, D)}, got {tuple(dt.shape)}")
    if tuple(B.shape) != (Bsz, T, N):
        raise ValueError(f"B must have shape {(Bsz, T, N)}, got {tuple(B.shape)}")
    if C.dim() != 4 or tuple(C.shape[:2]) != (Bsz, T) or C.shape[3] != N:
        raise ValueError(f"C must have shape ({Bsz}, {T}, S, {N}), got {tuple(C.shape)}")
    if h0 is not None and tuple(h0.shape) != (Bsz, D, N):
        raise ValueError(f"h0 must have shape {(Bsz, D, N)}, got {tuple(h0.shape)}")


# The fused path pays ~16 small operator calls per time step, the chunked path a few passes over the whole
# (B, T, D, N) tensors: the fused one wins once a step's slice (B x D x N numbers) is large enough for the
# calls' overhead to be amortised, at T = 48 and at T = 512 alike; with one number per channel (N = 1) its
# per-step matrix products are too thin to win (BENCHMARKS.md, "Selective scan"; CPU, one thread). On a GPU
# the per-step launches would dominate: the chunked path (about 2 sqrt(T) steps) stays until measured there.
FUSED_MIN_SLICE = 8192
FUSED_MIN_STATE = 2


def use_fused_scan(batch: int, width: int, state_size: int, steps: int, device: torch.device) -> bool:
    """Whether :func:`selective_ssm` takes the fused per-step path for these sizes (see ``FUSED_MIN_SLICE``)."""
    return (device.type == "cpu" and steps >= 1 and state_size >= FUSED_MIN_STATE
            and batch * width * state_size >= FUSED_MIN_SLICE)  # fmt: skip


def selective_ssm(
    u: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    h0: torch.Tensor | None = None,
    fused: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The S6 recurrence over a sequence, the training path.

    Args:
        u: inputs ``(B, T, D)``.
        dt: steps ``(B, T, D)``, > 0.
        A: state matrix ``(D, N)``, < 0 (diagonal per channel).
        B: write keys ``(B, T, N)``.
        C: read vectors ``(B, T, S, N)``.
        h0: state before the first step ``(B, D, N)``; zeros when ``None``.
        fused: the fused per-step path (:class:`_FusedSelectiveSSM`) or the chunked scan
            (:func:`selective_scan`); ``None`` picks the faster by :func:`use_fused_scan`.

    Returns:
        ``(y, h_last)``: readouts ``y[:, t, s, d] = sum_n C[:, t, s, n] h_t[d, n]`` ``(B, T, S, D)`` and the
        final state ``(B, D, N)``, both in ``accumulation_dtype(u.dtype)`` (float32, or float64).
    """
    _check_ssm_inputs(u, dt, A, B, C, h0)
    acc = accumulation_dtype(u.dtype)
    if fused is None:
        fused = use_fused_scan(u.shape[0], u.shape[2], A.shape[1], u.shape[1], u.device)
    with torch.autocast(device_type=u.device.type, enabled=False):
        dt, A, B, C = dt.to(acc), A.to(acc), B.to(acc), C.to(acc)
        if fused and u.shape[1] > 0:
            return _FusedSelectiveSSM.apply(u.to(acc), dt, A, B, C, h0.to(acc) if h0 is not None else None)
        lam = torch.exp(dt[..., None] * A)  # (B, T, D, N), in (0, 1]
        b = (dt * u.to(acc))[..., None] * B[:, :, None, :]
        h = selective_scan(lam, b, h0.to(acc) if h0 is not None else None)
        y = torch.einsum("btdn,btsn->btsd", h, C)
    return y, h[:, -1]


def selective_ssm_step(
    u_t: torch.Tensor, dt_t: torch.Tensor, A: torch.Tensor, B_t: torch.Tensor, C_t: torch.Tensor, h: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step for decoding: ``u_t, dt_t (B, D)``, ``B_t (B, N)``, ``C_t (B, S, N)``, ``h (B, D, N)``.

    Returns ``(y_t (B, S, D), h_t (B, D, N))`` in ``accumulation_dtype(u_t.dtype)``.
    """
    acc = accumulation_dtype(u_t.dtype)
    with torch.autocast(device_type=u_t.device.type, enabled=False):
        dt_t, A, B_t, C_t = dt_t.to(acc), A.to(acc), B_t.to(acc), C_t.to(acc)
        h = torch.exp(dt_t[..., None] * A) * h.to(acc) + (dt_t * u_t.to(acc))[..., None] * B_t[:, None, :]
        return torch.einsum("bdn,bsn->bsd", h, C_t), h


def dt_init_range(trace_rates: list[float]) -> tuple[float, float]:
    """The range of the initial steps ``dt``: the slowest mode (``A = -1``) spans the configured rates.

    Mode ``n = 0`` of a channel decays by ``exp(-dt)`` per step, the write rate ``a = 1 - exp(-dt)``
    of an EMA: ``dt = -log(1 - a)`` puts it at rate ``a``. The faster modes (``A = -(n + 1)``) of the
    same channel decay faster still, as in S4D.
    """
    return -math.log1p(-min(trace_rates)), -math.log1p(-max(trace_rates))


class SelectiveSSMTraces(nn.Module):
    """The ``selective_ssm`` trace of a SPEN block: S6 parameters and the slots ``y_{t-1}^(1..S)``.

    Parameters: ``dt_down`` (D -> R, R = ``selective_rank``) and ``dt_up`` (R -> D, with the bias ``b``),
    ``x_proj`` (D -> N + S N: the key ``B_t`` and the S read vectors), ``A_log`` ``(D, N)``. The values of
    ``A_log`` and of ``dt_up``'s bias are written in ``SPENPreTrainedModel._init_weights`` (S4D-real
    ``A[d, n] = -(n + 1)``; ``dt`` log-uniform over channels in :func:`dt_init_range`).
    """

    def __init__(self, config: SPENConfig) -> None:
        super().__init__()
        D, N, S = config.hidden_size, config.trace_state_size, config.num_traces
        self.num_traces, self.state_size = S, N
        self.dt_down = nn.Linear(D, config.selective_rank, bias=False)
        self.dt_up = nn.Linear(config.selective_rank, D)
        self.x_proj = nn.Linear(D, N + S * N, bias=False)
        self.A_log = nn.Parameter(torch.empty(D, N))

    def parameters_for(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(dt, A, B, C)`` for inputs ``u (B, T, D)``: ``(B, T, D)``, ``(D, N)``, ``(B, T, N)``, ``(B, T, S, N)``."""
        acc = accumulation_dtype(u.dtype)
        dt = F.softplus(self.dt_up(self.dt_down(u)).to(acc))
        A = -torch.exp(self.A_log.to(acc))
        keys = self.x_proj(u).to(acc)
        N = self.state_size
        return dt, A, keys[..., :N], keys[..., N:].unflatten(-1, (self.num_traces, N))

    def forward(self, u: torch.Tensor, state: dict[str, torch.Tensor] | None) -> torch.Tensor:
        """The slots ``y_{t-1}^(s)`` for every position, ``(B, T, S, D)`` in ``u``'s dtype.

        ``state`` (a decoding state, updated in place) holds ``"ssm"`` ``(B, D, N)``, the state after the
        last consumed token, and ``"traces"`` ``(B, S, D)``, its readouts: the next token's slots.
        """
        Bsz, T, D = u.shape
        acc = accumulation_dtype(u.dtype)
        h0 = state.get("ssm") if state is not None else None
        y0 = state.get("traces") if state is not None else None
        if y0 is None:
            y0 = u.new_zeros(Bsz, self.num_traces, D, dtype=acc)
        dt, A, B, C = self.parameters_for(u)
        if T == 1:  # decoding: the one-step update
            h0 = h0 if h0 is not None else u.new_zeros(Bsz, D, self.state_size, dtype=acc)
            y, h_last = selective_ssm_step(u[:, 0], dt[:, 0], A, B[:, 0], C[:, 0], h0)
            y = y[:, None]
        else:
            y, h_last = selective_ssm(u, dt, A, B, C, h0)
        if state is not None:
            state["ssm"], state["traces"] = h_last, y[:, -1]
        return torch.cat([y0[:, None], y[:, :-1]], 1).to(u.dtype)
