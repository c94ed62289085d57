"""``python -m grammar_probe arms`` as a sweep of the experiment runner (what that command runs, in a child
process: grammar_probe imports nothing of eval).

    python -m grammar_probe arms --dataset data/grammar_seed21 --output_dir runs/arms --seed 21 --workers 2

The flags (``grammar_probe.cli``: ``--sizes``, ``--protocol_size``, ``--seed``, the run's sizes and protocol)
become a sweep plan (:func:`arms_plan`, the shape of ``hub_configs/sweeps/arms.yaml``): trainer ``arms`` (one
``grammar_probe run`` per arm, base seed and size), an arm ``size`` whose budgets are the labelled training
sentences of the size arms, and one arm per cell of the protocol 2 x 2 at ``--protocol_size`` (the cell that is the
fixed protocol is the size arm's run at that size when it has one). The runner's ``arms`` analysis writes
``arms.json`` (the schema the report's structure conditions read), ``arms.md`` and the figures beside the sweep's
``results.json``. ``--resume_from DIR`` continues a sweep; ``--summarize DIR`` rebuilds a sweep's results, or the
summary of a folder the command wrote before it ran as a sweep (``docs/structure/arms_seed21``).
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Any

from ema_boundary.io import output_owner
from ema_boundary.usage import EXIT_USAGE, UsageError, UsageParser, first_line
from eval.plans import repo_path
from eval.sweep import alias
from eval.sweep.runner import TOOL
from grammar_probe.arms import PROTOCOL_ARMS, ArmsFolderError, summarize_arms
from grammar_probe.cli import add_run_options, protocol_of, run_size

PROG = "python -m grammar_probe arms"
PLAN = "hub_configs/sweeps/arms.yaml"
RATE = 1e-3  # the plan's one rate: grammar_probe's models train at their own rates; it names the run folders only


def arms_plan(args: argparse.Namespace) -> Any:
    """The sweep plan of a ``grammar_probe arms`` command line (module docstring); bad flags: one UsageError."""
    size, protocol = run_size(args), protocol_of(args)
    if not (Path(args.dataset) / "ceilings.json").is_file():
        raise UsageError(f"--dataset {args.dataset}: not a folder of `python -m grammar_probe build` (no "
                         "ceilings.json)")
    sizes = sorted(args.sizes)
    n_protocol = args.protocol_size or size.train_sentences
    base: dict[str, Any] = {
        "dataset": repo_path(args.dataset),
        "size": {k: v for k, v in dataclasses.asdict(size).items() if k != "train_sentences"},
        "protocol": {"word_dropout": protocol.word_dropout, "unseen": protocol.unseen},
        "workers": 1, "threads": args.threads}  # the sweep runs the arms side by side (--workers of them)
    if args.splits is not None:
        base["splits"] = list(args.splits)
    arms: dict[str, Any] = {"size": {}}
    cells = {}
    for cell, changes in PROTOCOL_ARMS.items():
        if not changes and n_protocol in sizes:  # the fixed protocol at a size the size arm runs: that run
            cells[cell] = "size"
            continue
        arms[cell] = {"config": {"protocol": dict(changes)}, "budgets": [n_protocol]}
        cells[cell] = cell
    raw = {"name": "arms", "trainer": "arms", "analysis": "arms", "seeds": [args.seed], "budgets": sizes,
           "score": "test", "workers": args.workers, "rate": {"lr_grid": [RATE]}, "base": base, "arms": arms,
           "settings": {"size_arm": "size", "protocol_size": n_protocol, "protocol_arms": cells}}
    return alias.build_plan(raw, args.output_dir)


def _is_sweep(folder: Path) -> bool:
    return output_owner(folder) == TOOL


def main(argv: list[str] | None = None) -> int:
    p = UsageParser(prog=PROG, description="Every paper row of the structure experiment across labelled-data sizes "
                                           "and the unseen-word protocol, as a sweep of the experiment runner.")
    add_run_options(p, arms=True)
    p.set_defaults(launcher="local", launcher_args=None)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:  # a usage error (printed in one line) or --help
        return int(e.code or 0)
    command = shlex.join([*PROG.split(), *(argv if argv is not None else sys.argv[1:])])
    try:
        if args.summarize is not None or args.resume_from is not None:
            flag = "--summarize" if args.summarize is not None else "--resume_from"
            if args.dataset is not None or args.output_dir is not None or (args.summarize and args.resume_from):
                raise UsageError(f"{flag} reads the folder it names: give no --dataset, --output_dir or other "
                                 "folder with it")
            if args.resume_from is not None:
                return alias.run(p, args, command)
            folder = Path(args.summarize)
            if _is_sweep(folder):
                return alias.run(p, args, command, summarize=args.summarize)
            summary = summarize_arms(folder)  # a folder of the command before it ran as a sweep
            print(f"rebuilt {folder}: {len(summary['arms'])} arms (arms.json, arms.md, figures)")
            return 0
        alias.check_no_overwrite(args)
        for flag in ("dataset", "output_dir"):
            if getattr(args, flag) is None:
                raise UsageError(f"--{flag} is required (or --summarize DIR, --resume_from DIR)")
        plan = arms_plan(args)
    except (UsageError, ArmsFolderError) as e:
        print(f"{PROG}: error: {first_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    return alias.run(p, args, command, plan=plan)


__all__ = ["PLAN", "PROG", "arms_plan", "main"]


if __name__ == "__main__":
    sys.exit(main())
