"""``python -m grammar_probe build|run|arms``: build the grammar corpus and its ceilings; run the structure
experiment; run it across labelled-data sizes and unseen-word protocols (``arms --summarize DIR`` rebuilds a
finished arms folder's summary, report and figures from its arms' results, without training).

Output folders are never a folder the user made: a target that exists and is not empty is refused unless
it holds this same command's earlier output, which ``--overwrite_output_dir`` replaces. Bad input ends
with one line on stderr naming the flag, field or file, and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence

from ema_boundary.cli import (
    EXIT_USAGE,
    UsageError,
    UsageParser,
    add_output_dir,
    first_line,
    non_negative_int,
    positive_int,
)
from grammar_probe.grammar import GrammarError


def _fail(message: str) -> int:
    """A bad value found after parsing: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _option(parser: argparse.ArgumentParser, name: str, **kwargs) -> None:
    """``--name_with_underscores``, with the older ``--name-with-hyphens`` spelling as a hidden alias."""
    spellings = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
    parser.add_argument(*spellings, dest=name, **kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog="python -m grammar_probe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=UsageParser)

    build = sub.add_parser("build", help="write the grammar corpus (save_to_disk + parquet + card + ceilings)")
    add_output_dir(build, "output folder for the corpus, its ceilings.json and its card")
    _option(build, "seed", type=non_negative_int, default=0, help="corpus seed (every split and the ceiling sample)")
    _option(build, "train_size", type=positive_int, default=10000,
            help="train sentences (a run draws one disjoint subset per seed)")
    _option(build, "validation_size", type=positive_int, default=1000, help="sentences per validation split")
    _option(build, "test_size", type=positive_int, default=1000, help="sentences per test split")
    _option(build, "max_depth", type=positive_int, default=2, help="clause-embedding cap of train")
    _option(build, "deep_depth", type=positive_int, default=None, help="cap of test_deep (None: max_depth + 1)")
    _option(build, "ceiling_sentences", type=positive_int, default=3000,
            help="fresh sentences for the exact ceilings and kinds")
    _option(build, "window_sentences", type=positive_int, default=200_000,
            help="fresh sentences for the window-tagger tables (k = 0..12; >= 200k for the stated sampling error)")

    run = sub.add_parser("run", help="fit SPCN, the probes, the window tagger and the GRUs; write results")
    _add_run_options(run)

    arms = sub.add_parser("arms", help="every paper row as a function of labelled training sentences and of the "
                                       "unseen-word protocol (one `run` per arm); writes arms.json and figures")
    _add_run_options(arms, arms=True)
    return parser


def _add_run_options(p: argparse.ArgumentParser, arms: bool = False) -> None:
    # arms: --dataset and --output_dir are required unless --summarize names a finished folder (checked in main)
    p.add_argument("--dataset", "--dataset_dir", dest="dataset", required=not arms, metavar="DIR",
                   help="folder written by `python -m grammar_probe build`" + (" (required unless --summarize)"
                                                                               if arms else ""))
    add_output_dir(p, "output folder (results.json, report.md, figures)" if not arms else
                   "output folder (arms.json, arms.md, one figure per paper row, each arm's results.json; "
                   "required unless --summarize)", required=not arms)
    p.add_argument("--quick", action="store_true", help="the quick preset: fewer training sentences and "
                   "evaluation sentences per split (a smoke test)")
    _option(p, "seed", type=non_negative_int, default=0, help="base seed (seed s uses s*1000 + r for r < seeds)")
    p.add_argument("--splits", nargs="+", default=None, help="evaluate these splits (None: every test_* split; "
                   "validation_novel_words is the development one)")
    _option(p, "threads", type=positive_int, default=1, help="torch intra-op threads per worker")
    _option(p, "workers", type=positive_int, default=2, help="processes running seeds in parallel")
    _option(p, "seeds", type=positive_int, default=None, help="seeds (None: the preset's, 5)")
    _option(p, "train_sentences", type=positive_int, default=None,
            help="training sentences per seed (None: the preset's)")
    _option(p, "eval_sentences", type=positive_int, default=None,
            help="sentences per evaluated split (None: the preset's)")
    _option(p, "word_dropout", type=float, default=None,
            help="rate at which every training token becomes <unk> (None: the protocol's, 0.15)")
    _option(p, "unseen", choices=("unk", "random_codes"), default=None,
            help="how a word never seen in training is read: <unk>, or a fresh random code per word "
                 "(None: the protocol's, unk)")
    if arms:
        _option(p, "sizes", type=positive_int, nargs="+", default=[250, 500, 1000, 2000, 4000],
                help="labelled training sentences per seed, one arm each (run with the protocol's settings)")
        _option(p, "protocol_size", type=positive_int, default=None,
                help="training sentences per seed of the 2x2 protocol arms (None: the run preset's)")
        p.add_argument("--summarize", metavar="DIR", default=None,
                       help="train nothing: rebuild arms.json, arms.md and the figures of the finished arms folder "
                            "DIR from its arms/*/results.json, keeping the run's record (sizes, seeds, seconds)")


def _run_size(args: argparse.Namespace):
    from grammar_probe.protocol import FULL, QUICK

    overrides = {k: getattr(args, k) for k in ("seeds", "train_sentences", "eval_sentences")
                 if getattr(args, k) is not None}
    return dataclasses.replace(QUICK if args.quick else FULL, **overrides)


def _protocol(args: argparse.Namespace):
    from grammar_probe.protocol import PROTOCOL

    changes = {}
    if args.word_dropout is not None:
        if not 0.0 <= args.word_dropout < 1.0:
            raise UsageError(f"--word_dropout must be in [0, 1), got {args.word_dropout}")
        changes["word_dropout"] = args.word_dropout
    if args.unseen is not None:
        changes["unseen"] = args.unseen
    return dataclasses.replace(PROTOCOL, **changes)


def _check_memory(args: argparse.Namespace) -> None:
    """Refuse a build that cannot fit in memory before it starts (it would grow until the kernel kills it): one
    line naming the setting that needs the most, with the estimate and what is available."""
    from grammar_probe.dataset import available_memory, build_memory

    need = build_memory(args.train_size, args.validation_size, args.test_size, args.max_depth, args.deep_depth,
                        args.ceiling_sentences, args.window_sentences)
    have = available_memory()
    total = sum(need.values())
    if have is None or total <= have:
        return
    flag = max((k for k in need if k != "base"), key=need.__getitem__)
    value = getattr(args, flag)
    per = need[flag] / value / {"test_size": 5, "validation_size": 2}.get(flag, 1)  # splits of that size
    raise UsageError(f"--{flag} {value}: the build needs about {total / 2**30:.1f} GiB of memory "
                     f"(~{per / 1000:.1f} kB a sentence, measured), more than the {have / 2**30:.1f} GiB available; "
                     f"give a smaller --{flag}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Imported late so that `--help` and argument errors answer instantly.
    import datasets

    from ema_boundary.io import check_output_dir
    from grammar_probe.dataset import BUILD_TOOL, DatasetFormatError, build_dataset, compute_ceilings, write_dataset

    datasets.disable_progress_bars()  # per-shard bars of save_to_disk/to_parquet are noise here

    try:
        if args.command == "build":
            check_output_dir(args.output_dir, tool=BUILD_TOOL, overwrite=args.overwrite_output_dir)
            _check_memory(args)
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
            write_dataset(dataset, args.output_dir, {**build_args, "ceiling_sentences": args.ceiling_sentences,
                                                     "window_sentences": args.window_sentences}, ceilings,
                          overwrite=args.overwrite_output_dir)
            print(f"wrote {args.output_dir}: " + ", ".join(f"{k} {len(v)}" for k, v in dataset.items()))
            return 0

        if args.command == "arms" and args.summarize is not None:
            from grammar_probe.arms import summarize_arms

            if args.dataset is not None or args.output_dir is not None:
                raise UsageError("--summarize rebuilds DIR in place from its arms' results.json: give no --dataset "
                                 "or --output_dir with it")
            summary = summarize_arms(args.summarize)
            print(f"rebuilt {args.summarize}: {len(summary['arms'])} arms (arms.json, arms.md, figures)")
            return 0
        if args.command == "arms":
            for flag in ("dataset", "output_dir"):
                if getattr(args, flag) is None:
                    raise UsageError(f"--{flag} is required (or --summarize DIR to rebuild a finished arms folder)")

        size, protocol = _run_size(args), _protocol(args)
        if args.command == "arms":
            from grammar_probe.arms import ARMS_TOOL, run_arms

            check_output_dir(args.output_dir, tool=ARMS_TOOL, overwrite=args.overwrite_output_dir)
            summary = run_arms(args.dataset, args.output_dir, sizes=args.sizes, size=size, protocol=protocol,
                               protocol_size=args.protocol_size, seed=args.seed, splits=args.splits,
                               threads=args.threads, workers=args.workers, overwrite=args.overwrite_output_dir)
            print(f"wrote {args.output_dir}: {len(summary['arms'])} arms in {summary['seconds']:.0f} s")
            return 0

        from grammar_probe.experiment import RUN_TOOL, run_experiment

        check_output_dir(args.output_dir, tool=RUN_TOOL, overwrite=args.overwrite_output_dir)
        results = run_experiment(args.dataset, args.output_dir, quick=args.quick, seed=args.seed, splits=args.splits,
                                 threads=args.threads, workers=args.workers, size=size, protocol=protocol,
                                 overwrite=args.overwrite_output_dir)
        for split, scores in results["splits"].items():
            print(f"{split:24s} " + "  ".join(f"{m} {100 * s['accuracy']['mean']:.1f}" for m, s in scores.items()))
        for name, row in results["paper"].items():
            print(f"paper row {name}: {row['verdict']}")
        print(f"wrote {args.output_dir} in {results['seconds']:.0f} s")
        return 0
    except (UsageError, GrammarError, DatasetFormatError, ValueError, OSError) as err:
        return _fail(first_line(err))


if __name__ == "__main__":
    sys.exit(main())
