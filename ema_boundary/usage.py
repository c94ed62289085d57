"""Command-line conventions shared by every entry point.

- Flags use transformers' example-script spellings with underscores (``--output_dir``, ``--max_steps``,
  ``--learning_rate``, ``--seed``, ``--model_name_or_path``, ``--overwrite_output_dir``); older spellings
  stay as aliases.
- ``--help`` shows every default (:class:`UsageParser` uses ``ArgumentDefaultsHelpFormatter``).
- Exit status: 0 success; 1 a long job failed after it started (one line naming the kept partial output
  and its logs); 2 bad command line, settings or input files (one line on stderr, nothing written); 3 the
  work is done but a final upload failed; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence

__all__ = ["EXIT_INTERRUPTED", "EXIT_UPLOAD_FAILED", "EXIT_USAGE", "UsageError", "UsageParser", "add_output_dir",
           "comma_list", "first_line", "flatten", "looks_like_path", "non_negative_int", "positive_int"]

EXIT_USAGE = 2
EXIT_UPLOAD_FAILED = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input: the message is one line naming the flag, field or file; nothing has been written."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after every help text; descriptions keep their line breaks.

    An unset default (None) and an off switch (False) say nothing, so they are not printed.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit status 2 (no usage dump), and whose
    ``--help`` shows every default."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def first_line(err: BaseException, limit: int = 300) -> str:
    """One line for an error message: the exception's first line (or its class name), and where a failed
    long job's partial output was kept (``err.kept_at``, set by ``ema_boundary.io.atomic_dir``)."""
    text = str(err).strip()
    line = (text.splitlines()[0] if text else type(err).__name__)[:limit]
    kept = getattr(err, "kept_at", None)
    return f"{line} (partial output and logs kept in {kept})" if kept else line


def _int_at_least(value: str, low: int, what: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a {what} integer, got {value!r}") from None
    if n < low:
        raise argparse.ArgumentTypeError(f"must be a {what} integer, got {value!r}")
    return n


def positive_int(value: str) -> int:
    """An argparse ``type``: a positive integer (argparse prefixes the message with "argument --flag: ")."""
    return _int_at_least(value, 1, "positive")


def non_negative_int(value: str) -> int:
    """An argparse ``type``: an integer >= 0 (a seed)."""
    return _int_at_least(value, 0, "non-negative")


def comma_list(value: str) -> list[str]:
    """An argparse ``type``: ``"a,b"`` -> ``["a", "b"]`` (lm-eval's ``--tasks a,b``); empty items refused."""
    items = [v.strip() for v in value.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"empty item in the comma list {value!r}")
    return items


def flatten(values: Iterable[Sequence[str]] | None) -> list[str] | None:
    """Join ``nargs="+"`` lists of :func:`comma_list` items: ``--tasks a,b c`` -> ``["a", "b", "c"]``."""
    if values is None:
        return None
    return [v for group in values for v in group]


def add_output_dir(parser: argparse.ArgumentParser, help: str, *, aliases: Sequence[str] = ("--out",),
                   required: bool = True, default: str | None = None) -> None:
    """``--output_dir`` (older spellings in ``aliases``) and ``--overwrite_output_dir``, as every tool has them."""
    parser.add_argument("--output_dir", *aliases, dest="output_dir", required=required, default=default,
                        metavar="DIR", help=help)
    parser.add_argument("--overwrite_output_dir", action="store_true",
                        help="replace this tool's own earlier output in --output_dir (a folder that is not "
                             "this tool's output is never replaced)")


def looks_like_path(name: str) -> bool:
    """Whether a model name that does not exist was meant as a local path (hub ids are "name" or
    "owner/name"): such a name is a typo to refuse, not a hub model to look up."""
    return name.startswith(("/", ".", "~")) or name.endswith(".json") or name.count("/") > 1
