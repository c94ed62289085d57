"""The loss every model trains and is scored on: next-token cross-entropy over all block_size targets, and
SPEN's prediction loss beside it (the objective ``CE + prediction_loss_weight x P``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from accelerate import Accelerator


def perplexity(loss: float) -> float:
    """``exp(loss)``, infinite where it overflows (a diverged run's loss of 800 nats is a number to record, not an
    OverflowError) and NaN for a NaN loss."""
    return math.exp(loss) if loss < 709.0 else (math.inf if loss == loss else math.nan)


def lm_loss(model: torch.nn.Module, blocks: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    # The same loss for every model (fair comparison): next-token cross-entropy over all block_size targets.
    # Validation and every perplexity of the project are this loss alone.
    return train_losses(model, blocks, reduction)[0]


def train_losses(model: torch.nn.Module, blocks: torch.Tensor,
                 reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token cross-entropy and, for a model whose output carries one (SPEN), its prediction loss.

    The prediction loss ``P`` trains SPEN's predictor to predict its block input (modeling_spen); the
    training objective is ``CE + config.prediction_loss_weight * P`` (:func:`objective`).
    """
    out = model(input_ids=blocks[:, :-1])
    ce = F.cross_entropy(out.logits.float().flatten(0, 1), blocks[:, 1:].flatten(), reduction=reduction)
    return ce, getattr(out, "prediction_loss", None)


def prediction_loss_weight(model: torch.nn.Module) -> float:
    """The model config's ``prediction_loss_weight`` (0 for models without one, e.g. GPT-2)."""
    return float(getattr(getattr(model, "module", model).config, "prediction_loss_weight", 0.0) or 0.0)


def objective(ce: torch.Tensor, prediction: torch.Tensor | None, weight: float) -> torch.Tensor:
    """What training minimises: ``ce + weight * prediction`` (the next-token loss alone without a prediction loss)."""
    return ce if prediction is None or not weight else ce + weight * prediction


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, accelerator: Accelerator) -> float:
    model.eval()
    total = torch.zeros((), device=accelerator.device)
    count = 0
    for (blocks,) in loader:
        per_block = lm_loss(model, blocks, "none").view(len(blocks), -1).mean(1)
        per_block = accelerator.gather_for_metrics(per_block)  # drops the padding of the last batch
        total, count = total + per_block.sum(), count + len(per_block)
    model.train()
    return (total / count).item()
