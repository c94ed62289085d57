"""Where a sweep's runs execute: local worker processes by default, or a cluster through submitit.

- ``local``: a pool of ``workers`` spawned processes of one torch thread each (tiny models train faster on one
  thread per core than on two threads in one process, docs/notes/issue14-phase1.md); ``workers == 1`` runs in
  this process.
- ``slurm``: submitit's ``AutoExecutor`` submits each run as a Slurm job (``--launcher_args`` sets its
  parameters: ``timeout_min=120,slurm_partition=gpu,gpus_per_node=1``). A preempted or timed-out job is
  requeued by submitit (:class:`RunJob` is ``Checkpointable``) and the run resumes from its newest checkpoint.
- ``submitit-local``: the same submission through submitit's local executor (processes on this machine):
  what the tests exercise of the cluster path.

Every launcher executes :func:`eval.sweep.execute.execute` on a run folder and yields as each run finishes;
a run that fails is reported with its log, and the others go on. The runs come from a ``feed`` (a callable
returning the runs that became ready), asked again after each run finishes: a rate extension or a seed at the
chosen rate starts as soon as a worker is free, not after the slowest run of a wave.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import submitit

from ema_boundary.cli import UsageError

LAUNCHERS = ("local", "slurm", "submitit-local")

Outcome = tuple[str, BaseException | None]  # (run folder, the error if it failed)
Feed = Callable[[], Sequence[str]]  # the runs ready now (each returned once); asked again after every finished run


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)


def _execute(sweep: str, run: str) -> None:
    from eval.sweep.execute import execute

    execute(Path(sweep), run)


class LocalLauncher:
    """Runs in this process (``workers == 1``) or in a pool of spawned one-thread processes."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def launch(self, sweep: Path, feed: Feed) -> Iterator[Outcome]:
        queue = list(feed())
        if self.workers == 1:
            while queue:
                run = queue.pop(0)
                try:
                    _execute(str(sweep), run)
                    yield run, None
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # noqa: BLE001  reported with the run's log; the other runs go on
                    yield run, e
                queue += feed()
            return
        if not queue:
            return
        ctx = multiprocessing.get_context("spawn")  # no fork after torch started its threads
        pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx, initializer=_worker_init)
        futures: dict[Future, str] = {}
        try:
            while queue or futures:
                while queue and len(futures) < self.workers:  # never more in flight than workers: a run that
                    run = queue.pop(0)                         # becomes ready later is not stuck behind a queue
                    futures[pool.submit(_execute, str(sweep), run)] = run
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield futures.pop(fut), fut.exception()
                    queue += feed()
        except BaseException:
            # Ctrl-C or a preemption signal in the sweep process: pass it on to the workers, whose train.py saves
            # a checkpoint after its step and stops (a run without checkpoints, e.g. MQAR, is simply stopped),
            # and wait for them, so that --resume_from continues where they were.
            for proc in list(getattr(pool, "_processes", {}).values()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGTERM)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


class RunJob(submitit.helpers.Checkpointable):
    """One run as a submitit job; requeued on preemption or timeout (the run resumes from its checkpoint)."""

    def __init__(self, sweep: str, run: str) -> None:
        self.sweep, self.run = sweep, run

    def __call__(self) -> None:
        _execute(self.sweep, self.run)

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        # submitit calls this before a preemption or timeout; train.py saves on the signal (SIGTERM/SIGUSR1),
        # and the same call, requeued, resumes from its newest checkpoint.
        return submitit.helpers.DelayedSubmission(RunJob(self.sweep, self.run))


class SubmititLauncher:
    """submitit's AutoExecutor (``cluster="slurm"``, or ``"local"`` for processes on this machine)."""

    def __init__(self, cluster: str, parameters: dict[str, Any]) -> None:
        self.cluster, self.parameters = cluster, parameters
        self.name = "slurm" if cluster == "slurm" else "submitit-local"

    poll_seconds = 1.0  # how often finished jobs are looked for (submitit caches the cluster's state itself)

    def launch(self, sweep: Path, feed: Feed) -> Iterator[Outcome]:
        executor = submitit.AutoExecutor(folder=sweep / "submitit" / "%j", cluster=self.cluster)
        executor.update_parameters(**{"timeout_min": 60, **self.parameters})
        jobs = {run: executor.submit(RunJob(str(sweep), run)) for run in feed()}
        while jobs:
            finished = [run for run, job in jobs.items() if job.done()]
            if not finished:
                time.sleep(self.poll_seconds)
                continue
            for run in finished:
                try:
                    jobs.pop(run).result()
                    yield run, None
                except KeyboardInterrupt:
                    raise
                except Exception as e:  # noqa: BLE001  reported with the run's log; the other runs go on
                    yield run, e
            jobs.update({run: executor.submit(RunJob(str(sweep), run)) for run in feed()})


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
    if name == "local":
        if launcher_args:
            raise UsageError("--launcher_args: only for the submitit launchers (slurm, submitit-local)")
        return LocalLauncher(workers)
    if name in ("slurm", "submitit-local"):
        return SubmititLauncher("slurm" if name == "slurm" else "local", parse_launcher_args(launcher_args))
    raise UsageError(f"--launcher {name}: not one of {', '.join(LAUNCHERS)}")


__all__ = ["LAUNCHERS", "LocalLauncher", "RunJob", "SubmititLauncher", "make_launcher", "parse_launcher_args"]
