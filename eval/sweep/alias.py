"""The older experiment commands as aliases of the runner: their flags become a sweep plan, the runner runs it.

``python -m eval.ablation --config ...`` and ``python -m eval.depth --config ...`` each translate their flags into
a plan (the one a plan file under ``hub_configs/sweeps/`` would declare) and hand it to ``ema-boundary sweep``'s
own command (:func:`eval.sweep.cli.run`): one runner, one folder layout, one results.json. The folder keeps the
plan as ``DIR/sweep.yaml``, so ``ema-boundary sweep DIR/sweep.yaml --output_dir NEW`` runs it again and
``--resume_from DIR`` continues it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ema_boundary.io import output_owner
from ema_boundary.usage import (
    EXIT_USAGE,
    UsageError,
    UsageParser,
    add_output_dir,
    comma_list,
    first_line,
    flatten,
    non_negative_int,
    positive_int,
)
from eval import ablation, depth
from eval.plans import data_sources, repo_path
from eval.sweep import cli
from eval.sweep.launch import LAUNCHERS
from eval.sweep.plan import SweepPlan, plan_from_text
from eval.sweep.runner import TOOL as SWEEP_TOOL

NO_OVERWRITE = ("--overwrite_output_dir no longer applies: the experiment runs as a sweep, which never replaces a "
                "folder; give a new --output_dir, or continue this one with --resume_from {dir}")


def build_plan(raw: dict[str, Any], output_dir: str | Path) -> SweepPlan:
    """The plan ``raw`` (a plan file's mapping), checked as a plan file is; its path is the copy the sweep folder
    will keep (``DIR/sweep.yaml``)."""
    return plan_from_text(yaml.safe_dump(raw, sort_keys=False), str(Path(output_dir) / "sweep.yaml"))


def add_sweep_arguments(p: argparse.ArgumentParser) -> None:
    """The runner's flags an alias passes on: continue a folder, where the runs execute."""
    p.add_argument("--resume_from", metavar="DIR", help="continue the sweep in DIR (finished runs are reused)")
    p.add_argument("--launcher", choices=LAUNCHERS, default="local",
                   help="local: worker processes here; slurm or submitit-local: through submitit")
    p.add_argument("--launcher_args", metavar="K=V,...", help="submitit parameters, e.g. timeout_min=120")


def run(parser: argparse.ArgumentParser, args: argparse.Namespace, command: str, plan: SweepPlan | None = None,
        summarize: str | None = None) -> int:
    """``ema-boundary sweep``'s command with ``plan`` into ``args.output_dir``, or ``--resume_from`` or
    ``--summarize`` of a sweep folder (exit status as the sweep's)."""
    sweep_args = argparse.Namespace(
        plan=plan, output_dir=args.output_dir if plan is not None else None, resume_from=args.resume_from,
        summarize=summarize, launcher=args.launcher, launcher_args=args.launcher_args,
        workers=args.workers if plan is not None or args.resume_from else None, arms=None, max_runs=None,
        max_steps=None)
    return cli.run(parser, sweep_args, command)


def check_no_overwrite(args: argparse.Namespace) -> None:
    if args.overwrite_output_dir:
        raise UsageError(NO_OVERWRITE.format(dir=args.output_dir or "DIR"))


# ---------------------------------------------------------------------------------------------
# python -m eval.depth (eval/depth/__main__.py)
# ---------------------------------------------------------------------------------------------


def _depth_parser() -> UsageParser:
    p = UsageParser(prog=depth.PROG, description=depth.__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--model_name_or_path", nargs="+", metavar="FOLDER",
                      help="measure trained SPEN folders (save_pretrained); several are compared in one figure")
    mode.add_argument("--config", metavar="YAML",
                      help="train and measure: the train.py YAML of a SPEN model (e.g. "
                           "hub_configs/spen-depth8/train.yaml), trained once per residual arm and seed")
    add_output_dir(p, "output folder (depth.json, depth.png; with --config a new folder for the sweep)",
                   aliases=(), required=False)
    p.add_argument("--num_sequences", type=positive_int, default=64, help="sequences probed (80%% fit, 20%% held out)")
    p.add_argument("--seq_len", type=positive_int, default=128, help="tokens per sequence")
    p.add_argument("--seed", type=non_negative_int,
                   help="with --config: the first seed (default: the YAML's); else the seed of the random token ids "
                        "(folders without a tokenizer; default: 0)")
    p.add_argument("--ridge", type=float, default=1e-3, help="L2 penalty of the probes on standardised features")
    train = p.add_argument_group("the experiment (with --config)")
    train.add_argument("--residuals", type=comma_list, nargs="+", metavar="NAME",
                       help=f"the residual arms, compared paired by seed (default: {','.join(depth.RESIDUALS)}, "
                            "the only pair)")
    train.add_argument("--seeds", type=positive_int, default=depth.MIN_SEEDS, help="seeds per arm: --seed + 0..N-1")
    train.add_argument("--max_steps", type=positive_int, help="optimizer steps per run (default: the YAML's)")
    train.add_argument("--learning_rate", type=float, help="peak learning rate of both arms (default: the YAML's)")
    train.add_argument("--data", nargs="+", metavar="SOURCE", help="training data (default: the YAML's)")
    train.add_argument("--tokenizer", metavar="DIR",
                       help="tokenizer folder for every run (default: the YAML's, or a BPE trained on the data once)")
    train.add_argument("--workers", type=positive_int, default=1,
                       help="trainings at a time, in processes of one torch thread each")
    for key, value in depth.MARGINS.items():
        unit = "nats" if key == "val_loss" else "a fraction: 0.02 = 2 points"
        train.add_argument(f"--{key}_margin", type=float, default=value,
                           help=f"equivalence margin of {key.replace('_', ' ')} ({unit}), declared before the run")
    add_sweep_arguments(train)
    return p


def depth_sweep_plan(args: argparse.Namespace) -> Any:
    """The sweep plan of an ``eval.depth --config`` command line (module docstring); bad flags: one UsageError."""
    residuals = flatten(args.residuals) or list(depth.RESIDUALS)
    if sorted(residuals) != sorted(depth.RESIDUALS) or len(residuals) != len(depth.RESIDUALS):
        raise UsageError(f"--residuals must name both of {', '.join(depth.RESIDUALS)} (the comparison is paired), "
                         f"got {','.join(residuals)}")
    raw = depth.experiment_plan(args.config, args.seeds, seed=args.seed, max_steps=args.max_steps,
                                lr=args.learning_rate, data=args.data, tokenizer=args.tokenizer, workers=args.workers,
                                margins={key: getattr(args, f"{key}_margin") for key in depth.MARGINS},
                                num_sequences=args.num_sequences, seq_len=args.seq_len, ridge=args.ridge)
    return build_plan(raw, args.output_dir)


def depth_main(argv: list[str] | None = None) -> int:
    parser = _depth_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help
        return int(e.code or 0)
    command = shlex.join([*depth.PROG.split(), *(argv if argv is not None else sys.argv[1:])])
    try:
        if args.resume_from is not None:
            if args.model_name_or_path or args.config or args.output_dir:
                raise UsageError("--resume_from continues the sweep its folder recorded: give no --config, "
                                 "--model_name_or_path or --output_dir")
            return run(parser, args, command)
        if not (args.model_name_or_path or args.config):
            raise UsageError("give --model_name_or_path (measure trained models) or --config (the experiment)")
        if args.output_dir is None:
            raise UsageError("--output_dir is required")
        if not args.ridge >= 0:
            raise UsageError(f"--ridge must be >= 0, got {args.ridge}")
        if args.config is not None:
            check_no_overwrite(args)
            plan = depth_sweep_plan(args)
        else:
            depth.measure_folders(args)
    except UsageError as err:
        print(f"{depth.PROG}: error: {first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    if args.config is not None:
        return run(parser, args, command, plan=plan)
    print(f"wrote {Path(args.output_dir) / 'depth.json'}")
    return 0


# ---------------------------------------------------------------------------------------------
# python -m eval.ablation (eval/ablation/__main__.py)
# ---------------------------------------------------------------------------------------------


def _rates(text: str) -> float | dict[str, float]:
    """``--learning_rate``: one rate, or ``ARM=RATE,...``."""
    try:
        if "=" not in text:
            return float(text)
        return {arm.strip(): float(rate) for arm, rate in (item.split("=", 1) for item in comma_list(text))}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rate or ARM=RATE,ARM=RATE, got {text!r}") from None


def _grid(text: str) -> list[float]:
    try:
        return [float(r) for r in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rates separated by commas, got {text!r}") from None


def _budgets(text: str) -> list[int]:
    """``--budgets``: distinct positive step counts, comma separated."""
    try:
        steps = [int(b) for b in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected step counts separated by commas, got {text!r}") from None
    try:
        return ablation.budget_steps(steps)
    except UsageError:
        raise argparse.ArgumentTypeError(f"expected distinct positive step counts, got {text!r}") from None


def ablation_sweep_plan(args: argparse.Namespace) -> Any:
    """The sweep plan of an ``eval.ablation`` command line (the one hub_configs/sweeps/ablation-*.yaml declares for
    the committed recipe): one arm per named variant over the YAML's model, every seed at every budget, each arm at
    the given rate (one, or ``ARM=RATE``) or choosing its own from ``--lr_grid`` with the first seed at the longest
    budget (a choice at the grid's edge trains one rate beyond it, as every sweep's rule), read by the runner's
    ``ablation`` analysis behind the Kneser-Ney bigram. Bad flags: one UsageError."""
    if args.budgets is not None and args.max_steps is not None:
        raise UsageError("--max_steps and --budgets: give one (the budgets are the runs' steps)")
    cfg, axis, chosen, reference = ablation.design(
        args.config, args.seeds, variants=flatten(args.variants), traces=flatten(args.trace), max_steps=args.max_steps,
        lr=args.lr, lr_grid=args.lr_grid, workers=args.workers, reference=args.reference, margin=args.margin,
        tokenizer=args.tokenizer, seed=args.seed)
    first = cfg["seed"] if args.seed is None else args.seed
    given = {name: float(args.lr[name] if isinstance(args.lr, Mapping) else args.lr or cfg["learning_rate"])
             for name in chosen}
    shared: dict[str, Any] = {}
    if args.data or any(Path(d).exists() for d in cfg["data"]):  # files: named as the plan reads them
        shared["data"] = data_sources(list(args.data or cfg["data"]))
    if args.tokenizer:
        shared["tokenizer_name"] = repo_path(args.tokenizer)
    model = repo_path(cfg["model_name_or_path"])
    arms = {name: {"config": {"model": {"from": model, "variant": name}, **shared},
                   **({"lr_grid": [given[name]]} if isinstance(args.lr, Mapping) else {})} for name in chosen}
    raw = {
        "name": f"ablation-{axis}", "trainer": "train", "analysis": "ablation",
        "seeds": [first + i for i in range(args.seeds)],
        "budgets": sorted(args.budgets or [args.max_steps or cfg["max_steps"]]),
        # The validation blocks choose the rates; the test blocks (when the YAML holds some out) score the arms.
        "score": "test" if cfg["test_every"] else "validation", "workers": args.workers,
        # The sweeps' rule: a choice at an edge of the grid trains one rate beyond it, then chooses again.
        "rate": {"lr_grid": [float(r) for r in args.lr_grid], "choose": "first_seed",
                 "extend": len(args.lr_grid) > 1, "max_extensions": 1} if args.lr_grid else
                {"lr_grid": [given[reference]], "choose": "first_seed", "extend": False},
        "base": repo_path(args.config), "arms": arms,
        "settings": {"reference": reference, "equivalence_margin": args.margin, "gate_ngram": "bigram"},
    }
    return build_plan(raw, args.output_dir)


def _is_sweep(folder: Path) -> bool:
    """Whether ``folder`` is a sweep's (else ``--summarize`` reads it as a folder this command wrote before it
    became an alias of the sweep: ``steps_<N>/ablation.json``)."""
    return output_owner(folder) == SWEEP_TOOL


def ablation_main(argv: Sequence[str] | None = None) -> int:
    p = UsageParser(prog="python -m eval.ablation", description=ablation.__doc__.split("\n\n")[0])
    p.add_argument("--config", help="train.py YAML of a SPEN model, e.g. hub_configs/spen-w32/train.yaml (required "
                                    "unless --summarize or --resume_from)")
    p.add_argument("--seeds", type=positive_int, default=5, help="seeds per arm: --seed + 0..N-1")
    p.add_argument("--seed", type=int, help="the first seed (default: the YAML's)")
    add_output_dir(p, "a new folder for the sweep (required unless --summarize or --resume_from)", required=False)
    p.add_argument("--variants", type=comma_list, nargs="+", metavar="NAME",
                   help="predictor arms, comma or space separated (default: all of "
                        f"{', '.join(ablation.PREDICTOR_VARIANTS)})")
    p.add_argument("--trace", type=comma_list, nargs="+", metavar="NAME",
                   help=f"run the trace ablation instead, over these of {', '.join(ablation.TRACE_VARIANTS)}")
    p.add_argument("--reference", help=f"the arm every other is compared with (default: {ablation.REFERENCE_VARIANT})")
    p.add_argument("--margin", type=float, default=ablation.DEFAULT_MARGIN,
                   help="equivalence margin in nats, declared before the run")
    p.add_argument("--max_steps", type=positive_int, help="optimizer steps per run (default: the YAML's)")
    p.add_argument("--budgets", type=_budgets, metavar="STEPS",
                   help="the ablation at each of these step counts (comma separated) instead of --max_steps; the "
                        "longest chooses each arm's rate (default: one budget)")
    p.add_argument("--summarize", metavar="DIR",
                   help="results.json of a sweep folder again, or budgets.json and budgets.png of a folder this "
                        "command wrote before it became an alias of the sweep (DIR/steps_N/ablation.json), "
                        "without training; no other flag")
    p.add_argument("--learning_rate", "--lr", dest="lr", type=_rates,
                   help="peak learning rate of every arm, or each arm's as ARM=RATE,ARM=RATE (default: the YAML's)")
    p.add_argument("--lr_grid", type=_grid, metavar="RATES",
                   help="each arm chooses its own rate from these (comma separated) on the first seed's final "
                        "validation loss at the longest budget (a choice at an edge trains one rate beyond it); "
                        "the other seeds train at it (default: no grid)")
    p.add_argument("--data", nargs="+", metavar="PATH", help="training data (default: the YAML's, as in train.py)")
    p.add_argument("--tokenizer", metavar="DIR", help="tokenizer folder for every run (default: the YAML's, or a "
                                                      "BPE trained on the data once)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="trainings at a time, in processes of one torch thread each")
    add_sweep_arguments(p)
    try:
        args = p.parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help: its status, returned
        return int(e.code or 0)
    command = shlex.join(["python", "-m", "eval.ablation", *(argv if argv is not None else sys.argv[1:])])
    try:
        given = [a.option_strings[0] for a in p._actions
                 if a.dest not in ("help", "summarize", "resume_from", "workers", "launcher", "launcher_args")
                 and getattr(args, a.dest) != a.default]
        if args.summarize is not None:
            if given or args.resume_from:
                raise UsageError(f"--summarize reads a finished folder: give no other flag (got "
                                 f"{', '.join(given or ['--resume_from'])})")
            folder = Path(args.summarize)
            if not folder.is_dir():
                raise UsageError(f"--summarize {folder}: no such folder")
            if _is_sweep(folder):
                return run(p, args, command, summarize=args.summarize)
            summary = ablation.summarize_budgets(folder)
            print(summary["budgets"][-1]["statement"])
            print(f"wrote {folder / ablation.BUDGETS_JSON} and {folder / ablation.BUDGETS_PNG}")
            return 0
        if args.resume_from is not None:
            if given:
                raise UsageError(f"--resume_from continues the sweep its folder recorded: give no other flag but "
                                 f"--workers (got {', '.join(given)})")
            return run(p, args, command)
        check_no_overwrite(args)
        for flag, value in (("--config", args.config), ("--output_dir", args.output_dir)):
            if value is None:
                raise UsageError(f"{flag} is required (unless --summarize or --resume_from)")
        plan = ablation_sweep_plan(args)
    except UsageError as e:
        print(f"{p.prog}: error: {first_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    return run(p, args, command, plan=plan)


__all__ = ["ablation_main", "ablation_sweep_plan", "add_sweep_arguments", "build_plan", "check_no_overwrite",
           "depth_main", "depth_sweep_plan", "run"]
