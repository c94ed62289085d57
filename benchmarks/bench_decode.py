"""Decoding: time per new token and state / cache memory vs context length, SPEN vs GPT-2.

The context is not prefilled by running the model (at 8192 tokens that would dominate the
benchmark and measure prefill, not decoding); the state is built directly at the right size
with random contents, which decoding cost does not depend on: SPEN's recurrent state
(``SPENState``: S traces per layer, constant size) and GPT-2's ``DynamicCache`` holding
``context`` keys and values per layer. Each timed step feeds one token per sequence with the
cache and extends it, as ``generate()`` does.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from modeling_spen import SPENState

from .bench_train import build
from .common import measure, table


def _spen_state(model: torch.nn.Module, B: int, context: int, device: str) -> SPENState:
    cfg = model.config
    state = SPENState(cfg.num_hidden_layers)
    for layer in state.layers:
        layer["traces"] = torch.randn(B, cfg.num_traces, cfg.hidden_size, device=device)
    state.seen_tokens = context
    return state


def _gpt2_cache(model: torch.nn.Module, B: int, context: int, device: str) -> DynamicCache:
    cfg = model.config
    cache = DynamicCache(config=cfg)
    shape = (B, cfg.n_head, context, cfg.n_embd // cfg.n_head)
    for i in range(cfg.n_layer):
        cache.update(torch.randn(shape, device=device), torch.randn(shape, device=device), i)
    return cache


def _cache_bytes(cache: Any) -> int:
    if isinstance(cache, SPENState):
        return cache.num_bytes()
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


def run(
    contexts: list[int],
    batches: list[int],
    size: dict[str, int],
    steps: int,
    device: str = "cpu",
    max_cache_bytes: float = 4e9,
) -> dict:
    rows: list[dict[str, Any]] = []
    max_len = max(contexts) + steps + 8  # GPT-2's position table must cover the growing cache
    models = {
        arch: build(arch, size["width"], size["depth"], size["heads"], size["vocab"], max_len).to(device).eval()
        for arch in ("spen", "gpt2")
    }
    skipped = []
    # Untimed first calls (lazy initialisation, first-touch of the weights) would otherwise land
    # on whichever context is measured first and bend the flatness ratio.
    for arch, model in models.items():
        cache = (_spen_state if arch == "spen" else _gpt2_cache)(model, 1, min(contexts), device)
        with torch.no_grad():
            for _ in range(3):
                model(input_ids=torch.zeros(1, 1, dtype=torch.long, device=device), cache=cache, use_cache=True)
    for B in batches:
        for context in contexts:
            per_arch = {}
            for arch, model in models.items():
                cfg = model.config
                kv_bytes = 2 * cfg.num_hidden_layers * B * context * cfg.hidden_size * 4
                if arch == "gpt2" and kv_bytes > max_cache_bytes:
                    skipped.append({"arch": arch, "B": B, "context": context, "cache_bytes": kv_bytes})
                    continue
                cache = (_spen_state if arch == "spen" else _gpt2_cache)(model, B, context, device)
                token = torch.randint(0, size["vocab"], (B, 1), device=device)

                @torch.no_grad()
                def one_token(model=model, cache=cache, token=token) -> None:
                    model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)

                t = measure(one_token, steps, warmup=2, device=device)
                per_arch[arch] = {"B": B, "context": context, "arch": arch, **t.as_dict(),
                                  "ms_per_token": t.min * 1e3, "state_MiB": _cache_bytes(cache) / 2**20}  # fmt: skip
                del cache
            if "spen" in per_arch and "gpt2" in per_arch:
                per_arch["spen"]["gpt2_over_spen"] = per_arch["gpt2"]["min_s"] / per_arch["spen"]["min_s"]
            rows.extend(per_arch.values())
    # Flatness: SPEN's time per token at each context over its time at the shortest one.
    for B in batches:
        spen = [r for r in rows if r["arch"] == "spen" and r["B"] == B]
        for r in spen:
            r["vs_shortest"] = r["min_s"] / spen[0]["min_s"]
    return {"rows": rows, "size": size, "steps": steps, "skipped": skipped, "max_cache_bytes": max_cache_bytes}


def render(result: dict) -> str:
    s = result["size"]
    title = f"Decoding one token, width {s['width']}, depth {s['depth']}, vocab {s['vocab']}, fp32"
    cols = ["B", "context", "arch", "ms_per_token", "median_s", "state_MiB", "gpt2_over_spen", "vs_shortest"]
    out = table(result["rows"], cols, title)
    if result["skipped"]:
        out += (
            "\nSkipped (KV cache over the memory cap): "
            + ", ".join(f"{r['arch']} B={r['B']} context={r['context']}" for r in result["skipped"])
            + "\n"
        )
    return out
