"""``python -m grammar_probe build|run``: build the grammar corpus and its ceilings; run the structure experiment.

Bad input ends with one line on stderr naming the field or file, and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser
from ema_boundary.io import check_output_dir
from grammar_probe.grammar import GrammarError


def _fail(message: str) -> int:
    """A bad value found after parsing: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog="python -m grammar_probe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=UsageParser)

    build = sub.add_parser("build", help="write the grammar corpus (save_to_disk + parquet + card)")
    build.add_argument("--out", required=True, help="output folder (replaced atomically)")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--train-size", type=int, default=10000,
                       help="train sentences (a run draws one disjoint subset per seed)")
    build.add_argument("--validation-size", type=int, default=1000, help="sentences per validation split")
    build.add_argument("--test-size", type=int, default=1000, help="sentences per test split")
    build.add_argument("--max-depth", type=int, default=2, help="clause-embedding cap of train")
    build.add_argument("--deep-depth", type=int, default=None, help="cap of test_deep (default max+1)")
    build.add_argument("--ceiling-sentences", type=int, default=3000,
                       help="fresh sentences for the exact ceilings and kinds")
    build.add_argument("--window-sentences", type=int, default=200_000,
                       help="fresh sentences for the window-tagger tables")

    run = sub.add_parser("run", help="fit SPCN, the probes and the BiGRU; write results")
    run.add_argument("--dataset", required=True, help="folder written by `build`")
    run.add_argument("--out", required=True, help="output folder (replaced atomically)")
    run.add_argument("--quick", action="store_true", help="fewer training sentences per seed, fewer epochs")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--splits", nargs="+", default=None, help="evaluate these splits (default: every test_* split; "
                     "validation_novel_words is the development one)")
    run.add_argument("--threads", type=int, default=1, help="torch intra-op threads per worker")
    run.add_argument("--workers", type=int, default=2,
                     help="processes running seeds in parallel (default 2: one per core of a 2-core machine)")
    run.add_argument("--seeds", type=int, help="seeds (overrides the preset: 5)")
    run.add_argument("--train-sentences", type=int, help="training sentences per seed (overrides the preset)")
    run.add_argument("--eval-sentences", type=int, help="sentences per evaluated split (default: the preset's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Imported late so that `--help` and argument errors answer instantly.
    import datasets

    from grammar_probe.dataset import DatasetFormatError, build_dataset, compute_ceilings, write_dataset

    datasets.disable_progress_bars()  # per-shard bars of save_to_disk/to_parquet are noise here

    try:
        check_output_dir(args.out)  # before minutes of work, not after
        if args.command == "build":
            # Checked before any work, with the flags' names, so a bad value costs nothing.
            for flag in ("ceiling_sentences", "window_sentences"):
                if getattr(args, flag) <= 0:
                    return _fail(f"{flag} must be a positive integer, got {getattr(args, flag)}")
            build_args = {
                "seed": args.seed, "train_size": args.train_size, "validation_size": args.validation_size,
                "test_size": args.test_size, "max_depth": args.max_depth,
            }
            if args.deep_depth is not None:
                build_args["deep_depth"] = args.deep_depth
            dataset = build_dataset(**build_args)
            ceilings = compute_ceilings(
                dataset, seed=args.seed, ceiling_sentences=args.ceiling_sentences,
                window_sentences=args.window_sentences, max_depth=args.max_depth, deep_depth=args.deep_depth,
                progress=lambda msg: print(msg, file=sys.stderr),
            )
            write_dataset(dataset, args.out, {**build_args, "ceiling_sentences": args.ceiling_sentences,
                                              "window_sentences": args.window_sentences}, ceilings)
            print(f"wrote {args.out}: " + ", ".join(f"{k} {len(v)}" for k, v in dataset.items()))
            return 0

        from grammar_probe.experiment import run_experiment
        from grammar_probe.protocol import FULL, QUICK

        for flag in ("threads", "workers", "seeds", "train_sentences", "eval_sentences"):
            value = getattr(args, flag)
            if value is not None and value <= 0:
                return _fail(f"--{flag.replace('_', '-')} must be a positive integer, got {value}")
        overrides = {k: getattr(args, k) for k in ("seeds", "train_sentences", "eval_sentences")
                     if getattr(args, k) is not None}
        size = dataclasses.replace(QUICK if args.quick else FULL, **overrides)
        results = run_experiment(args.dataset, args.out, quick=args.quick, seed=args.seed, splits=args.splits,
                                 threads=args.threads, workers=args.workers, size=size)
        for split, scores in results["splits"].items():
            print(f"{split:24s} " + "  ".join(f"{m} {100 * s['accuracy']['mean']:.1f}" for m, s in scores.items()))
        for name, row in results["paper"].items():
            print(f"paper row {name}: {row['verdict']}")
        print(f"wrote {args.out} in {results['seconds']:.0f} s")
        return 0
    except (UsageError, GrammarError, DatasetFormatError, ValueError, OSError) as err:
        return _fail(str(err).splitlines()[0] if str(err) else type(err).__name__)


if __name__ == "__main__":
    sys.exit(main())
