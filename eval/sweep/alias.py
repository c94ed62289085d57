"""The older experiment commands as aliases of the runner: their flags become a sweep plan, the runner runs it.

``python -m eval.ablation --config ...`` and ``python -m eval.depth --config ...`` each translate their flags into
a plan (the one a plan file under ``hub_configs/sweeps/`` would declare) and hand it to ``ema-boundary sweep``'s
own command (:func:`eval.sweep.cli.run`): one runner, one folder layout, one results.json. The folder keeps the
plan as ``DIR/sweep.yaml``, so ``ema-boundary sweep DIR/sweep.yaml --output_dir NEW`` runs it again and
``--resume_from DIR`` continues it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from ema_boundary.usage import UsageError
from eval.plans import REPO
from eval.sweep.plan import SweepPlan, plan_from_text

NO_OVERWRITE = ("--overwrite_output_dir no longer applies: the experiment runs as a sweep, which never replaces a "
                "folder; give a new --output_dir, or continue this one with --resume_from {dir}")


def repo_path(path: str | Path) -> str:
    """A path as a plan names it: repository-relative when inside the repository, else absolute (a plan's paths are
    read from the repository, whatever the working folder)."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def data_sources(data: list[str]) -> list[str]:
    """train.py's data sources as a plan names them: named corpora as they are, files by :func:`repo_path`."""
    from ema_boundary import corpus

    named = (corpus.C4, corpus.EMBEDDED, corpus.EMBEDDED_PYDOC, corpus.EMBEDDED_STDLIB)
    return [d if d in named else repo_path(d) for d in data]


def build_plan(raw: dict[str, Any], output_dir: str | Path) -> SweepPlan:
    """The plan ``raw`` (a plan file's mapping), checked as a plan file is; its path is the copy the sweep folder
    will keep (``DIR/sweep.yaml``)."""
    return plan_from_text(yaml.safe_dump(raw, sort_keys=False), str(Path(output_dir) / "sweep.yaml"))


def add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    """The runner's flags an alias passes on: continue a folder, where the runs execute."""
    from eval.sweep.launch import LAUNCHERS

    p.add_argument("--resume_from", metavar="DIR", help="continue the sweep in DIR (finished runs are reused)")
    p.add_argument("--launcher", choices=LAUNCHERS, default="local",
                   help="local: worker processes here; slurm or submitit-local: through submitit")
    p.add_argument("--launcher_args", metavar="K=V,...", help="submitit parameters, e.g. timeout_min=120")


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str, plan: SweepPlan | None = None,
        summarize: str | None = None) -> int:
    """``ema-boundary sweep``'s command with ``plan`` into ``args.output_dir``, or ``--resume_from`` or
    ``--summarize`` of a sweep folder (exit status as the sweep's)."""
    from eval.sweep.cli import run as run_sweep

    sweep_args = argparse.Namespace(
        plan=plan, output_dir=args.output_dir if plan is not None else None, resume_from=args.resume_from,
        summarize=summarize, launcher=args.launcher, launcher_args=args.launcher_args,
        workers=args.workers if plan is not None or args.resume_from else None, arms=None, max_runs=None,
        max_steps=None)
    return run_sweep(parser, sweep_args, command)


def check_no_overwrite(args: argparse.Namespace) -> None:
    if args.overwrite_output_dir:
        raise UsageError(NO_OVERWRITE.format(dir=args.output_dir or "DIR"))


__all__ = ["add_sweep_arguments", "build_plan", "check_no_overwrite", "data_sources", "repo_path", "run"]
