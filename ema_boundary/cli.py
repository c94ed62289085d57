"""Command-line conventions shared by every entry point: bad input is one line and exit status 2."""

from __future__ import annotations

import argparse
import sys

__all__ = ["EXIT_USAGE", "UsageError", "UsageParser"]

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: the message is one line naming the flag, field or file; nothing has been written."""


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
