"""Stopping a run well: Ctrl-C, SIGTERM and SIGUSR1 finish the step, save a checkpoint, print the command
that resumes, and exit 128 + the signal's number."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from pathlib import Path

import torch
from accelerate import Accelerator

from ema_boundary import signals
from ema_boundary.signals import STOP_SIGNALS, Stopped, exit_status
from ema_boundary.usage import EXIT_INTERRUPTED
from training.console import log

__all__ = ["STOP_SIGNALS", "Interrupt", "Interrupted", "exit_status"]


class Interrupted(Stopped):
    """Ctrl-C, SIGTERM or SIGUSR1: the message is one line saying what was saved and the command that resumes;
    ``status`` the exit status (:func:`exit_status`)."""

    def __init__(self, message: str, status: int = EXIT_INTERRUPTED):
        super().__init__(message, status - 128)

    def __reduce__(self):  # pickled as it was made (a sweep's worker process sends it to the sweep)
        return type(self), (str(self), self.status)


class Interrupt:
    """Ctrl-C (SIGINT), SIGTERM or SIGUSR1 during training as a request: the step in progress finishes, a
    checkpoint is saved, and the run stops with the command that resumes it. Before the first step, or a second
    signal, stops at once."""

    def __init__(self, argv: list[str]):
        self.argv, self.requested, self.armed = argv, False, False
        self.signum = signal.SIGINT
        self.out: Path | None = None
        self.seed_dirs: list[Path] = []  # an ensemble run's folders (--seeds), once written
        self.processes, self.main = 1, True
        self._previous: dict[int, object] = {}
        self.held = contextlib.ExitStack()  # what the run holds until it ends: its output folders' locks

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self.held.close()

    @property
    def name(self) -> str:
        return signals.signal_name(self.signum)

    @property
    def status(self) -> int:
        return exit_status(self.signum)

    def _handle(self, signum, frame) -> None:
        signals.take(signum)  # a process that forwards stops (the sweep's workers) sends none taken already
        if not self.requested:
            self.signum = signum
        if not self.armed or self.requested:
            raise KeyboardInterrupt
        self.requested = True
        log.warning(f"train.py: {self.name}: saving a checkpoint after this step ({self.name} again to stop "
                    "without it)")

    def stop_now(self, accelerator: Accelerator) -> bool:
        """Whether any process was interrupted (all processes agree, so that they save the same step)."""
        if self.processes == 1:
            return self.requested
        flag = torch.tensor(float(self.requested), device=accelerator.device)
        return bool(accelerator.reduce(flag, "sum").item())

    def resume_command(self) -> str:
        """The command line that continues this run from its newest checkpoint."""
        args, skip = [], False
        for arg in self.argv:  # the same run, minus what would start it over or point elsewhere
            if skip:
                skip = False
            elif arg in ("--resume_from_checkpoint", "--resume-from-checkpoint"):
                skip = True
            elif arg != "--overwrite_output_dir" and not arg.startswith("--resume_from_checkpoint="):
                args.append(arg)
        script = sys.argv[0] if Path(sys.argv[0]).name == "train.py" else "train.py"
        if self.processes == 1:
            launcher = ["python"]
        elif any(k.startswith("ACCELERATE_") for k in os.environ):  # accelerate launch sets its settings so
            launcher = ["accelerate", "launch", "--num_processes", str(self.processes)]
        else:  # torchrun (one machine; a multi-node run needs its rendezvous flags again)
            launcher = ["torchrun", "--standalone", "--nproc_per_node", str(self.processes)]
        return shlex.join([*launcher, script, *args, "--resume_from_checkpoint", "latest"])

    def message(self, saved: Path | None) -> str:
        """What the main process prints (other processes print nothing: the empty string)."""
        if not self.main:
            return ""
        stopped = "interrupted" if self.signum == signal.SIGINT else f"interrupted by {self.name}"
        if self.seed_dirs:  # an ensemble run: its folders hold the steps logged so far, and no checkpoint
            steps = [sum(1 for _ in (d / "metrics.jsonl").open()) if (d / "metrics.jsonl").is_file() else 0
                     for d in self.seed_dirs]
            parent = self.seed_dirs[0].parent
            return (f"train.py: {stopped}; {parent}/seed_* hold {max(steps)} logged steps each and no checkpoint (an "
                    "ensemble run does not resume: rerun it with --overwrite_output_dir)")
        if self.out is None:
            return f"train.py: {stopped} before training started; nothing was written"
        if saved is not None:
            return f"train.py: {stopped}; checkpoint saved in {saved}; resume with: {self.resume_command()}"
        done = [d for d in (self.out / "checkpoints").glob("step_*") if (d / "data_state.json").is_file()]
        if not done:
            return f"train.py: {stopped} before the first checkpoint; nothing to resume"
        latest = max(done, key=lambda d: int(d.name.split("_")[1]))
        return f"train.py: {stopped}; the newest checkpoint is {latest}; resume with: {self.resume_command()}"
