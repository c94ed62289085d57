"""Readers of the past traces: predict x_t from h_{t-1} (the paper's predictor ablation).

Every predictor gets exactly the same inputs: the block input ``u_t`` (only the attention
predictors use it, to form a query) and the past trace states ``h_{t-1}^{(s)}`` of every
position, shape ``(B, T, S, D)``. They differ in what they can read:

* ``NoPredictor``: ``x̂_t = 0``, so the "error" is the input itself. The control arm: with no
  prediction loss, a linear predictor is an exact reparametrisation of this model (the context mix
  reads ``e_t = u_t - x̂_t`` linearly, so ``W_pred``, ``b_pred`` fold into the mix weights).
* ``LinearPredictor``: a static linear map of the concatenated past state ``[h^(1); ...; h^(S)]``.
  Sees the current past state only.
* ``AttentionPredictor`` with scope ``"state"``: attends over the ``S`` timescale slots of the
  current past state ``h_{t-1}``. It too sees nothing but the state, but it can pick slots by
  content; this is the setting where the data-processing argument applies verbatim.
* ``AttentionPredictor`` with scope ``"sequence"``: attends over the past states
  ``h_{-1}, ..., h_{t-1}`` of every earlier position (the paper's "causal attention"). It can
  read any earlier state, yet each one is still a fixed-decay mixture of the tokens before it.

Kernels: ``"linear_attention"`` uses the ``elu + 1`` feature map with normalisation (a
constant-size state when decoding); ``"softmax_attention"`` uses
``torch.nn.functional.scaled_dot_product_attention`` (a key/value cache that grows with the
sequence when decoding with scope ``"sequence"``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_spen import SPENConfig

_EPS = 1e-6


class NoPredictor(nn.Module):
    """x̂_t = 0: no reader of the traces."""

    def forward(
        self, u: torch.Tensor, h_prev: torch.Tensor, key_valid: torch.Tensor | None, state: dict | None
    ) -> torch.Tensor:
        return torch.zeros_like(u)


class LinearPredictor(nn.Module):
    """x̂_t = W [h_{t-1}^(1); ...; h_{t-1}^(S)] + b."""

    def __init__(self, config: SPENConfig) -> None:
        super().__init__()
        self.proj = nn.Linear(config.num_traces * config.hidden_size, config.hidden_size)

    def forward(
        self, u: torch.Tensor, h_prev: torch.Tensor, key_valid: torch.Tensor | None, state: dict | None
    ) -> torch.Tensor:
        return self.proj(h_prev.flatten(-2))


def _phi(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


class AttentionPredictor(nn.Module):
    """Multi-head attention from a query on ``u_t`` to keys/values made of past trace states."""

    def __init__(self, config: SPENConfig) -> None:
        super().__init__()
        D, S, H = config.hidden_size, config.num_traces, config.num_attention_heads
        self.kind = config.predictor  # "linear_attention" | "softmax_attention"
        self.scope = config.predictor_scope
        self.num_heads, self.head_dim = H, D // H
        self.q_proj = nn.Linear(D, D)
        if self.scope == "sequence":
            # One memory item per past position: the whole past state, all timescales.
            self.k_proj = nn.Linear(S * D, D)
            self.v_proj = nn.Linear(S * D, D)
        else:
            # One memory item per timescale slot; a learned slot embedding lets the reader
            # tell the timescales apart (their contents alone need not).
            self.k_proj = nn.Linear(D, D)
            self.v_proj = nn.Linear(D, D)
            self.slot_embedding = nn.Parameter(torch.zeros(S, D))
        self.o_proj = nn.Linear(D, D)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        # (..., D) -> (..., H, dh)
        return x.unflatten(-1, (self.num_heads, self.head_dim))

    def forward(
        self, u: torch.Tensor, h_prev: torch.Tensor, key_valid: torch.Tensor | None, state: dict | None
    ) -> torch.Tensor:
        """Predict x_t for each of the T new positions.

        Args:
            u: block input ``(B, T, D)``.
            h_prev: past trace states ``(B, T, S, D)`` (``h_prev[:, t] = h_{t-1}``).
            key_valid: ``(B, T)`` bool, False at padded positions (their memory items are ignored).
            state: per-layer decoding state (a dict updated in place), or ``None`` when training.
        """
        h_prev = h_prev.to(u.dtype)
        q = self._heads(self.q_proj(u))  # (B, T, H, dh)
        if self.scope == "state":
            out = self._attend_slots(q, h_prev)
        elif self.kind == "linear_attention":
            out = self._linear_sequence(q, h_prev, key_valid, state)
        else:
            out = self._softmax_sequence(q, h_prev, key_valid, state)
        return self.o_proj(out.flatten(-2))

    def _attend_slots(self, q: torch.Tensor, h_prev: torch.Tensor) -> torch.Tensor:
        k = self._heads(self.k_proj(h_prev) + self.slot_embedding)  # (B, T, S, H, dh)
        v = self._heads(self.v_proj(h_prev))
        B, T, S, H, dh = k.shape
        if self.kind == "softmax_attention":
            qs = q.reshape(B * T, H, 1, dh)
            ks = k.permute(0, 1, 3, 2, 4).reshape(B * T, H, S, dh)
            vs = v.permute(0, 1, 3, 2, 4).reshape(B * T, H, S, dh)
            return F.scaled_dot_product_attention(qs, ks, vs).view(B, T, H, dh)
        w = torch.einsum("bthd,btshd->btsh", _phi(q), _phi(k))
        w = w / (w.sum(2, keepdim=True) + _EPS)
        return torch.einsum("btsh,btshd->bthd", w, v)

    def _linear_sequence(
        self, q: torch.Tensor, h_prev: torch.Tensor, key_valid: torch.Tensor | None, state: dict | None
    ) -> torch.Tensor:
        # The running sums accumulate in at least float32 (a bf16 sum over T drifts), float64 in a float64 model.
        acc = torch.promote_types(q.dtype, torch.float32)
        fq = _phi(q).to(acc).transpose(1, 2)  # (B, H, T, dh)
        fk = _phi(self._heads(self.k_proj(h_prev.flatten(-2)))).to(acc).transpose(1, 2)
        v = self._heads(self.v_proj(h_prev.flatten(-2))).to(acc).transpose(1, 2)
        if key_valid is not None:
            fk = fk * key_valid[:, None, :, None]
        T = q.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        scores = (fq @ fk.transpose(-1, -2)).masked_fill(~causal, 0.0)  # (B, H, T, T)
        num = scores @ v
        den = scores.sum(-1)
        if state is not None:
            if "kv" in state:  # contributions of the positions already consumed
                num = num + fq @ state["kv"]
                den = den + (fq @ state["z"][..., None]).squeeze(-1)
            state["kv"] = state.get("kv", 0) + fk.transpose(-1, -2) @ v  # (B, H, dh, dh)
            state["z"] = state.get("z", 0) + fk.sum(2)  # (B, H, dh)
        out = num / (den[..., None] + _EPS)
        return out.transpose(1, 2).to(q.dtype)

    def _softmax_sequence(
        self, q: torch.Tensor, h_prev: torch.Tensor, key_valid: torch.Tensor | None, state: dict | None
    ) -> torch.Tensor:
        B, T = q.shape[:2]
        k = self._heads(self.k_proj(h_prev.flatten(-2))).transpose(1, 2)  # (B, H, T, dh)
        v = self._heads(self.v_proj(h_prev.flatten(-2))).transpose(1, 2)
        valid = key_valid if key_valid is not None else torch.ones(B, T, dtype=torch.bool, device=q.device)
        past = 0
        if state is not None:
            if "k" in state:
                past = state["k"].shape[2]
                k = torch.cat([state["k"], k], 2)
                v = torch.cat([state["v"], v], 2)
                valid = torch.cat([state["valid"], valid], 1)
            state["k"], state["v"], state["valid"] = k, v, valid
        L = past + T
        qpos = torch.arange(T, device=q.device)[:, None] + past
        kpos = torch.arange(L, device=q.device)[None, :]
        # Keys at padded positions are masked; the diagonal stays open so that a padded query
        # (whose output is discarded) never sees an all-masked row, which would give NaN.
        allowed = ((kpos <= qpos) & valid[:, None, None, :]) | (kpos == qpos)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=allowed)
        return out.transpose(1, 2)


def build_predictor(config: SPENConfig) -> nn.Module:
    if config.predictor == "none":
        return NoPredictor()
    if config.predictor == "linear":
        return LinearPredictor(config)
    return AttentionPredictor(config)


__all__ = ["NoPredictor", "LinearPredictor", "AttentionPredictor", "build_predictor"]
