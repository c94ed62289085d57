"""Many train.py runs, one or two processes at a time: the ablations' and the language-model comparison's runner.

Each run is ``train.main(argv)``, with the argv recorded as the command ``python train.py ...`` that reproduces
it. With ``workers > 1`` the runs go to a pool of spawned processes of one torch thread each: tiny models train
faster on one thread per core than on two threads in one process (docs/notes/issue14-phase1.md), and independent
runs need no communication. A run's numbers do not depend on the process it ran in (its seed fixes its
initialisation, the data order is fixed by the data). Each run's console output (progress bar, Accelerate's
messages) goes to ``<log_dir>/<name>.log`` so that parallel runs do not interleave on the terminal.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import shlex
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from ema_boundary.cli import UsageError

TRAIN = ("python", "train.py")


@dataclass(frozen=True)
class Run:
    """One train.py run: a name (unique within a batch) and its argv (``--output_dir`` among them)."""

    name: str
    argv: tuple[str, ...]
    output_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        argv = tuple(str(a) for a in self.argv)
        object.__setattr__(self, "argv", argv)
        if "--output_dir" not in argv:
            raise ValueError(f"run {self.name}: argv has no --output_dir")
        object.__setattr__(self, "output_dir", Path(argv[argv.index("--output_dir") + 1]))

    @property
    def command(self) -> str:
        """The command line that reproduces the run (what :func:`train_runs` executes, as ``train.main``)."""
        return shlex.join([*TRAIN, *self.argv])


def _train(argv: tuple[str, ...], log: str, threads: int | None) -> None:
    """One run in this process, its console output in ``log``."""
    import torch

    import train

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        with open(log, "w") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            train.main(list(argv))
    finally:
        torch.set_num_threads(before)


def train_runs(runs: Sequence[Run], log_dir: Path, workers: int = 1, desc: str = "train.py runs") -> None:
    """Execute every run (``train.main(argv)``), ``workers`` at a time, in order of submission.

    ``workers == 1`` runs in this process (with the caller's torch threads); more use spawned processes of one
    torch thread each. A run with bad settings or data stops the batch with :class:`UsageError` naming the run's
    command line; the other runs' folders are left as they are (the caller builds everything under a temporary
    folder).
    """
    import train_config
    from ema_boundary import corpus

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(f"workers must be a positive integer, got {workers!r}")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"run names must be unique, got {names}")
    log_dir.mkdir(parents=True, exist_ok=True)
    logs = {r.name: str(log_dir / f"{r.name.replace('/', '_')}.log") for r in runs}
    bar = tqdm(total=len(runs), desc=desc, unit="run", disable=None)
    try:
        if workers == 1 or len(runs) == 1:
            for r in runs:
                bar.set_postfix_str(r.name)
                _guard(r, lambda r=r: _train(r.argv, logs[r.name], None), train_config, corpus)
                bar.update()
        else:
            ctx = multiprocessing.get_context("spawn")  # no fork after torch started its threads
            with ProcessPoolExecutor(max_workers=min(workers, len(runs)), mp_context=ctx) as pool:
                futures = {r: pool.submit(_train, r.argv, logs[r.name], 1) for r in runs}
                for r, fut in futures.items():
                    bar.set_postfix_str(r.name)
                    _guard(r, fut.result, train_config, corpus)
                    bar.update()
    finally:
        bar.close()


def _guard(run: Run, call, train_config, corpus) -> None:
    try:
        call()
    except (train_config.ConfigError, corpus.DataError) as e:
        raise UsageError(f"train.py: {e} (in: {run.command})") from None


def param_count(checkpoint: Path) -> int:
    """Parameters stored in a checkpoint's model.safetensors (tied weights once)."""
    import math

    from safetensors import safe_open

    with safe_open(str(checkpoint / "model.safetensors"), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def read_metrics(path: Path) -> dict[str, list]:
    """Training and validation curves from a train.py metrics.jsonl, against steps and tokens.

    ``loss`` (the training next-token loss, a mean since the previous log) and ``val_loss`` (the held-out
    blocks) are the same quantity on two sets of blocks; ``prediction_loss`` is SPEN's predictor loss.
    """
    curve: dict[str, list] = {"step": [], "tokens": [], "loss": [], "prediction_loss": [],
                              "val_step": [], "val_tokens": [], "val_loss": []}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "loss" in row:
            curve["step"].append(row["step"])
            curve["tokens"].append(row["tokens"])
            curve["loss"].append(row["loss"])
            if "prediction_loss" in row:
                curve["prediction_loss"].append(row["prediction_loss"])
        if "val_loss" in row:
            curve["val_step"].append(row["step"])
            curve["val_tokens"].append(row.get("tokens", curve["tokens"][-1] if curve["tokens"] else 0))
            curve["val_loss"].append(row["val_loss"])
    if not curve["prediction_loss"]:
        del curve["prediction_loss"]
    return curve


__all__ = ["Run", "TRAIN", "train_runs", "read_metrics", "param_count"]
