"""Command-line conventions shared by every entry point: bad input is one line and exit status 2."""

from __future__ import annotations

import argparse
import sys

__all__ = ["EXIT_USAGE", "UsageError", "UsageParser", "looks_like_path", "positive_int"]

EXIT_USAGE = 2


class UsageError(Exception):
    """Bad input: the message is one line naming the flag, field or file; nothing has been written."""


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def positive_int(value: str) -> int:
    """An argparse ``type``: a positive integer (argparse prefixes the message with "argument --flag: ")."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return n


def looks_like_path(name: str) -> bool:
    """Whether a model name that does not exist was meant as a local path (hub ids are "name" or
    "owner/name"): such a name is a typo to refuse, not a hub model to look up."""
    return name.startswith(("/", ".", "~")) or name.endswith(".json") or name.count("/") > 1
