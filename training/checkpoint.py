"""The run folder while a run writes it: its lock, its settings and metrics before the first step,
checkpoints (complete or absent, with their settings, model config and checksums), final/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import broadcast_object_list
from huggingface_hub import ModelCard
from transformers import PreTrainedConfig

import train_config
from ema_boundary.io import FolderLock, OutputError, atomic_dir, publish_dir, write_json, write_text
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
        write_json(tmp / "data_state.json", {**state, "files": train_config.checkpoint_files(tmp)})
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
