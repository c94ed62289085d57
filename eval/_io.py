"""Small shared helpers of the eval CLIs: atomic outputs and one-line usage errors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# One implementation of "build in a temp folder, rename at the end" for the whole project.
from grammar_probe.atomic import atomic_dir

__all__ = ["EXIT_USAGE", "UsageError", "UsageParser", "atomic_dir", "write_json", "write_jsonl"]

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: the message is one line naming the flag or file; nothing has been written."""


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, allow_nan=True) + "\n")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
