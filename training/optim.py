"""The optimizer and schedule of every run: AdamW with decay on matrices and embeddings only (as GPT-2 and
nanoGPT), linear warmup then cosine decay to ``min_lr_ratio`` x the peak."""

from __future__ import annotations

import torch
from transformers import get_scheduler


def build_optimizer(model: torch.nn.Module, cfg: dict, fused: bool) -> torch.optim.AdamW:
    """AdamW over ``model``'s parameters with the run's settings."""
    params = [p for p in model.parameters() if p.requires_grad]
    return adamw(params, cfg, fused, model_rank=lambda p: p.dim())


def adamw(params: list[torch.Tensor], cfg: dict, fused: bool, model_rank=lambda p: p.dim()) -> torch.optim.AdamW:
    """AdamW over ``params``: matrices and embeddings decay, biases and norm gains (rank 1 in one model) do not, as
    in GPT-2/nanoGPT. ``model_rank``: a parameter's rank in one model (a stacked ensemble's tensors carry one more
    dimension, the seed)."""
    groups = [{"params": [p for p in params if model_rank(p) >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [p for p in params if model_rank(p) < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg["learning_rate"], betas=(cfg["adam_beta1"], cfg["adam_beta2"]), fused=fused)


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: dict) -> torch.optim.lr_scheduler.LambdaLR:
    """``warmup_steps`` of linear warmup, then cosine decay to ``min_lr_ratio`` x the peak at ``max_steps``."""
    return get_scheduler("cosine_with_min_lr", optimizer, num_warmup_steps=cfg["warmup_steps"],
                         num_training_steps=cfg["max_steps"],
                         scheduler_specific_kwargs={"min_lr_rate": cfg["min_lr_ratio"]})
