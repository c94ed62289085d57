"""Training step: SPEN vs the GPT-2 architecture at equal width, depth and vocabulary.

One step = forward, next-token loss, backward, AdamW update, on random token ids. Tokens per
step are held fixed across sequence lengths (batch = tokens // T), so the ratio at each T
isolates the cost of the sequence mixer: EMA traces (linear in T) vs attention (SDPA, quadratic
FLOPs in T). Both models come from the repository's hub configs with width, depth, heads and
vocabulary overridden together; SPEN's FFN width keeps its ratio to the width (2048 / 768).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM

import modeling_spen  # noqa: F401  (registers the SPEN Auto classes)

from .common import measure, peak_memory, table

HUB = "hub_configs"


def build(arch: str, width: int, depth: int, heads: int, vocab: int, max_len: int) -> torch.nn.Module:
    """A randomly initialised model of the given size from the repository's configs."""
    if arch == "spen":
        cfg = AutoConfig.from_pretrained(f"{HUB}/spen-130m")
        inter = round(cfg.intermediate_size * width / cfg.hidden_size)
        cfg.update({"hidden_size": width, "num_hidden_layers": depth, "num_attention_heads": heads,
                    "intermediate_size": inter, "vocab_size": vocab, "max_position_embeddings": max_len})  # fmt: skip
    else:
        cfg = AutoConfig.from_pretrained(f"{HUB}/gpt2-small")
        cfg.update({"n_embd": width, "n_layer": depth, "n_head": heads, "vocab_size": vocab,
                    "n_positions": max_len})  # fmt: skip
        cfg._attn_implementation = "sdpa"
    cfg.bos_token_id = cfg.eos_token_id = min(cfg.eos_token_id, vocab - 1)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg)


def run(
    seq_lens: list[int],
    tokens_per_step: int,
    size: dict[str, int],
    repeats: int,
    device: str = "cpu",
    dtype: str = "fp32",
) -> dict:
    rows: list[dict[str, Any]] = []
    autocast = dtype == "bf16"
    for T in seq_lens:
        B = max(1, tokens_per_step // T)
        ids = torch.randint(0, size["vocab"], (B, T), device=device)
        per_arch: dict[str, dict[str, Any]] = {}
        for arch in ("spen", "gpt2"):
            model = build(arch, size["width"], size["depth"], size["heads"], size["vocab"], max(T, 1024)).to(device)
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)

            def step(model=model, opt=opt, ids=ids) -> None:
                with torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16, enabled=autocast):
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            t = measure(step, repeats, warmup=1, device=device)  # the warm-up creates the AdamW state
            peak = peak_memory(step, device)
            n_params = sum(p.numel() for p in model.parameters())
            per_arch[arch] = {"T": T, "B": B, "arch": arch, "params": n_params, **t.as_dict(),
                              "tokens_per_s": B * T / t.min, "peak_mem_MiB": peak / 2**20}  # fmt: skip
            del model, opt
        ratio = per_arch["spen"]["tokens_per_s"] / per_arch["gpt2"]["tokens_per_s"]
        for arch in ("spen", "gpt2"):
            rows.append({**per_arch[arch], "spen_over_gpt2": ratio if arch == "spen" else None})
    return {"rows": rows, "size": size, "tokens_per_step": tokens_per_step, "dtype": dtype}


def render(result: dict) -> str:
    s = result["size"]
    title = (f"Training step, width {s['width']}, depth {s['depth']}, vocab {s['vocab']}, "
             f"{result['tokens_per_step']} tokens/step, {result['dtype']}")  # fmt: skip
    cols = ["T", "B", "arch", "params", "min_s", "median_s", "tokens_per_s", "peak_mem_MiB", "spen_over_gpt2"]
    return table(result["rows"], cols, title)
