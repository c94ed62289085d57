"""Accelerate for one run: the process group, devices, mixed precision, accumulation and trackers
(metrics.jsonl always, and Accelerate's trackers as report_to names them)."""

from __future__ import annotations

import json
import os
import shlex
import sys
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
# Set by mpirun (Open MPI, MPICH/Intel MPI, MVAPICH): a launch Accelerate's MULTI_CPU joins without WORLD_SIZE.
MPI_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")
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


def launch_processes(script: str, argv: list[str]) -> None:
    """Start the processes a launch asked for and did not start, or refuse it in one line with the command that works.

    ``accelerate launch --cpu --num_processes 2`` (or ``--num_processes 2`` on a machine without GPUs) runs its
    "simple launcher": one process, with MASTER_ADDR and MASTER_PORT set but no WORLD_SIZE (Accelerate leaves
    several CPU processes to mpirun), which would train alone. On the CPU this process becomes ``torchrun
    --standalone --nproc_per_node N`` of the same command (exec: the launcher waits on it as before), whose
    processes Accelerate joins (MULTI_CPU, gloo), as the launch meant. Where N cannot be read off the launcher, or a
    GPU is there (several processes on one GPU), it is refused with the torchrun command instead."""
    env = os.environ
    launched = "ACCELERATE_USE_CPU" in env and "MASTER_ADDR" in env and "MASTER_PORT" in env
    if not launched or "WORLD_SIZE" in env or any(k in env for k in MPI_SIZE_VARIABLES):
        return
    processes = _launcher_processes()
    if processes == "1":  # several machines of one process each: Accelerate's own business
        return
    command = ["torchrun", "--standalone", "--nproc_per_node", processes or "N", script, *argv]
    if processes is None or not processes.isdigit() or torch.cuda.is_available():
        raise ConfigError(f"accelerate launch started 1 process, not {processes or 'several'}; run: "
                          + shlex.join(command))
    print(f"train.py: accelerate launch started 1 process for {processes} on the CPU; running "
          f"{shlex.join(command)}", flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", *command[1:]])


def _launcher_processes() -> str | None:
    """The --num_processes of the `accelerate launch` command that started this process, if it can be read."""
    try:
        import psutil  # Accelerate's own dependency

        launcher = psutil.Process(os.getppid()).cmdline()
    except Exception:  # no such process, no permission, no psutil: the message says N
        return None
    for i, arg in enumerate(launcher):
        if arg in ("--num_processes", "--num-processes") and i + 1 < len(launcher):
            return launcher[i + 1]
        if arg.startswith(("--num_processes=", "--num-processes=")):
            return arg.split("=", 1)[1]
    return None


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
