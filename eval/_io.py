"""Small shared helpers of the eval CLIs: atomic outputs and one-line usage errors."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: the message is one line naming the flag or file; nothing has been written."""


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """A fresh temp folder next to `target` that replaces it only if the block succeeds.

    Readers never see a half-written result; on error the temp folder goes and `target` stays as it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(tmp, 0o755)  # mkdtemp makes it 0700
    if target.exists():  # os.replace cannot overwrite a non-empty folder: move the old one aside first
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, old / "x")
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, allow_nan=True) + "\n")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
