"""The command-line options of ``python -m grammar_probe run`` and ``arms``, shared with the arms' sweep
(``eval/sweep/grammar_arms.py`` parses the same flags): one definition of each flag and of what it means."""

from __future__ import annotations

import argparse
import dataclasses

from ema_boundary.usage import UsageError, add_output_dir, non_negative_int, positive_int
from grammar_probe.protocol import FULL, PROTOCOL, QUICK, Protocol, RunSize

__all__ = ["DEFAULT_SIZES", "add_run_options", "option", "protocol_of", "run_size"]

DEFAULT_SIZES: tuple[int, ...] = (250, 500, 1000, 2000, 4000)  # the arms' labelled training sentences per seed


def option(parser: argparse.ArgumentParser, name: str, **kwargs) -> None:
    """``--name_with_underscores``, with the older ``--name-with-hyphens`` spelling as a hidden alias."""
    spellings = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
    parser.add_argument(*spellings, dest=name, **kwargs)


def add_run_options(p: argparse.ArgumentParser, arms: bool = False) -> None:
    # arms: --dataset and --output_dir are required unless --summarize or --resume_from names a folder (checked by
    # eval.sweep.grammar_arms)
    p.add_argument("--dataset", "--dataset_dir", dest="dataset", required=not arms, metavar="DIR",
                   help="folder written by `python -m grammar_probe build`"
                        + (" (required unless --summarize or --resume_from)" if arms else ""))
    add_output_dir(p, "output folder (results.json, report.md, figures)" if not arms else
                   "a new sweep folder (its runs, results.json; arms.json, arms.md, one figure per paper row; "
                   "required unless --summarize or --resume_from)", required=not arms)
    p.add_argument("--quick", action="store_true", help="the quick preset: fewer training sentences and "
                   "evaluation sentences per split (a smoke test)")
    option(p, "seed", type=non_negative_int, default=0, help="base seed (seed s uses s*1000 + r for r < seeds)")
    p.add_argument("--splits", nargs="+", default=None, help="evaluate these splits (None: every test_* split; "
                   "validation_novel_words is the development one)")
    option(p, "threads", type=positive_int, default=1, help="torch intra-op threads per worker")
    option(p, "workers", type=positive_int, default=2, help="processes running seeds in parallel")
    option(p, "seeds", type=positive_int, default=None, help="seeds (None: the preset's, 5)")
    option(p, "train_sentences", type=positive_int, default=None,
            help="training sentences per seed (None: the preset's)")
    option(p, "eval_sentences", type=positive_int, default=None,
            help="sentences per evaluated split (None: the preset's)")
    option(p, "word_dropout", type=float, default=None,
            help="rate at which every training token becomes <unk> (None: the protocol's, 0.15)")
    option(p, "unseen", choices=("unk", "random_codes"), default=None,
            help="how a word never seen in training is read: <unk>, or a fresh random code per word "
                 "(None: the protocol's, unk)")
    if arms:
        option(p, "sizes", type=positive_int, nargs="+", default=list(DEFAULT_SIZES),
                help="labelled training sentences per seed, one arm each (run with the protocol's settings)")
        option(p, "protocol_size", type=positive_int, default=None,
                help="training sentences per seed of the 2x2 protocol arms (None: the run preset's)")
        p.add_argument("--summarize", metavar="DIR", default=None,
                       help="train nothing: rebuild the sweep's results.json, arms.json, arms.md and figures in DIR "
                            "from its finished runs (or, in a folder of the command before it ran as a sweep, from "
                            "its arms/*/results.json, keeping the run's record)")
        p.add_argument("--resume_from", metavar="DIR", default=None,
                       help="continue the sweep in DIR: finished arms are reused (no other flag but --workers)")


def run_size(args: argparse.Namespace) -> RunSize:
    """The run's sizes: the preset (``--quick`` or the full one) with the flags given on top."""
    overrides = {k: getattr(args, k) for k in ("seeds", "train_sentences", "eval_sentences")
                 if getattr(args, k) is not None}
    return dataclasses.replace(QUICK if args.quick else FULL, **overrides)


def protocol_of(args: argparse.Namespace) -> Protocol:
    """The unseen-word protocol with the flags given on top (one UsageError line for a bad rate)."""
    changes = {}
    if args.word_dropout is not None:
        if not 0.0 <= args.word_dropout < 1.0:
            raise UsageError(f"--word_dropout must be in [0, 1), got {args.word_dropout}")
        changes["word_dropout"] = args.word_dropout
    if args.unseen is not None:
        changes["unseen"] = args.unseen
    return dataclasses.replace(PROTOCOL, **changes)
