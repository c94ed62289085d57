"""transformers' ``MambaForCausalLM`` on SPEN's checked scan: the recall map's transformers arms at CPU speed.

Without the ``mamba-ssm`` kernels, transformers' ``MambaMixer`` runs its selective scan as a Python loop over time
that autograd unrolls (about 2.6 s a training step on the recall map's sizes). :func:`fast_mamba_scan` swaps that
one function, ``transformers.models.mamba.modeling_mamba.mamba_selective_scan``, for :func:`selective_scan`: the
same arguments and result, computed by :func:`modeling_spen.traces_ssm.selective_ssm` (checked against a float64
loop in tests/test_traces_ssm.py). Everything else is transformers' own code: the in-projection, the conv, the
gate, the out-projection, the init, the cache. ``tests/test_mamba_scan.py`` checks a whole ``MambaForCausalLM``'s
logits and gradients with and without the swap on the same weights.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from transformers.models.mamba import modeling_mamba

from modeling_spen.traces_ssm import selective_ssm

__all__ = ["fast_mamba_scan", "selective_scan"]


def selective_scan(
    hidden_states: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None,
    delta_softplus: bool = False,
    return_last_state: bool = False,
    **kwargs: object,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """transformers' ``mamba_selective_scan`` (the kernel's layout: ``hidden_states, dt, z (B, E, T)``,
    ``B, C (B, N, T)``, ``A (E, N)``, ``D, delta_bias (E,)``) computed by SPEN's selective scan."""
    if delta_bias is not None:
        dt = dt + delta_bias.to(dt.dtype)[..., None]
    if delta_softplus:
        dt = F.softplus(dt)
    u = hidden_states.transpose(1, 2)
    y, last = selective_ssm(u, dt.transpose(1, 2), A, B.transpose(1, 2), C.transpose(1, 2)[:, :, None])
    out = y[:, :, 0].transpose(1, 2)  # (B, E, T)
    if D is not None:
        out = out + hidden_states * D[None, :, None]
    if z is not None:
        out = out * F.silu(z)
    return (out, last) if return_last_state else out


@contextlib.contextmanager
def fast_mamba_scan() -> Iterator[None]:
    """Within the block, transformers' Mamba models scan with :func:`selective_scan`; restored on exit."""
    original = modeling_mamba.mamba_selective_scan
    modeling_mamba.mamba_selective_scan = selective_scan
    try:
        yield
    finally:
        modeling_mamba.mamba_selective_scan = original
