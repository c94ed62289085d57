"""Training throughput of the tiny SPEN and GPT-2 architectures on CPU, for sizing the LM regime (issue 14).

For each architecture and size: one optimizer step = forward, next-token loss, backward, AdamW update
on a micro-batch of B blocks of T = 128 tokens (train.py's step without the data loader), timed with
benchmarks.common.measure (minimum over repeats, the most reproducible statistic on a shared machine).
Also the n-gram reference on the embedded corpus (tokens in each split, time to count and score).

    PYTHONPATH=. python docs/notes/issue14_lm_regime.py --out outputs/lm_regime.json [--threads 1 2]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

import modeling_spen  # noqa: F401
from benchmarks.common import machine, measure
from ema_boundary.corpus import load_tokenizer
from ema_boundary.packing import PackedBlocks, validation_blocks
from eval.ngram import ngram_perplexities

REPO = Path(__file__).resolve().parents[2]
T = 128


def build(arch: str, width: int, layers: int = 2, vocab: int = 1024) -> torch.nn.Module:
    cfg = AutoConfig.from_pretrained(REPO / f"hub_configs/{arch}-tiny")
    if arch == "spen":
        cfg.update({"hidden_size": width, "num_hidden_layers": layers, "intermediate_size": 4 * width,
                    "vocab_size": vocab})  # fmt: skip
    else:
        cfg.update({"n_embd": width, "n_layer": layers, "vocab_size": vocab})
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).train()


def step_time(model: torch.nn.Module, batch: int, repeats: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    vocab = model.config.vocab_size
    blocks = torch.randint(0, vocab, (batch, T + 1))

    def step() -> None:
        logits = model(input_ids=blocks[:, :-1], use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), blocks[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return measure(step, repeats, warmup=2).min


def ngram_cost() -> dict:
    tok, _ = load_tokenizer(None, ["embedded"], 10, 1024, 100_000, str(REPO / "hub_configs/spen-tiny"))
    train = []
    for b in PackedBlocks(["embedded"], "train", 10, tok, T, repeat=False):
        train.extend(b["input_ids"][:-1].tolist())
    val = validation_blocks(["embedded"], 10, tok, T, 10_000)
    t0 = time.perf_counter()
    ppl = ngram_perplexities(train, val, 1024)
    return {"train_tokens": len(train), "val_blocks": len(val), "val_tokens": int(val[:, 1:].numel()),
            "seconds": time.perf_counter() - t0, **ppl}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--widths", type=int, nargs="+", default=[32, 64, 96, 128])
    p.add_argument("--batches", type=int, nargs="+", default=[8, 16])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ngram", action="store_true")
    args = p.parse_args()
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for width in args.widths:
            for arch in ("spen", "gpt2"):
                model = build(arch, width)
                params = sum(p.numel() for p in model.parameters())
                for batch in args.batches:
                    seconds = step_time(model, batch, args.repeats)
                    rows.append({"arch": arch, "width": width, "params": params, "threads": threads, "batch": batch,
                                 "step_s": seconds, "tokens_per_s": batch * T / seconds})  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
    result = {"machine": machine(), "T": T, "rows": rows, "load_after": open("/proc/loadavg").read().split()[:3]}
    if args.ngram:
        result["ngram"] = ngram_cost()
        print(json.dumps(result["ngram"]))
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
