"""``python -m grammar_probe build|run|arms``: build the grammar corpus and its ceilings; run the structure
experiment; run it across labelled-data sizes and unseen-word protocols (``arms``: a sweep of the experiment
runner, ``hub_configs/sweeps/arms.yaml``'s shape, run by ``python -m eval.sweep.grammar_arms`` with the same
flags; ``arms --summarize DIR`` rebuilds a sweep's results, or an earlier arms folder's summary, report and
figures from its arms' results, without training).

Output folders are never a folder the user made: a target that exists and is not empty is refused unless
it holds this same command's earlier output, which ``--overwrite_output_dir`` replaces. Bad input ends
with one line on stderr naming the flag, field or file, and exit status 2.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

from ema_boundary.usage import (
    EXIT_USAGE,
    UsageError,
    UsageParser,
    add_output_dir,
    first_line,
    non_negative_int,
    positive_int,
)
from grammar_probe.cli import add_run_options, option, protocol_of, run_size
from grammar_probe.grammar import GrammarError


def _fail(message: str) -> int:
    """A bad value found after parsing: one line on stderr, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = UsageParser(prog="python -m grammar_probe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=UsageParser)

    build = sub.add_parser("build", help="write the grammar corpus (save_to_disk + parquet + card + ceilings)")
    add_output_dir(build, "output folder for the corpus, its ceilings.json and its card")
    option(build, "seed", type=non_negative_int, default=0, help="corpus seed (every split and the ceiling sample)")
    option(build, "train_size", type=positive_int, default=10000,
            help="train sentences (a run draws one disjoint subset per seed)")
    option(build, "validation_size", type=positive_int, default=1000, help="sentences per validation split")
    option(build, "test_size", type=positive_int, default=1000, help="sentences per test split")
    option(build, "max_depth", type=positive_int, default=2, help="clause-embedding cap of train")
    option(build, "deep_depth", type=positive_int, default=None, help="cap of test_deep (None: max_depth + 1)")
    option(build, "ceiling_sentences", type=positive_int, default=3000,
            help="fresh sentences for the exact ceilings and kinds")
    option(build, "window_sentences", type=positive_int, default=200_000,
            help="fresh sentences for the window-tagger tables (k = 0..12; >= 200k for the stated sampling error)")

    run = sub.add_parser("run", help="fit SPCN, the probes, the window tagger and the GRUs; write results")
    add_run_options(run)

    arms = sub.add_parser("arms", help="every paper row as a function of labelled training sentences and of the "
                                       "unseen-word protocol: a sweep, one `run` per arm; writes arms.json and "
                                       "figures beside the sweep's results.json")
    add_run_options(arms, arms=True)
    return parser


def _arms(argv: list[str]) -> int:
    """``grammar_probe arms``: the sizes x protocol arms as a sweep of the experiment runner (``python -m
    eval.sweep.grammar_arms``, which reads the same flags; grammar_probe imports nothing of eval, so it runs as a
    child process); its exit status."""
    return subprocess.call([sys.executable, "-m", "eval.sweep.grammar_arms", *argv])


def _check_memory(args: argparse.Namespace) -> None:
    """Refuse a build that cannot fit in memory before it starts (it would grow until the kernel kills it): one
    line naming the setting that needs the most, with the estimate and what is available."""
    from grammar_probe.dataset import available_memory, build_memory  # deferred: datasets, as in main

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
    if args.command == "arms":  # an alias of the experiment runner, which the eval layer holds: a child process
        given = list(sys.argv[1:] if argv is None else argv)
        return _arms(given[given.index("arms") + 1:])
    # deferred, each subcommand's module: datasets and pandas (build), torch, scipy and matplotlib (run) take
    # seconds; `--help` and argument errors answer without them (nor the output folder's lock, filelock)
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

        size, protocol = run_size(args), protocol_of(args)
        from grammar_probe.experiment import RUN_TOOL, run_experiment  # deferred: torch, scipy (see above)

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
