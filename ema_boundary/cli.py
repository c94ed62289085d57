"""``ema-boundary``: the command line of the main job (``report``) and of its re-rendering tools.

Exit status: 0 done; 2 a bad command line, plan, corpus or output folder (one line, nothing written) or a
stage that refused its input; 1 a stage that failed (one line naming the folder kept with its logs).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ema_boundary.io import OutputError, check_output_dir
from ema_boundary.usage import (
    EXIT_USAGE,
    UsageError,
    UsageParser,
    add_output_dir,
    first_line,
    non_negative_int,
    positive_int,
)
from ema_boundary.yamlio import YAMLFileError
from eval.report.plan import CORPORA, PLANS, SCALES, Plan
from eval.sweep.cli import add_arguments as add_sweep_arguments
from eval.sweep.cli import run as run_sweep
from eval.sweep.cli import scale_arguments, scale_run
from eval.sweep.plan import sweep_hint

TOOL = "ema-boundary report"  # eval.report.build.TOOL, without importing torch to parse a command line
EXIT_FAILED = 1


def _check_corpus(parser: UsageParser, corpus: str) -> None:
    """A corpus file must exist and be text: checked before minutes of training, in one line."""
    if corpus in CORPORA:
        return
    path = Path(corpus)
    if not path.is_file():
        parser.error(f"--corpus {corpus}: not 'embedded', 'c4' or an existing text file")
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(1 << 16)
    except UnicodeDecodeError:
        parser.error(f"--corpus {corpus}: not UTF-8 text")
    except OSError as e:
        parser.error(f"--corpus {corpus}: cannot read ({e.strerror})")
    if "\x00" in head:
        parser.error(f"--corpus {corpus}: a binary file, not text")
    if not head.strip():
        parser.error(f"--corpus {corpus}: empty")


def parser() -> tuple[UsageParser, dict[str, UsageParser]]:
    p = UsageParser(prog="ema-boundary", description="Map what fixed-decay EMA context can and cannot represent.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=UsageParser)
    rep = sub.add_parser("report", help="run every experiment and write the boundary report",
                         description="Run every experiment and write the boundary report (index.md, report.json, "
                                     "figures). What runs is declared in a plan YAML: "
                                     + ", ".join(sorted(set(PLANS.values()))) + ".")
    rep.add_argument("--quick", action="store_true", help=f"the quick plan ({PLANS['tiny', True]}): a smoke test")
    rep.add_argument("--plan", metavar="YAML", help="another plan YAML (overrides --quick and --scale's choice)")
    add_output_dir(rep, "the report folder (an earlier report is replaced only with --overwrite_output_dir)",
                   required=False, default="outputs/report")
    rep.add_argument("--corpus", default="embedded",
                     help="'embedded' (Python's help topics and standard-library docstrings, offline), 'c4' "
                          "(streamed from the hub) or a text file")
    rep.add_argument("--scale", choices=SCALES, default="tiny",
                     help="tiny CPU models, or the paper's 130M SPEN vs GPT-2 small (GPU)")
    rep.add_argument("--seed", type=non_negative_int, default=0, help="seed of the grammar corpus, SPCN and probes")
    rep.add_argument("--max_steps", "--max-steps", dest="max_steps", type=positive_int,
                     help="cap on every training run's optimizer steps (a smoke test)")
    render = sub.add_parser("render", help="re-render a report's index.md from its report.json",
                            description="Re-render FOLDER/index.md from FOLDER/report.json (the figures are kept); "
                                        "a report.json of an older schema is read in today's.")
    render.add_argument("folder", help="a report folder (index.md, report.json, figures/)")
    render.add_argument("--upgrade", action="store_true",
                        help="also rewrite report.json in the current schema, its claims evaluated by today's "
                             "claims table on the committed sweeps its plan names now (committed:, re-read) and every "
                             "recorded path relative to the repository or the output folder (numbers unchanged)")
    readme = sub.add_parser("readme", help="rewrite the README's results block from a report.json",
                            description="Rewrite the results block of README.md from a report's report.json.")
    readme.add_argument("--report", default="docs/report/report.json", help="the report.json to read")
    readme.add_argument("--readme", default="README.md", help="the README whose results block is rewritten")

    scale = sub.add_parser("scale", help="the scale ladder: SPEN vs GPT-2 at several sizes (python -m eval.scale)",
                           description="Train SPEN and the GPT-2 architecture at every size of a ladder plan and "
                                       "write report.json, index.md and gap.png.")
    scale_arguments(scale)
    sweep = sub.add_parser("sweep", help="run, continue or summarise a sweep plan (python -m eval.sweep)",
                           description="Run a sweep plan (arms x rates x seeds x budgets) into one folder with one "
                                       "results.json; continue it (--resume_from), or summarise it again "
                                       "(--summarize).")
    add_sweep_arguments(sweep)
    return p, {"report": rep, "render": render, "readme": readme, "scale": scale, "sweep": sweep}


def main(argv: list[str] | None = None) -> int:
    p, subs = parser()
    try:
        args = p.parse_args(argv)
        if args.command == "render":
            from eval.report import rerender  # deferred: the claims and figures import torch, scipy and matplotlib

            return rerender.render(subs["render"], Path(args.folder), args.upgrade,
                           shlex.join(["ema-boundary", *(argv if argv is not None else sys.argv[1:])]))
        if args.command == "readme":
            from eval.report import rerender  # deferred: as for render

            return rerender.readme(subs["readme"], Path(args.report), Path(args.readme))
        if args.command == "sweep":
            return run_sweep(subs["sweep"], args, shlex.join(["ema-boundary", *(argv or sys.argv[1:])]))
        if args.command == "scale":
            return scale_run(subs["scale"], args, shlex.join(["ema-boundary", *(argv or sys.argv[1:])]))
        rep = subs["report"]
        _check_corpus(rep, args.corpus)
        try:
            check_output_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir)
        except OutputError as e:
            rep.error(f"--output_dir {e}")
        try:
            plan = Plan.make(args.scale, args.quick, args.corpus, args.seed, args.max_steps, args.plan)
        except YAMLFileError as e:  # a plan error, or a file that cannot be read as YAML
            rep.error(sweep_hint(args.plan) or str(e))
    except SystemExit as e:  # a usage error (printed in one line) or --help
        return int(e.code or 0)
    return _report(rep, args, plan, argv)


def _report(rep: UsageParser, args: argparse.Namespace, plan: Plan, argv: list[str] | None) -> int:
    from eval.report import build, stages  # deferred: the stages import torch; --help and a bad flag answer without it

    try:
        stages.probe_settings(plan)  # the probes' own rules on the plan's recall section, before any work
    except UsageError as e:
        return _error(rep, first_line(e), EXIT_USAGE)
    command = shlex.join(["ema-boundary", *(argv if argv is not None else sys.argv[1:])])
    try:
        report = build.build_report(Path(args.output_dir), plan, command, overwrite=args.overwrite_output_dir)
    except UsageError as err:
        return _error(rep, first_line(err), EXIT_USAGE)
    except Exception as err:  # a stage failed: one line; the traceback is in the kept folder's logs/error.log
        return _error(rep, f"{type(err).__name__}: {first_line(err)}", EXIT_FAILED)
    print(f"wrote {Path(args.output_dir) / 'index.md'} and report.json "
          f"({report['environment']['seconds'] / 60:.1f} min)")
    return 0


def _error(parser: UsageParser, message: str, status: int) -> int:
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    return status
