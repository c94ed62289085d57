"""Accelerate for one run: the process group, devices, mixed precision, accumulation and trackers
(metrics.jsonl always, and Accelerate's trackers as report_to names them)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.tracking import GeneralTracker, get_available_trackers
from accelerate.utils import LoggerType

import train_config
from train_config import ConfigError

# The pip package of a tracker, where it is not the tracker's name.
PACKAGES = {"comet_ml": "comet-ml"}
# The keyword of each tracker's start (its init_kwargs) that names the run; the others name it by the project.
RUN_NAME_KWARGS = {"wandb": "name", "trackio": "name", "mlflow": "run_name", "clearml": "task_name",
                   "swanlab": "experiment_name"}
# metrics.jsonl's fields that are bookkeeping for resumes (tests/test_train_resume.py), not measurements.
BOOKKEEPING = ("batch_crc32", "data_pos")


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


def trackers(cfg: dict) -> list[str]:
    """The trackers ``report_to`` names besides metrics.jsonl (``all``: every one installed). A tracker whose package
    is not installed is refused in one line naming the package: Accelerate would leave it out without a word."""
    if cfg["report_to"] == "none":
        return []
    if cfg["report_to"] == "all":
        return [str(t) for t in get_available_trackers()]
    names = list(dict.fromkeys(cfg["report_to"].split(",")))
    for name in names:
        if LoggerType(name) not in get_available_trackers():
            package = PACKAGES.get(name, name)
            raise ConfigError(f"report_to {name}: the {package} package is not installed (pip install {package}); "
                              "metrics.jsonl is written without it")
    return names


def make_accelerator(cfg: dict, out: Path, accum: int, cpu: bool, extra: list[str]) -> Accelerator:
    """Devices, mixed precision, accumulation and trackers (metrics.jsonl, then ``extra``) for one run."""
    # step_scheduler_with_optimizer=False: the schedule counts optimizer steps whatever the process count.
    return Accelerator(
        cpu=cpu, mixed_precision=cfg["mixed_precision"], gradient_accumulation_steps=accum,
        log_with=[JSONLTracker(out / "metrics.jsonl"), *extra], project_dir=str(out),
        step_scheduler_with_optimizer=False, dynamo_backend="inductor" if cfg["torch_compile"] else "no")


def init_trackers(accelerator: Accelerator, cfg: dict) -> None:
    """Start the trackers: the project ``tracker_project_name``, the run named ``run_name`` (default: the output
    folder's name, as transformers' run_name) where the tracker names runs, and the settings as typed
    hyperparameters (numbers stay numbers; a list becomes its comma-separated text, which every tracker takes)."""
    run_name = cfg["run_name"] or Path(cfg["output_dir"]).resolve().name
    config = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else v for k, v in cfg.items()}
    accelerator.init_trackers(cfg["tracker_project_name"], config=config,
                              init_kwargs={name: {kwarg: run_name} for name, kwarg in RUN_NAME_KWARGS.items()})


def log_metrics(accelerator: Accelerator, metrics: dict, step: int) -> None:
    """``metrics`` into metrics.jsonl whole, and into the other trackers without its bookkeeping (the data
    position and the batch checksum, which resumes are checked against, are not measurements to plot)."""
    if not accelerator.is_main_process:  # as Accelerator.log
        return
    measured = {k: v for k, v in metrics.items() if k not in BOOKKEEPING}
    for tracker in accelerator.trackers:
        values = metrics if tracker.name == JSONLTracker.name else measured
        if values:
            tracker.log(values, step=step)
