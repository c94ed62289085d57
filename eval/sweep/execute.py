"""One run of a sweep, from its folder: ``python -m eval.sweep.execute runs/<arm>/lr_<lr>/seed_<s>/steps_<n>``.

Run from the sweep folder (every path a run records is relative to it). Where a run keeps its files:
:class:`eval.sweep.paths.RunPaths`, the one place that names them. The run's ``run.json`` says what to
train (the trainer, the arm's settings, the rate, the seed, the steps); its numbers go to ``result.json``,
written once the run is complete (a run folder without a readable one is unfinished: it continues from its newest
checkpoint where its trainer keeps them), and its console output to ``log.txt``.

How the processes of one sweep stop together (:class:`StopFile`): Ctrl-C, SIGTERM or SIGUSR1 may reach the
sweep's process alone, one of its workers alone, or all of them (the process group, a Slurm job). Whichever
process takes the signal first writes the invocation's stop file; every process of the sweep watches it, and
a run that has not taken a stop signal itself is sent the same one (never a second: to train.py a second signal
means "stop without saving"). A run so stopped saves what its trainer saves (train.py: a checkpoint after the
step in progress) and ends as :class:`RunStopped`, resumable; no further run starts. A worker whose sweep died
(kill -9) stops its run the same way and exits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock

from ema_boundary import signals
from ema_boundary.io import read_json, write_json
from ema_boundary.signals import STOP_SIGNALS, Stopped, signal_name
from eval.sweep.paths import RUN_JSON, RunPaths

STOPS = ".stops"  # DIR/.stops/<invocation>: the stop file of one invocation, while it stops
ORPHAN_GRACE = 5.0  # seconds a worker whose sweep died gives its run to save and stop before it exits
WATCH_EVERY = 0.2  # seconds between two looks at the stop file and the sweep's process


class RunBusy(RuntimeError):
    """Another process is training this run (its lock is held): this one leaves it alone."""


class RunStopped(Stopped):
    """A run a stop signal ended: what its trainer saved is kept (train.py: a checkpoint after its last step), and
    ``--resume_from`` continues it. Not a failure."""

    def __init__(self, run: str, signum: int) -> None:
        super().__init__(f"{run}: stopped by {signal_name(signum)}", signum)
        self.run = run

    def __reduce__(self):  # pickled as it was made (a worker process sends it to the sweep)
        return type(self), (self.run, self.signum)


def read_result(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """A run's result.json: ``(result, None)``, ``(None, None)`` where there is none yet, or ``(None, why)`` where it
    cannot be read (truncated, empty, not an object): such a run is unfinished, and trains again."""
    try:
        result = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"not readable JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    if not isinstance(result, dict):
        return None, f"not a JSON object (a {type(result).__name__})"
    return result, None


# ---------------------------------------------------------------------------------------------
# Stopping together
# ---------------------------------------------------------------------------------------------


class StopFile:
    """The stop of one invocation of a sweep: a file in the sweep folder (shared by its processes, on a cluster
    too) naming the signal that stopped it. Each invocation has its own, so that two invocations working on one
    folder (``--arms`` in parallel) do not stop each other."""

    def __init__(self, folder: Path, token: str | None = None) -> None:
        self.path = Path(folder).resolve() / STOPS / (token or uuid.uuid4().hex)

    def request(self, signum: int) -> None:
        """Stop the invocation on ``signum`` (the first request wins; later ones change nothing)."""
        if self.path.exists():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(signal.Signals(signum).name + "\n")
        with contextlib.suppress(FileExistsError):  # a hard link: the file appears whole, and only once
            os.link(tmp, self.path)
        tmp.unlink()

    def signum(self) -> int | None:
        """The signal the invocation stops on, or None while it goes on."""
        try:
            return int(signal.Signals[self.path.read_text().strip()])
        except (OSError, KeyError):
            return None

    def clear(self) -> None:
        """Remove the file (the invocation ended); the folder too once no invocation holds one."""
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()


def diverged(objective: Any) -> bool:
    """Whether a run's objective says it diverged: a number that is NaN or infinite (its loss blew up)."""
    return isinstance(objective, float) and not math.isfinite(objective)


class _Process:
    """This process's part in its sweep: the invocation's stop, the run it executes now, and whether that run has
    been stopped already (its trainer stops on the first signal; more would stop it without saving)."""

    stop: StopFile | None = None
    running: str | None = None
    stopping = False  # the running run was told to stop (KeyboardInterrupt raised or a signal sent)
    taken: tuple[int, ...] = ()  # signals.taken() when the run started


class _SignalStop(KeyboardInterrupt):
    """A stop signal raised in code that has no handler of its own (a trainer other than train.py, a run's setup):
    stop now, like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_stop_signal(signum: int, frame: object) -> None:
    signals.take(signum)
    if _Process.stop is not None:
        _Process.stop.request(signum)
    if _Process.running is not None and not _Process.stopping:  # between runs: nothing to stop here
        _Process.stopping = True
        raise _SignalStop(signum)


def install_stop_handlers(stop: StopFile | None) -> dict[int, Any]:
    """Make this process a part of the sweep that ``stop`` stops: a stop signal writes the stop file and stops the
    run in progress (train.py's own handlers take over while it trains). Returns the handlers replaced. Main
    thread only (signals reach the main thread only); elsewhere nothing is installed."""
    _Process.stop = stop
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.signal(s, _on_stop_signal) for s in STOP_SIGNALS}


@contextlib.contextmanager
def stop_signals(stop: StopFile | None) -> Iterator[None]:
    """:func:`install_stop_handlers` for the block; the earlier handlers and stop restored after."""
    before_stop = _Process.stop
    previous = install_stop_handlers(stop)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _Process.stop = before_stop


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def start_watch(stop: StopFile | None, sweep_alive: Callable[[], bool]) -> threading.Thread:
    """Watch, in a daemon thread of a process that executes runs for a sweep, the stop file and the sweep itself:
    on a stop, the run in progress is sent the stop's signal (unless it took one itself); when ``sweep_alive()``
    turns false (the sweep was killed), the run is sent SIGTERM, given :data:`ORPHAN_GRACE` seconds to save and
    stop, and the process exits (its locks die with it): nothing of a killed sweep trains on."""

    def watch() -> None:
        signalled = None  # the run sent a signal already
        while True:
            time.sleep(WATCH_EVERY)
            orphan = not sweep_alive()
            signum = stop.signum() if stop is not None else None
            if orphan and signum is None:
                signum = signal.SIGTERM
            run, taken = _Process.running, signals.taken()
            if run is not None and stop is not None and signum is None and len(taken) > len(_Process.taken):
                stop.request(taken[len(_Process.taken)])  # the run took a signal itself: the sweep stops too
            elif (signum is not None and run is not None and run != signalled and not _Process.stopping
                    and taken == _Process.taken):
                signalled = run
                os.kill(os.getpid(), signum)
            if orphan:
                deadline = time.monotonic() + ORPHAN_GRACE
                while _Process.running is not None and time.monotonic() < deadline:
                    time.sleep(0.05)
                os._exit(signals.exit_status(signum))

    thread = threading.Thread(target=watch, name="sweep-watch", daemon=True)
    thread.start()
    return thread


def parent_alive() -> Callable[[], bool]:
    """For a worker process: whether the process that started it still runs (a dead parent's children are given
    to another)."""
    parent = os.getppid()
    return lambda: os.getppid() == parent


def pid_alive(pid: int) -> Callable[[], bool]:
    """For a job started by another process than the sweep's (submitit's local controller): whether ``pid`` runs."""
    return lambda: _alive(pid)


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------


def execute(sweep: Path, run: str) -> dict[str, Any]:
    """Train and score the run in ``sweep/run`` (unless it has a readable result.json); return its result. Raises
    :class:`RunBusy` when another process holds the run's lock, :class:`RunStopped` when a stop signal (or the
    sweep's stop file) ended it, or before it started where its sweep is stopping."""
    paths = RunPaths(Path(sweep).resolve(), run)
    result, _ = read_result(paths.result)
    if result is not None:
        return result
    stop = _Process.stop
    if stop is not None and stop.signum() is not None:  # the sweep stops: this run does not start
        raise RunStopped(run, stop.signum())
    # One writer per run: two invocations on one sweep folder (e.g. --arms in parallel) never train the same run.
    lock = filelock.FileLock(paths.lock)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise RunBusy(f"{run}: another process is training it") from None
    _Process.running, _Process.stopping, _Process.taken = run, False, signals.taken()
    try:
        result, _ = read_result(paths.result)
        if result is not None:  # finished by the other process while this one waited for the lock
            return result
        return _execute(paths)
    except Stopped as e:  # train.py saved a checkpoint after its step and stopped
        raise RunStopped(run, e.signum) from None
    except KeyboardInterrupt as e:  # a run with no handler of its own, stopped where it was
        raise RunStopped(run, getattr(e, "signum", signal.SIGINT)) from None
    finally:
        _Process.running = None
        lock.release()


@contextlib.contextmanager
def _log_records_to(log: Any) -> Iterator[None]:
    """The logging module's stderr handlers write to the run's log while it runs, and to the worker's stderr after.

    A handler keeps the stream it was made with: transformers' is made at its first warning, inside some run's
    redirect, and a worker's next run would write to that run's closed log ("--- Logging error ---", the warning
    lost)."""
    def stream_handlers() -> list[logging.StreamHandler]:
        loggers = [logging.getLogger()] + [x for x in logging.root.manager.loggerDict.values()
                                           if isinstance(x, logging.Logger)]
        # a handler whose stream is a property (logging's last resort) reads sys.stderr at each record already;
        # one handler may sit on several loggers (pytest >= 9.2 puts its capture handler on each): once each
        return list(dict.fromkeys(h for x in loggers for h in x.handlers
                                  if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
                                  and not isinstance(getattr(type(h), "stream", None), property)))

    before = {h: h.stream for h in stream_handlers()}
    for h in before:
        h.setStream(log)
    try:
        yield
    finally:
        for h in stream_handlers():
            if h.stream is log:  # its stream before the run; one made during it: the worker's own stderr
                h.setStream(before.get(h, sys.__stderr__))


def _execute(paths: RunPaths) -> dict[str, Any]:
    # deferred: the trainers import torch and the experiments; the launcher and --help import this module, not them
    from eval.sweep.trainers import TRAINERS

    spec = read_json(paths.spec, "run spec", "the sweep writes it before the run", error=RuntimeError)
    trainer = TRAINERS[spec["trainer"]]
    for name, text in trainer.files(spec, paths).items():
        path = paths.file(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
    started, cpu = time.time(), time.process_time()
    with (open(paths.log, "a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log),
          _log_records_to(log)):
        result = trainer.run(spec, paths)
    # CPU seconds of this process (one torch thread per worker): the cost of a run on a shared machine,
    # where wall time depends on the neighbours.
    result = {**result, "run": paths.run, "command": trainer.command(paths.run, spec), "finished": time.time(),
              "wall_seconds": time.time() - started, "cpu_seconds": time.process_time() - cpu}
    if diverged(result.get(trainer.objective)):  # NaN or infinite: recorded, never chosen (Sweep.choice)
        result["diverged"] = True
    write_json(paths.result, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m eval.sweep.execute RUN_FOLDER   "
              "(from the sweep folder: runs/<arm>/lr_*/seed_*/steps_*)", file=sys.stderr)
        return 2
    run = args[0].rstrip("/")
    if not RunPaths(Path.cwd(), run).spec.is_file():
        print(f"eval.sweep.execute: {run}/{RUN_JSON}: no such file (run from the sweep folder)", file=sys.stderr)
        return 2
    install_stop_handlers(None)  # SIGTERM and SIGUSR1 stop the run as Ctrl-C does (train.py saves a checkpoint)
    try:
        result = execute(Path.cwd(), run)
    except (RunBusy, RunStopped) as e:
        print(f"eval.sweep.execute: {e}", file=sys.stderr)
        return e.status if isinstance(e, RunStopped) else 1
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
