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

For a corpus and a tokenizer, :func:`ngram_references` reads both streams from :mod:`ema_boundary.corpus`
(the runs' own training stream and validation or test blocks); from the command line::

    python -m eval.ngram --data embedded --tokenizer outputs/spen-w32/final --val_every 10 --block_size 128 \\
        --eval_blocks 200 --output_dir outputs/ngram            # ngram.json
"""

from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ema_boundary.io import atomic_dir, check_output_dir, write_json
from ema_boundary.usage import EXIT_USAGE, UsageError, UsageParser, add_output_dir, first_line, positive_int

TOOL = "eval.ngram"  # whose output folder this is (ema_boundary.io's marker)
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


def ngram_references(data: list[str], val_every: int, tokenizer: Any, block_size: int, n_blocks: int | None,
                     train_tokens: int | None = None, split: str = "validation", test_every: int = 0,
                     discount: float = DISCOUNT, train_fraction: float = 1.0) -> dict[str, Any]:
    """Kneser-Ney perplexities on the first ``n_blocks`` blocks of ``split`` (None: all of them) of ``data``,
    counted on the training stream a run reads (documents joined with EOS, at most ``train_tokens`` of it; with
    ``train_fraction`` < 1, train.py's nested subset of the training documents).

    The splits are the corpus's (:func:`ema_boundary.corpus.split_of`: the same ``val_every`` and
    ``test_every`` as the runs). Returns :func:`ngram_perplexities`' dict with ``split``, ``eval_tokens``
    (the targets scored, ``n_blocks * block_size``) and ``train_split_tokens`` (the training split's size;
    None for a streamed corpus read only as far as ``train_tokens``).
    """
    from ema_boundary import corpus, packing  # deferred: datasets and transformers; the CLI answers --help first

    stream: list[int] = []
    exhausted = True  # a streamed corpus (c4) is read only as far as the runs read it; a finite one to its end
    texts = (d["text"] for d in corpus.train_documents(data, val_every, test_every, train_fraction))
    for batch in packing.batched(texts, 64):
        for ids in tokenizer(batch, add_special_tokens=False, verbose=False)["input_ids"]:
            stream.extend([*ids, tokenizer.eos_token_id])
        if data == [corpus.C4] and train_tokens is not None and len(stream) >= train_tokens:
            exhausted = False
            break
    if split == "validation":
        blocks = packing.validation_blocks(data, val_every, tokenizer, block_size, n_blocks, test_every)
    else:
        blocks = packing.test_blocks(data, val_every, tokenizer, block_size, n_blocks, test_every)
    result = ngram_perplexities(stream[:train_tokens], blocks, len(tokenizer), discount)
    result["split"] = split
    result["eval_tokens"] = int(blocks.shape[0] * (blocks.shape[1] - 1))
    result["train_split_tokens"] = len(stream) if exhausted else None
    return result


def kneser_ney(settings: dict[str, Any], tokenizer: str | Path, train_tokens: int, split: str) -> dict[str, Any]:
    """eval.ngram's Kneser-Ney perplexities on the blocks the runs are scored on (``split``: the first
    ``max_test_samples`` or ``max_eval_samples`` blocks), counted on the training stream the runs read (at most
    ``train_tokens`` of it, of its ``train_fraction``): ``settings`` are train.py's (``data`` a list of sources, the
    split settings of :data:`eval.runs.DATA_SETTINGS`), ``tokenizer`` the folder every run read."""
    from transformers import AutoTokenizer  # deferred: transformers is slow to import, eval.ngram's CLI parses first

    tok = AutoTokenizer.from_pretrained(tokenizer)
    n_blocks = settings["max_test_samples"] if split == "test" else settings["max_eval_samples"]
    return ngram_references(list(settings["data"]), settings["val_every"], tok, settings["block_size"], n_blocks,
                            train_tokens, split, settings["test_every"],
                            train_fraction=settings.get("train_fraction", 1.0))


def _tokenizer(args: Any, data: list[str]) -> tuple[Any, str]:
    """The tokenizer named by ``--tokenizer``, or a BPE of ``--vocab_size`` tokens trained on the training split."""
    # deferred: transformers and datasets take seconds; eval.ngram's CLI parses its flags first
    from transformers import AutoTokenizer

    from ema_boundary import corpus

    if args.tokenizer is None:
        return corpus.load_tokenizer(None, data, args.val_every, args.vocab_size, 100_000, "--vocab_size",
                                     args.test_every)
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    except (OSError, ValueError) as e:
        raise UsageError(f"--tokenizer {args.tokenizer}: not a tokenizer ({first_line(e)})") from None
    if tokenizer.eos_token_id is None:
        raise UsageError(f"--tokenizer {args.tokenizer}: no EOS token to separate documents")
    return tokenizer, args.tokenizer


def main(argv: Sequence[str] | None = None) -> int:
    p = UsageParser(prog="python -m eval.ngram", description="Kneser-Ney unigram, bigram and trigram perplexities "
                    "of a corpus's validation or test blocks, counted on its training split.")
    p.add_argument("--data", nargs="+", default=["embedded"], metavar="SOURCE",
                   help="c4, embedded (or embedded:pydoc, embedded:stdlib), or local files, as in train.py")
    p.add_argument("--tokenizer", metavar="NAME_OR_DIR",
                   help="a tokenizer folder (e.g. a run's final/) or hub name (default: a byte-level BPE of "
                        "--vocab_size tokens trained on the training split, as train.py does)")
    p.add_argument("--vocab_size", type=positive_int, default=1024, help="the trained BPE's size (no --tokenizer)")
    p.add_argument("--val_every", type=positive_int, default=10, help="every N-th document is validation")
    p.add_argument("--test_every", type=int, default=0,
                   help="of the other documents every N-th is test (0: no test split)")
    p.add_argument("--split", choices=["validation", "test"], default="validation", help="the blocks scored")
    p.add_argument("--block_size", type=positive_int, default=128, help="tokens of context per block")
    p.add_argument("--eval_blocks", type=positive_int, help="blocks scored (default: all of the split)")
    p.add_argument("--max_train_tokens", type=positive_int,
                   help="count at most this many training tokens (the runs' budget; default: the whole split)")
    p.add_argument("--train_fraction", type=float, default=1.0,
                   help="count on this nested subset of the training documents, as train.py's train_fraction")
    add_output_dir(p, "output folder (ngram.json)")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help: its status, returned
        return int(e.code or 0)
    from ema_boundary import corpus  # deferred: datasets and transformers, after the flags are parsed

    try:
        if args.test_every < 0 or (args.split == "test" and args.test_every == 0):
            raise UsageError(f"--test_every {args.test_every}: give a positive N for a test split (every N-th of the "
                             "documents that are not validation)")
        if not 0 < args.train_fraction <= 1:
            raise UsageError(f"--train_fraction {args.train_fraction:g}: must be a number in (0, 1]")
        check_output_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir)
        try:
            data = corpus.parse_data(args.data)
            corpus.check_data(data, args.val_every, args.test_every)
            tokenizer, name = _tokenizer(args, data)
            result = ngram_references(data, args.val_every, tokenizer, args.block_size, args.eval_blocks,
                                      args.max_train_tokens, args.split, args.test_every,
                                      train_fraction=args.train_fraction)
        except corpus.DataError as e:
            raise UsageError(f"--data {first_line(e)}") from None
        result.update(data=data, tokenizer=name, val_every=args.val_every, test_every=args.test_every,
                      block_size=args.block_size, train_fraction=args.train_fraction)
        with atomic_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir) as tmp:
            write_json(tmp / "ngram.json", result)
    except UsageError as e:
        print(f"{p.prog}: error: {first_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{args.split}: unigram {result['unigram']:.2f}, bigram {result['bigram']:.2f}, trigram "
          f"{result['trigram']:.2f} perplexity on {result['eval_tokens']:,} tokens; wrote "
          f"{Path(args.output_dir) / 'ngram.json'}")
    return 0


__all__ = ["DISCOUNT", "KneserNey", "main", "ngram_perplexities", "ngram_references"]


if __name__ == "__main__":
    sys.exit(main())
