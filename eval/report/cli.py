"""``ema-boundary report``: the command line of the main job."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser
from ema_boundary.io import OutputError, check_output_dir
from eval.report.plan import CORPORA, PLANS, SCALES, Plan, PlanError


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


def _readme(parser: UsageParser, report: Path, readme: Path) -> int:
    import json

    from eval.report.render import update_readme

    try:
        changed = update_readme(json.loads(report.read_text()), readme)
    except FileNotFoundError as e:
        return _usage(parser, f"{e.filename}: no such file")
    except (ValueError, KeyError) as e:
        return _usage(parser, f"{report}: {e}")
    print(f"{readme}: results block {'rewritten' if changed else 'already up to date'}")
    return 0


def _render(parser: UsageParser, folder: Path) -> int:
    import json

    from ema_boundary.io import atomic_file
    from eval.report.render import write_index

    try:
        report = json.loads((folder / "report.json").read_text())
    except FileNotFoundError:
        return _usage(parser, f"{folder}: no report.json")
    except ValueError as e:
        return _usage(parser, f"{folder / 'report.json'}: not JSON ({e})")
    with atomic_file(folder / "index.md") as tmp:
        write_index(report, report["figures"], Path(tmp))
    print(f"wrote {folder / 'index.md'}")
    return 0


def _usage(parser: UsageParser, message: str) -> int:
    try:
        parser.error(message)
    except SystemExit as e:
        return int(e.code)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    parser = UsageParser(prog="ema-boundary", description="Map what fixed-decay EMA context can and cannot represent.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=UsageParser)
    rep = sub.add_parser("report", help="run every experiment and write the boundary report",
                         description="Run every experiment and write the boundary report (index.md, report.json, "
                                     "figures). What runs is declared in a plan YAML: "
                                     + ", ".join(sorted(set(PLANS.values()))) + ".")
    rep.add_argument("--quick", action="store_true", help=f"the quick plan ({PLANS['tiny', True]}): a smoke test")
    rep.add_argument("--plan", metavar="YAML", help="another plan YAML (overrides --quick and --scale's choice)")
    rep.add_argument("--out", default="outputs/report", help="output folder (default: outputs/report)")
    rep.add_argument("--corpus", default="embedded",
                     help="'embedded' (Python's help topics and standard-library docstrings, offline), 'c4' "
                          "(streamed from the hub) or a text file")
    rep.add_argument("--scale", choices=SCALES, default="tiny",
                     help="tiny CPU models, or the paper's 130M SPEN vs GPT-2 small (GPU)")
    rep.add_argument("--seed", type=int, default=0, help="seed of the grammar corpus, SPCN and probes")
    rep.add_argument("--max-steps", type=int, help="cap on every training run's optimizer steps (a smoke test)")
    render = sub.add_parser("render", help="re-render a report's index.md from its report.json",
                            description="Re-render OUT/index.md from OUT/report.json (the figures are kept).")
    render.add_argument("folder", help="a report folder (index.md, report.json, figures/)")
    readme = sub.add_parser("readme", help="rewrite the README's results block from a report.json",
                            description="Rewrite the results block of README.md from a report's report.json.")
    readme.add_argument("--report", default="docs/report/report.json", help="default: docs/report/report.json")
    readme.add_argument("--readme", default="README.md", help="default: README.md")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error (printed in one line) or --help
        return int(e.code or 0)
    if args.command == "render":
        return _render(render, Path(args.folder))
    if args.command == "readme":
        return _readme(readme, Path(args.report), Path(args.readme))
    try:
        _check_corpus(rep, args.corpus)
        if args.max_steps is not None and args.max_steps < 1:
            rep.error(f"--max-steps must be a positive integer, got {args.max_steps}")
        if args.seed < 0:
            rep.error(f"--seed must be a non-negative integer, got {args.seed}")
        try:
            check_output_dir(args.out)
            plan = Plan.make(args.scale, args.quick, args.corpus, args.seed, args.max_steps, args.plan)
        except (OutputError, PlanError) as e:
            rep.error(f"--out {e}" if isinstance(e, OutputError) else str(e))
    except SystemExit as e:
        return int(e.code or 0)
    command = shlex.join(["ema-boundary", *(argv if argv is not None else sys.argv[1:])])
    from eval.report.build import build_report

    try:
        report = build_report(Path(args.out), plan, command)
    except UsageError as err:
        print(f"ema-boundary: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.out) / 'index.md'} and report.json ({report['environment']['seconds'] / 60:.1f} min)")
    return 0
