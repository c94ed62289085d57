"""ema_boundary.usage: one-line errors, exit status 2, defaults in --help, the shared flags."""

import argparse

import pytest

from ema_boundary.usage import EXIT_USAGE, UsageParser, add_output_dir, comma_list, first_line, flatten, positive_int


def _parser() -> UsageParser:
    p = UsageParser(prog="tool")
    add_output_dir(p, "where the results go")
    p.add_argument("--max_steps", "--max-steps", type=positive_int, default=10, help="optimizer steps")
    p.add_argument("--tasks", type=comma_list, nargs="+", default=[["a"]], help="tasks")
    return p


def test_help_shows_defaults_and_output_dir(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "--output_dir" in out and "--overwrite_output_dir" in out and "(default: 10)" in out


def test_old_spellings_are_aliases_and_comma_lists_flatten():
    args = _parser().parse_args(["--out", "d", "--max-steps", "3", "--tasks", "a,b", "c"])
    assert args.output_dir == "d" and args.max_steps == 3 and flatten(args.tasks) == ["a", "b", "c"]


def test_bad_command_line_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(["--output_dir", "d", "--max_steps", "0"])
    assert info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max_steps" in err and "positive integer" in err


def test_comma_list_refuses_empty_items():
    with pytest.raises(argparse.ArgumentTypeError):
        comma_list("a,,b")


def test_first_line_names_kept_output():
    err = RuntimeError("first\nsecond")
    assert first_line(err) == "first"
    err.kept_at = "/x/report.failed"
    assert first_line(err) == "first (partial output and logs kept in /x/report.failed)"
    assert first_line(ValueError()) == "ValueError"


def test_non_negative_int_takes_zero_and_refuses_negatives():
    from ema_boundary.usage import non_negative_int

    assert non_negative_int("0") == 0 and non_negative_int("7") == 7
    for bad in ("-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="non-negative integer"):
            non_negative_int(bad)
