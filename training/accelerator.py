"""Accelerate for one run: the process group, devices, mixed precision, accumulation and trackers
(metrics.jsonl always)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.tracking import GeneralTracker

import train_config


class JSONLTracker(GeneralTracker):
    """metrics.jsonl as an Accelerate tracker: one JSON object per logged step."""

    name, requires_logging_directory, main_process_only = "jsonl", False, True

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    @property
    def tracker(self) -> Path:
        return self.path

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **values}) + "\n")


def join_processes(cfg: dict) -> tuple[bool, int, int]:
    """Fresh Accelerate state in this process's group: (cpu, processes, gradient accumulation steps)."""
    # Accelerate's state is a per-process singleton: forget an earlier in-process run's settings (mixed
    # precision, accumulation) so that other modules can call main() again with other ones.
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    # Without a GPU, Accelerate uses its multi-CPU (gloo) mode under torchrun only when told it runs on the
    # CPU; otherwise every process would train alone.
    cpu = not torch.cuda.is_available()
    world = PartialState(cpu=cpu).num_processes  # joins the process group of torchrun / accelerate launch
    return cpu, world, train_config.resolve_batch(cfg, world)


def make_accelerator(cfg: dict, out: Path, accum: int, cpu: bool) -> Accelerator:
    """Devices, mixed precision, accumulation and trackers (metrics.jsonl always) for one run."""
    extra = [cfg["report_to"]] if cfg["report_to"] != "none" else []
    # step_scheduler_with_optimizer=False: the schedule counts optimizer steps whatever the process count.
    return Accelerator(
        cpu=cpu, mixed_precision=cfg["mixed_precision"], gradient_accumulation_steps=accum,
        log_with=[JSONLTracker(out / "metrics.jsonl"), *extra], project_dir=str(out),
        step_scheduler_with_optimizer=False, dynamo_backend="inductor" if cfg["torch_compile"] else "no")
