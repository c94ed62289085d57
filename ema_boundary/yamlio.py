"""YAML files that say what they mean: one reader for training configs and plans.

``load_yaml(path) -> (data, lines)`` reads a YAML file with PyYAML's safe loader and refuses what the plain loader
accepts silently: a key given twice in one mapping (the later value would win) is refused with both line numbers.
``lines`` maps each mapping key to the line it is written on (1-based), by its dotted path from the top:
``"learning_rate"``, ``"arms.spen.lr"``; list items count as keys ``"0"``, ``"1"``...: ``"arms.0.name"``.

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

__all__ = ["YAMLFileError", "load_yaml"]


class YAMLFileError(UsageError):
    """A YAML file that cannot be read as meant: one line naming the file and line."""


class _DuplicateKey(Exception):
    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.line = line


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice in one mapping (both lines in the message)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:  # the keys as written, before merge keys (<<) add theirs
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            if first is not None:
                raise _DuplicateKey(f"duplicate key {key!r} (first at line {first}, again at line {line})", line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _key_lines(node: yaml.Node, prefix: str, lines: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                name = f"{prefix}{key_node.value}"
                lines.setdefault(name, key_node.start_mark.line + 1)
                _key_lines(value, name + ".", lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _key_lines(item, f"{prefix}{i}.", lines)


def load_yaml(path: str | os.PathLike) -> tuple[Any, dict[str, int]]:
    """The YAML document at ``path`` and the line of each mapping key (see the module docstring).

    Raises :class:`YAMLFileError` in one line for a missing file, a file that is not UTF-8, invalid YAML and a
    key given twice in one mapping (``"PATH:LINE: duplicate key 'lr' (first at line 3, again at line 9)"``).
    An empty file is ``None``.
    """
    path = Path(path)
    if not path.is_file():
        raise YAMLFileError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506  (a SafeLoader subclass)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except _DuplicateKey as e:
        raise YAMLFileError(f"{path}:{e.line}: {e}") from None
    except UnicodeDecodeError as e:
        raise YAMLFileError(f"{path}: not a UTF-8 text file ({e.reason})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise YAMLFileError(f"{where}: invalid YAML ({getattr(e, 'problem', None) or e})") from None
    lines: dict[str, int] = {}
    if node is not None:
        _key_lines(node, "", lines)
    return data, lines
