"""Where one run of a sweep keeps its files, named in one place: ``DIR/runs/<arm>/lr_<rate>/seed_<s>/steps_<n>/``
with its spec ``run.json``, its numbers ``result.json`` (once complete), its log ``log.txt`` and its lock."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

RUN_JSON, RESULT_JSON, LOG, LOCK = "run.json", "result.json", "log.txt", ".run.lock"


def run_id(arm: str, lr: float, seed: int, steps: int) -> str:
    """A run's folder, relative to the sweep folder."""
    return f"runs/{arm}/lr_{lr:g}/seed_{seed}/steps_{steps}"


def run_pattern(arm: str = "**") -> str:
    """The glob of :func:`run_id`'s folders (of one arm, or of every arm: an arm's name may hold folders, the
    ladder's ``w128/spen``), relative to the sweep folder."""
    return f"runs/{arm}/lr_*/seed_*/steps_*"


@dataclass(frozen=True)
class RunPaths:
    """Where one run of a sweep keeps its files: ``sweep / run``. ``run`` (:func:`run_id`) is how results, commands
    and the run's own files name it (relative to the sweep folder, so a sweep runs from a clone); the paths are the
    sweep folder's, so no one needs to change the working folder to read or write them."""

    sweep: Path
    run: str

    @classmethod
    def of(cls, sweep: str | os.PathLike, arm: str, lr: float, seed: int, steps: int) -> RunPaths:
        return cls(Path(sweep), run_id(arm, lr, seed, steps))

    @property
    def folder(self) -> Path:
        return self.sweep / self.run

    @property
    def spec(self) -> Path:
        """run.json: what the run trains (written by the sweep before it runs)."""
        return self.folder / RUN_JSON

    @property
    def result(self) -> Path:
        """result.json: its numbers, once complete (a run without a readable one is unfinished)."""
        return self.folder / RESULT_JSON

    @property
    def log(self) -> Path:
        return self.folder / LOG

    @property
    def lock(self) -> Path:
        return self.folder / LOCK

    def file(self, name: str) -> Path:
        """A file of the run's own (its trainer's), by its name in the run folder."""
        return self.folder / name

    def relative(self, name: str) -> str:
        """That file as the run's records name it: relative to the sweep folder."""
        return f"{self.run}/{name}"


__all__ = ["LOCK", "LOG", "RESULT_JSON", "RUN_JSON", "RunPaths", "run_id", "run_pattern"]
