"""Stop signals, one vocabulary for every process that trains: which signals stop a run with a checkpoint, the
exit status each gives, the exception a stopped run ends with, and which of them this process has taken.

Ctrl-C (SIGINT) and what clusters send before they stop a job (SIGTERM: Slurm's preemption and scancel, docker
stop, Kubernetes; SIGUSR1: Slurm's ``--signal=USR1@seconds`` warning) all mean "save what you can and stop".
train.py acts on them (training/interrupt.py); the experiment runner's processes (eval/sweep/execute.py) stop
together on them. They meet here because a process of the runner that forwards a stop to the run it executes
must not forward a signal the run has taken already: a second signal means "stop without saving" to train.py.
"""

from __future__ import annotations

import signal

__all__ = ["STOP_SIGNALS", "StopSignal", "Stopped", "exit_status", "signal_name", "take", "taken"]

STOP_SIGNALS: tuple[int, ...] = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1")
                                      if hasattr(signal, name))


def exit_status(signum: int) -> int:
    """128 + the signal's number, as a shell reports a process the signal ended (130 Ctrl-C, 143 SIGTERM, 138
    SIGUSR1), so that a launcher or a Slurm script sees which."""
    return 128 + signum


def signal_name(signum: int) -> str:
    """``Ctrl-C`` for SIGINT, else the signal's name (``SIGTERM``)."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


class StopSignal:
    """What every stop-signal exception carries: a one-line message, the signal, and the exit status 128 + signal.
    Mixed into an exception class (an Exception for work that stopped, a KeyboardInterrupt for a whole sweep)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message, signum)
        self.signum = signum

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def status(self) -> int:
        return exit_status(self.signum)


class Stopped(StopSignal, Exception):
    """Work stopped by a stop signal, its output resumable: the message is one line saying what was kept."""


_taken: list[int] = []  # the stop signals this process's handlers have taken, in order


def take(signum: int) -> None:
    """Record that a handler of this process took ``signum`` (every stop-signal handler calls it first)."""
    _taken.append(signum)


def taken() -> tuple[int, ...]:
    """The stop signals this process's handlers have taken so far, in order (compare two readings: any since?)."""
    return tuple(_taken)
