"""Attention Residuals (Kimi Team, arXiv 2603.15031): softmax attention over depth instead of the residual sum.

The ordinary residual stream adds every sublayer output with unit weight, ``x_{l+1} = x_l + f_l(x_l)``:
its magnitude grows with depth and each layer's share of it is diluted. Attention Residuals form the
input of sublayer ``l`` as

    x_l = sum_{i < l} alpha_{i -> l} v_i,      alpha_{i -> l} = softmax_i(w_l . RMSNorm(v_i)),

with ``v_0`` the token embedding, ``v_i`` the output of sublayer ``i`` and ``w_l`` one learned
pseudo-query vector per sublayer. The weights depend on the input through the keys ``RMSNorm(v_i)``,
per token and position: nothing crosses positions, so causality and the decoding state are untouched.

Design choices (ours, documented in ``SPENConfig``): a SPEN block has two sublayers (context mix,
sparse FFN), so a model of ``L`` blocks has ``2 L`` pseudo-queries plus one for the final output read
by the final LayerNorm; the key normalisation has no learned scale; the pseudo-queries start at zero,
so at initialisation every sublayer reads the uniform average of its sources.

Block AttnRes (``residual_block_size = k``, our reading of the report's block variant): consecutive groups
of ``k`` sublayers are summed as ordinary residuals, and each sublayer attends over the embedding, the
sums of the completed groups and the partial sum of its own group: ``O(2 L / k)`` sources instead of
``O(2 L)``. ``k = 1`` is the full variant. The grouping lives in ``SPENModel._attention_residual_blocks``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["DepthAttention"]


class DepthAttention(nn.Module):
    """One pseudo-query ``w`` and the softmax over depth it drives: ``sum_i softmax_i(w . RMSNorm(v_i)) v_i``."""

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        # Zero at init (written in SPENPreTrainedModel._init_weights): a uniform average of the sources.
        self.query = nn.Parameter(torch.empty(hidden_size))
        self.eps = eps

    def weights(self, values: torch.Tensor) -> torch.Tensor:
        """Depth weights ``(B, T, K)`` over the sources ``values`` ``(B, T, K, D)``, in float32 or wider."""
        acc = torch.promote_types(values.dtype, torch.float32)
        # Scores in float32 whatever autocast says: a bf16 dot product moves the softmax by ~1e-2.
        with torch.autocast(device_type=values.device.type, enabled=False):
            keys = F.rms_norm(values.to(acc), (values.shape[-1],), eps=self.eps)
            return torch.softmax(keys @ self.query.to(acc), dim=-1)

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        """The sublayer input ``(B, T, D)`` from its sources ``values`` ``(B, T, K, D)`` (embedding first)."""
        alpha = self.weights(values).to(values.dtype)
        return (alpha[..., None] * values).sum(-2)
