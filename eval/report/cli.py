"""``ema-boundary report``: the command line of the main job."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser
from eval.report.plan import CORPORA, SCALES, Plan


def main(argv: list[str] | None = None) -> int:
    parser = UsageParser(prog="ema-boundary", description="Map what fixed-decay EMA context can and cannot represent.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=UsageParser)
    rep = sub.add_parser("report", help="run every experiment and write the boundary report",
                         description="Run every experiment and write the boundary report (index.md, report.json, "
                                     "figures).")
    rep.add_argument("--quick", action="store_true", help="fewer steps, smaller probes (~4 min on 2 cores)")
    rep.add_argument("--out", default="outputs/report", help="output folder (default: outputs/report)")
    rep.add_argument("--corpus", default="embedded",
                     help="'embedded' (Python's help topics and standard-library docstrings, offline), 'c4' "
                          "(streamed from the hub) or a text file")
    rep.add_argument("--scale", choices=SCALES, default="tiny",
                     help="tiny CPU models, or the paper's 130M SPEN vs GPT-2 small (GPU)")
    rep.add_argument("--seed", type=int, default=0, help="seed of the grammar corpus, SPCN and probes")
    rep.add_argument("--max-steps", type=int, help="optimizer steps per training run (overrides the plan)")
    args = parser.parse_args(argv)
    if args.corpus not in CORPORA and not Path(args.corpus).is_file():
        parser.error(f"--corpus {args.corpus}: not 'embedded', 'c4' or an existing text file")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(f"--max-steps must be a positive integer, got {args.max_steps}")
    plan = Plan.make(args.scale, args.quick, args.corpus, args.seed, args.max_steps)
    command = shlex.join(["ema-boundary", *(argv if argv is not None else sys.argv[1:])])
    from eval.report.build import build_report

    try:
        report = build_report(Path(args.out), plan, command)
    except UsageError as err:
        print(f"ema-boundary: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.out) / 'index.md'} and report.json ({report['environment']['seconds'] / 60:.1f} min)")
    return 0
