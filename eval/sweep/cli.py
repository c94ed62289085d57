"""``ema-boundary sweep PLAN --output_dir DIR`` (also ``python -m eval.sweep``): run, continue or summarise a sweep.

Exit status: 0 done (or a part of it, with what is left printed); 2 a bad command line, plan or folder (one
line, nothing written); 1 a run failed (one line naming it and its log; the finished runs are kept); 128 + the
signal after Ctrl-C (130), SIGTERM (143) or SIGUSR1 (138): the runs in progress saved and stopped, resumable.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path

from ema_boundary.format import count
from ema_boundary.usage import EXIT_USAGE, UsageError, UsageParser, comma_list, first_line, positive_int
from eval import scale
from eval.sweep.launch import LAUNCHERS, make_launcher

PROG = "ema-boundary sweep"
EXIT_FAILED = 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", nargs="?", help="a sweep plan YAML, e.g. hub_configs/sweeps/ladder.yaml "
                                           "(repository-relative paths work from any folder)")
    p.add_argument("--output_dir", metavar="DIR", help="a new (or empty) folder for the sweep")
    p.add_argument("--resume_from", metavar="DIR", help="continue the sweep in DIR: finished runs are reused, an "
                   "unfinished one continues from its checkpoint; a PLAN given too must be the one DIR ran, or it with "
                   "arms added (the sweep grows; its finished runs stay)")
    p.add_argument("--summarize", metavar="DIR", help="rebuild DIR's results.json and results.md from its finished "
                   "runs, without training")
    p.add_argument("--launcher", choices=LAUNCHERS, default="local",
                   help="local: worker processes here; slurm: submitit's AutoExecutor on a Slurm cluster; "
                        "submitit-local: submitit's local executor (what the tests run of the cluster path)")
    p.add_argument("--launcher_args", metavar="K=V,...", help="submitit parameters, e.g. "
                   "timeout_min=120,slurm_partition=gpu,gpus_per_node=1")
    p.add_argument("--workers", type=positive_int, help="runs at a time, on every launcher (default: the plan's)")
    p.add_argument("--arms", type=comma_list, metavar="A,B", help="only these arms in this call (a sweep run in "
                   "parts; results.json lists what is still to run)")
    p.add_argument("--max_runs", type=positive_int, metavar="N", help="train at most N runs in this call")
    p.add_argument("--max_steps", type=positive_int, metavar="N", help="cap every budget at N steps (a smoke test "
                   "of a plan: a sweep of its own, never mixed with the plan's real runs)")


def run(parser: UsageParser, args: argparse.Namespace, command: str) -> int:
    # deferred: the plan reader (yaml), the runner and its analyses (scipy, the trainers); --help answers without them
    from eval.plans import PlanError
    from eval.sweep.plan import SweepPlan, cap_steps, load_plan
    from eval.sweep.runner import IDENTITY, RunFailed, SweepStopped, read_folder, run_sweep, summarize

    given = [x for x in ("output_dir", "resume_from", "summarize") if getattr(args, x)]
    if len(given) != 1:
        parser.error("give one of --output_dir (with PLAN), --resume_from DIR or --summarize DIR")
    try:
        if args.summarize:
            results = summarize(Path(args.summarize))
            for path, why in results.get("unreadable", {}).items():
                print(f"{parser.prog}: {Path(args.summarize) / path}: {why}; "
                      + ("left out of the summary" if path != IDENTITY else "summarised without it"), file=sys.stderr)
            print(f"{PROG}: rebuilt {Path(args.summarize) / 'results.json'} "
                  f"({'complete' if results['complete'] else count(len(results['missing']), 'run') + ' still to run'})")
            return 0
        if args.output_dir and not args.plan:
            parser.error("--output_dir needs a PLAN")
        folder = Path(args.output_dir or args.resume_from)
        plan = read_folder(folder) if args.resume_from else None
        if args.plan:  # a plan file, or a plan an alias built from its own flags (eval.ablation, eval.depth)
            given_plan = args.plan if isinstance(args.plan, SweepPlan) else load_plan(args.plan)
            plan = plan or given_plan  # a resumed sweep checks the given plan against its own (run_sweep)
            if args.resume_from:
                plan = given_plan
        if args.max_steps is not None:
            if args.resume_from and not args.plan:
                parser.error("--max_steps: give it with a PLAN (a capped sweep is resumed with the same cap)")
            plan = cap_steps(plan, args.max_steps)
        if args.arms:
            unknown = [a for a in args.arms if a not in {arm.name for arm in plan.arms}]
            if unknown:
                parser.error(f"--arms {','.join(unknown)}: not an arm of {plan.path} "
                             f"({', '.join(a.name for a in plan.arms)})")
        launcher = make_launcher(args.launcher, args.workers or plan.workers, args.launcher_args)
        for sig in (signal.SIGTERM, signal.SIGUSR1):  # before and after the runs (the launcher handles them between)
            signal.signal(sig, _raise_preempted)
        run_sweep(plan, folder, launcher, command, resume=bool(args.resume_from), arms=args.arms,
                  max_runs=args.max_runs)
        return 0
    except RunFailed as e:
        print(f"{parser.prog}: error: {first_line(e, 600)}", file=sys.stderr)  # an alias's errors say its name
        return EXIT_FAILED
    except (PlanError, UsageError) as e:
        print(f"{parser.prog}: error: {first_line(e, 600)}", file=sys.stderr)
        return EXIT_USAGE
    except SweepStopped as e:
        print(f"{parser.prog}: {e}", file=sys.stderr)
        return e.status
    except (KeyboardInterrupt, Preempted) as e:
        where = args.output_dir or args.resume_from
        print(f"{parser.prog}: interrupted; finished runs are kept; continue with: {parser.prog} --resume_from {where}",
              file=sys.stderr)
        return 128 + (e.signum if isinstance(e, Preempted) else signal.SIGINT)


class Preempted(Exception):
    """SIGTERM (Slurm preemption, scancel, docker stop) or SIGUSR1: stop like Ctrl-C, saying how to continue."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_preempted(signum: int, frame: object) -> None:
    raise Preempted(signum)


def parser() -> UsageParser:
    p = UsageParser(prog=PROG, description="Run a sweep plan (arms x rates x seeds x budgets) into one folder with "
                    "one results.json; continue it, or summarise it again.")
    add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    try:
        args = p.parse_args(argv)
        return run(p, args, shlex.join([PROG, *(argv if argv is not None else sys.argv[1:])]))
    except SystemExit as e:  # a usage error (printed in one line) or --help
        return int(e.code or 0)


# ---------------------------------------------------------------------------------------------
# ema-boundary scale and python -m eval.scale (eval/scale/__main__.py): the sweep, the ladder's plan by default
# ---------------------------------------------------------------------------------------------


def scale_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``python -m eval.scale`` and ``ema-boundary scale``: the sweep's, with the ladder's plan as the
    default."""
    add_arguments(parser)
    for action in parser._actions:
        if action.dest == "plan":
            action.default = scale.PLAN
            action.help = f"a ladder sweep plan (default: {scale.PLAN}; ladder-gpu.yaml for one GPU)"


def scale_run(parser: UsageParser, args: argparse.Namespace, command: str) -> int:
    """``ema-boundary sweep`` with the ladder's plan (when resuming or summarising, the folder's own plan)."""
    if (args.resume_from or args.summarize) and args.plan == scale.PLAN:
        args.plan = None
    return run(parser, args, command)


def scale_main(argv: list[str] | None = None) -> int:
    parser = UsageParser(prog=scale.PROG, description=scale.__doc__.split("\n\n")[0])
    scale_arguments(parser)
    try:
        args = parser.parse_args(argv)
        command = shlex.join([*scale.PROG.split(), *(argv if argv is not None else sys.argv[1:])])
        return scale_run(parser, args, command)
    except SystemExit as e:  # a usage error (printed in one line) or --help
        return int(e.code or 0)
