"""Checkpoints, their one home: how a training state is saved whole and resumed, and how a damaged one is found
and passed over. Also the run folder while train.py writes it: its lock, its settings and metrics before the first
step, final/.

train.py's checkpoints are Accelerate's ``save_state`` folders, ``checkpoints/step_N`` (complete or absent, with
their settings, model config and checksums). Accelerate's ``ProjectConfiguration(automatic_checkpoint_naming,
total_limit)`` is not used: it names a folder by how many saves came before (``checkpoint_<i>``), not by its step,
which resuming, the sweeps and earlier runs read; it writes in place and deletes the oldest checkpoint before the
new one is written, so a kill mid-save can leave no whole checkpoint. Here a checkpoint is written under a hidden
name, checksummed, renamed into place, and only then are older ones removed.

A loop without Accelerate (eval.recall's) saves its state as one file (:func:`save_state_file`), resumed by
:func:`load_state_file`; a damaged one is set aside and the loop starts over, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import broadcast_object_list
from huggingface_hub import ModelCard
from safetensors import safe_open
from transformers import PreTrainedConfig

import train_config
from ema_boundary.io import FolderLock, OutputError, atomic_dir, atomic_file, publish_dir, write_json, write_text
from train_config import ConfigError
from training.console import log
from training.interrupt import Interrupt


def lock_output(out: Path, command: list[str], interrupt: Interrupt, world: int) -> None:
    """One writer per run folder: the main process holds ``out``'s lock (ema_boundary.io.FolderLock) until the
    run ends; if another process holds it, every process stops with one line naming the holder."""
    error = None
    if PartialState().is_main_process:
        lock = FolderLock(out, train_config.TOOL, command)
        try:
            stale = lock.acquire()
        except OutputError as e:
            error = str(e)
        else:
            interrupt.held.callback(lock.release)
            if stale:  # the OS released a killed holder's lock; its record is what is left of it
                log.warning(f"train.py: {out}: the run of pid {stale.get('pid')} on {stale.get('host')} ended "
                            "without releasing its lock (killed?); taken over")
    if world > 1:
        error = broadcast_object_list([error])[0]
    if error:
        raise ConfigError(error)


def model_config_record(model_cfg: PreTrainedConfig) -> dict:
    """The model's settings as a checkpoint keeps them: config.json's fields, without the library's bookkeeping."""
    fields = json.loads(model_cfg.to_json_string(use_diff=False))
    return {k: v for k, v in fields.items() if not k.startswith("_") and k != "transformers_version"}


def check_model_config(ckpt: Path, state: dict, model_cfg: PreTrainedConfig, model_json: Path) -> None:
    """Refuse a resume under another model than the checkpoint's (one line naming the field and both values)."""
    if "model_config" not in state:  # a checkpoint saved before checkpoints kept their model's config
        return
    saved, now = state["model_config"], model_config_record(model_cfg)
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            raise ConfigError(f"{model_json}: {key} is {json.dumps(now.get(key))}, the checkpoint {ckpt} was "
                              f"trained with {json.dumps(saved.get(key))}; resume with the checkpoint's model config, "
                              "or start over with --overwrite_output_dir")


def prepare_output(accelerator: Accelerator, out: Path, cfg: dict, tokenizer, tokenizer_name: str,
                   metrics_text: str | None, changes: list[dict], overwrite: bool, command: list[str]) -> None:
    """The output folder before the first step: an earlier run cleared (--overwrite_output_dir), the marker,
    tokenizer and settings (with the changes made on resume) saved, leftovers of a killed run gone, and
    metrics.jsonl cut to ``metrics_text`` (train_config.kept_metrics: the steps after the checkpoint are redone)."""
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        if overwrite:
            train_config.clear_run(out)
        train_config.write_marker(out, command)
        tokenizer.save_pretrained(out / "tokenizer")
        write_json(out / "train_config.json", {**cfg, "tokenizer_used": tokenizer_name, "changes": changes})
        for tmp in [*(out / "checkpoints").glob(".tmp_step_*"), *out.glob(".final.tmp-*")]:  # a crash mid-save
            shutil.rmtree(tmp)
        if metrics_text is not None:
            write_text(out / "metrics.jsonl", metrics_text)
    accelerator.wait_for_everyone()


def checkpoint_problem(ckpt: Path) -> str | None:
    """Why checkpoint folder ``ckpt`` cannot be resumed from, or None. A checkpoint lists the size and SHA-256
    of its files in data_state.json (written last, then the folder is renamed into place); one saved before
    that is checked by opening its safetensors files."""
    try:
        state = json.loads((ckpt / "data_state.json").read_text())
    except FileNotFoundError:
        return "not a complete checkpoint (no data_state.json)"
    except (OSError, ValueError) as e:
        return f"data_state.json is not readable ({e})"
    files = state.get("files") if isinstance(state, dict) else None
    if files is None:  # an older checkpoint: at least its weights must be whole
        for path in sorted(ckpt.glob("*.safetensors")):
            try:
                with safe_open(str(path), "pt"):
                    pass
            except Exception as e:  # safetensors raises its own error type for every kind of damage
                return f"{path.name} does not load ({str(e).splitlines()[0]})"
        return None
    for name, (size, digest) in files.items():
        path = ckpt / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size:,} bytes, the checkpoint wrote {size:,}"
        if file_digest(path) != digest:
            return f"{name} does not match its SHA-256 checksum"
    return None


def file_digest(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def checkpoint_files(folder: Path) -> dict[str, list]:
    """``{relative path: [size, sha256]}`` of every file in a checkpoint folder but data_state.json, which lists
    them (checkpoint_problem checks them)."""
    return {p.relative_to(folder).as_posix(): [p.stat().st_size, file_digest(p)]
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "data_state.json"}


def find_checkpoint(out: Path, resume: str | None, earlier: bool, overwrite: bool,
                    warn: Callable[[str], None] | None = None) -> Path | None:
    """The checkpoint to resume from (None: a fresh start). Only renamed (complete) `step_N` folders count.

    As transformers' example scripts do, an earlier run in ``out`` resumes from its newest checkpoint unless
    ``overwrite`` asks to start over; a finished run without checkpoints is not replaced without it. A
    checkpoint that is damaged (:func:`checkpoint_problem`) is passed over for the one before it, with one line
    to ``warn``; one passed as ``resume`` is refused.
    """
    if overwrite:
        if resume is not None:
            raise ConfigError("--overwrite_output_dir starts over and --resume_from_checkpoint continues; pass one")
        return None
    if resume is not None and resume != "latest":
        problem = checkpoint_problem(Path(resume))
        if problem:
            raise ConfigError(f"{resume}: cannot resume from this checkpoint: {problem}")
        return Path(resume)
    done = [d for d in (out / "checkpoints").glob("step_*") if (d / "data_state.json").is_file()]
    latest = None
    for ckpt in sorted(done, key=lambda d: int(d.name.split("_")[1]), reverse=True):
        problem = checkpoint_problem(ckpt)
        if problem is None:
            latest = ckpt
            break
        if warn is not None:
            warn(f"train.py: warning: {ckpt}: cannot resume from it ({problem}); trying the checkpoint before it")
    if latest is None and done:
        raise ConfigError(f"{out}: no checkpoint of it can be resumed ({len(done)} damaged); pass "
                          "--overwrite_output_dir to start over")
    if latest is None and earlier and (out / "final").exists():
        raise ConfigError(f"{out}: holds a finished train.py run without checkpoints; pass --overwrite_output_dir "
                          "to replace it, or choose another --output_dir")
    return latest


def save_checkpoint(accelerator: Accelerator, out: Path, step: int, state: dict, keep: int) -> None:
    """save_state into a hidden temp folder, then rename: a crash mid-save leaves no `step_N` folder. ``state``
    (the data position, the settings, the model's config) goes into its data_state.json."""
    ckpts, tmp = out / "checkpoints", out / "checkpoints" / f".tmp_step_{step}"
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        # Last, with the size and checksum of every file: a checkpoint with it is complete (checkpoint_problem).
        write_json(tmp / "data_state.json", {**state, "files": checkpoint_files(tmp)})
        publish_dir(tmp, ckpts / f"step_{step}")  # replaces an older run's step_N when resuming from earlier
        old = sorted(ckpts.glob("step_*"), key=lambda d: int(d.name.split("_")[1]))[:-keep]
        for d in old:
            shutil.rmtree(d)
    accelerator.wait_for_everyone()


def save_final(accelerator: Accelerator, model: torch.nn.Module, tokenizer, out: Path, card: ModelCard) -> Path:
    """final/: model (safetensors, config with auto_map, modeling files), tokenizer and model card, atomically."""
    state_dict = accelerator.get_state_dict(model)  # every process takes part (FSDP gathers the shards)
    if accelerator.is_main_process:
        with atomic_dir(out / "final") as tmp:
            accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state_dict)
            tokenizer.save_pretrained(tmp)
            card.save(tmp / "README.md")
    accelerator.wait_for_everyone()
    return out / "final"


def save_state_file(path: str | Path, state: dict[str, Any]) -> None:
    """``state`` (state dicts, tensors, plain values) saved whole at ``path``: written under a temporary name, then
    renamed, so a kill mid-save leaves the previous state."""
    with atomic_file(path) as tmp:
        torch.save(state, tmp)


def load_state_file(path: str | Path | None, keys: tuple[str, ...] = (),
                    warn: Callable[[str], None] | None = None) -> dict[str, Any] | None:
    """The state :func:`save_state_file` saved at ``path`` (tensors on the CPU), or None: no file (a fresh start),
    or one that cannot be resumed from (unreadable, truncated, or without one of ``keys``). As train.py passes
    over a damaged checkpoint, such a file is set aside as ``NAME.damaged`` (kept for a look, never read again)
    and the loop starts over, with one line to ``warn`` (default: stderr, a sweep run's log)."""
    if path is None or not Path(path).is_file():
        return None
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        missing = [k for k in keys if k not in state] if isinstance(state, dict) else ["(not a mapping)"]
        problem = f"no {missing[0]}" if missing else None
    # whatever torch.load raises for a file it cannot read (zip, pickle, EOF, OS errors)
    except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError) as e:
        problem = str(e).splitlines()[0] if str(e) else type(e).__name__
    if problem is None:
        return state
    aside = _damaged_name(path)
    path.replace(aside)
    (warn or (lambda line: print(line, file=sys.stderr)))(
        f"warning: {path}: cannot resume from it ({problem}); set aside as {aside.name}, training starts over")
    return None


def _damaged_name(path: Path) -> Path:
    """A fresh sibling name for a damaged state file: ``NAME.damaged``, ``NAME.damaged-2``..."""
    n = 1
    while (aside := path.with_name(f"{path.name}.damaged" + (f"-{n}" if n > 1 else ""))).exists():
        n += 1
    return aside
