"""YAML files that say what they mean: the one reader of the project's YAML (training configs and plans).

``read_yaml_text(text, name) -> (data, lines)`` reads YAML with PyYAML's safe loader and refuses what the plain
loader accepts silently: a key given twice in one mapping (the later value would win) is a
:class:`DuplicateKeyError` carrying both lines. ``lines`` maps each key path (a tuple; list items count as keys
``"0"``, ``"1"``...) to the line it is written on (1-based): ``yaml.safe_load`` forgets where a value came from.
Both the training configs (``load_yaml``, below) and the plan dialect (``eval.plans.read_yaml``) read through it;
each words the duplicate in its own vocabulary.

``load_yaml(path) -> (data, lines)`` reads a file, its ``lines`` keyed by dotted paths from the top:
``"learning_rate"``, ``"arms.spen.lr"``, ``"arms.0.name"`` (list items themselves have no entry)::

    data, lines = load_yaml("plan.yaml")
    raise UsageError(f"plan.yaml:{lines['seeds']}: seeds must be a list")

Errors are :class:`YAMLFileError` (a :class:`~ema_boundary.cli.UsageError`): one line, ``"PATH:LINE: what"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ema_boundary.cli import UsageError

__all__ = ["DuplicateKeyError", "Lines", "YAMLFileError", "error_line", "load_yaml", "read_yaml_text"]

Lines = dict[tuple[str, ...], int]  # key path -> the YAML line (1-based) where it is written
MERGE = "tag:yaml.org,2002:merge"  # `<<: *anchor`: its keys may be overridden, so it is no key of its own


class YAMLFileError(UsageError):
    """A YAML file that cannot be read as meant: one line naming the file and line."""


class DuplicateKeyError(YAMLFileError):
    """A key written twice in one mapping: ``path`` (the key path), ``first`` and ``line`` (both 1-based)."""

    def __init__(self, name: str, path: tuple[str, ...], first: int, line: int) -> None:
        super().__init__(f"{name}:{line}: duplicate key {path[-1]!r} (first at line {first}, again at line {line})")
        self.name, self.path, self.first, self.line = name, path, first, line


def read_yaml_text(text: str, name: str = "<yaml>", items: bool = True) -> tuple[Any, Lines]:
    """The document in ``text`` and the line of every key path (see the module docstring); ``items``: list items
    get a line of their own too. A key written twice raises :class:`DuplicateKeyError`; text that is not YAML
    raises ``yaml.YAMLError`` (:func:`error_line` words it)."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: Lines = {}
        if node is not None:
            _walk(node, (), lines, name, items)
        return (loader.construct_document(node) if node is not None else None), lines
    finally:
        loader.dispose()


def _walk(node: yaml.Node, path: tuple[str, ...], lines: Lines, name: str, items: bool) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            if key.tag != MERGE and isinstance(key, yaml.ScalarNode):
                k = (key.tag, key.value)
                if k in seen:
                    raise DuplicateKeyError(name, (*path, str(key.value)), seen[k], line)
                seen[k] = line
            p = (*path, str(key.value))
            lines.setdefault(p, line)
            _walk(value, p, lines, name, items)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            p = (*path, str(i))
            if items:
                lines[p] = item.start_mark.line + 1
            _walk(item, p, lines, name, items)


def error_line(e: yaml.YAMLError, name: str) -> tuple[str, str]:
    """Where a YAML parse error is (``NAME:LINE``, or ``NAME``) and what it is, in one line."""
    mark = getattr(e, "problem_mark", None)
    return (f"{name}:{mark.line + 1}" if mark is not None else name,
            getattr(e, "problem", None) or str(e).splitlines()[0])


def load_yaml(path: str | os.PathLike) -> tuple[Any, dict[str, int]]:
    """The YAML document at ``path`` and the line of each mapping key, by dotted path (see the module docstring).

    Raises :class:`YAMLFileError` in one line for a missing file, a file that is not UTF-8, invalid YAML and a
    key given twice in one mapping (``"PATH:LINE: duplicate key 'lr' (first at line 3, again at line 9)"``).
    An empty file is ``None``.
    """
    path = Path(path)
    if not path.is_file():
        raise YAMLFileError(f"{path}: no such file")
    try:
        data, lines = read_yaml_text(path.read_text(encoding="utf-8"), str(path), items=False)
    except UnicodeDecodeError as e:
        raise YAMLFileError(f"{path}: not a UTF-8 text file ({e.reason})") from None
    except yaml.YAMLError as e:
        where, what = error_line(e, str(path))
        raise YAMLFileError(f"{where}: invalid YAML ({what})") from None
    return data, {".".join(p): line for p, line in lines.items()}
