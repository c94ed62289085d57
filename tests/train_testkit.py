"""Shared helpers for tests/test_train*.py: tiny configs, runs in-process and in subprocesses."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Tiny and quick: 8 sequences of 64 tokens per step, every step logged, a checkpoint every 3 steps.
TINY = {
    "model_name_or_path": str(ROOT / "hub_configs/gpt2-tiny"),
    "data": "embedded",
    "tokenizer_name": None,
    "block_size": 64,
    "total_train_batch_size": 8,
    "per_device_train_batch_size": 4,
    "max_steps": 16,
    "learning_rate": 3e-3,
    "warmup_steps": 1,
    "logging_steps": 1,
    "eval_steps": 8,
    "max_eval_samples": 8,
    "save_steps": 3,
    "save_total_limit": 2,
    "val_every": 10,
}
# One thread per process: identical arithmetic in-process and in subprocesses, and no oversubscription
# of small CI machines when two processes run.
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT)}


@functools.cache
def tokenizer_dir() -> str:
    """The tiny runs' BPE, trained once per session: most tests need a tokenizer, not its training."""
    from ema_boundary import corpus

    folder = Path(tempfile.mkdtemp(prefix="tiny_bpe_"))
    corpus.train_bpe(iter(corpus.embedded_documents()), 1024).save_pretrained(folder)
    return str(folder)


def write_config(path: Path, **overrides) -> Path:
    """A YAML of TINY with ``overrides``."""
    path.write_text(yaml.safe_dump({**TINY, **overrides}))
    return path


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def run_python(code: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def run_cmd(cmd: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)
