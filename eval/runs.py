"""Many train.py runs, one or two processes at a time (:func:`train_runs`: no experiment calls it any more, every
one runs on :mod:`eval.sweep`, the commands ``python -m eval.ablation`` and ``eval.depth --config`` as its aliases and
the report's stages), and the reader of a run's metrics.jsonl (:func:`read_metrics`, :func:`read_test`).

Each run is ``train.main(argv)``, with the argv recorded as the command ``python train.py ...`` that reproduces
it. With ``workers > 1`` the runs go to a pool of spawned processes of one torch thread each: tiny models train
faster on one thread per core than on two threads in one process (docs/notes/issue14-phase1.md), and independent
runs need no communication. A run's numbers do not depend on the process it ran in (its seed fixes its
initialisation, the data order is fixed by the data).

Runs that differ only by their seed, each writing ``<folder>/seed_<seed>`` of one folder, can train as one
ensemble (``train.py --seeds``, ensemble.py): one process, one start-up and one data stream for all of them, and
each seed's folder and numbers those of its own run. :func:`jobs` decides the grouping (in chunks that keep every
worker busy); :func:`train_runs` groups by default where it pays (with a GPU). Each job's console output
(progress, Accelerate's messages) goes to ``<log_dir>/<name>.log`` so that parallel jobs do not interleave on the
terminal.
"""

from __future__ import annotations

import contextlib
import json
import math
import multiprocessing
import shlex
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ema_boundary.cli import UsageError

TRAIN = ("python", "train.py")
VALUED = ("--seed", "--output_dir")  # the flags whose values an ensemble's members may differ in


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

    @property
    def seed(self) -> int | None:
        """The run's ``--seed``, or None without one."""
        if "--seed" not in self.argv:
            return None
        value = self.argv[self.argv.index("--seed") + 1]
        return int(value) if value.isdigit() else None

    def ensemble_key(self) -> tuple | None:
        """What a run shares with the runs it can train with as one ensemble (None: it trains alone).

        A member has one ``--seed``, writes ``<folder>/seed_<seed>`` and does not resume (ensembles start fresh);
        its key is its argv without ``--seed`` and ``--output_dir``, and the folder.
        """
        argv = self.argv
        if self.seed is None or self.output_dir.name != f"seed_{self.seed}" or any(
                a.startswith(("--seeds", "--resume_from_checkpoint")) or a.startswith(tuple(f"{f}=" for f in VALUED))
                for a in argv):
            return None
        return (*_without_seed_and_folder(argv), str(self.output_dir.parent))


def _without_seed_and_folder(argv: Sequence[str]) -> list[str]:
    """``argv`` without the flags of :data:`VALUED` and their values."""
    rest, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in VALUED:
            skip = True
        else:
            rest.append(a)
    return rest


@dataclass(frozen=True)
class Job:
    """What one process executes: a single run, or several runs that differ only by seed as one ensemble."""

    runs: tuple[Run, ...]

    @property
    def name(self) -> str:
        if len(self.runs) == 1:
            return self.runs[0].name
        # The members' names without their last part (``spen/lr_3e-3/seed_1`` -> ``spen/lr_3e-3``).
        prefix = self.runs[0].name.rsplit("/", 1)[0] + "/" if "/" in self.runs[0].name else ""
        return f"{prefix}seeds_{'_'.join(str(r.seed) for r in self.runs)}"

    @property
    def argv(self) -> tuple[str, ...]:
        """The single run's argv, or ``--seeds a,b,...`` with the members' common folder."""
        first = self.runs[0]
        if len(self.runs) == 1:
            return first.argv
        seeds = ",".join(str(r.seed) for r in self.runs)
        return (*_without_seed_and_folder(first.argv), "--seeds", seeds, "--output_dir", str(first.output_dir.parent))

    @property
    def command(self) -> str:
        return shlex.join([*TRAIN, *self.argv])


def jobs(runs: Sequence[Run], workers: int = 1, ensemble: bool = True) -> list[Job]:
    """The processes that execute ``runs``: runs that differ only by seed grouped into ensembles (``ensemble``).

    One worker takes each group whole. With several workers a group is cut into nearly equal chunks so that
    there are at least twice as many jobs as workers (a group of 4 seeds on 2 workers: 2 + 2), largest first:
    a worker left without work would cost more than the shared start-up saves.
    """
    groups: dict[object, list[Run]] = {}
    for i, r in enumerate(runs):
        key = r.ensemble_key() if ensemble else None
        groups.setdefault(key if key is not None else ("alone", i), []).append(r)
    chunk = max(1, len(runs) // (2 * workers)) if workers > 1 else len(runs)
    out: list[Job] = []
    for members in groups.values():
        parts = math.ceil(len(members) / chunk)
        size = math.ceil(len(members) / parts)
        out += [Job(tuple(members[i:i + size])) for i in range(0, len(members), size)]
    return sorted(out, key=lambda j: -len(j.runs)) if workers > 1 else out


def _train(argv: tuple[str, ...], log: str, threads: int | None) -> None:
    """One job in this process, its console output in ``log``."""
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


def train_runs(runs: Sequence[Run], log_dir: Path, workers: int = 1, desc: str = "train.py runs",
               ensemble: bool | None = None) -> list[Job]:
    """Execute every run (``train.main(argv)``), ``workers`` processes at a time; return the jobs that ran.

    With ``ensemble``, runs that differ only by seed (each writing ``<folder>/seed_<seed>``) train as ensembles
    (:func:`jobs`); their folders and numbers are the runs' own either way. ``None`` (the default) groups them
    where that pays: with a GPU, whose small-model steps the stacked engine shares. On the CPU an ensemble's step
    costs what its seeds' steps cost one after another and it saves only the start-up (~1 CPU-second a run;
    BENCHMARKS.md, section 6), less than a worker left idle by a large group loses, so every run trains alone.

    ``workers == 1`` runs in this process (with the caller's torch threads); more use spawned processes of one
    torch thread each. A run with bad settings or data stops the batch with :class:`UsageError` naming the command
    line; the other runs' folders are left as they are (the caller builds everything under a temporary folder).
    """
    import train_config
    from ema_boundary import corpus

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise UsageError(f"workers must be a positive integer, got {workers!r}")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"run names must be unique, got {names}")
    if ensemble is None:
        import torch

        ensemble = torch.cuda.is_available()
    todo = jobs(runs, workers, ensemble)
    log_dir.mkdir(parents=True, exist_ok=True)
    logs = {j.name: str(log_dir / f"{j.name.replace('/', '_')}.log") for j in todo}
    bar = tqdm(total=len(runs), desc=desc, unit="run", disable=None)
    try:
        if workers == 1 or len(todo) == 1:
            for j in todo:
                bar.set_postfix_str(j.name)
                _guard(j, lambda j=j: _train(j.argv, logs[j.name], None), train_config, corpus)
                bar.update(len(j.runs))
        else:
            ctx = multiprocessing.get_context("spawn")  # no fork after torch started its threads
            with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx) as pool:
                futures = {j: pool.submit(_train, j.argv, logs[j.name], 1) for j in todo}
                for j, fut in futures.items():
                    bar.set_postfix_str(j.name)
                    _guard(j, fut.result, train_config, corpus)
                    bar.update(len(j.runs))
    finally:
        bar.close()
    return todo


def _guard(run: Run | Job, call, train_config, corpus) -> None:
    try:
        call()
    except (train_config.ConfigError, corpus.DataError) as e:
        raise UsageError(f"train.py: {e} (in: {run.command})") from None


def read_spen_yaml(config: Path, swaps: str) -> dict[str, Any]:
    """Every setting of a train.py YAML (``train_config.read_yaml``) for an experiment that swaps a part of SPEN
    (``swaps``: what it swaps, for the message): the YAML must train a SPEN model. One :class:`UsageError` line
    naming ``--config`` otherwise."""
    import train_config

    try:
        cfg = train_config.read_yaml(config)
    except train_config.ConfigError as e:
        raise UsageError(f"--config {e}") from None
    model_json = Path(cfg["model_name_or_path"]) / "config.json"
    if json.loads(model_json.read_text()).get("model_type") != "spen":
        raise UsageError(f"--config {config}: model_config {model_json} is not a SPEN config ({swaps})")
    return cfg


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


def read_test(path: Path) -> dict[str, float | int] | None:
    """The test score of a train.py metrics.jsonl (``test_loss``, ``test_ppl``, ``test_tokens``,
    ``test_documents``: the final model on the held-out test blocks), or None for a run without a test split."""
    found = None
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "test_loss" in row:
            found = {k: row[k] for k in ("test_loss", "test_ppl", "test_tokens", "test_documents") if k in row}
    return found


__all__ = ["Job", "Run", "TRAIN", "jobs", "train_runs", "read_metrics", "read_test", "param_count"]
