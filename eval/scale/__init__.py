"""The scale ladder's fair recipe: SPEN and the GPT-2 architecture at one size, matched on non-embedding parameters.

At each size both architectures are built by the fair recipe (:func:`fair_pair`, the one of issue 20's headline
pair ``hub_configs/{spen,gpt2}-f64``): the same width, depth, tied vocabulary and block size;
``initializer_range = 1 / sqrt(width)`` for both; GPT-2 heads of size 16 and exactly ``block_size`` learned
positions; GPT-2's MLP width chosen so that the two have the same non-embedding parameters.

The ladder itself is a sweep (``hub_configs/sweeps/ladder.yaml`` for two CPU cores, ``ladder-gpu.yaml`` for one
GPU; arms ``<size>/spen`` and ``<size>/gpt2`` whose model is ``{fair_pair: {...}}``), run by the experiment runner
(eval/sweep) and read by its ``ladder`` analysis. ``ema-boundary scale`` and ``python -m eval.scale`` are kept as
aliases of ``ema-boundary sweep hub_configs/sweeps/ladder.yaml``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ema_boundary.paper import PAPER

PROG = "python -m eval.scale"
PLAN = "hub_configs/sweeps/ladder.yaml"
ARCHITECTURES = {"spen": "SPEN (EMA traces)", "gpt2": "GPT-2 architecture"}

HEAD_SIZE = 16  # GPT-2's heads in the fair recipe: at least 16 dimensions each (issue 20)
TRACE_RATES = (0.5, 0.1, 0.02)  # SPEN's fixed EMA rates, as every SPEN config of the project
FFN_TOPK = 0.06
MATCH_TOLERANCE = 0.01  # the fair pair's non-embedding counts may differ by at most 1%


def gpt2_inner(width: int) -> int:
    """GPT-2's MLP width that gives its block SPEN's non-embedding parameters at ``width``.

    SPEN's block has ``16 w^2 + 11 w`` (reader ``3 w^2 + w``, context mix ``5 w^2 + w``, FFN of ``4 w``:
    ``8 w^2 + 5 w``, two LayerNorms ``4 w``); GPT-2's ``4 w^2 + 2 w n + n + 9 w``: equal for
    ``n = (12 w^2 + 2 w) / (2 w + 1)``.
    """
    return round((12 * width**2 + 2 * width) / (2 * width + 1))


def parameter_counts(arch: str, width: int, layers: int, vocab_size: int, block_size: int) -> dict[str, int]:
    """Total, embedding and non-embedding parameters of one architecture of the fair pair, counted from the
    formulas (no torch; tests/test_scale.py checks them against ``ema_boundary.params`` on the meta device).

    Embedding: the tied token table (and GPT-2's ``block_size`` learned positions); everything else, the final
    LayerNorm included, is non-embedding.
    """
    if arch == "spen":
        block, embedding = 16 * width**2 + 11 * width, vocab_size * width
    elif arch == "gpt2":
        n = gpt2_inner(width)
        block, embedding = 4 * width**2 + 2 * width * n + n + 9 * width, (vocab_size + block_size) * width
    else:
        raise ValueError(f"unknown architecture {arch!r} (spen, gpt2)")
    non_embedding = layers * block + 2 * width
    return {"total": non_embedding + embedding, "embedding": embedding, "non_embedding": non_embedding}


def fair_pair(width: int, layers: int, vocab_size: int, block_size: int) -> dict[str, dict[str, Any]]:
    """The config.json dicts of SPEN and the GPT-2 architecture at one size of the fair recipe (module docstring)."""
    if width % HEAD_SIZE:
        raise ValueError(f"width {width} is not a multiple of the head size {HEAD_SIZE}")
    heads, init = width // HEAD_SIZE, 1.0 / math.sqrt(width)
    spen = {
        "model_type": "spen", "architectures": ["SPENForCausalLM"], "vocab_size": vocab_size, "hidden_size": width,
        "num_hidden_layers": layers, "intermediate_size": 4 * width, "ffn_topk_fraction": FFN_TOPK, "trace": "ema",
        "trace_rates": list(TRACE_RATES), "predictor": "linear", "predictor_scope": "sequence",
        "num_attention_heads": heads, "layer_norm_epsilon": 1e-5, "initializer_range": init,
        "max_position_embeddings": block_size, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": True,
        "selective_rank": max(1, width // HEAD_SIZE),
    }
    gpt2 = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab_size,
        "n_positions": block_size, "n_embd": width, "n_layer": layers, "n_head": heads, "n_inner": gpt2_inner(width),
        "activation_function": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "layer_norm_epsilon": 1e-5, "initializer_range": init, "bos_token_id": 0, "eos_token_id": 0,
        "tie_word_embeddings": True,
    }
    return {"spen": spen, "gpt2": gpt2}


def paper_point() -> dict[str, Any]:
    """The paper's SPEN-130M vs GPT-2 small on C4 as a loss gap: log of the perplexity ratio, in nats."""
    ratio = float(PAPER["perplexity_ratio"])
    return {"parameters": 130e6, "parameters_counted": "total (SPEN-130M, GPT-2 small)", "perplexity_ratio": ratio,
            "gap": math.log(ratio), "corpus": "C4"}


def mean_loss(folder: Path, blocks: Any, batch_size: int = 32) -> float:
    """The mean next-token loss of the causal LM in ``folder`` on ``blocks`` ``(N, block_size + 1)``: train.py's
    validation loss (cross-entropy over every block's ``block_size`` targets, no context across blocks)."""
    # delayed: torch and transformers (seconds); the runner imports eval.scale's fair_pair to read and check plans
    import torch
    import torch.nn.functional as F
    from transformers.utils import logging

    from eval.probes.models import load_causal_lm  # weights that do not fit their config.json: one line

    logging.disable_progress_bar()  # one load per seed: the ladder's progress lines say what is scored
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_causal_lm(folder, dtype=torch.float32).to(device)
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(blocks), batch_size):
            chunk = blocks[i:i + batch_size].to(device)
            logits = model(input_ids=chunk[:, :-1]).logits.float()
            total += float(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum"))
    return total / (blocks.shape[0] * (blocks.shape[1] - 1))




__all__ = ["ARCHITECTURES", "fair_pair", "gpt2_inner", "mean_loss", "paper_point", "parameter_counts"]

