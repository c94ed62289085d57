"""Count-based n-gram perplexities: the reference lines of the language-model comparison.

A neural LM in early training can sit above a bigram model; the unigram, bigram and trigram
perplexities on the same validation tokens say where a learning curve is.

The models: interpolated Kneser-Ney (Chen & Goodman 1999, section 3) with one fixed discount
``D = 0.75`` at every order, ending in the uniform distribution over the vocabulary. For an
n-gram model, the highest order uses raw counts ``c``; each lower order uses continuation counts
``N1+(• ctx w)`` (the number of distinct tokens seen before ``ctx w``)::

    p_k(w | ctx) = max(C_k(ctx w) - D, 0) / C_k(ctx •)  +  D T_k(ctx) / C_k(ctx •) * p_{k-1}(w | ctx[1:])
    p_0(w)       = 1 / V

with ``T_k(ctx)`` the number of distinct ``w`` with ``C_k(ctx w) > 0``; a context never seen
(``C_k(ctx •) = 0``) falls through to ``p_{k-1}``. The unigram model is the case ``n = 1``
(absolute discounting toward uniform), so no token of the vocabulary has probability 0.

Counts come from the training token stream (the packed stream the LMs train on). Validation
tokens are scored as train.py scores the LMs: blocks of ``block_size + 1`` tokens, every token
after the first of a block is a target, and context never crosses the start of a block: where a
target has only ``k < n - 1`` tokens of context, the order-``(k + 1)`` model scores it (the
trigram line scores a block's first target with the bigram model).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence

import torch

DISCOUNT = 0.75
ORDERS = {"unigram": 1, "bigram": 2, "trigram": 3}


class KneserNey:
    """An interpolated Kneser-Ney n-gram model of order ``n`` over ``vocab_size`` tokens."""

    def __init__(self, stream: Sequence[int], n: int, vocab_size: int, discount: float = DISCOUNT) -> None:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not 0 < discount < 1:
            raise ValueError(f"discount must lie in (0, 1), got {discount}")
        self.n, self.vocab_size, self.discount = n, vocab_size, discount
        tokens = [int(t) for t in stream]
        if len(tokens) < n:
            raise ValueError(f"need at least {n} training tokens for an order-{n} model, got {len(tokens)}")
        if min(tokens) < 0 or max(tokens) >= vocab_size:
            raise ValueError(f"training tokens must lie in [0, vocab_size={vocab_size})")
        def grams(k: int):
            return zip(*(tokens[i:] for i in range(k)), strict=False)

        # counts[k]: the order-k table (k-gram -> count): raw counts at k = n; below, continuation
        # counts N1+(• g), the number of distinct (k+1)-gram types that end in g.
        self.counts: dict[int, Counter] = {n: Counter(grams(n))}
        for k in range(1, n):
            self.counts[k] = Counter(gram[1:] for gram in set(grams(k + 1)))
        # Per context: total count and number of distinct continuations.
        self.totals: dict[int, dict[tuple, int]] = {}
        self.types: dict[int, dict[tuple, int]] = {}
        for k, table in self.counts.items():
            total: dict[tuple, int] = defaultdict(int)
            types: dict[tuple, int] = defaultdict(int)
            for gram, count in table.items():
                total[gram[:-1]] += count
                types[gram[:-1]] += 1
            self.totals[k], self.types[k] = dict(total), dict(types)

    def prob(self, w: int, context: Sequence[int]) -> float:
        """``p(w | context)``, using the last ``n - 1`` tokens of ``context`` (fewer if it is shorter)."""
        context = tuple(context[len(context) - (self.n - 1) :]) if self.n > 1 else ()
        p = 1.0 / self.vocab_size
        for k in range(1, len(context) + 2):  # from the lowest order up to the context available
            ctx = context[len(context) - (k - 1) :] if k > 1 else ()
            total = self.totals[k].get(ctx, 0)
            if total:
                count = self.counts[k].get((*ctx, w), 0)
                p = (max(count - self.discount, 0.0) + self.discount * self.types[k][ctx] * p) / total
        return p


def ngram_perplexities(
    train_stream: Sequence[int] | torch.Tensor,
    val_blocks: torch.Tensor,
    vocab_size: int,
    discount: float = DISCOUNT,
) -> dict:
    """Unigram, bigram and trigram perplexities of ``val_blocks`` ``(N, L)`` under interpolated
    Kneser-Ney models counted on ``train_stream`` (1-D token ids).

    Returns ``{"unigram", "bigram", "trigram", "discount", "train_tokens", "val_targets"}``.
    """
    if isinstance(train_stream, torch.Tensor):
        train_stream = train_stream.flatten().tolist()
    if val_blocks.dim() != 2 or val_blocks.shape[1] < 2:
        raise ValueError(f"val_blocks must have shape (N, L) with L >= 2, got {tuple(val_blocks.shape)}")
    blocks = val_blocks.tolist()
    if min(map(min, blocks)) < 0 or max(map(max, blocks)) >= vocab_size:
        raise ValueError(f"validation tokens must lie in [0, vocab_size={vocab_size})")
    models = {n: KneserNey(train_stream, n, vocab_size, discount) for n in ORDERS.values()}
    result: dict = {}
    for name, n in ORDERS.items():
        nll, count = 0.0, 0
        for block in blocks:
            for t in range(1, len(block)):
                order = min(n, t + 1)  # the context available inside the block
                nll -= math.log(models[order].prob(block[t], block[t - order + 1 : t]))
                count += 1
        result[name] = math.exp(nll / count)
    return {**result, "discount": discount, "train_tokens": len(train_stream), "val_targets": count}


__all__ = ["KneserNey", "ngram_perplexities", "DISCOUNT"]
