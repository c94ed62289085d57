"""One run of a sweep, from its folder: ``python -m eval.sweep.execute runs/<arm>/lr_<lr>/seed_<s>/steps_<n>``.

Run from the sweep folder (every path a run records is relative to it). The run's ``run.json`` says what to
train (the trainer, the arm's settings, the rate, the seed, the steps); its numbers go to ``result.json``,
written once the run is complete (a run folder without one is unfinished: it continues from its newest
checkpoint where its trainer keeps them), and its console output to ``log.txt``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import filelock

from ema_boundary.io import write_json

RUN_JSON, RESULT_JSON, LOG, LOCK = "run.json", "result.json", "log.txt", ".run.lock"


class RunBusy(RuntimeError):
    """Another process is training this run (its lock is held): this one leaves it alone."""


@contextlib.contextmanager
def _in(folder: Path):
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def execute(sweep: Path, run: str) -> dict[str, Any]:
    """Train and score the run in ``sweep/run`` (unless its result.json exists); return its result. Raises
    :class:`RunBusy` when another process holds the run's lock."""
    sweep = Path(sweep).resolve()
    folder = sweep / run
    done = folder / RESULT_JSON
    if done.is_file():
        return json.loads(done.read_text())
    # One writer per run: two invocations on one sweep folder (e.g. --arms in parallel) never train the same run.
    lock = filelock.FileLock(folder / LOCK)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        raise RunBusy(f"{run}: another process is training it") from None
    try:
        if done.is_file():  # finished by the other process while this one waited for the lock
            return json.loads(done.read_text())
        return _execute(sweep, run, folder)
    finally:
        lock.release()


def _execute(sweep: Path, run: str, folder: Path) -> dict[str, Any]:
    from eval.sweep.trainers import TRAINERS

    spec = json.loads((folder / RUN_JSON).read_text())
    trainer = TRAINERS[spec["trainer"]]
    with _in(sweep):
        for name, text in trainer.files(spec, run).items():
            path = Path(run) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text() != text:
                path.write_text(text)
        started, cpu = time.time(), time.process_time()
        with open(Path(run) / LOG, "a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            result = trainer.run(spec, run)
        # CPU seconds of this process (one torch thread per worker): the cost of a run on a shared machine,
        # where wall time depends on the neighbours.
        result = {**result, "run": run, "command": trainer.command(run, spec), "finished": time.time(),
                  "wall_seconds": time.time() - started, "cpu_seconds": time.process_time() - cpu}
        write_json(Path(run) / RESULT_JSON, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m eval.sweep.execute RUN_FOLDER   "
              "(from the sweep folder: runs/<arm>/lr_*/seed_*/steps_*)", file=sys.stderr)
        return 2
    run = args[0].rstrip("/")
    if not (Path(run) / RUN_JSON).is_file():
        print(f"eval.sweep.execute: {run}/{RUN_JSON}: no such file (run from the sweep folder)", file=sys.stderr)
        return 2
    result = execute(Path.cwd(), run)
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
