"""The training configuration, apart from the loop (as nanoGPT keeps its configurator apart).

Every setting lives in :data:`SETTINGS` with its default and meaning (``train.py --help`` prints the
table, so it is the documentation). A run's settings are a training YAML (``hub_configs/*/train.yaml``)
with command-line flags on top; :func:`load_config` reads and checks both, and :func:`find_checkpoint`
and :func:`check_resume` decide where a run continues. Bad settings raise :class:`ConfigError` with one
line naming the file (and line) or flag; nothing has been written by then.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub.utils import HFValidationError, validate_repo_id

from ema_boundary import corpus
from ema_boundary.io import OutputError, check_output_dir

REPO = Path(__file__).resolve().parent

# Every YAML key: default and meaning.
SETTINGS: dict[str, tuple[object, str]] = {
    "model_config": (None, "model config folder, e.g. hub_configs/spen-130m (required)"),
    "data": ("embedded", "'c4' (streamed), 'embedded' (Python's help topics + standard-library docstrings; "
                         "'embedded:pydoc' or 'embedded:stdlib' for one part) or local files (a list)"),
    "tokenizer": (None, "hub name or folder; null (or unavailable): train a byte-level BPE on the data"),
    "output_dir": (None, "output folder (default: outputs/<model config name>)"),
    "block_size": (1024, "tokens per sequence"),
    "batch_size": (512, "sequences per optimizer step, all processes together"),
    "micro_batch_size": (16, "sequences per process per forward pass (gradient accumulation does the rest)"),
    "max_steps": (5000, "optimizer steps"),
    "lr": (6e-4, "peak learning rate"),
    "min_lr_ratio": (0.1, "final learning rate as a fraction of lr (cosine decay)"),
    "warmup_steps": (200, "linear warmup steps"),
    "weight_decay": (0.1, "AdamW weight decay for matrices and embeddings (not biases, not norms)"),
    "betas": ([0.9, 0.95], "AdamW betas"),
    "grad_clip": (1.0, "clip the global gradient norm to this (0: no clipping)"),
    "mixed_precision": ("no", "'bf16', 'fp16' or 'no' (Accelerate mixed precision)"),
    "compile": (False, "torch.compile the model (through Accelerate's dynamo backend)"),
    "log_every": (10, "write metrics every N steps"),
    "eval_every": (250, "validation loss every N steps (and at the end)"),
    "eval_blocks": (200, "validation sequences (fixed: the first ones of the validation split)"),
    "save_every": (500, "checkpoint every N steps (and at the end)"),
    "keep_checkpoints": (2, "how many recent checkpoints to keep"),
    "val_every": (100, "local/embedded data: every N-th document is held out for validation"),
    "bpe_train_docs": (100000, "documents used to train the BPE tokenizer when one is trained"),
    "seed": (1337, "seed for initialisation (the data order is fixed by the data)"),
    "report_to": ("none", "extra tracker: 'tensorboard', 'wandb' or 'none' (metrics.jsonl always)"),
}
# Settings a resumed run must share with the run that wrote its checkpoint: they fix the data stream.
RESUME_INVARIANTS = ("model_config", "data", "block_size", "batch_size", "val_every")
# Flags that override the YAML key of the same name.
FLAG_OVERRIDES = ("output_dir", "data", "tokenizer", "max_steps", "lr", "seed", "report_to")

# What a setting may be beyond its type: the checks of read_yaml, with the words of its error message.
POSITIVE = ("block_size", "batch_size", "micro_batch_size", "max_steps", "log_every", "eval_every", "eval_blocks",
            "save_every", "keep_checkpoints", "val_every", "bpe_train_docs")
CHOICES = {"mixed_precision": ("no", "bf16", "fp16"), "report_to": ("none", "tensorboard", "wandb")}
BOUNDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "lr": (lambda v: 0 < v < float("inf"), "a positive number"),
    "min_lr_ratio": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "warmup_steps": (lambda v: v >= 0, "a non-negative integer"),
    "weight_decay": (lambda v: 0 <= v < float("inf"), "a non-negative number"),
    "grad_clip": (lambda v: 0 <= v < float("inf"), "a non-negative number (0: no clipping)"),
    "seed": (lambda v: 0 <= v < 2**32, "an integer in [0, 2**32)"),
    "betas": (lambda v: len(v) == 2 and all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1
                                            for b in v), "two numbers in [0, 1)"),
    **{k: (lambda v: v >= 1, "a positive integer") for k in POSITIVE},
    **{k: (lambda v, c=c: v in c, "one of " + ", ".join(map(repr, c))) for k, c in CHOICES.items()},
}

__all__ = ["SETTINGS", "EXIT_BAD_INPUT", "EXIT_PUSH_FAILED", "ConfigError", "parse_args", "load_config", "read_yaml",
           "resolve_model_config", "hub_repo_id", "find_checkpoint", "check_resume"]

# Exit statuses of train.py (argparse's own usage errors exit with 2).
EXIT_BAD_INPUT = 1  # bad settings or data: nothing written
EXIT_PUSH_FAILED = 3  # trained, final/ complete on disk, but the push to the hub failed


class ConfigError(Exception):
    """A bad setting: the message is one line naming the file (and line) or flag; nothing is written yet."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """train.py's command line (``--help`` lists every flag and YAML key)."""
    keys = "\n".join(f"  {k:<17} {str(v[0]):<12} {v[1]}" for k, v in SETTINGS.items())
    p = argparse.ArgumentParser(
        prog="train.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train SPEN or the GPT-2 baseline (Accelerate; DDP/FSDP via `accelerate launch`).",
        epilog=f"YAML keys (key, default, meaning):\n{keys}\n\n"
               f"Exit status: 0 done; {EXIT_BAD_INPUT} bad settings or data (nothing written); 2 bad command line; "
               f"{EXIT_PUSH_FAILED} trained and\nfinal/ saved, but --push_to_hub failed.\n\n"
               "Full-scale recipe and pushing to the hub: docs/training.md")
    p.add_argument("--config", required=True, help="training YAML, e.g. hub_configs/spen-130m/train.yaml")
    p.add_argument("--output_dir", help="output folder (overrides the YAML)")
    p.add_argument("--data", nargs="+", metavar="PATH",
                   help="'c4', 'embedded', or local .txt/.jsonl/.parquet files (overrides the YAML)")
    p.add_argument("--tokenizer", metavar="NAME_OR_DIR", help="hub name or folder (overrides the YAML)")
    p.add_argument("--max_steps", type=int, help="optimizer steps (overrides the YAML)")
    p.add_argument("--lr", type=float, help="peak learning rate (overrides the YAML), e.g. one point of a grid")
    p.add_argument("--seed", type=int, help="initialisation seed (overrides the YAML)")
    p.add_argument("--resume_from_checkpoint", metavar="latest|DIR",
                   help="'latest' (newest checkpoint in the output folder; start fresh if none) or a folder")
    p.add_argument("--report_to", choices=["tensorboard", "wandb", "none"], help="extra tracker")
    p.add_argument("--push_to_hub", action="store_true",
                   help="after training, upload final/ (weights, config with auto_map, modeling files, tokenizer, "
                        f"model card) to the Hugging Face hub, from the main process; exit status {EXIT_PUSH_FAILED} "
                        "if that fails (final/ stays complete). Needs `hf auth login` or HF_TOKEN")
    p.add_argument("--hub_model_id", metavar="[NAMESPACE/]NAME",
                   help="the hub repository for --push_to_hub (created if missing; default: the output folder's "
                        "name, in the token's namespace)")
    return p.parse_args(argv)


def resolve_model_config(name: str) -> str:
    """A model config folder as given, or, when relative and absent, inside this repository.

    The shipped YAMLs name `hub_configs/<model>` relative to the repository root; this lets them
    work from any working directory.
    """
    path = Path(name)
    if not (path / "config.json").is_file() and not path.is_absolute():
        in_repo = REPO / path
        if (in_repo / "config.json").is_file():
            return str(in_repo)
    return name


def read_yaml(path: str | Path, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every setting: the defaults, then the YAML at ``path``, then ``overrides`` (flags); checked.

    Errors name the file and line. ``model_config`` is resolved (see :func:`resolve_model_config`)
    and must hold a config.json; ``data`` becomes a list of sources.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    try:
        text = path.read_text()
        node = yaml.compose(text)
        raw = yaml.safe_load(text) or {}
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a UTF-8 text file ({e.reason})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    lines = {k.value: k.start_mark.line + 1 for k, _ in node.value}
    cfg = {k: v[0] for k, v in SETTINGS.items()}
    for key, value in raw.items():
        if key not in SETTINGS:
            raise ConfigError(f"{path}:{lines[key]}: unknown setting {key!r} (see train.py --help)")
        default = SETTINGS[key][0]
        if isinstance(default, float) and isinstance(value, (int, str)) and not isinstance(value, bool):
            try:  # YAML 1.1 reads 3e-4 (no dot) as a string, and 1 as an int
                value = float(value)
            except ValueError:
                pass
        if key == "data" and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            pass  # several local files
        elif not (default is None or value is None or isinstance(value, type(default))):
            raise ConfigError(f"{path}:{lines[key]}: {key} must be {type(default).__name__}, got {value!r}")
        cfg[key] = value
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    cfg.update(flags)
    for key, (ok, allowed) in BOUNDS.items():
        if cfg[key] is not None and not ok(cfg[key]):
            where = f"--{key}" if key in flags else f"{path}:{lines[key]}" if key in lines else str(path)
            raise ConfigError(f"{where}: {key} must be {allowed}, got {cfg[key]!r}")
    if not cfg["model_config"]:
        raise ConfigError(f"{path}: model_config is missing")
    cfg["model_config"] = resolve_model_config(cfg["model_config"])
    model_json = Path(cfg["model_config"]) / "config.json"
    where = f"{path}:{lines['model_config']}" if "model_config" in lines else str(path)
    if not model_json.is_file():
        raise ConfigError(f"{where}: {model_json}: no such file")
    try:
        model_type = json.loads(model_json.read_bytes()).get("model_type")
    except (ValueError, AttributeError) as e:  # not JSON, not UTF-8, or not a JSON object
        raise ConfigError(f"{model_json}: not a model config (a JSON object), {str(e).splitlines()[0]}") from None
    if not isinstance(model_type, str):
        raise ConfigError(f"{model_json}: no model_type (not a transformers model config)")
    try:
        cfg["data"] = corpus.parse_data(cfg["data"])
    except corpus.DataError as e:
        raise ConfigError(str(e)) from None
    cfg["output_dir"] = cfg["output_dir"] or f"outputs/{Path(cfg['model_config']).name}"
    return cfg


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of the run ``args`` describes: its YAML with the flags on top; its output folder writable."""
    cfg = read_yaml(args.config, {key: getattr(args, key) for key in FLAG_OVERRIDES})
    try:
        check_output_dir(cfg["output_dir"])
    except OutputError as e:
        raise ConfigError(f"output_dir {e}") from None
    return cfg


def hub_repo_id(args: argparse.Namespace, output_dir: str | Path) -> str | None:
    """The hub repository that final/ is pushed to, or None without --push_to_hub; checked before training.

    As in transformers' example scripts, the id defaults to the output folder's name (the hub then puts it in
    the token's namespace). ``--hub_model_id`` alone is refused rather than ignored: nothing would be pushed.
    """
    if not args.push_to_hub:
        if args.hub_model_id is not None:
            raise ConfigError(f"--hub_model_id {args.hub_model_id!r} needs --push_to_hub (nothing is pushed "
                              "without it)")
        return None
    repo_id = args.hub_model_id if args.hub_model_id is not None else Path(output_dir).resolve().name
    try:
        validate_repo_id(repo_id)
    except HFValidationError as e:
        if args.hub_model_id is not None:
            raise ConfigError(f"--hub_model_id: {e}") from None
        raise ConfigError(f"--push_to_hub: the output folder's name is not a repo id, pass --hub_model_id "
                          f"({e})") from None
    return repo_id


def find_checkpoint(out: Path, resume: str | None) -> Path | None:
    """The checkpoint to resume from. Only renamed (complete) `step_N` folders count."""
    if resume is None:
        if (out / "checkpoints").exists() or (out / "metrics.jsonl").exists():
            raise ConfigError(f"{out}: already holds a run; pass --resume_from_checkpoint latest or another "
                              "--output_dir")
        return None
    if resume != "latest":
        if not (Path(resume) / "data_state.json").is_file():
            raise ConfigError(f"{resume}: not a complete checkpoint (no data_state.json)")
        return Path(resume)
    done = [d for d in (out / "checkpoints").glob("step_*") if (d / "data_state.json").is_file()]
    return max(done, key=lambda d: int(d.name.split("_")[1]), default=None)


def check_resume(ckpt: Path | None, out: Path, cfg: dict[str, Any]) -> tuple[Path, dict[str, Any] | None]:
    """The folder of the run to continue and its saved settings (None when it saved none yet).

    Refused when the saved run read another data stream (:data:`RESUME_INVARIANTS`).
    """
    run_dir = ckpt.parent.parent if ckpt else out  # the run that wrote the checkpoint, if any
    saved_path = run_dir / "train_config.json"
    if not saved_path.is_file():
        return run_dir, None
    saved = json.loads(saved_path.read_text())
    changed = [k for k in RESUME_INVARIANTS if saved[k] != cfg[k]]
    if changed:
        raise ConfigError(f"{saved_path}: the run to resume used another {', '.join(changed)}")
    return run_dir, saved
