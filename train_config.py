"""The training configuration, apart from the loop (as nanoGPT keeps its configurator apart).

Every setting lives in :data:`SETTINGS`, one table: its default, meaning and older flag spellings. The table is
both the YAML schema (``hub_configs/*/train.yaml``) and the command line (every key is a flag of the same name,
in transformers' example-script spelling: ``--learning_rate``, ``--per_device_train_batch_size``...);
``train.py --help`` prints it. A run's settings are the defaults, then the YAML, then the flags;
:func:`read_yaml` reads and checks them. :func:`check_output` decides where a run writes, and
:func:`check_resume` which settings a checkpoint binds (training/checkpoint.py finds and checks the checkpoints).
Bad settings raise :class:`ConfigError` with one line naming the file (and line) or flag; nothing has been written
by then.

The batch: ``total_train_batch_size`` sequences per optimizer step over all processes is the recipe (it fixes
the data stream, so a run is the same on 1 or 8 GPUs); ``per_device_train_batch_size`` is how many of them
one process runs per forward pass; gradient accumulation makes up the rest:
``total = per_device x gradient_accumulation_steps x processes``. Give ``gradient_accumulation_steps`` to
fix the accumulation instead (transformers' way); the total then follows from it. Where both are given at
the same level (both in the YAML or both as flags) they must agree; a flag wins over the YAML.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelerate.utils import LoggerType
from huggingface_hub.utils import HFValidationError, validate_repo_id

from ema_boundary import corpus, packing
from ema_boundary.io import MARKER, OutputError, check_output_dir, output_owner, write_json
from ema_boundary.usage import EXIT_INTERRUPTED, EXIT_UPLOAD_FAILED, EXIT_USAGE, HelpFormatter, UsageError, UsageParser
from ema_boundary.yamlio import Lines, YAMLFileError, read_yaml_file

# Accelerate's trackers (accelerate.utils.LoggerType), by the names report_to takes.
TRACKERS = tuple(str(t) for t in LoggerType if str(t) != "all")
# What save_pretrained writes (transformers' file names): a folder with one of them has weights to start from.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model")

REPO = Path(__file__).resolve().parent
TOOL = "train.py"  # the name in the output folder's marker file


@dataclass(frozen=True)
class Setting:
    """One training setting: a YAML key and the flag ``--<key>``."""

    default: Any
    help: str
    old: tuple[str, ...] = ()  # earlier names, still accepted as flags (a YAML names a setting by its name only)
    type: type | None = None  # when the default (None) does not tell


# Every setting, in the order --help lists them. Names follow transformers' TrainingArguments and run_clm.py
# where they have one; the rest (data, val_every, ...) are this project's.
SETTINGS: dict[str, Setting] = {
    "model_name_or_path": Setting(None, "the model: a folder with weights (train.py's final/, any save_pretrained "
                                        "folder) continues from them, with its tokenizer, as run_clm; a folder with "
                                        "config.json alone (e.g. hub_configs/spen-tiny) is trained from scratch "
                                        "(this or config_name is required)", ("model_config",), str),
    "config_name": Setting(None, "a model config alone (a folder with config.json): trained from scratch, weights "
                                 "beside it unread, as run_clm's --config_name", (), str),
    "data": Setting("embedded", "'c4' (streamed), 'embedded' (Python's help topics + standard-library docstrings; "
                                "'embedded:pydoc' or 'embedded:stdlib' for one part) or local .txt/.jsonl/.parquet "
                                "files"),
    "tokenizer_name": Setting(None, "hub name or folder; unset (or unavailable): a byte-level BPE trained on the data",
                              ("tokenizer",), str),
    "output_dir": Setting(None, "output folder (unset: outputs/<model folder name>, or outputs/<name>-continued "
                                "for a folder whose weights are loaded)", (), str),
    "block_size": Setting(1024, "tokens per sequence"),
    "total_train_batch_size": Setting(512, "sequences per optimizer step, all processes together",
                                      ("batch_size",)),
    "per_device_train_batch_size": Setting(16, "sequences per process per forward pass (gradient accumulation "
                                               "makes up the total)", ("micro_batch_size",)),
    "gradient_accumulation_steps": Setting(None, "forward passes per optimizer step and process (unset: "
                                                 "total / (per_device x processes); set: fixes the total)", (), int),
    "max_steps": Setting(5000, "optimizer steps"),
    "learning_rate": Setting(6e-4, "peak learning rate", ("lr",)),
    "min_lr_ratio": Setting(0.1, "final learning rate as a fraction of the peak (cosine decay)"),
    "warmup_steps": Setting(200, "linear warmup steps"),
    "weight_decay": Setting(0.1, "AdamW weight decay for matrices and embeddings (not biases, not norms)"),
    "adam_beta1": Setting(0.9, "AdamW beta1"),
    "adam_beta2": Setting(0.95, "AdamW beta2"),
    "max_grad_norm": Setting(1.0, "clip the global gradient norm to this (0: no clipping)", ("grad_clip",)),
    "mixed_precision": Setting("no", "'bf16', 'fp16' or 'no' (Accelerate mixed precision)"),
    "torch_compile": Setting(False, "torch.compile the model (through Accelerate's dynamo backend)", ("compile",)),
    "logging_steps": Setting(10, "log the training loss every N steps", ("log_every",)),
    "eval_steps": Setting(250, "validation loss every N steps (and at the end)", ("eval_every",)),
    "max_eval_samples": Setting(200, "validation sequences (fixed: the first ones of the validation split)",
                                ("eval_blocks",)),
    "save_steps": Setting(500, "checkpoint every N steps (and at the end)", ("save_every",)),
    "save_total_limit": Setting(2, "how many recent checkpoints to keep", ("keep_checkpoints",)),
    "val_every": Setting(100, "local/embedded data: every N-th document is held out for validation"),
    "test_every": Setting(0, "held-out test documents: of the local/embedded documents not held out for validation, "
                             "every N-th (C4: the odd documents of its validation split); the final model is scored "
                             "on them (test_loss in the last metrics.jsonl record). 0: no test split"),
    "drop_shared_documents": Setting(False, "local data: a training document with the text of a validation or test "
                                            "document longer than 200 characters (a file given twice: a leak) is "
                                            "refused (false) or left out of training and counted (true); shorter "
                                            "exact repeats (headings, one-line speeches) leave the held-out splits "
                                            "instead, counted in one line"),
    "max_test_samples": Setting(None, "test sequences scored at the end (unset: every block of the test split)",
                                (), int),
    "bpe_train_docs": Setting(100000, "documents used to train the BPE tokenizer when one is trained"),
    "train_fraction": Setting(1.0, "local/embedded data: train on this fraction of the training split, as whole "
                                   "documents taken in a fixed order (the SHA-256 of their text, whatever the seed) "
                                   "until their characters reach it, so 0.125 ⊂ 0.25 ⊂ 0.5 ⊂ 1; validation and test "
                                   "blocks and a trained tokenizer are the whole split's, as at 1; the last "
                                   "metrics.jsonl record counts the distinct training tokens read"),
    "shuffle": Setting(True, "shuffle the training data: local/embedded data as blocks in a new order each epoch, "
                             "streamed C4 through a shuffle buffer; the order follows the seed (false: documents "
                             "in corpus order, every epoch the same)"),
    "shuffle_buffer": Setting(packing.DEFAULT_SHUFFLE_BUFFER, "streamed data (C4): documents in the shuffle buffer "
                                                             "(local/embedded data are shuffled whole)"),
    "seed": Setting(1337, "seed for initialisation and the order of the shuffled training data"),
    "report_to": Setting("none", "trackers besides metrics.jsonl (always written), as transformers' report_to: "
                                 "comma-separated names of Accelerate's trackers (" + ", ".join(TRACKERS) + "), "
                                 "'all' (every one installed) or 'none'"),
    "run_name": Setting(None, "the run's name in the trackers (unset: the output folder's name)", (), str),
    "tracker_project_name": Setting("ema-boundary", "the trackers' project (wandb, trackio, comet_ml, swanlab), "
                                                    "experiment (mlflow) or folder in the output folder (tensorboard, "
                                                    "aim)"),
}
# The older flag spellings (and the names older runs saved their settings under): old -> setting.
OLD_NAMES: dict[str, str] = {old: key for key, s in SETTINGS.items() for old in s.old}
# Settings a resume may change: how the run is watched, saved and computed, not what it trains on or how it
# learns (max_steps moves the end of the cosine schedule from the resumed step on). A change is recorded with its
# step in train_config.json and the model card. Every other setting must be the checkpoint's (check_resume).
CHANGEABLE_ON_RESUME = ("max_steps", "logging_steps", "eval_steps", "max_eval_samples", "save_steps",
                        "save_total_limit", "max_test_samples", "per_device_train_batch_size",
                        "gradient_accumulation_steps", "mixed_precision", "torch_compile", "report_to", "run_name",
                        "tracker_project_name", "output_dir")
# The settings that fix the data stream (the rest of the settings a resume may not change fix the learning).
RESUME_INVARIANTS = ("model_name_or_path", "data", "block_size", "total_train_batch_size", "val_every",
                     "test_every", "shuffle", "shuffle_buffer", "seed")
# The value of a setting in a saved run that predates it, where that is not its default: runs before the
# `shuffle` setting read their data in order.
PREDATED = {"shuffle": False}
# Every setting is also a flag of the same name (kept under this name for callers that list the flags).
FLAG_OVERRIDES = tuple(SETTINGS)
# What train.py writes in its output folder: the only entries --overwrite_output_dir removes.
RUN_FILES = (MARKER, "checkpoints", "final", "tokenizer", "metrics.jsonl", "train_config.json")

# What a setting may be beyond its type: the checks of read_yaml, with the words of its error message.
POSITIVE = ("block_size", "total_train_batch_size", "per_device_train_batch_size", "gradient_accumulation_steps",
            "max_steps", "logging_steps", "eval_steps", "max_eval_samples", "save_steps", "save_total_limit",
            "val_every", "bpe_train_docs", "max_test_samples", "shuffle_buffer")
CHOICES = {"mixed_precision": ("no", "bf16", "fp16")}
BOUNDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "learning_rate": (lambda v: 0 < v < float("inf"), "a positive number"),
    "min_lr_ratio": (lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "warmup_steps": (lambda v: v >= 0, "a non-negative integer"),
    "test_every": (lambda v: v >= 0, "a non-negative integer (0: no test split)"),
    "train_fraction": (lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "weight_decay": (lambda v: 0 <= v < float("inf"), "a non-negative number"),
    "adam_beta1": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "adam_beta2": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "max_grad_norm": (lambda v: 0 <= v < float("inf"), "a non-negative number (0: no clipping)"),
    "seed": (lambda v: 0 <= v < 2**32, "an integer in [0, 2**32)"),
    **{k: (lambda v: v >= 1, "a positive integer") for k in POSITIVE},
    **{k: (lambda v, c=c: v in c, "one of " + ", ".join(map(repr, c))) for k, c in CHOICES.items()},
    "report_to": (lambda v: v in ("none", "all") or all(t in TRACKERS for t in v.split(",")),
                  "'none', 'all' or tracker names, comma-separated (" + ", ".join(TRACKERS) + ")"),
}

__all__ = ["SETTINGS", "OLD_NAMES", "EXIT_BAD_INPUT", "EXIT_PUSH_FAILED", "EXIT_INTERRUPTED", "ConfigError",
           "parse_args", "overrides", "load_config", "read_yaml", "resolve_model_config", "pretrained_weights",
           "model_label", "resolve_batch",
           "hub_repo_id", "check_output", "check_resume", "kept_metrics", "clear_run", "write_marker"]

# Exit statuses of train.py (ema_boundary.usage's, as every command of the project).
EXIT_BAD_INPUT = EXIT_USAGE  # 2: bad command line, settings, data or output folder: nothing written
EXIT_PUSH_FAILED = EXIT_UPLOAD_FAILED  # 3: trained, final/ complete on disk, but the push to the hub failed


class ConfigError(UsageError):
    """A bad setting: the message is one line naming the file (and line) or flag; nothing is written yet."""


# ------------------------------------------------------------------------------------------ command line
class _SettingsHelpFormatter(HelpFormatter):
    """Each flag under its current name only (older names stay accepted, unlisted); defaults as written."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.dest == "help":
            return super()._format_action_invocation(action)
        first = action.option_strings[0]
        if action.nargs == 0:
            return first
        return f"{first} {self._format_args(action, self._get_default_metavar_for_optional(action))}"

    def _get_help_string(self, action: argparse.Action) -> str:
        # Settings carry their own "(default: ...)": their argparse default is None (unset: the YAML decides).
        return action.help if "(default:" in (action.help or "") else super()._get_help_string(action)


class _Parser(UsageParser):
    """Errors name a flag by its current name alone, not with every older spelling (``--max_steps/--max-steps``)."""

    def error(self, message: str) -> None:
        super().error(re.sub(r"^argument (--[\w-]+)(?:/--[\w-]+)+:", r"argument \1:", message))


def _bool(value: str) -> bool:
    """An argparse ``type`` for ``--flag [true|false]`` (as transformers' HfArgumentParser reads booleans)."""
    if value.lower() in ("true", "yes", "1"):
        return True
    if value.lower() in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _shown(value: Any) -> str:
    return "unset" if value is None else str(value)


def _seed_list(value: str) -> list[int]:
    """``--seeds 0,1,2`` -> ``[0, 1, 2]``: distinct integers in [0, 2**32)."""
    try:
        seeds = [int(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None
    if any(not 0 <= s < 2**32 for s in seeds) or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"expected distinct integers in [0, 2**32), got {value!r}")
    return seeds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """train.py's command line: every setting of :data:`SETTINGS` as a flag, and the flags of a run."""
    olds = ", ".join(f"--{old}" for old in OLD_NAMES)
    p = _Parser(
        prog="train.py", formatter_class=_SettingsHelpFormatter,
        description="Train SPEN or the GPT-2 baseline (Accelerate; DDP/FSDP via `accelerate launch`).\n\n"
                    "Settings come from the defaults shown, then the --config YAML (whose keys are the setting "
                    "names below), then the flags.",
        epilog=f"Older names still accepted as flags (a YAML key is the setting's name): {olds}.\n\n"
               f"Exit status: 0 done; {EXIT_BAD_INPUT} bad command line, settings, data or output folder (one "
               f"line, nothing written); {EXIT_PUSH_FAILED} trained and final/ saved, but --push_to_hub failed; "
               f"{EXIT_INTERRUPTED} interrupted by Ctrl-C, 143 by SIGTERM, 138 by SIGUSR1 (128 + the signal's number; "
               "a checkpoint is saved and the resume command printed).\n"
               "Full-scale recipe and pushing to the hub: docs/training.md")
    run = p.add_argument_group("run")
    run.add_argument("--config", metavar="YAML", help="training YAML, e.g. hub_configs/spen-130m/train.yaml "
                                                      "(default: none, the flags alone describe the run)")
    run.add_argument("--overwrite_output_dir", action="store_true",
                     help="replace train.py's earlier run in --output_dir instead of resuming it (a folder that is "
                          "not train.py's output is never replaced; files train.py did not write are kept)")
    run.add_argument("--resume_from_checkpoint", metavar="latest|DIR",
                     help="'latest' (the newest checkpoint in --output_dir; start fresh if none) or a checkpoint "
                          "folder (default: an earlier run in --output_dir resumes from its newest checkpoint)")
    run.add_argument("--push_to_hub", action="store_true",
                     help="upload final/ (weights, config with auto_map, modeling files, tokenizer, model card) to "
                          "the Hugging Face hub after training; the hub login and the repository are checked before "
                          f"training starts. Exit status {EXIT_PUSH_FAILED} if the final upload fails (final/ stays "
                          "complete). Needs `hf auth login` or HF_TOKEN")
    run.add_argument("--hub_model_id", metavar="[NAMESPACE/]NAME",
                     help="the hub repository for --push_to_hub, created if missing (default: the output folder's "
                          "name, in the token's namespace)")
    run.add_argument("--log_level", "--verbosity", choices=("debug", "info", "warning", "error"), default="info",
                     help="info: a start line, progress (a bar on a terminal, log lines otherwise), validation "
                          "losses and the summary; warning: the summary and warnings only; debug: also the "
                          "libraries' own messages and progress bars")
    run.add_argument("--seeds", type=_seed_list, metavar="N,N,...",
                     help="train these seeds together, as one ensemble in this process, into <output_dir>/seed_<n>/ "
                          "(each folder what `--seed n` would write there, without intermediate checkpoints); "
                          "replaces --seed (default: one run of --seed)")
    run.add_argument("--ensemble_engine", choices=("auto", "stacked", "sequential"), default="auto",
                     help="how --seeds computes: 'stacked' runs the seeds as one batched model (vmap), "
                          "'sequential' one after another on each shared batch; 'auto': stacked on CUDA, "
                          "sequential on the CPU (faster there, BENCHMARKS.md)")

    settings = p.add_argument_group("settings (YAML keys)")
    for key, s in SETTINGS.items():
        # The older names, and the spellings with hyphens (--max-steps), are accepted but not listed.
        names = list(dict.fromkeys(f"--{n}" for name in (key, *s.old) for n in (name, name.replace("_", "-"))))
        help_text = f"{s.help} (default: {_shown(s.default)})"
        if key == "data":
            settings.add_argument(*names, dest=key, nargs="+", metavar="SOURCE", help=help_text)
        elif isinstance(s.default, bool):
            settings.add_argument(*names, dest=key, nargs="?", const=True, type=_bool, metavar="true|false",
                                  help=help_text)
        elif key in CHOICES:
            settings.add_argument(*names, dest=key, choices=CHOICES[key], help=help_text)
        else:
            kind = s.type or type(s.default)
            metavar = {"model_name_or_path": "DIR", "config_name": "DIR", "tokenizer_name": "NAME_OR_DIR",
                       "output_dir": "DIR"}.get(key, {int: "N", float: "X"}.get(kind))
            settings.add_argument(*names, dest=key, type=kind, metavar=metavar, help=help_text)
    return p.parse_args(argv)


def overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags (None: not given)."""
    return {key: getattr(args, key) for key in SETTINGS}


# ------------------------------------------------------------------------------------------ settings
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


def _read_mapping(path: Path) -> tuple[dict[str, Any], Lines]:
    """The YAML file's settings and the line of each key (the project's one YAML reader, :mod:`ema_boundary.yamlio`:
    a key given twice is refused with both lines)."""
    try:
        raw, lines = read_yaml_file(path)
    except YAMLFileError as e:
        raise ConfigError(str(e)) from None
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    return raw, lines


def _typed(key: str, value: Any) -> Any:
    """``value`` converted to the setting's type where YAML reads it otherwise; unchanged if it is not one."""
    default = SETTINGS[key].default
    if isinstance(default, float) and isinstance(value, (int, str)) and not isinstance(value, bool):
        try:  # YAML 1.1 reads 3e-4 (no dot) as a string, and 1 as an int
            return float(value)
        except ValueError:
            return value
    return value


def _type_ok(key: str, value: Any) -> bool:
    s = SETTINGS[key]
    if value is None:
        return s.default is None or key == "tokenizer_name"
    if key == "data":
        return isinstance(value, str) or (isinstance(value, list) and value and all(isinstance(v, str) for v in value))
    kind = s.type or type(s.default)
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _unknown(key: str) -> str:
    """Why a YAML key is refused, naming the setting an older spelling stands for."""
    if key in OLD_NAMES:
        return f"{key} is an older flag spelling; a YAML names the setting {OLD_NAMES[key]}"
    if key == "betas":
        return "betas is an older spelling; a YAML names adam_beta1 and adam_beta2"
    return f"unknown setting {key!r} (see train.py --help)"


def read_yaml(path: str | Path | None, flags: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every setting: the defaults, then the YAML at ``path`` (if any), then ``flags`` (None: not given); checked.

    Each YAML key is a setting's name (an older spelling is a flag only, :data:`OLD_NAMES`). Errors name the file
    and line, or the flag. ``model_name_or_path`` (or ``config_name``) is resolved (see
    :func:`resolve_model_config`) and must hold a config.json; afterwards ``model_name_or_path`` names the folder
    whose config.json builds the model, and :func:`pretrained_weights` says whether its weights are loaded.
    ``data`` becomes a list of sources.
    """
    cfg = {k: s.default for k, s in SETTINGS.items()}
    where: dict[str, str] = {}  # where each setting that is not a default was given: "file:line" or "--flag"
    level: dict[str, int] = {}  # 1: the YAML, 2: a flag
    source = str(path) if path is not None else "the command line"
    if path is not None:
        path = Path(path)
        raw, lines = _read_mapping(path)
        for key, value in raw.items():
            at = f"{path}:{lines.get((str(key),), 1)}"
            if key not in SETTINGS:
                raise ConfigError(f"{at}: {_unknown(key)}")
            value = _typed(key, value)
            if not _type_ok(key, value):
                kind = (SETTINGS[key].type or type(SETTINGS[key].default)).__name__
                raise ConfigError(f"{at}: {key} must be {'str' if key == 'data' else kind}, got {value!r}")
            cfg[key], where[key], level[key] = value, at, 1
    for key, value in (flags or {}).items():
        if value is not None:
            cfg[key], where[key], level[key] = value, f"--{key}", 2
    for key, (ok, allowed) in BOUNDS.items():
        if cfg[key] is not None and not ok(cfg[key]):
            raise ConfigError(f"{where.get(key, source)}: {key} must be {allowed}, got {cfg[key]!r}")
    if cfg["train_fraction"] < 1 and cfg["data"] in (corpus.C4, [corpus.C4]):  # streamed: no split to cut
        raise ConfigError(f"{where.get('train_fraction', source)}: train_fraction {cfg['train_fraction']:g} needs "
                          "local or embedded data (streamed C4 has no fixed training split to take a fraction of)")

    # The batch: the later of total and accumulation decides (see the module docstring); at one level, both.
    if cfg["gradient_accumulation_steps"] is not None:
        total, accum = level.get("total_train_batch_size", 0), level["gradient_accumulation_steps"]
        if total < accum:
            cfg["total_train_batch_size"] = None  # follows from the accumulation (resolve_batch)
        elif total > accum:
            cfg["gradient_accumulation_steps"] = None

    # The model: weights and their config (model_name_or_path), or a config alone (config_name), as run_clm. Where
    # both are given the later level decides (a flag over the YAML); at one level they contradict each other.
    if cfg["config_name"] and cfg["model_name_or_path"]:
        if level["config_name"] == level["model_name_or_path"]:
            raise ConfigError(f"{where['config_name']}: config_name trains a config from scratch and "
                              "model_name_or_path continues from a folder's weights; pass one")
        loser = "model_name_or_path" if level["config_name"] > level["model_name_or_path"] else "config_name"
        cfg[loser] = None
    key = "config_name" if cfg["config_name"] else "model_name_or_path"
    if not cfg[key]:
        raise ConfigError(f"{source}: model_name_or_path is missing (a model folder: train.py's final/ to continue "
                          "from, or a config folder such as hub_configs/spen-tiny; in the YAML or as a flag)")
    folder = resolve_model_config(cfg[key])
    model_json = Path(folder) / "config.json"
    if not model_json.is_file():
        inside = " (its model is in final/)" if (Path(folder) / "final" / "config.json").is_file() else ""
        raise ConfigError(f"{where[key]}: {model_json}: no such file{inside}")
    # From here on model_name_or_path names the folder whose config.json builds the model (what every reader of a
    # train.py YAML expects); config_name, when set, says that it is trained from scratch.
    cfg["model_name_or_path"] = folder
    if key == "config_name":
        cfg["config_name"] = folder
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
    weights = pretrained_weights(cfg)
    if weights is not None and cfg["tokenizer_name"] is None:  # the weights' token ids are its tokenizer's
        if not any((weights / f).is_file() for f in TOKENIZER_FILES):
            raise ConfigError(f"{where['model_name_or_path']}: {weights} has weights but no tokenizer; pass "
                              "--tokenizer_name (the tokenizer it was trained with)")
        cfg["tokenizer_name"] = str(weights)
    if not cfg["output_dir"]:
        cfg["output_dir"] = f"outputs/{model_label(folder)}" + ("-continued" if weights is not None else "")
    return cfg


def pretrained_weights(cfg: dict[str, Any]) -> Path | None:
    """The folder whose weights the run starts from (``model_name_or_path`` holding weights, unless
    ``config_name`` asks for the config alone), or None: trained from scratch."""
    if cfg.get("config_name"):
        return None
    folder = Path(cfg["model_name_or_path"])
    return folder if any((folder / f).is_file() for f in WEIGHT_FILES) else None


def model_label(folder: str | Path) -> str:
    """How logs, the model card and the default output folder name a model folder: train.py's ``final/`` by its
    run's folder."""
    path = Path(folder)
    return path.parent.name if path.name == "final" and path.parent.name else path.name


def resolve_batch(cfg: dict[str, Any], processes: int) -> int:
    """Fill in the total batch or the accumulation for ``processes`` processes; return the accumulation."""
    micro, total, accum = (cfg["per_device_train_batch_size"], cfg["total_train_batch_size"],
                           cfg["gradient_accumulation_steps"])
    if total is None:
        cfg["total_train_batch_size"] = micro * accum * processes
    elif accum is None:
        if total % (micro * processes):
            raise ConfigError(f"total_train_batch_size {total} is not a multiple of per_device_train_batch_size "
                              f"{micro} x {processes} processes")
        cfg["gradient_accumulation_steps"] = total // (micro * processes)
    elif total != micro * accum * processes:
        raise ConfigError(f"total_train_batch_size {total} is not per_device_train_batch_size {micro} x "
                          f"gradient_accumulation_steps {accum} x {processes} processes; set only one of the two")
    return cfg["gradient_accumulation_steps"]


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of the run ``args`` describes: its YAML (if any) with the flags on top."""
    return read_yaml(args.config, overrides(args))


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


# ------------------------------------------------------------------------------------------ output folder
def _earlier_run(out: Path) -> bool:
    """Whether ``out`` holds train.py's output: its marker, or (written before markers) a checkpoints/ folder."""
    owner = output_owner(out)
    return owner == TOOL or (owner is None and (out / "checkpoints").is_dir())


def check_output(out: Path, overwrite: bool) -> bool:
    """Refuse an output folder train.py may not write (one line); return whether it holds an earlier run.

    Refused: a file; the working folder, its parents, a repository root; a non-empty folder that is not
    train.py's output. A folder of train.py's own is resumed, or replaced with ``overwrite``.
    """
    earlier = out.is_dir() and _earlier_run(out)
    # A run from before the marker existed has none: its ownership is its checkpoints/ (checked above).
    tool = TOOL if not earlier or output_owner(out) == TOOL else None
    try:
        check_output_dir(out, tool=tool, overwrite=True)
    except OutputError as e:
        raise ConfigError(str(e)) from None
    return earlier


def check_resume(ckpt: Path | None, out: Path, cfg: dict[str, Any]) -> tuple[Path, dict[str, Any] | None]:
    """The folder of the run to continue and the settings its checkpoint was trained with (None: a fresh start).

    Without a checkpoint nothing was trained, so an earlier attempt's settings bind nothing (a run that failed
    before its first checkpoint is rerun as corrected). With one, every setting must be the checkpoint's except
    :data:`CHANGEABLE_ON_RESUME`: a difference is refused in one line naming the setting and both values. The
    settings returned carry ``changes``: the changes of those (earlier resumes' included), each with its step.
    """
    if ckpt is None:
        return out, None
    run_dir = ckpt.parent.parent  # the run that wrote the checkpoint
    state = json.loads((ckpt / "data_state.json").read_text())
    if "config" in state:
        saved, where = dict(state["config"]), f"{ckpt}"
    else:  # a checkpoint saved before checkpoints kept their settings: the run's
        saved_path = run_dir / "train_config.json"
        if not saved_path.is_file():
            return run_dir, None
        saved, where = json.loads(saved_path.read_text()), f"{saved_path}"
    saved = {OLD_NAMES.get(k, k): v for k, v in saved.items()}  # older runs' names
    step = state.get("step", 0)
    # The model's content is compared (train.py: config.json against the checkpoint's), not its folder's name,
    # where the checkpoint kept it.
    fixed = [k for k in SETTINGS if k not in CHANGEABLE_ON_RESUME
             and not (k in ("model_name_or_path", "config_name") and "model_config" in state)]
    checked = fixed if "config" in state else RESUME_INVARIANTS  # an older run's file: the data stream only
    for key in checked:
        # A setting the saved run predates had its default then (test_every: no test split), or PREDATED's value.
        before = saved.get(key, PREDATED.get(key, SETTINGS[key].default))
        if before != cfg[key]:
            raise ConfigError(f"{where}: the run to resume used another {key} ({_shown(before)} in the checkpoint, "
                              f"{_shown(cfg[key])} now); resume with the checkpoint's {key}, or start over with "
                              "--overwrite_output_dir")
    changes = [c for c in saved.get("changes", []) if c["step"] <= step]
    changes += [{"step": step, "setting": k, "from": saved[k], "to": cfg[k]} for k in CHANGEABLE_ON_RESUME
                if k != "output_dir" and k in saved and saved[k] != cfg[k]]
    return run_dir, {**saved, "changes": changes}


def kept_metrics(out: Path, start_step: int, warn: Callable[[str], None] | None = None) -> str | None:
    """metrics.jsonl of the run in ``out`` up to ``start_step`` (the steps after it are redone), or None
    without one. A last line torn by a kill mid-write is dropped with one line to ``warn``; a damaged line
    before it is refused, naming the line."""
    path = out / "metrics.jsonl"
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = []
    for n, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            step = record["step"]
        except (ValueError, TypeError, KeyError):
            if n == len(lines):
                if warn is not None:
                    warn(f"train.py: warning: {path}:{n}: dropped its last line, torn by an interrupted write")
                break
            raise ConfigError(f"{path}:{n}: not a metrics record ({line[:40]!r}); repair or remove the line, or "
                              "start over with --overwrite_output_dir") from None
        if step <= start_step:
            kept.append(line)
    return "".join(line + "\n" for line in kept)


def clear_run(out: Path) -> None:
    """Remove an earlier run's files from ``out`` (--overwrite_output_dir): only what train.py writes there."""
    for name in RUN_FILES:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def write_marker(out: Path, command: list[str]) -> None:
    """Mark ``out`` as train.py's output (ema_boundary.io's marker format): resumable, replaceable on request."""
    write_json(out / MARKER, {"tool": TOOL, "command": command,
                              "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")})
