"""Atomic outputs: a reader never sees a half-written file or folder.

Everything is written under a temporary name beside its target and renamed into place at the
end; on an error the temporary is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError

__all__ = ["OutputError", "atomic_dir", "atomic_file", "check_output_dir", "publish_dir", "write_json",
           "write_jsonl", "write_text"]


class OutputError(UsageError):
    """An output path that cannot be written: one line naming it; nothing has been written."""


def check_output_dir(target: str | os.PathLike) -> Path:
    """Refuse, before any work, an output folder that is a file or cannot be created where it is asked for.

    Permission bits say nothing to root, so the check tries: it creates (and removes) an empty
    temporary folder in the nearest existing ancestor of ``target``.
    """
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is not a folder")
    ancestor = target.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"{target}: {ancestor} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".write-check-", dir=ancestor))
    except OSError as e:
        raise OutputError(f"{target}: cannot write in {ancestor} ({e.strerror})") from None
    return target


def publish_dir(tmp: str | os.PathLike, target: str | os.PathLike) -> None:
    """Rename the finished folder ``tmp`` to ``target``, replacing any folder already there.

    ``os.replace`` cannot overwrite a non-empty folder, so an existing target is first moved
    aside (one rename) and deleted after the new one is in place.
    """
    tmp, target = Path(tmp), Path(target)
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.rmdir(old)
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``target``; on success it replaces ``target``.

    A ``target`` that is a file, or that cannot be written, raises :class:`OutputError` first.
    """
    target = check_output_dir(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700; give it ordinary folder permissions
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish_dir(tmp, target)


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success it is renamed to ``target``."""
    target = Path(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.tmp-", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    os.chmod(tmp, 0o666 & ~_umask())
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 text atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically (NaN and infinities kept as JSON5 literals)."""
    write_text(path, json.dumps(obj, indent=1, allow_nan=True) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Write one JSON object per line, atomically."""
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
