"""``python -m eval.probes``: content probes for any Hugging Face causal LM.

Identity at lag (a linear probe for the token k steps back, every layer, on trained weights) and the
associative-recall map (a fresh model of each architecture trained on MQAR under one recipe, the GPT-2
architecture as positive control)::

    python -m eval.probes --model_name_or_path outputs/spen-tiny/final gpt2 \\
        --config hub_configs/gpt2-tiny mamba=my/mamba/config.json --output_dir DIR

The recall map over seeds and a rate grid (each seed chooses its rate on its own held-out sequences; the
selective state against the fixed bank of equal state, paired by seed, in ``recall_escape``)::

    python -m eval.probes --default_map --no_identity --recall_seeds 0,1,2,3,4 --learning_rate 1e-3,3e-3 \\
        --output_dir DIR

What each input kind gets:

=========================  =====================================  ====================================
input                      identity at lag                        recall
=========================  =====================================  ====================================
``--model_name_or_path``   its weights and tokenizer (skipped,    a fresh model of its config.json
a folder                   with the reason, without a tokenizer)
``--model_name_or_path``   the same, from the hub (or its cache   a fresh model of its config
a hub name                 offline)
``--config PATH``          skipped: no trained weights (train     a fresh model of the config
                           with train.py, then pass ``final/``)
=========================  =====================================  ====================================

Writes ``DIR/content_probes.json`` (schema in docs/evaluation.md), ``content_probes.md`` and the figures,
all at once at the end. Bad input -- a missing folder, a config.json that is not JSON, a truncated
``model.safetensors``, a config that is not a causal LM, a hub name that cannot be reached, an output
folder that is not this tool's -- is one line naming it, exit status 2, before any training.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from ema_boundary.io import check_output_dir
from ema_boundary.usage import (
    EXIT_USAGE,
    UsageError,
    UsageParser,
    add_output_dir,
    comma_list,
    first_line,
    flatten,
    positive_int,
)
from eval.probes.experiment import (
    TOOL,
    ProbeInputError,
    ProbeSettings,
    default_map_models,
    probe_text,
    run_content_probes,
)
from eval.probes.models import ModelError, ModelSpec, resolve_config, resolve_model

PROG = "python -m eval.probes"
# The flag each field of a typed error came from.
FLAGS = {"recall": "--recall_models", "control": "--control", "text": "--text", "recall_pairs": "--recall_pairs",
         "recall_lrs": "--learning_rate", "recall_steps": "--max_steps", "seed": "--seed",
         "recall_seeds": "--recall_seeds", "device": "--device"}


def _int_list(value: str) -> list[int]:
    """``"2,4,8"`` -> ``[2, 4, 8]``, each a positive integer."""
    return [positive_int(v) for v in comma_list(value)]


def _seed_list(value: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``, each a non-negative integer."""
    seeds = []
    for v in comma_list(value):
        try:
            seed = int(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not an integer") from None
        if seed < 0:
            raise argparse.ArgumentTypeError(f"{v!r} is not a seed (a non-negative integer)")
        seeds.append(seed)
    return seeds


def _rate_list(value: str) -> list[float]:
    """``"1e-3,3e-3"`` -> rates in (0, 1)."""
    rates = []
    for v in comma_list(value):
        try:
            lr = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{v!r} is not a number") from None
        if not 0 < lr < 1:
            raise argparse.ArgumentTypeError(f"{v!r} is not a rate in (0, 1)")
        rates.append(lr)
    return rates


def parser() -> UsageParser:
    p = UsageParser(prog=PROG, description=__doc__.split("\n\n")[0])
    what = p.add_argument_group("models (at least one; each optionally NAME=...)")
    what.add_argument("--model_name_or_path", "--model", "--models", dest="models", nargs="+", action="extend",
                      default=[], metavar="[NAME=]PATH_OR_HUB_NAME",
                      help="trained causal LMs: save_pretrained folders (with a tokenizer for identity at lag) "
                           "or hub names (online, or from the cache offline)")
    what.add_argument("--config", nargs="+", action="extend", default=[], metavar="[NAME=]PATH",
                      help="architectures only: config.json files or folders holding one; recall only")
    what.add_argument("--default_map", "--default-map", action="store_true",
                      help="add the recall map's models as configs: the GPT-2 architecture and every SPEN variant "
                           "(width 64)")
    what.add_argument("--trust_remote_code", "--trust-remote-code", action="store_true",
                      help="run model code that ships with a checkpoint or hub model (SPEN needs none: registered)")
    add_output_dir(p, "output folder (content_probes.json, content_probes.md, PNGs)")
    p.add_argument("--text", help="text file for identity at lag (default: Python's help topics, embedded)")
    p.add_argument("--quick", action="store_true",
                   help="shorter lags, fewer sequences; recall on 2/4/8 pairs with the quick recipe (one rate, "
                        "1,200 steps at most)")
    p.add_argument("--seed", type=int, default=0, help="seed of the recall models (init and training examples)")
    p.add_argument("--recall_seeds", "--recall-seeds", type=_seed_list, nargs="+", metavar="SEED",
                   help="run the recall map once per seed (comma or space separated; each seed chooses its own rate "
                        "on its own held-out sequences; default: --seed alone)")
    probes = p.add_argument_group("which probes")
    probes.add_argument("--no_identity", "--no-identity", action="store_true", help="skip identity at lag")
    probes.add_argument("--no_recall", "--no-recall", action="store_true", help="skip the recall map")
    probes.add_argument("--recall_models", "--recall-models", type=comma_list, nargs="+", metavar="NAME",
                        help="run recall on these models only (comma or space separated; default: all)")
    probes.add_argument("--control", metavar="NAME",
                        help="the positive control (default: the first GPT-2-architecture model with recall)")
    recipe = p.add_argument_group("the recall recipe (default: the measured one, 2,000 steps, rates 1e-3,3e-3,1e-2, "
                                  "2,4,8,16 pairs; --quick: 1,200 steps, 1e-3, 2,4,8 pairs)")
    recipe.add_argument("--max_steps", "--recall_steps", "--recall-steps", dest="recall_steps", type=positive_int,
                        metavar="N", help="at most N optimizer steps per learning rate (default: the recipe's)")
    recipe.add_argument("--learning_rate", "--recall_lrs", "--recall-lrs", dest="recall_lrs", type=_rate_list,
                        nargs="+", metavar="LR",
                        help="the learning-rate grid, declared before the run (default: the recipe's)")
    recipe.add_argument("--recall_pairs", "--recall-pairs", type=_int_list, nargs="+", metavar="N",
                        help="pair counts scored (default: the task's)")
    run = p.add_argument_group("how it runs")
    run.add_argument("--workers", type=positive_int, default=1, help="processes training recall models at once")
    run.add_argument("--threads", type=positive_int, default=1,
                     help="torch threads per process (on a shared CPU, more are slower)")
    run.add_argument("--device", default="cpu",
                     help="where the recall models train: cpu, cuda or cuda:N (identity at lag runs on the CPU)")
    return p


def _resolve(args: argparse.Namespace) -> tuple[list[ModelSpec], dict[str, str]]:
    """Every model of the command line, checked; and the flag each location came from."""
    specs, flags = [], {}
    for flag, given, resolve in (("--model_name_or_path", args.models, resolve_model),
                                 ("--config", args.config, resolve_config)):
        for value in given:
            try:
                spec = resolve(value, trust_remote_code=args.trust_remote_code)
            except ModelError as e:
                raise UsageError(f"{flag} {e}") from None
            specs.append(spec)
            flags[spec.location] = flag
    if args.default_map:
        specs += default_map_models()
    if not specs:
        raise UsageError("no model: give --model_name_or_path, --config or --default_map")
    return specs, flags


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help: its status, returned
        return int(e.code or 0)
    torch.set_num_threads(args.threads)
    flags: dict[str, str] = {}
    try:
        check_output_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir)  # before any work
        settings = ProbeSettings.make(quick=args.quick, seed=args.seed, recall_pairs=flatten(args.recall_pairs),
                                      recall_lrs=flatten(args.recall_lrs), recall_steps=args.recall_steps,
                                      recall_seeds=flatten(args.recall_seeds))
        specs, flags = _resolve(args)
        needs_text = not args.no_identity and any(s.identity_skip is None for s in specs)
        text = probe_text(args.text) if needs_text else ""
        run_content_probes(specs, text, args.output_dir, settings,
                           identity=not args.no_identity,
                           recall=False if args.no_recall else (flatten(args.recall_models) or True),
                           workers=args.workers, threads=args.threads, control=args.control,
                           trust_remote_code=args.trust_remote_code, overwrite=args.overwrite_output_dir,
                           device=args.device)
    except ModelError as err:  # found while probing: the flag that gave the model, if it came from one
        flag = flags.get(err.where)
        print(f"{PROG}: error: {flag + ' ' if flag else ''}{first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except ProbeInputError as err:
        flag = FLAGS.get(err.field or "")
        print(f"{PROG}: error: {flag + ': ' if flag else ''}{first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, UsageError) as err:
        print(f"{PROG}: error: {first_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.output_dir) / 'content_probes.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
