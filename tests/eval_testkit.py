"""Shared by tests/test_eval_*.py: a tiny SPEN checkpoint trained by train.py, and a local task."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "eval" / "tasks" / "perplexity" / "_perplexity_template.yaml"

# Seconds on a CPU: 32-token blocks, 4 per step, a BPE trained on 20 help topics.
MICRO_TRAIN = {
    "model_name_or_path": str(REPO / "hub_configs" / "spen-tiny"), "data": "embedded", "tokenizer_name": None,
    "block_size": 32, "total_train_batch_size": 4, "per_device_train_batch_size": 4, "max_steps": 3,
    "learning_rate": 3.0e-3, "warmup_steps": 1, "logging_steps": 1, "eval_steps": 3, "max_eval_samples": 2,
    "save_steps": 3, "val_every": 10, "bpe_train_docs": 20, "seed": 7,
}

# Short English documents (each well under the tiny model's 256-token context, so lm-eval scores each
# in one window and the reference computation below needs no windowing of its own).
DOCS = [
    "The quick brown fox jumps over the lazy dog.",
    "Return the absolute value of a number. The argument may be an integer, a floating point number, "
    "or an object implementing __abs__().",
    "Lists are mutable sequences, typically used to store collections of homogeneous items.",
    "A for loop iterates over the items of any sequence, in the order that they appear.",
    "x",
]


def write_micro_config(path: Path, **overrides) -> Path:
    path.write_text(yaml.safe_dump({**MICRO_TRAIN, **overrides}))
    return path


def write_local_task(folder: Path, name: str = "local_ppl", docs: list[str] = DOCS) -> Path:
    """A perplexity task on a local JSON-lines file: the documented way to score any local text."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    (folder / f"{name}.yaml").write_text(yaml.safe_dump({
        "include": str(TEMPLATE), "task": name, "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"validation": str(data)}},
    }))
    return folder
