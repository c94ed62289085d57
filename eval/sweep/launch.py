"""Where a sweep's runs execute: local worker processes by default, or a cluster through submitit.

- ``local``: a pool of ``workers`` spawned processes of one torch thread each (tiny models train faster on one
  thread per core than on two threads in one process, docs/notes/issue14-phase1.md); ``workers == 1`` runs in
  this process.
- ``slurm``: submitit's ``AutoExecutor`` submits each run as a Slurm job (``--launcher_args`` sets its
  parameters: ``timeout_min=120,slurm_partition=gpu,gpus_per_node=1``). A preempted or timed-out job is
  requeued by submitit (:class:`RunJob` is ``Checkpointable``) and the run resumes from its newest checkpoint.
- ``submitit-local``: the same submission through submitit's local executor (processes on this machine):
  what the tests exercise of the cluster path.

Every launcher executes :func:`eval.sweep.execute.execute` on a run folder, at most ``workers`` runs at a time,
and yields as each run finishes; a run that fails is reported with its log, and the others go on. The runs come
from a ``feed`` (a callable returning the runs that became ready), asked again after each run finishes: a rate
extension or a seed at the chosen rate starts as soon as a worker is free, not after the slowest run of a wave.

Stopping (:class:`eval.sweep.execute.StopFile`): a stop signal taken by the sweep or by any of its runs stops the
invocation; the launcher starts nothing more, every run in progress saves and stops (reported as
:class:`~eval.sweep.execute.RunStopped`), and the launcher returns once they have. Workers and submitit-local jobs
watch the sweep's process and stop with it when it is killed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import submitit

from ema_boundary.signals import STOP_SIGNALS
from ema_boundary.usage import UsageError
from eval.sweep.execute import (
    RunStopped,
    StopFile,
    execute,
    install_stop_handlers,
    parent_alive,
    pid_alive,
    start_watch,
    stop_signals,
)

LAUNCHERS = ("local", "slurm", "submitit-local")

Outcome = tuple[str, BaseException | None]  # (run folder, the error if it failed; RunStopped if a signal ended it)
Feed = Callable[[], Sequence[str]]  # the runs ready now (each returned once); asked again after every finished run
WAIT = 0.25  # seconds between two looks for finished runs and for a stop


def _worker_init(stop: StopFile) -> None:
    import torch  # deferred: only a worker trains; the sweep's command line imports this module for its choices

    torch.set_num_threads(1)
    install_stop_handlers(stop)  # a stop signal to this worker alone stops the sweep too
    start_watch(stop, parent_alive())  # ... and one to the sweep stops this worker's run; a killed sweep, the worker


def _execute(sweep: str, run: str) -> None:
    execute(Path(sweep), run)


@contextlib.contextmanager
def _signals_blocked(sigs: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
    """Stop signals held back in this thread for the block; the processes started in it inherit the mask."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class LocalLauncher:
    """Runs in this process (``workers == 1``) or in a pool of spawned one-thread processes."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def launch(self, sweep: Path, feed: Feed, stop: StopFile | None = None) -> Iterator[Outcome]:
        stop = stop or StopFile(sweep)
        with stop_signals(stop):
            if self.workers == 1:
                yield from self._here(sweep, feed, stop)
            else:
                yield from self._pool(sweep, feed, stop)

    @staticmethod
    def _here(sweep: Path, feed: Feed, stop: StopFile) -> Iterator[Outcome]:
        queue = list(feed())
        while queue and stop.signum() is None:
            run = queue.pop(0)
            try:
                _execute(str(sweep), run)
            except RunStopped as e:
                stop.request(e.signum)
                yield run, e
                continue
            except Exception as e:  # noqa: BLE001  reported with the run's log; the other runs go on
                yield run, e
            else:
                yield run, None
            queue += feed()

    def _pool(self, sweep: Path, feed: Feed, stop: StopFile) -> Iterator[Outcome]:
        queue = list(feed())
        if not queue:
            return
        # multiprocessing's resource tracker (one process for the sweep) ignores SIGINT and SIGTERM; it is started
        # with SIGUSR1 held back too, or Slurm's warning signal to the group would kill it ("resources might leak").
        with _signals_blocked([signal.SIGUSR1]):
            resource_tracker.ensure_running()
        ctx = multiprocessing.get_context("spawn")  # no fork after torch started its threads
        pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_worker_init,
                                   initargs=(stop,))
        futures: dict[Future, str] = {}
        try:
            while queue or futures:
                if stop.signum() is not None:
                    queue.clear()
                while queue and len(futures) < self.workers:  # never more in flight than workers: a run that
                    run = queue.pop(0)                         # becomes ready later is not stuck behind a queue
                    futures[pool.submit(_execute, str(sweep), run)] = run
                if not futures:
                    break
                done, _ = wait(futures, timeout=WAIT, return_when=FIRST_COMPLETED)
                for fut in done:
                    run, error = futures.pop(fut), fut.exception()
                    if isinstance(error, RunStopped):
                        stop.request(error.signum)
                    yield run, error
                    if stop.signum() is None:
                        queue += feed()
        finally:
            if futures:  # left early (an error in the sweep itself): the runs in flight save and stop
                stop.request(signal.SIGTERM)
            pool.shutdown(wait=True, cancel_futures=True)


class RunJob(submitit.helpers.Checkpointable):
    """One run as a submitit job; requeued on preemption or timeout (the run resumes from its checkpoint). A job
    that a stop signal ended returns ``{"stopped": signum}`` (a failure to submitit would be a failed run)."""

    def __init__(self, sweep: str, run: str, stop: StopFile | None = None, sweep_pid: int | None = None) -> None:
        self.sweep, self.run, self.stop, self.sweep_pid = sweep, run, stop, sweep_pid

    def __call__(self) -> dict[str, int] | None:
        with stop_signals(self.stop):
            # submitit-local's controller was started with the stop signals held back (so that it neither dies of
            # SIGUSR1 nor kills the run on Ctrl-C); the run takes them itself.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            if self.stop is not None:
                start_watch(self.stop, pid_alive(self.sweep_pid) if self.sweep_pid else (lambda: True))
            try:
                _execute(self.sweep, self.run)
            except RunStopped as e:
                return {"stopped": e.signum}
        return None

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        # submitit calls this before a preemption or timeout; train.py saves on the signal (SIGTERM/SIGUSR1),
        # and the same call, requeued, resumes from its newest checkpoint.
        return submitit.helpers.DelayedSubmission(RunJob(self.sweep, self.run, self.stop, self.sweep_pid))


class SubmititLauncher:
    """submitit's AutoExecutor (``cluster="slurm"``, or ``"local"`` for processes on this machine), at most
    ``workers`` jobs at a time."""

    def __init__(self, cluster: str, parameters: dict[str, Any], workers: int = 1) -> None:
        self.cluster, self.parameters, self.workers = cluster, parameters, workers
        self.name = "slurm" if cluster == "slurm" else "submitit-local"

    poll_seconds = 1.0  # how often finished jobs are looked for (submitit caches the cluster's state itself)

    def executor(self, folder: Path) -> submitit.AutoExecutor:
        """The executor, its parameters set (submitit refuses a parameter it does not know)."""
        executor = submitit.AutoExecutor(folder=folder, cluster=self.cluster)
        executor.update_parameters(**{"timeout_min": 60, **self.parameters})
        return executor

    def launch(self, sweep: Path, feed: Feed, stop: StopFile | None = None) -> Iterator[Outcome]:
        stop = stop or StopFile(sweep)
        executor = self.executor(sweep / "submitit" / "%j")
        local = self.cluster == "local"
        queue, jobs = list(feed()), {}

        def submit(run: str) -> Any:
            job = RunJob(str(sweep), run, stop, os.getpid() if local else None)
            # A local job's controller inherits the mask: group signals reach the run alone, which takes them.
            with _signals_blocked() if local else contextlib.nullcontext():
                return executor.submit(job)

        with stop_signals(stop):
            try:
                while queue or jobs:
                    if stop.signum() is not None:
                        queue.clear()
                    while queue and len(jobs) < self.workers:
                        run = queue.pop(0)
                        jobs[run] = submit(run)
                    finished = [run for run, job in jobs.items() if job.done()]
                    if not finished:
                        time.sleep(self.poll_seconds if not local else WAIT)
                        continue
                    for run in finished:
                        try:
                            value = jobs.pop(run).result()
                        except Exception as e:  # noqa: BLE001  reported with the run's log; the other runs go on
                            yield run, e
                            continue
                        if isinstance(value, dict) and "stopped" in value:
                            stop.request(value["stopped"])
                            yield run, RunStopped(run, value["stopped"])
                        else:
                            yield run, None
                    if stop.signum() is None:
                        queue += feed()
            finally:
                if jobs:  # left early: the jobs in flight save and stop (they watch the stop file)
                    stop.request(signal.SIGTERM)
                    while any(not job.done() for job in jobs.values()):
                        time.sleep(WAIT)


def parse_launcher_args(text: str | None) -> dict[str, Any]:
    """``key=value,key=value`` -> a dict for submitit's ``update_parameters`` (numbers as numbers)."""
    out: dict[str, Any] = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--launcher_args {text}: {item!r} is not key=value")
        v: Any = value.strip()
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except ValueError:
                pass
        out[key.strip()] = v
    return out


def make_launcher(name: str, workers: int, launcher_args: str | None = None) -> Any:
    """The launcher ``name`` running ``workers`` runs at a time; its arguments checked before anything is written
    (submitit's own check of its parameters, on a scratch folder)."""
    if name == "local":
        if launcher_args:
            raise UsageError("--launcher_args: only for the submitit launchers (slurm, submitit-local)")
        return LocalLauncher(workers)
    if name in ("slurm", "submitit-local"):
        launcher = SubmititLauncher("slurm" if name == "slurm" else "local", parse_launcher_args(launcher_args),
                                    workers)
        with tempfile.TemporaryDirectory() as scratch:
            try:
                launcher.executor(Path(scratch))
            except Exception as e:  # noqa: BLE001  submitit's ValueError / TypeError / RuntimeError, in one line
                raise UsageError(f"--launcher {name} --launcher_args {launcher_args or ''}: "
                                 f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        return launcher
    raise UsageError(f"--launcher {name}: not one of {', '.join(LAUNCHERS)}")


__all__ = ["LAUNCHERS", "LocalLauncher", "RunJob", "SubmititLauncher", "make_launcher", "parse_launcher_args"]
