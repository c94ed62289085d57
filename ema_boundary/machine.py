"""The record of the machine a result was computed on: what a number needs beside it to be compared or rerun.

report.json (``machine``) and every sweep's results.json (``machine``) carry :func:`machine_record`: the CPU model,
the cores this process may use and the threads torch computes with, the GPU if any, the git commit of the code
(and whether it had uncommitted changes), the versions of Python and of the libraries the numbers depend on, and
the machine's load when the record was written (a wall time measured beside other work is not a cost).
"""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
# The distributions whose versions a result records (their names on the package index).
PACKAGES = ("torch", "transformers", "datasets", "accelerate", "lm-eval")

__all__ = ["PACKAGES", "cpu_model", "git_commit", "load_average", "machine_record"]


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo's ``model name``; elsewhere what platform reports)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def git_commit(repo: Path = REPO) -> dict[str, Any] | None:
    """``{"commit": sha, "dirty": bool}`` of the checkout the code runs from, or None outside a git checkout (an
    installed copy, no git)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def load_average() -> list[float] | None:
    """The system's load over the last 1, 5 and 15 minutes (runnable processes), or None where the system has none
    to give: beside a wall time, it says whether the cores were shared."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_record() -> dict[str, Any]:
    """The machine and code of this process, as report.json and a sweep's results.json record them."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return {
        "cpu": cpu_model(),
        "cores": cores,  # the cores this process may run on
        "torch_threads": torch.get_num_threads(),  # the threads torch computes with (OMP_NUM_THREADS, if set)
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
        "git": git_commit(),
        "versions": {"python": platform.python_version(), **{p: _version(p) for p in PACKAGES}},
        "load_average": load_average(),  # when the record was written: 1, 5 and 15 minutes
    }
