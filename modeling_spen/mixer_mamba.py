"""Mamba's mixer as a SPEN context sublayer: ``mixer="mamba"``.

A SPEN block's context sublayer reads the block input ``u_t = LayerNorm(x_t)`` and adds what it returns to the
residual stream. With ``mixer="mamba"`` that sublayer is Mamba's mixer (Gu & Dao 2023; transformers'
``MambaMixer``), written from its equations, with the same parameter names and shapes so that a transformers
``MambaMixer``'s ``state_dict`` loads into it as it is:

    x_t, z_t   = split(W_in u_t)                                      (B, T, E) each, E = expand x D
    c_t        = SiLU(causal depthwise conv_K(x)_t + b_conv)          kernel K over time, per channel
    dt_t       = softplus(W_dt (W_x c_t)[:R] + b_dt)                  (B, T, E), R = selective_rank
    B_t, C_t   = (W_x c_t)[R:R+N], (W_x c_t)[R+N:]                    (B, T, N) each, input-dependent
    h_t[e, n]  = exp(dt_t[e] A[e, n]) h_{t-1}[e, n] + dt_t[e] B_t[n] c_t[e]     A = -exp(A_log)
    y_t        = C_t . h_t + D c_t                                    the current token's read
    out_t      = W_out (y_t * SiLU(z_t))

Three switches make the ablation of issue 49 (each a config field; the defaults are Mamba):

* ``mamba_conv_kernel``: ``K = 4`` (Mamba); ``K = 1`` leaves no previous-token feature at write time;
* ``mamba_read``: ``"current"`` reads ``C_t . h_t`` (the query chooses what is read); ``"lagged"`` reads
  ``C_{t-1} . h_{t-1}``, the previous step's readout (what the ``selective_ssm`` trace's slots hold);
* ``mamba_gate``: ``True`` multiplies by ``SiLU(z_t)``; ``False`` drops the gate (and ``W_in`` makes x only).

The scan is :func:`.traces_ssm.selective_ssm` with one read vector (its fused or chunked path, checked against
:func:`.traces_naive.selective_ssm_naive`); the whole mixer's float64 reference is
:func:`.traces_naive.mamba_mixer_naive`, and ``tests/test_mixer_mamba.py`` checks this module against both and
against transformers' ``MambaMixer`` on shared weights (values, gradients, with a cached state, in ``generate()``).

Decoding keeps, per layer, the ssm state ``(B, E, N)``, the last ``K - 1`` conv inputs ``(B, E, K - 1)`` and, for
the lagged read, the last readout ``(B, E)``: constant size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init

from .configuration_spen import SPENConfig
from .traces import accumulation_dtype
from .traces_ssm import selective_ssm, selective_ssm_step

__all__ = ["MambaMixer", "mamba_state_numbers"]

# Mamba's dt initialisation (transformers' MambaConfig defaults): log-uniform in [min, max], floored, and the
# projection's weight uniform in +-rank^-0.5.
DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 1e-1, 1e-4


class MambaMixer(nn.Module):
    """Mamba's mixer over SPEN's block input (see the module docstring). Parameters, as transformers names them:
    ``in_proj`` (D -> 2E, or E without the gate), ``conv1d`` (depthwise, kernel K, with bias), ``x_proj``
    (E -> R + 2N), ``dt_proj`` (R -> E, with bias), ``A_log`` ``(E, N)``, ``D`` ``(E,)``, ``out_proj`` (E -> D)."""

    def __init__(self, config: SPENConfig) -> None:
        super().__init__()
        D = config.hidden_size
        E, N, R, K = config.mamba_expand * D, config.trace_state_size, config.selective_rank, config.mamba_conv_kernel
        self.inner, self.state_size, self.rank, self.kernel = E, N, R, K
        self.gate, self.lagged = config.mamba_gate, config.mamba_read == "lagged"
        self.in_proj = nn.Linear(D, 2 * E if self.gate else E, bias=False)
        self.conv1d = nn.Conv1d(E, E, kernel_size=K, groups=E, padding=K - 1, bias=True)
        self.x_proj = nn.Linear(E, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, E, bias=True)
        self.A_log = nn.Parameter(torch.empty(E, N))
        self.D = nn.Parameter(torch.empty(E))
        self.out_proj = nn.Linear(E, D, bias=False)

    @torch.no_grad()
    def reset_mamba_parameters(self) -> None:
        """Mamba's own initialisation of the mixer (transformers' ``MambaPreTrainedModel._init_weights``): S4D-real
        ``A``, ``D = 1``, ``dt`` log-uniform in [1e-3, 1e-1], kaiming-uniform conv and out-projection."""
        E, N = self.A_log.shape
        init.copy_(self.A_log, torch.log(torch.arange(1, N + 1, dtype=torch.float32)).expand(E, N))
        init.ones_(self.D)
        bound = self.rank**-0.5
        init.uniform_(self.dt_proj.weight, -bound, bound)
        dt = torch.exp(torch.rand(E) * (math.log(DT_MAX) - math.log(DT_MIN)) + math.log(DT_MIN)).clamp(min=DT_FLOOR)
        init.copy_(self.dt_proj.bias, dt + torch.log(-torch.expm1(-dt)))  # the inverse of softplus
        init.kaiming_uniform_(self.conv1d.weight, a=math.sqrt(5))
        init.zeros_(self.conv1d.bias)
        init.kaiming_uniform_(self.out_proj.weight, a=math.sqrt(5))

    def _conv(self, x: torch.Tensor, state: dict[str, torch.Tensor] | None) -> torch.Tensor:
        """The causal depthwise conv of ``x (B, T, E)`` after the ``K - 1`` inputs the state kept, SiLU applied."""
        Bsz, T, E = x.shape
        x = x.transpose(1, 2)
        K = self.kernel
        if K > 1:
            past = state.get("conv") if state is not None else None
            past = x.new_zeros(Bsz, E, K - 1) if past is None else past.to(x.dtype)
            x = torch.cat([past, x], -1)
            if state is not None:
                state["conv"] = x[:, :, -(K - 1):]
        out = F.conv1d(x, self.conv1d.weight, self.conv1d.bias, groups=E)  # (B, E, T): no padding, the past is in x
        return F.silu(out).transpose(1, 2)

    def forward(self, u: torch.Tensor, valid: torch.Tensor | None = None,
                state: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
        """The mixer's output ``(B, T, D)`` for block input ``u (B, T, D)``.

        ``valid`` ``(B, T)`` (False at padded positions): their inputs and conv outputs are zeroed, as transformers
        does, so left padding writes nothing into the state. ``state`` (a decoding state, updated in place) holds
        ``"ssm"`` ``(B, E, N)``, ``"conv"`` ``(B, E, K - 1)`` and, for the lagged read, ``"read"`` ``(B, E)``.
        """
        acc = accumulation_dtype(u.dtype)
        mask = None if valid is None else valid[..., None].to(u.dtype)
        if mask is not None:
            u = u * mask
        xz = self.in_proj(u)
        x, z = xz.chunk(2, -1) if self.gate else (xz, None)
        c = self._conv(x, state)
        if mask is not None:
            c = c * mask
        dt_r, B, C = self.x_proj(c).split([self.rank, self.state_size, self.state_size], -1)
        dt = F.softplus(self.dt_proj(dt_r).to(acc))
        A = -torch.exp(self.A_log.to(acc))
        h0 = state.get("ssm") if state is not None else None
        if c.shape[1] == 1 and h0 is not None:  # decoding: the one-step update
            y, h_last = selective_ssm_step(c[:, 0], dt[:, 0], A, B[:, 0], C[:, 0, None], h0)
            y = y[:, None, 0]
        else:
            y, h_last = selective_ssm(c, dt, A, B, C[:, :, None], h0)
            y = y[:, :, 0]  # (B, T, E): C_t . h_t
        if self.lagged:
            read0 = state.get("read") if state is not None else None
            read0 = y.new_zeros(y.shape[0], 1, y.shape[2]) if read0 is None else read0[:, None]
            y_last = y[:, -1]
            y = torch.cat([read0, y[:, :-1]], 1)
            if state is not None:
                state["read"] = y_last
        if state is not None:
            state["ssm"] = h_last
        y = y.to(c.dtype) + c * self.D.to(c.dtype)
        if z is not None:
            y = y * F.silu(z)
        return self.out_proj(y)


def mamba_state_numbers(config: SPENConfig) -> dict[str, int]:
    """What one layer of a ``mixer="mamba"`` SPEN keeps to continue a sequence, in numbers, by part."""
    E = config.mamba_expand * config.hidden_size
    parts = {"selective state (E x N)": E * config.trace_state_size,
             "convolution window (E x (K - 1))": E * (config.mamba_conv_kernel - 1)}
    if config.mamba_read == "lagged":
        parts["last readout (E)"] = E
    return parts
