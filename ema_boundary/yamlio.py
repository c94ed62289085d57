"""The one reader of the project's YAML (training configs, sweep plans, report plans): data with the line of every
key, and one line naming the file and line for anything that cannot be used as meant.

``read_yaml_text(text, name) -> (data, lines)`` reads YAML with PyYAML's safe loader and refuses what the plain loader
accepts silently: a key written twice in one mapping (the later value would win) is a :class:`DuplicateKeyError`
carrying both lines. ``lines`` maps each key path (a tuple; list items count as keys ``"0"``, ``"1"``...) to the
line it is written on (1-based): ``yaml.safe_load`` forgets where a value came from. ``read_yaml_file(path)`` reads
a file the same way::

    data, lines = read_yaml_file("plan.yaml")
    raise UsageError(f"plan.yaml:{lines[('seeds',)]}: seeds must be a list")

Every error is a :class:`YAMLFileError` (a :class:`~ema_boundary.usage.UsageError`) in one line, ``"PATH:LINE:
what"``: a missing or unreadable file, text that is not YAML, a key written twice (``"plan.yaml:9: arms.spen.lr is
written twice (lines 3 and 9); keep one"``). What the data must hold is each reader's own check (train_config's
settings, eval.plans' dialect of plans).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ema_boundary.usage import UsageError

__all__ = ["DuplicateKeyError", "Lines", "YAMLFileError", "read_yaml_file", "read_yaml_text"]

Lines = dict[tuple[str, ...], int]  # key path -> the YAML line (1-based) where it is written
MERGE = "tag:yaml.org,2002:merge"  # `<<: *anchor`: its keys may be overridden, so it is no key of its own


class YAMLFileError(UsageError, ValueError):
    """A YAML file that cannot be used as meant: one line naming the file and line."""


class DuplicateKeyError(YAMLFileError):
    """A key written twice in one mapping: ``path`` (the key path), ``first`` and ``line`` (both 1-based)."""

    def __init__(self, name: str, path: tuple[str, ...], first: int, line: int) -> None:
        dotted = ".".join(p for p in path if not p.isdigit())
        super().__init__(f"{name}:{line}: {dotted} is written twice (lines {first} and {line}); keep one")
        self.name, self.path, self.first, self.line = name, path, first, line


def read_yaml_text(text: str, name: str = "<yaml>") -> tuple[Any, Lines]:
    """The document in ``text`` and the line of every key path (see the module docstring); ``name`` stands for the
    file in messages. Text that is not YAML, or that writes a key twice in one mapping, is a :class:`YAMLFileError`.
    An empty document is ``(None, {})``."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        lines: Lines = {}
        if node is not None:
            _walk(node, (), lines, name)
        return (loader.construct_document(node) if node is not None else None), lines
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise YAMLFileError(f"{where}: invalid YAML ({getattr(e, 'problem', None) or str(e).splitlines()[0]})") \
            from None
    finally:
        loader.dispose()


def read_yaml_file(path: str | os.PathLike, what: str = "") -> tuple[Any, Lines]:
    """:func:`read_yaml_text` of the file at ``path``; a file that is missing, unreadable or not UTF-8 is a
    :class:`YAMLFileError` too. ``what`` (a flag, a field) leads the message of a file that cannot be read."""
    path = Path(path)
    lead = f"{what} " if what else ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YAMLFileError(f"{lead}{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise YAMLFileError(f"{lead}{path}: not a UTF-8 text file ({e.reason})") from None
    except OSError as e:
        raise YAMLFileError(f"{lead}{path}: cannot read ({e.strerror or e})") from None
    return read_yaml_text(text, str(path))


def _walk(node: yaml.Node, path: tuple[str, ...], lines: Lines, name: str) -> None:
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
            _walk(value, p, lines, name)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            p = (*path, str(i))
            lines[p] = item.start_mark.line + 1
            _walk(item, p, lines, name)
