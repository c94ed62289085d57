"""The README gets a newcomer going in one screen, and docs/ names no path of the machine a run happened on."""

from __future__ import annotations

import re
import shlex

from eval.report.paths import absolute_paths
from tests.train_testkit import ROOT

README = (ROOT / "README.md").read_text()
LINES = README.splitlines()
# Not a machine's: the system's own files and programs (/proc/loadavg, /usr/bin/time).
SYSTEM = re.compile(r"/(proc|dev|sys|usr|bin|etc)/")


def _bash_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) of every line in a ```bash block of the README, continuation lines joined."""
    out, inside, pending = [], False, None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            inside = line.strip() == "```bash"
            continue
        if inside:
            command = line.split("  #")[0].rstrip()
            if pending is not None:
                out[-1] = (pending, out[-1][1] + " " + command.rstrip("\\").strip())
            else:
                out.append((n, command.rstrip("\\").strip()))
            pending = out[-1][0] if command.endswith("\\") else None
    return out


def test_the_readme_is_one_screen_then_links():
    assert len(LINES) <= 200, len(LINES)
    assert max(map(len, LINES)) <= 300
    setup = [c for n, c in _bash_lines(README) if n <= 30 and c.startswith("pip install")]
    assert len(setup) == 2 and "ema-boundary report" in setup[0] and "pytest" in setup[1]
    first_train = next(n for n, c in _bash_lines(README) if "train.py" in c)
    assert first_train <= 60, first_train
    for link in re.findall(r"\]\(([^)#\s]+)", README):  # the rest is linked, and the links resolve
        assert link.startswith("http") or (ROOT / link).exists(), link


def test_ci_runs_the_readmes_test_command():
    ci = [shlex.split(line.split(" || ")[0]) for line in (ROOT / ".ci/run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    command = next(c for n, c in _bash_lines(README) if c.startswith("pip install") and "pytest" in c)
    for step in command.split(" && "):
        words = shlex.split(step)
        if words[0] == "pip":  # CI installs quietly through the interpreter it tests with
            words = ["python", "-m", "pip", "install", "-q", *words[2:]]
        assert words in ci, step


def test_the_fast_subset_is_named_beside_the_full_suite_and_its_marker_registered(pytestconfig):
    assert any(m.startswith("slow:") for m in pytestconfig.getini("markers"))
    head = "\n".join(LINES[:30])
    assert 'python -m pytest -m "not slow"' in head
    assert re.search(r"full test suite \([\d,]+ tests\) takes [\d.]+ min", head)
    assert re.search(r"not slow\"`.*[\d.]+ min", head, re.S)


def test_no_machine_path_in_docs():
    found = {}
    for path in sorted((ROOT / "docs").rglob("*")):
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # figures
            continue
        paths = [p for p in absolute_paths(text) if re.match(r"/[A-Za-z]", p) and not SYSTEM.match(p)]
        if paths:
            found[path.relative_to(ROOT).as_posix()] = paths[:3]
    assert not found, found
