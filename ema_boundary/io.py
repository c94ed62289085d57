"""Outputs that are safe to write: atomic, and never at the cost of something the user made.

Everything is written under a temporary name beside its target and renamed into place at the
end; on an error the temporary is removed (or, for long jobs, kept and named) and the target is
left as it was.

A tool's output folder carries a marker file (``MARKER``) naming the tool that wrote it. A folder
that exists and is not empty is only ever replaced when it carries the same tool's marker *and* the
user asked for it (``--overwrite_output_dir``): a foreign folder is refused whatever the flags say,
and so are the working folder, its parents and the repository root, before any work starts.

A folder that a long job writes for a long time (a training run) is held by one process at a time:
:class:`FolderLock`, an OS file lock (``filelock``) on ``LOCK`` inside it, with who holds it in ``LOCK_INFO``.
The operating system releases the lock when its process dies (even by kill -9), so a lock left behind by a
killed process is recognised as stale and taken over.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import itertools
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ema_boundary.usage import UsageError

__all__ = ["LOCK", "LOCK_INFO", "MARKER", "FolderLock", "OutputError", "atomic_dir", "atomic_file", "check_output_dir",
           "content_digest", "earlier_attempt", "output_owner", "publish_dir", "read_json", "write_json", "write_jsonl",
           "write_text"]

MARKER = ".ema-boundary-output.json"  # {"tool": ..., "command": ..., "written": ...}: whose output this folder is
LOCK = ".ema-boundary.lock"  # the file FolderLock locks
LOCK_INFO = ".ema-boundary.lock.json"  # {"tool", "pid", "host", "since", "command"}: who holds the lock
LOCK_FILES = (LOCK, LOCK_INFO)  # not content: a folder holding only these is empty
REPO_ROOT = Path(__file__).resolve().parents[1]


class OutputError(UsageError):
    """An output path that cannot be written: one line naming it; nothing has been written."""


def output_owner(folder: str | os.PathLike) -> str | None:
    """The tool whose output ``folder`` is (from its marker file), or None."""
    try:
        return str(json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))["tool"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _protected(target: Path) -> str | None:
    """Why ``target`` may never be an output folder (the working folder, a parent of it, a repository root)."""
    resolved = target.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        return "is the working folder or one of its parents"
    if resolved == REPO_ROOT or (resolved / ".git").exists():
        return "is a repository root"
    return None


def _check_owner(target: Path, tool: str, overwrite: bool) -> None:
    """Refuse a non-empty ``target`` unless it is ``tool``'s own earlier output and ``overwrite`` is set."""
    if not target.is_dir() or all(p.name in LOCK_FILES for p in target.iterdir()):
        return
    owner = output_owner(target)
    if owner is None:
        raise OutputError(f"{target}: exists, is not empty and is not an output of {tool}; nothing was written "
                          "(choose a new or empty --output_dir)")
    if owner != tool:
        raise OutputError(f"{target}: holds an output of {owner}, not of {tool}; nothing was written "
                          "(choose a new --output_dir)")
    if not overwrite:
        raise OutputError(f"{target}: holds an earlier output of {tool}; pass --overwrite_output_dir to replace it")


def check_output_dir(target: str | os.PathLike, *, tool: str | None = None, overwrite: bool = False) -> Path:
    """Refuse, before any work, an output folder that cannot or may not be written.

    Always refused: a file, or a folder that cannot be created where it is asked for (permission bits say
    nothing to root, so the check tries: it creates and removes an empty folder in the nearest existing
    ancestor). With ``tool`` (a user-facing output folder): also the working folder, its parents and a
    repository root, and a non-empty folder that is not ``tool``'s own output (see the module docstring);
    ``overwrite`` allows replacing ``tool``'s own earlier output.
    """
    target = Path(target)
    if tool is not None:
        why = _protected(target)
        if why:
            raise OutputError(f"{target}: {why}; choose a new --output_dir")
    if target.exists() and not target.is_dir():
        raise OutputError(f"{target}: exists and is not a folder")
    if tool is not None:
        _check_owner(target, tool, overwrite)
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


def _kept_name(target: Path) -> Path:
    """A fresh visible sibling of ``target`` for a failed run's partial output (``NAME.failed``, ``.failed-2``...)."""
    for n in itertools.count(1):
        kept = target.with_name(f"{target.name}.failed" + (f"-{n}" if n > 1 else ""))
        if not kept.exists():
            return kept
    raise AssertionError("unreachable")


def earlier_attempt(target: str | os.PathLike, folder: str | os.PathLike) -> Path:
    """``folder`` checked as an earlier attempt at ``target`` that a long job may continue in: a sibling of
    ``target`` kept by :func:`atomic_dir` (``NAME.failed``, ``NAME.failed-2``...) or left by a killed run
    (``.NAME.tmp-*``). Anything else is refused (:class:`OutputError`): a job resumes only its own leftovers."""
    target, folder = Path(target).resolve(), Path(folder).resolve()
    name = folder.name
    ours = name.startswith(f"{target.name}.failed") or name.startswith(f".{target.name}.tmp-")
    if folder.parent != target.parent or not ours:
        raise OutputError(f"{folder}: not an earlier attempt at {target} (expected {target.name}.failed or "
                          f".{target.name}.tmp-* beside it)")
    if not folder.is_dir():
        raise OutputError(f"{folder}: no such folder")
    return folder


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, *, tool: str | None = None, overwrite: bool = False,
               keep_on_error: bool = False, resume: str | os.PathLike | None = None) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``target``; on success it replaces ``target``.

    ``target`` is checked first (:func:`check_output_dir`, with ``tool`` and ``overwrite``). With ``tool``,
    the finished folder carries ``tool``'s marker, and the ownership rule is checked again just before the
    rename (the user may have put files there meanwhile: then the result stays beside it and the error says
    where). On an error the temporary folder is removed, or with ``keep_on_error`` (long jobs, whose per-run
    logs explain the failure) renamed to ``NAME.failed`` and named on the exception as ``kept_at``.

    ``resume`` continues in an earlier attempt's folder (:func:`earlier_attempt`) instead of a fresh one; it is
    never removed: on any error (Ctrl-C too) it is kept as ``NAME.failed``.
    """
    target = check_output_dir(target, tool=tool, overwrite=overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    if resume is not None:
        tmp = earlier_attempt(target, resume)
    else:
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700; give it ordinary folder permissions
    try:
        yield tmp
    except BaseException as err:
        if resume is not None and tmp.name.startswith(f"{target.name}.failed"):
            with contextlib.suppress(AttributeError):
                err.kept_at = tmp  # type: ignore[attr-defined]
        elif (keep_on_error and not isinstance(err, KeyboardInterrupt)) or resume is not None:
            kept = _kept_name(target)
            os.replace(tmp, kept)
            with contextlib.suppress(AttributeError):
                err.kept_at = kept  # type: ignore[attr-defined]
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if tool is not None:
        marker = {"tool": tool, "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
                  "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
        try:
            _check_owner(target, tool, overwrite)
        except OutputError as err:
            kept = _kept_name(target)
            os.replace(tmp, kept)
            raise OutputError(f"{err}; the finished output is in {kept}") from None
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


@contextlib.contextmanager
def atomic_files(folder: str | os.PathLike, names: Iterable[str] | None = None) -> Iterator[Path]:
    """Yield a scratch folder inside ``folder``; on success each file written at its top (or only ``names``: the
    scratch may hold inputs too) replaces its namesake in ``folder`` in one rename. Files that belong together
    (a summary and its figure) are all written before any is replaced, so a failure replaces none; the scratch
    folder is removed either way."""
    folder = Path(folder)
    with tempfile.TemporaryDirectory(prefix=".atomic-files-", dir=folder) as tmp:
        yield Path(tmp)
        chosen = sorted(p.name for p in Path(tmp).iterdir() if p.is_file()) if names is None else list(names)
        for name in chosen:
            os.replace(Path(tmp) / name, folder / name)


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write UTF-8 text atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def read_json(path: str | os.PathLike, kind: str, missing: str, *, name: str | None = None,
              error: type[Exception] = UsageError) -> Any:
    """A committed JSON result, parsed; a file that is missing or cannot be read raises ``error`` in one line,
    ``"{name}: no such file ({missing})"`` or ``"{name}: not a readable {kind} (...)"`` (``name``: the path)."""
    name = str(path) if name is None else name
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{name}: no such file ({missing})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{name}: not a readable {kind} ({e})") from None


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, atomically (NaN and infinities kept as JSON5 literals)."""
    write_text(path, json.dumps(obj, indent=1, allow_nan=True) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Write one JSON object per line, atomically."""
    write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def content_digest(paths: Iterable[str | os.PathLike], names: Iterable[str] = ()) -> str:
    """``sha256:<hex>`` of the bytes of ``paths`` (a folder: every file under it, by relative name, lock files
    aside) and of ``names`` (what stands for a source that is not a file: a corpus name and version): what a
    result depends on, to tell the same input from a changed one. A path that does not exist is hashed as such."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(f"name {name}\n".encode())
    for path in map(Path, paths):
        files = ([path] if path.is_file() else
                 sorted(p for p in path.rglob("*") if p.is_file() and p.name not in LOCK_FILES) if path.is_dir()
                 else [])
        digest.update(f"path {path.name} {len(files)} {'file' if path.is_file() else 'folder'}\n".encode())
        for file in files:
            digest.update(f"file {file.relative_to(path).as_posix() if file != path else ''}\n".encode())
            with file.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class FolderLock:
    """One writer per folder: ``acquire`` takes an OS lock on ``folder/LOCK`` (created with the folder if need
    be) and records the holder in ``LOCK_INFO``; a second process is refused with :class:`OutputError` in one
    line naming the holder. The lock dies with its process, so after a kill the next ``acquire`` takes it over
    and returns the dead holder's record (``stale``). ``release`` removes the record, and the folder too if
    ``acquire`` created it and nothing else was written there."""

    def __init__(self, folder: str | os.PathLike, tool: str, command: list[str] | None = None):
        self.folder, self.tool = Path(folder), tool
        self.command = command if command is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]
        self._lock: FileLock | None = None
        self._created = False

    def holder(self) -> dict | None:
        """The record of the process that holds (or, after a kill, held) the lock, or None."""
        try:
            info = json.loads((self.folder / LOCK_INFO).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) else None

    def acquire(self) -> dict | None:
        """Take the lock; return the record of a killed holder whose lock was taken over (else None)."""
        self._created = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.folder / LOCK, timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            h = self.holder() or {}
            who = (f"pid {h.get('pid', '?')} on {h.get('host', '?')}, since {h.get('since', '?')}: "
                   f"{' '.join(map(str, h.get('command', [])))}".rstrip(": "))
            raise OutputError(f"{self.folder}: another {h.get('tool', self.tool)} is writing this folder ({who}); "
                              "wait for it to finish or stop it, or choose another --output_dir") from None
        self._lock = lock
        stale = self.holder()
        write_json(self.folder / LOCK_INFO, {"tool": self.tool, "pid": os.getpid(), "host": socket.gethostname(),
                                             "since": _now(), "command": self.command})
        return stale

    def release(self) -> None:
        if self._lock is None:
            return
        (self.folder / LOCK_INFO).unlink(missing_ok=True)
        empty = self._created and all(p.name == LOCK for p in self.folder.iterdir())
        if empty:
            (self.folder / LOCK).unlink(missing_ok=True)
        self._lock.release()
        self._lock = None
        if empty:
            with contextlib.suppress(OSError):
                self.folder.rmdir()

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
