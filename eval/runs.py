"""What the experiments read of a train.py run: its metrics.jsonl (:func:`read_metrics`, :func:`read_test`), its
parameter count (:func:`param_count`), and the SPEN check of a YAML an ablation swaps a part of
(:func:`read_spen_yaml`). Running many train.py runs is the experiment runner's (:mod:`eval.sweep`); its
orchestration that lived here (``train_runs``, seeds grouped into one ``train.py --seeds`` ensemble where a GPU
pays for it) went with issue 32: ensembles remain a train.py feature (ensemble.py), not a runner's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from safetensors import safe_open

import train_config
from ema_boundary.usage import UsageError

# The settings that decide the blocks every run is trained, chosen and scored on: one for the whole sweep
# (its tokenizer and its n-gram lines read them).
DATA_SETTINGS = ("data", "val_every", "test_every", "block_size", "max_eval_samples", "max_test_samples",
                 "tokenizer_name", "bpe_train_docs")


def read_spen_yaml(config: Path, swaps: str) -> dict[str, Any]:
    """Every setting of a train.py YAML (``train_config.read_yaml``) for an experiment that swaps a part of SPEN
    (``swaps``: what it swaps, for the message): the YAML must train a SPEN model. One :class:`UsageError` line
    naming ``--config`` otherwise."""
    try:
        cfg = train_config.read_yaml(config)
    except train_config.ConfigError as e:
        raise UsageError(f"--config {e}") from None
    model_json = Path(cfg["model_name_or_path"]) / "config.json"
    if json.loads(model_json.read_text()).get("model_type") != "spen":
        raise UsageError(f"--config {config}: model_config {model_json} is not a SPEN config ({swaps})")
    return cfg


def param_count(checkpoint: Path) -> int:
    """Parameters stored in a checkpoint's model.safetensors (tied weights once)."""

    with safe_open(str(checkpoint / "model.safetensors"), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def read_metrics(path: Path) -> dict[str, list]:
    """Training and validation curves from a train.py metrics.jsonl, against steps and tokens.

    ``loss`` (the training next-token loss, a mean since the previous log) and ``val_loss`` (the held-out
    blocks) are the same quantity on two sets of blocks; ``prediction_loss`` is SPEN's predictor loss.
    """
    curve: dict[str, list] = {"step": [], "tokens": [], "loss": [], "prediction_loss": [],
                              "val_step": [], "val_tokens": [], "val_loss": []}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "loss" in row:
            curve["step"].append(row["step"])
            curve["tokens"].append(row["tokens"])
            curve["loss"].append(row["loss"])
            if "prediction_loss" in row:
                curve["prediction_loss"].append(row["prediction_loss"])
        if "val_loss" in row:
            curve["val_step"].append(row["step"])
            curve["val_tokens"].append(row.get("tokens", curve["tokens"][-1] if curve["tokens"] else 0))
            curve["val_loss"].append(row["val_loss"])
    if not curve["prediction_loss"]:
        del curve["prediction_loss"]
    return curve


def read_test(path: Path) -> dict[str, float | int] | None:
    """The test score of a train.py metrics.jsonl (``test_loss``, ``test_ppl``, ``test_tokens``,
    ``test_documents``: the final model on the held-out test blocks), or None for a run without a test split."""
    found = None
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "test_loss" in row:
            found = {k: row[k] for k in ("test_loss", "test_ppl", "test_tokens", "test_documents") if k in row}
    return found


def read_seen(path: Path) -> dict[str, int]:
    """How much distinct text a train.py (or eval.reference) run trained on, from its metrics.jsonl:
    ``train_split_tokens`` (its training split, or train_fraction's subset, as block targets) and
    ``distinct_train_tokens`` (how many of them it read); {} for a run that does not record them (streamed or
    unshuffled data, runs before train_fraction)."""
    found: dict[str, int] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        found |= {k: row[k] for k in ("train_split_tokens", "distinct_train_tokens") if k in row}
    return found


__all__ = ["read_spen_yaml", "read_metrics", "read_seen", "read_test", "param_count"]
