"""Paths in a report that run from a clone: every recorded path relative to the repository or the output folder.

A report records the command behind every number, and the paths in those commands are the machine's where it
ran: the clone it ran from (``/tmp/ci/hub_configs/...``), its output folder (``/tmp/def-report/work/...``, or the
temporary folder beside it while it was being built) and, for a committed run the report cites, the folder it
was run into (``/work/runs/ablation``). :func:`portable` rewrites each of them so that the command runs as written
from the root of any clone:

- a path inside the repository (the one it ran from, or this one) becomes repository-relative
  (``hub_configs/spen-f48/train.yaml``);
- a path inside the output folder is written under the output folder as the top command names it, relative to
  the repository (``outputs/report/work/tokenizer``); an output folder outside the repository is written as the
  default ``outputs/report`` (the top command's ``--output_dir`` with it), so that ``ema-boundary report`` from a
  clone writes exactly the paths its stage commands name;
- a committed run's own ``--output_dir`` becomes the folder it is committed in (the block's ``source``), and its
  ``--resume_from`` (a temporary folder of an interrupted attempt; the resumed result equals a fresh run's) goes.

Every other string, and every number, is left as it is (a user's own corpus file stays where the user has it).
Rewriting twice changes nothing.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

from eval.report.plan import REPO

DEFAULT_OUTPUT = "outputs/report"  # `ema-boundary report`'s default --output_dir
OUTPUT_FLAGS = ("--output_dir", "--output-dir", "--out")
# An absolute path inside a recorded string: after the start, a blank, a quote, '=' or ',' (comma-separated lists).
_ABSOLUTE = re.compile(r"(?<![^\s'\"=,(])/[^\s'\",()]+")

__all__ = ["DEFAULT_OUTPUT", "absolute_paths", "portable"]


def absolute_paths(text: str) -> list[str]:
    """The absolute paths a recorded string holds."""
    return _ABSOLUTE.findall(text)


def _flag_value(argv: list[str], flags: tuple[str, ...]) -> str | None:
    for i, arg in enumerate(argv):
        if arg in flags and i + 1 < len(argv):
            return argv[i + 1]
        for flag in flags:
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def _split(command: str) -> list[str]:
    """A recorded command's argv; a program recorded as one quoted word (``'python -m eval.ablation'``) split."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return []
    if argv and " " in argv[0]:
        argv = [*argv[0].split(), *argv[1:]]
    return argv


def _recorded_repo(report: dict[str, Any]) -> PurePosixPath | None:
    """The clone the report ran from, read off its plan's path (``/tmp/ci/hub_configs/report/default.yaml`` ->
    ``/tmp/ci``): the prefix whose remainder (two parts or more) names a file of this repository."""
    path = (report.get("plan") or {}).get("path")
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    parts = PurePosixPath(path).parts
    for i in range(1, len(parts) - 1):
        if (REPO / Path(*parts[i:])).exists():
            return PurePosixPath(*parts[:i])
    return None


def _roots(report: dict[str, Any]) -> list[tuple[PurePosixPath, str]]:
    """(absolute prefix, what it becomes) for the repository and the output folder, longest prefix first."""
    roots: list[tuple[PurePosixPath, str]] = [(PurePosixPath(REPO), "")]
    if (recorded := _recorded_repo(report)) is not None:
        roots.append((recorded, ""))
    argv = _split(report.get("command") or "")
    out = _flag_value(argv, OUTPUT_FLAGS)
    if out is None and argv[:2] == ["ema-boundary", "report"]:
        out = DEFAULT_OUTPUT
    if out is not None:
        if out.startswith("/"):
            folder = PurePosixPath(out)
            inside = next((r for r, _ in roots if folder.is_relative_to(r)), None)
            as_written = str(folder.relative_to(inside)) if inside is not None else DEFAULT_OUTPUT
        else:  # as typed, relative to where it ran (while it is being built: here)
            folder, as_written = PurePosixPath(Path.cwd() / out), str(PurePosixPath(out))
        roots.append((folder, as_written))
        # The temporary folder the report was built in, beside it (ema_boundary.io.atomic_dir's name).
        roots.append((folder.parent / f".{folder.name}.tmp-*", as_written))
    return sorted(roots, key=lambda r: -len(str(r[0])))


def _rewrite_path(path: str, roots: list[tuple[PurePosixPath, str]]) -> str:
    p = PurePosixPath(path)
    for root, new in roots:
        if root.name.endswith("*"):  # the temporary sibling: any suffix after the prefix
            prefix = root.parent / root.name[:-1]
            head = p.parts[:len(prefix.parts)]
            if len(head) == len(prefix.parts) and str(PurePosixPath(*head)).startswith(str(prefix)):
                rest = p.parts[len(prefix.parts):]
                return str(PurePosixPath(new, *rest)) if new else str(PurePosixPath(*rest))
            continue
        if p == root or p.is_relative_to(root):
            rest = p.relative_to(root)
            joined = PurePosixPath(new) / rest if new else rest
            return str(joined) if str(joined) != "." else (new or ".")
    return path


def _rewrite(text: str, roots: list[tuple[PurePosixPath, str]]) -> str:
    return _ABSOLUTE.sub(lambda m: _rewrite_path(m.group(0), roots), text)


def _walk(obj: Any, roots: list[tuple[PurePosixPath, str]]) -> Any:
    if isinstance(obj, dict):
        return {k: _walk(v, roots) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, roots) for v in obj]
    if isinstance(obj, str):
        return _rewrite(obj, roots)
    return obj


def portable(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` (a report.json's content) with every recorded path relative to the repository or the output
    folder (module docstring); a new dict, numbers untouched."""
    roots = _roots(report)
    return _walk(copy.deepcopy(report), roots)
