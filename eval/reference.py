"""The plain reference: a short, standard training loop that every baseline is checked against.

Deliberately independent of train.py (its data feed, schedule, checkpointing): transformers' model class built
from a config.json, every training block of the corpus shuffled each epoch from the seed, AdamW, linear warmup
then cosine decay, gradient clipping, and the final model scored on the same validation and test blocks as
train.py's runs (``ema_boundary.corpus``). A baseline that our recipe trains worse than this loop does, by more
than a declared margin, is a bug in the recipe, not a finding (:func:`eval.verdicts.reference_gate`).

    python -m eval.reference --config runs/.../train.yaml      # the same YAML keys as train.py

It reads the settings train.py reads (model_name_or_path, data, tokenizer_name, block_size,
total_train_batch_size, max_steps, learning_rate, min_lr_ratio, warmup_steps, weight_decay, adam_beta1/2,
max_grad_norm, max_eval_samples, val_every, test_every, max_test_samples, train_fraction, seed, output_dir) and
writes ``metrics.jsonl`` (train.py's keys: step, tokens, loss; val_loss; test_loss, test_ppl, test_tokens;
train_split_tokens, distinct_train_tokens) and ``final/`` (the model and tokenizer).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes: the reference can train it too)
import train_config
from ema_boundary import corpus, packing
from ema_boundary.usage import UsageParser


def lr_at(step: int, peak: float, warmup: int, total: int, min_ratio: float) -> float:
    """Linear warmup to ``peak`` over ``warmup`` steps, then cosine to ``min_ratio * peak`` at ``total``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def mean_loss(model: torch.nn.Module, blocks: torch.Tensor, batch_size: int = 32) -> float:
    """Mean next-token loss over every target of ``blocks`` ``(N, block_size + 1)``."""
    model.eval()
    total = 0.0
    for i in range(0, len(blocks), batch_size):
        chunk = blocks[i:i + batch_size]
        logits = model(input_ids=chunk[:, :-1]).logits.float()
        total += float(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum"))
    model.train()
    return total / (blocks.shape[0] * (blocks.shape[1] - 1))


def train_reference(cfg: dict[str, Any]) -> dict[str, Any]:
    """Train and score one model with the plain loop; returns the final numbers (also in metrics.jsonl)."""
    out = Path(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    data = corpus.parse_data(cfg["data"])
    tok = AutoTokenizer.from_pretrained(cfg["tokenizer_name"])
    B, batch, steps = cfg["block_size"], cfg["total_train_batch_size"], cfg["max_steps"]
    val_every, test_every = cfg["val_every"], cfg["test_every"]
    # A finite corpus: every training block, reshuffled each epoch. A streamed one (C4): the first blocks the run
    # needs (steps x batch), shuffled once (int32: 672M tokens of the GPU ladder's largest size fit in 2.7 GB).
    streamed = data == [corpus.C4]
    train, _ = packing.split_blocks(data, "train", val_every, tok, B, steps * batch if streamed else None, test_every,
                                   cfg["train_fraction"])  # train.py's nested subset of the documents
    train = train.to(torch.int32)
    val = packing.validation_blocks(data, val_every, tok, B, cfg["max_eval_samples"], test_every)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    autocast = torch.autocast("cuda", torch.bfloat16, enabled=device == "cuda" and cfg["mixed_precision"] == "bf16")
    torch.manual_seed(cfg["seed"])
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg["model_name_or_path"])).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg["weight_decay"]},
                             {"params": rest, "weight_decay": 0.0}], lr=cfg["learning_rate"],
                            betas=(cfg["adam_beta1"], cfg["adam_beta2"]))
    order = torch.empty(0, dtype=torch.long)
    gen = torch.Generator().manual_seed(cfg["seed"])
    rows, seen, running = [], 0, 0.0
    for step in range(steps):
        if len(order) < batch:  # a new epoch: every training block once, in a fresh order from the seed
            order = torch.cat([order, torch.randperm(len(train), generator=gen)])
        idx, order = order[:batch], order[batch:]
        x = train[idx].long().to(device)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg["learning_rate"], cfg["warmup_steps"], steps, cfg["min_lr_ratio"])
        with autocast:
            logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg["max_grad_norm"]:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["max_grad_norm"])
        opt.step()
        seen += x[:, 1:].numel()
        running += loss.item()
        log_every = cfg["logging_steps"]
        if (step + 1) % log_every == 0 or step + 1 == steps:
            rows.append({"step": step + 1, "tokens": seen, "loss": running / ((step % log_every) + 1)})
            running = 0.0
    final: dict[str, Any] = {"step": steps, "tokens": seen, "val_loss": mean_loss(model, val.to(device))}
    if not streamed:  # the distinct text trained on, as train.py records it (training.data.seen_tokens)
        final |= {"train_split_tokens": len(train) * B, "distinct_train_tokens": min(seen, len(train) * B)}
    if test_every:
        test, docs = packing.split_blocks(data, "test", val_every, tok, B, cfg["max_test_samples"], test_every)
        test_loss = mean_loss(model, test.to(device))
        final.update({"test_loss": test_loss, "test_ppl": math.exp(test_loss),
                      "test_tokens": int(test.shape[0] * (test.shape[1] - 1)), "test_documents": docs})
    rows.append(final)
    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    model.save_pretrained(out / "final")
    tok.save_pretrained(out / "final")
    return final


def main(argv: list[str] | None = None) -> int:
    p = UsageParser(prog="python -m eval.reference", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="a train.py YAML (the same keys)")
    args = p.parse_args(argv)
    try:
        cfg = train_config.read_yaml(args.config)
    except train_config.ConfigError as e:
        p.error(f"--config {e}")
    print(json.dumps(train_reference(cfg)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["lr_at", "mean_loss", "train_reference"]
