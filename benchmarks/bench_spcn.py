"""SPCN (grammar_probe.spcn): Hebbian learning throughput and the cost of the linear probe.

Learning: ``SPCN.fit`` for one epoch over sentences sampled from grammar A (sentences/s, and
tokens/s). Probe: trace extraction with the frozen network (``SPCN.traces``) and fitting the
linear read-out (``LinearProbe``: minibatch Adam for a number of epochs, no early stopping here) on
those traces with the role labels.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import torch

from grammar_probe.grammar import grammar_a
from grammar_probe.linear_probe import LinearProbe
from grammar_probe.spcn import SPCN, SPCNConfig

from .common import measure, table


def run(n_sentences: int, repeats: int, probe_epochs: int = 8) -> dict:
    grammar = grammar_a()
    rng = random.Random(0)
    sents = [grammar.sample(rng) for _ in range(n_sentences)]
    tokens = [s.tokens for s in sents]
    n_tokens = sum(len(t) for t in tokens)
    role_ids = {name: i for i, name in enumerate(sorted({r for s in sents for r in s.roles}))}
    labels = torch.tensor([role_ids[r] for s in sents for r in s.roles])
    cfg = replace(SPCNConfig(), epochs=1)

    fit_t = measure(lambda: SPCN(cfg).fit(tokens), repeats)
    net = SPCN(cfg).fit(tokens)
    traces_t = measure(lambda: net.traces(tokens), repeats)
    feats = net.traces(tokens)
    probe_t = measure(lambda: LinearProbe(len(role_ids), max_iter=probe_epochs).fit(feats, labels), repeats)
    rows: list[dict[str, Any]] = [
        {"stage": "SPCN fit (1 epoch)", **fit_t.as_dict(), "sentences_per_s": n_sentences / fit_t.min,
         "tokens_per_s": n_tokens / fit_t.min},
        {"stage": "SPCN traces (frozen)", **traces_t.as_dict(), "sentences_per_s": n_sentences / traces_t.min,
         "tokens_per_s": n_tokens / traces_t.min},
        {"stage": f"LinearProbe fit ({probe_epochs} epochs of minibatch Adam)", **probe_t.as_dict()},
    ]  # fmt: skip
    return {"rows": rows, "n_sentences": n_sentences, "n_tokens": n_tokens, "feature_dim": int(feats.shape[1]),
            "config": {k: v for k, v in vars(cfg).items() if k != "eps"}}  # fmt: skip


def render(result: dict) -> str:
    title = f"SPCN on grammar A, {result['n_sentences']} sentences ({result['n_tokens']} tokens)"
    return table(result["rows"], ["stage", "min_s", "median_s", "sentences_per_s", "tokens_per_s"], title)
