"""The recall map's arms and what they are compared by: the map's two axes (how an arm writes its memory,
:data:`WRITE_RULES`, :func:`write_rule`; how many numbers that memory holds, :func:`state_numbers`), each arm's
description (:func:`describe_arm`), and the claim "only input-dependent selection escapes" (:func:`escape_comparison`:
the selective state against the fixed bank of equal size). The task, its trainer, the map's models
(:func:`eval.recall.default_map_configs`) and its runs are :mod:`eval.recall`'s."""

from __future__ import annotations

import math
from collections.abc import Mapping

from transformers import PretrainedConfig

from ema_boundary import stats
from ema_boundary.verdicts import A_HIGHER, A_LOWER, EQUIVALENT, NOT_RESOLVED, UNRESOLVED, higher
from eval import verdicts
from modeling_spen.mixer_mamba import mamba_state_numbers

# ---------------------------------------------------------------------------------------------
# The map's two axes: how an arm writes its memory, and how many numbers that memory holds
# ---------------------------------------------------------------------------------------------

# Write rules, from the least to the most input-dependent (issue 22). Zoology: recall capacity grows with
# the state; the map asks whether the rule matters at equal state. S6 and linear attention both write an
# input-dependent outer product, but S6 decays its state by an input-dependent step while linear attention
# sums without forgetting: two rules on the map (Zoology tells them apart too).
WRITE_RULES: dict[str, str] = {
    "fixed": "fixed (EMA rates)",
    "fixed_decay_weighted_write": "fixed decay per channel, input-weighted write (RWKV-4)",
    "learned_lti": "learned LTI (learned rates)",
    "input_gated_diagonal": "input-gated diagonal",
    "input_dependent_outer_product": "S6 decay and write, read one step late (SPEN's slots)",
    "selective_scan": "S6 in Mamba's block",
    "linear_attention": "input-dependent outer-product sums (linear attention)",
    "attention": "attention over tokens",
}
_TRACE_RULES = {"ema": "fixed", "learned": "learned_lti", "selective": "input_gated_diagonal",
                "selective_ssm": "input_dependent_outer_product"}


def write_rule(config: PretrainedConfig) -> str | None:
    """How the arm of ``config`` writes its decoding state: a key of :data:`WRITE_RULES` (None: an
    architecture the map does not describe).

    GPT-2 attends over every past token. Mamba (transformers', or SPEN's ``mixer="mamba"``) writes ``B_t x_t`` (an
    input-dependent outer product) into its state and reads it with the current token's ``C_t``; RWKV-4 sums
    ``exp(k_t) v_t`` under a fixed learned decay per channel. A SPEN arm is its reader's rule where the reader keeps
    its own memory of every past position
    (``sequence`` scope: linear attention sums ``phi(k_t) v_t^T`` with input-dependent keys, an outer-product
    state that never decays; softmax attention keeps every past state), and its trace's rule otherwise.
    """
    kind = getattr(config, "model_type", None)
    if kind == "gpt2":
        return "attention"
    if kind == "mamba":
        return "selective_scan"
    if kind == "rwkv":
        return "fixed_decay_weighted_write"
    if kind != "spen":
        return None
    if getattr(config, "mixer", "trace") == "mamba":
        return "selective_scan"
    if config.predictor_scope == "sequence" and config.predictor == "linear_attention":
        return "linear_attention"
    if config.predictor_scope == "sequence" and config.predictor == "softmax_attention":
        return "attention"
    return _TRACE_RULES[config.trace]


def state_parts(config: PretrainedConfig, seq_len: int) -> dict[str, int] | None:
    """The decoding state of one layer after ``seq_len`` tokens, in numbers (floats, one sequence), by
    part; None for an architecture the map does not describe.

    What a layer must keep to continue the sequence: GPT-2's key/value cache (``2 D T``); SPEN's traces
    (``S x D``; the ``selective_ssm`` state ``D x N`` and its ``S`` read-out slots for the next token), plus a
    ``sequence``-scope reader's memory (linear attention: one ``(D/H) x (D/H)`` sum and a ``D/H`` normaliser
    per head; softmax attention: keys and values of every past position, ``2 D T``); Mamba's state
    ``E x N`` and convolution window ``E x K`` (``E`` its inner width). The model tests check these counts
    against the caches the models return.
    """
    kind = getattr(config, "model_type", None)
    T = seq_len
    if kind == "gpt2":
        return {"keys and values (2 x D x T)": 2 * config.n_embd * T}
    if kind == "mamba":
        E = config.intermediate_size
        return {"selective state (E x N)": E * config.state_size, "convolution window (E x K)": E * config.conv_kernel}
    if kind == "rwkv":
        A, D = config.attention_hidden_size, config.hidden_size
        return {"time-mix sums and their scale (3 x A)": 3 * A, "token shifts (2 x D)": 2 * D}
    if kind != "spen":
        return None
    if getattr(config, "mixer", "trace") == "mamba":
        return mamba_state_numbers(config)
    D, S, H = config.hidden_size, config.num_traces, config.num_attention_heads
    if config.trace == "selective_ssm":
        parts = {"selective state (D x N)": D * config.trace_state_size, "read-out slots (S x D)": S * D}
    else:
        parts = {"traces (S x D)": S * D}
    if config.predictor_scope == "sequence" and config.predictor == "linear_attention":
        parts["linear-attention sums (H x (D/H)^2)"] = H * (D // H) ** 2
        parts["linear-attention normaliser (D)"] = D
    elif config.predictor_scope == "sequence" and config.predictor == "softmax_attention":
        parts["keys and values (2 x D x T)"] = 2 * D * T
    return parts


def state_numbers(config: PretrainedConfig, seq_len: int) -> int | None:
    """Numbers in one layer's decoding state after ``seq_len`` tokens (:func:`state_parts`, summed)."""
    parts = state_parts(config, seq_len)
    return None if parts is None else sum(parts.values())


def describe_arm(config: PretrainedConfig, seq_len: int) -> dict:
    """An arm on the map's two axes: ``write_rule`` (a key of :data:`WRITE_RULES` or None) with its
    label, ``state_numbers`` per layer at ``seq_len`` tokens with its parts, and whether it grows with
    the sequence (attention's caches do; every recurrent state is fixed)."""
    rule, parts = write_rule(config), state_parts(config, seq_len)
    grows = parts is not None and any("x T" in name for name in parts)
    label = WRITE_RULES.get(rule, "not described")
    if rule == "selective_scan":  # Mamba's block or an ablation of it: which of its parts the arm has
        label += f" ({mamba_block_parts(config)})"
    return {"write_rule": rule, "write_rule_label": label,
            "state_numbers": None if parts is None else sum(parts.values()), "state_parts": parts,
            "state_seq_len": seq_len, "state_grows_with_length": grows}


def mamba_block_parts(config: PretrainedConfig) -> str:
    """The parts of a Mamba block that the ablation switches (transformers' Mamba has them all): e.g. "conv 4,
    current read, gate"."""
    if getattr(config, "model_type", None) == "mamba":
        return f"conv {config.conv_kernel}, current read, gate"
    return (f"conv {config.mamba_conv_kernel}, {config.mamba_read} read, "
            f"{'gate' if config.mamba_gate else 'no gate'}")


# ---------------------------------------------------------------------------------------------
# The claim "only input-dependent selection escapes": the selective state against the fixed bank
# ---------------------------------------------------------------------------------------------

# N -> (a selective state of N per channel, a bank of N fixed rates): D x N numbers each per layer
# (the selective state also keeps its S = 3 read-out slots, 3 x D: state_parts says so beside the verdict).
ESCAPE_ARMS: dict[int, tuple[str, str]] = {3: ("linear-selective_ssm3", "linear"),
                                           16: ("linear-selective_ssm", "linear-ema16"),
                                           64: ("linear-selective_ssm64", "linear-ema64")}
ESCAPE_HEADLINE = 16  # the state size whose comparison is the claim's
ESCAPE_PAIRS = 16  # the pair count the claim is about (the map's largest by default)
ESCAPE_MARGIN = 0.05  # declared: a difference within 5 points of accuracy counts as equal (TOST)
ESCAPE_MIN_SEEDS = 5  # the suite's rule: a verdict on a difference rests on >= 5 paired seeds
CONTROL_BAR = 0.95  # the positive control's bar at ESCAPE_PAIRS (issue 14)
# The comparison's verdicts name the arm (eval.verdicts.difference_verdict of selective - fixed; "not resolved" short).
SELECTIVE_HIGHER, FIXED_HIGHER = higher("selective"), higher("fixed")
ESCAPE_WORDS = {A_HIGHER: SELECTIVE_HIGHER, A_LOWER: FIXED_HIGHER, NOT_RESOLVED: UNRESOLVED}
ESCAPE_VERDICTS = (SELECTIVE_HIGHER, FIXED_HIGHER, EQUIVALENT, UNRESOLVED)


def escape_comparison(
    recall: Mapping[str, Mapping],
    control: str | None = None,
    arms: Mapping[int, tuple[str, str]] = ESCAPE_ARMS,
    pairs: int = ESCAPE_PAIRS,
    margin: float = ESCAPE_MARGIN,
    min_seeds: int = ESCAPE_MIN_SEEDS,
) -> dict:
    """The selective state against the fixed bank of equal state numbers, paired by seed.

    ``recall``: the map's entries (:func:`map_entry`, per-seed accuracies under ``seeds``). For each state
    size N of ``arms`` whose two arms both ran: the per-seed accuracies at ``pairs`` pairs (the largest
    count both have if the map stops earlier), their difference selective − fixed with its paired 95% t
    interval (:func:`ema_boundary.stats.compare`, clipped to [-1, 1], the range of a difference of
    accuracies) and a verdict from the interval only (:data:`ESCAPE_VERDICTS`):

    * fewer than ``min_seeds`` paired seeds: "not resolved" (the suite's rule for a difference);
    * the 95% interval above 0: "selective higher"; below 0: "fixed higher";
    * the 90% interval inside ``(-margin, margin)``: "equivalent", but only behind a positive control
      that reached :data:`CONTROL_BAR` (two arms that both fail under a recipe too short for attention
      say nothing about the rule); otherwise "not resolved".

    Returns ``{"pairs", "margin", "min_seeds", "control", "control_passed", "headline", "verdict",
    "comparisons": {str(N): {...}}}``; ``headline`` is :data:`ESCAPE_HEADLINE` when it ran, else the
    first size that did, and ``verdict`` is its comparison's (None when no pair of arms ran).
    """
    control_passed = None
    if control is not None and control in recall:
        acc = recall[control]["accuracy"]
        at = str(pairs) if str(pairs) in acc else str(max(int(n) for n in acc))
        control_passed = int(at) >= pairs and acc[at] >= CONTROL_BAR
    comparisons: dict[str, dict] = {}
    for size, (selective, fixed) in arms.items():
        if selective not in recall or fixed not in recall:
            continue
        a, b = recall[selective], recall[fixed]
        common = sorted(set(a["accuracy"]) & set(b["accuracy"]), key=int)
        at = str(pairs) if str(pairs) in common else common[-1]
        seeds = [s for s in a["seeds"] if s in b["seeds"]]
        sel = {s: a["seeds"][s]["accuracy"][at] for s in seeds}
        fix = {s: b["seeds"][s]["accuracy"][at] for s in seeds}
        c = stats.compare(sel, fix, margin)
        kind, ci95, reason = verdicts.difference_verdict(c, min_seeds, (-1.0, 1.0), digits=3)
        verdict = ESCAPE_WORDS.get(kind, kind)
        if kind == EQUIVALENT and not control_passed:  # two arms that fail under a short recipe say nothing
            verdict, reason = UNRESOLVED, "equal within the margin, but without a positive control that passed"
        comparisons[str(size)] = {
            "state_size": size, "pairs": int(at), "selective": selective, "fixed": fixed,
            "state_numbers": {"selective": a.get("state_numbers"), "fixed": b.get("state_numbers")},
            "write_rules": {"selective": a.get("write_rule"), "fixed": b.get("write_rule")},
            "seeds": [int(s) for s in seeds], "selective_accuracy": sel, "fixed_accuracy": fix,
            "difference": c.difference, "ci95": ci95, "ci90": [_finite(x) for x in c.ci90],
            "p_difference": _finite(c.p_difference),
            "copying": 1 / int(at), "chance": a["chance"], "verdict": verdict, "reason": reason,
        }
    headline = str(ESCAPE_HEADLINE) if str(ESCAPE_HEADLINE) in comparisons else next(iter(comparisons), None)
    return {"pairs": pairs, "margin": margin, "min_seeds": min_seeds, "control": control,
            "control_passed": control_passed, "headline": headline,
            "verdict": comparisons[headline]["verdict"] if headline else None, "comparisons": comparisons}


def _finite(x: float) -> float | None:
    """None for what one seed cannot estimate (JSON without NaN)."""
    return x if math.isfinite(x) else None


__all__ = [
    "WRITE_RULES",
    "write_rule",
    "state_parts",
    "state_numbers",
    "describe_arm",
    "ESCAPE_ARMS",
    "ESCAPE_VERDICTS",
    "escape_comparison",
]
