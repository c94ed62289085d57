"""Identity at lag: how much of *which* token was seen k steps back a linear probe reads from a hidden state.

From the hidden state at position t (every layer), a linear probe (a ridge-regression classifier, one per
lag) predicts the token at t - k, for k = 1..K. Targets are the ``num_classes`` most frequent tokens of the
probe text, so that every class has enough examples; the probe is fit on 80% of the sequences and scored on
the rest. Chance is the frequency of the most common class. A fixed-decay EMA blurs identity with lag;
attention need not copy it into the residual stream at all (its memory is the key/value cache), which is
why the recall map (:mod:`eval.recall`) exists beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ema_boundary.usage import UsageError

__all__ = ["IdentityError", "fit_lag_probes", "hidden_states", "identity_at_lag"]


class IdentityError(UsageError):
    """A model the identity probe cannot read (no hidden states): one line."""


def fit_lag_probes(
    features: torch.Tensor,
    tokens: torch.Tensor,
    lags: Sequence[int],
    num_classes: int = 32,
    ridge: float = 1.0,
) -> dict[str, list[float]]:
    """Fit one linear probe per lag on ``features`` to predict ``tokens`` at t - lag.

    The probe is a ridge-regression classifier (least squares onto one-hot targets, argmax to
    predict; as scikit-learn's RidgeClassifier): linear, solved in closed form, deterministic, and
    cheap enough to fit 64 lags x every layer on a CPU.

    Args:
        features: ``(N, T, D)`` hidden states of N sequences.
        tokens: ``(N, T)`` the token ids of the same sequences.
        lags: the lags k >= 0 to probe (position t predicts ``tokens[:, t - k]``).
        num_classes: probe targets are the most frequent token ids of ``tokens``; positions whose
            target is another token are left out.
        ridge: L2 penalty on the standardised features.

    Returns:
        ``{"accuracy": [...], "chance": [...]}``, one entry per lag, on held-out sequences
        (the last 20% of the N sequences); chance is the majority class of the fitting set.
    """
    if features.dim() != 3 or tokens.shape != features.shape[:2]:
        raise ValueError(
            f"features (N, T, D) and tokens (N, T) disagree: {tuple(features.shape)}, {tuple(tokens.shape)}"
        )
    N, T, D = features.shape
    kmax = max(lags)
    if kmax >= T:
        raise ValueError(f"largest lag {kmax} needs sequences longer than {T}")
    n_train = max(1, int(round(0.8 * N)))
    if n_train >= N:
        raise ValueError("need at least 2 sequences to hold some out")
    classes = torch.bincount(tokens.flatten()).argsort(descending=True)[:num_classes]
    to_class = torch.full((int(tokens.max()) + 1,), -1, dtype=torch.long)
    to_class[classes] = torch.arange(len(classes))

    # Positions t >= kmax so that every lag has a target; features standardised per channel.
    x = features[:, kmax:].double()
    mean, std = x[:n_train].reshape(-1, D).mean(0), x[:n_train].reshape(-1, D).std(0) + 1e-6
    x = torch.cat([(x - mean) / std, torch.ones_like(x[..., :1])], -1)  # bias column
    xtr, xte = x[:n_train].reshape(-1, D + 1), x[n_train:].reshape(-1, D + 1)
    penalty = ridge * torch.eye(D + 1, dtype=x.dtype)
    penalty[-1, -1] = 0.0  # the bias is not penalised
    accuracy, chance = [], []
    for k in lags:
        y = to_class[tokens[:, kmax - k : T - k]]
        ytr, yte = y[:n_train].reshape(-1), y[n_train:].reshape(-1)
        keep_tr, keep_te = ytr >= 0, yte >= 0
        a, target = xtr[keep_tr], F.one_hot(ytr[keep_tr], len(classes)).double()
        weights = torch.linalg.solve(a.T @ a + penalty, a.T @ target)
        pred = (xte[keep_te] @ weights).argmax(-1)
        accuracy.append(float((pred == yte[keep_te]).double().mean()) if keep_te.any() else float("nan"))
        counts = torch.bincount(ytr[keep_tr], minlength=len(classes))
        chance.append(float(counts.max() / counts.sum()))
    return {"accuracy": accuracy, "chance": chance}


def _layer_states(model: torch.nn.Module, out: Any) -> list[torch.Tensor]:
    """The per-layer hidden states of a forward output, however the architecture returns them: a
    tuple (transformers' convention: embeddings first), or one stacked ``(layers, B, T, D)`` tensor."""
    states = getattr(out, "hidden_states", None)
    if isinstance(states, torch.Tensor):
        states = list(states.unbind(0)) if states.dim() == 4 else [states]
    if not states:
        raise IdentityError(f"{type(model).__name__} returns no hidden_states with output_hidden_states=True: "
                            "identity at lag needs them")
    return list(states)


@torch.no_grad()
def hidden_states(model: torch.nn.Module, ids: torch.Tensor, batch_size: int = 8) -> list[torch.Tensor]:
    """Hidden states of every layer (embeddings first) for ``ids`` ``(N, T)``: a list of ``(N, T, D)``."""
    model.eval()
    per_layer: list[list[torch.Tensor]] = []
    for start in range(0, ids.shape[0], batch_size):
        out = model(input_ids=ids[start : start + batch_size], output_hidden_states=True, use_cache=False)
        states = _layer_states(model, out)
        if not per_layer:
            per_layer = [[] for _ in states]
        for i, h in enumerate(states):
            per_layer[i].append(h.float())
    return [torch.cat(chunks) for chunks in per_layer]


def identity_at_lag(model: torch.nn.Module, ids: torch.Tensor, max_lag: int = 64, num_classes: int = 32) -> dict:
    """Probe every layer of ``model`` on ``ids`` ``(N, T)`` for the token at lags 1..max_lag.

    Returns ``{"lags", "layers": {layer: {"accuracy", "chance"}}, "best", "chance"}``: ``best`` is the
    best layer at each lag (what is recoverable anywhere in the model), ``chance`` the majority class.
    """
    lags = list(range(1, max_lag + 1))
    layers = hidden_states(model, ids)
    result: dict[str, Any] = {"lags": lags, "layers": {}}
    for i, feats in enumerate(layers):
        result["layers"][str(i)] = fit_lag_probes(feats, ids, lags, num_classes=num_classes)
    accs = torch.tensor([result["layers"][k]["accuracy"] for k in result["layers"]])
    result["best"] = accs.nan_to_num(-1).max(0).values.tolist()
    result["chance"] = result["layers"]["0"]["chance"]
    return result
