"""One plan dialect: every plan YAML of the project (report plans, sweeps) is checked here, once, after the
project's one YAML reader (:mod:`ema_boundary.yamlio`) has read it with the line of every key.

A plan is declared before a run and checked when it is read, before any work: each field's type and range, and
each failure is one line naming the file, the YAML line and the field (``plan.yaml:12: rate.lr_grid: ...``).
The vocabulary is shared: ``seeds`` is a list, ``lr_grid`` a list of rates in (0, 1), ``max_steps`` and
``budgets`` optimizer steps, margins end in ``_margin`` and are in the quantity's unit. A key written twice
in one mapping is refused with both lines (YAML itself would let the later value win silently). Reading a
plan imports no torch, so a bad plan is refused in about a second.

A section of a plan is a frozen dataclass whose fields carry their rule (``rule(check, default)``);
:class:`Checker` turns the YAML's values into those dataclasses.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable
from dataclasses import field, fields
from pathlib import Path
from typing import Any

from ema_boundary.yamlio import Lines, YAMLFileError

REPO = Path(__file__).resolve().parents[1]

Rule = Callable[[Any], "str | None"]  # value -> None when it is fine, else what it must be


class PlanError(YAMLFileError):
    """A plan YAML that cannot be used: one line naming the file, the line and the field. The file is read by the
    project's one YAML reader (:mod:`ema_boundary.yamlio`), whose errors (a file that cannot be read, a key written
    twice) are this error's base: catch :class:`~ema_boundary.yamlio.YAMLFileError` for both."""


# ---------------------------------------------------------------------------------------------
# Field rules
# ---------------------------------------------------------------------------------------------


def positive(v: Any) -> str | None:
    return None if 0 < v < math.inf else "must be positive"


def non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must be a non-negative integer"


def rate(v: Any) -> str | None:
    return None if 0 < v < 1 else "must be a rate in (0, 1)"


def margin(v: Any) -> str | None:
    return None if 0 < v < 1 else "must be a margin in (0, 1)"


def factor(v: Any) -> str | None:
    return None if 1 < v < math.inf else "must be a factor above 1"


def one_of(names: tuple[str, ...], what: str) -> Rule:
    def check(v: Any) -> str | None:
        return None if v in names else f"names an unknown {what} {v!r} ({what}s: {', '.join(names)})"
    return check


def rule(check: Rule | None, default: Any = None, *, factory: Any = None) -> Any:
    """A dataclass field whose values must also pass ``check`` (read by :meth:`Checker.value`)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"check": check})
    return field(default=default, metadata={"check": check})


# ---------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------


def in_repo(path: str | Path) -> Path:
    """A path a plan names (a YAML, a committed result): repository-relative unless absolute."""
    path = Path(path)
    return path if path.is_absolute() else REPO / path


def find_plan(path: str | Path) -> Path:
    """A plan path as given, else relative to the repository root (``hub_configs/...`` from any folder)."""
    path = Path(path)
    if not path.is_file() and not path.is_absolute() and (REPO / path).is_file():
        return REPO / path
    return path


# ---------------------------------------------------------------------------------------------
# Checking
# ---------------------------------------------------------------------------------------------


class Checker:
    """Every check of one plan file, each failure one line with the YAML line of the field."""

    def __init__(self, path: Path, lines: Lines) -> None:
        self.path, self.lines = path, lines

    def error(self, where: tuple[str, ...], problem: str) -> PlanError:
        line = next((self.lines[where[:i]] for i in range(len(where), 0, -1) if where[:i] in self.lines), None)
        name = ".".join(p for p in where if not p.isdigit())
        return PlanError(f"{self.path}{f':{line}' if line else ''}: {name + ' ' if name else ''}{problem}")

    def mapping(self, where: tuple[str, ...], raw: Any, known: typing.Iterable[str], what: str = "fields") -> dict:
        """``raw`` as a mapping whose keys are all in ``known``."""
        known = tuple(known)
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.error(where, f"must be a mapping of {what}")
        for key in raw:
            if key not in known:
                raise self.error((*where, str(key)), f"is not a field ({what}: {', '.join(known)})")
        return raw

    def section(self, where: tuple[str, ...], cls: type, raw: Any) -> Any:
        """``cls(**raw)`` with every field of ``raw`` checked by :meth:`value` against its hint and rule; a field
        that is a section of its own (``metadata["section"]``: ``read(checker, where, raw)``, e.g. a rate rule) is
        read by that reader."""
        known = {f.name: f for f in fields(cls)}
        raw = self.mapping(where, raw, known)
        hints = typing.get_type_hints(cls)
        values = {}
        for k, v in raw.items():
            read = known[k].metadata.get("section")
            values[k] = read(self, (*where, k), v) if read else self.value((*where, k), hints[k], v,
                                                                          known[k].metadata.get("check"))
        return cls(**values)

    def value(self, where: tuple[str, ...], hint: Any, value: Any, check: Rule | None = None) -> Any:
        """``value`` of the type ``hint`` (``int``, ``float``, ``bool``, ``str``, ``dict``, ``tuple[X, ...]``,
        ``X | None``), each item passing ``check``."""
        args = typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            if value is None:
                return None
            hint = next(a for a in args if a is not type(None))
            args = typing.get_args(hint)
        if value is None:
            raise self.error(where, "must be set")
        if typing.get_origin(hint) is tuple:
            if not isinstance(value, list) or not value:
                raise self.error(where, f"must be a non-empty list, got {value!r}")
            items = tuple(self.value((*where, str(i)), args[0], v, check) for i, v in enumerate(value))
            if len(set(items)) != len(items):
                raise self.error(where, f"lists {next(x for x in items if items.count(x) > 1)!r} twice")
            return items
        if typing.get_origin(hint) is dict or hint is dict:
            if not isinstance(value, dict):
                raise self.error(where, f"must be a mapping, got {value!r}")
            return value
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
            raise self.error(where, f"must be {hint.__name__}, got {value!r}")
        problem = check(value) if check is not None else None
        if problem:
            raise self.error(where, problem if problem.startswith("names") else f"{problem}, got {value!r}")
        return value


def repo_path(path: str | Path) -> str:
    """A path as a plan names it: repository-relative when inside the repository, else absolute (a plan's paths are
    read from the repository, whatever the working folder)."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def data_sources(data: list[str]) -> list[str]:
    """train.py's data sources as a plan names them: named corpora as they are, files by :func:`repo_path`."""
    from ema_boundary import corpus  # delayed: it imports datasets and torch (seconds); reading a plan needs neither

    named = (corpus.C4, corpus.EMBEDDED, corpus.EMBEDDED_PYDOC, corpus.EMBEDDED_STDLIB)
    return [d if d in named else repo_path(d) for d in data]


__all__ = ["Checker", "PlanError", "REPO", "Rule", "factor", "data_sources", "find_plan", "in_repo", "margin",
           "non_negative", "one_of", "positive", "rate", "repo_path", "rule"]
