"""Recorded paths that run from a clone (eval/report/paths.py): the committed report holds no machine path, the
rewrite changes no number, and a recorded command runs as written from a fresh clone."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval.report.paths import DEFAULT_OUTPUT, absolute_paths, portable
from eval.report.plan import REPO

COMMITTED = REPO / "docs/report"


def _strings(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _strings(v, (*path, str(i)))
    elif isinstance(obj, str):
        yield path, obj


def _commands(report: dict) -> list[str]:
    return [s for p, s in _strings(report) if "command" in p[-2:]]


def test_no_absolute_path_in_docs_report() -> None:
    report = json.loads((COMMITTED / "report.json").read_text())
    found = [(".".join(p), absolute_paths(s)) for p, s in _strings(report) if absolute_paths(s)]
    assert not found, found[:5]
    for md in COMMITTED.glob("*.md"):
        text = md.read_text()
        assert not absolute_paths(text), (md.name, absolute_paths(text)[:5])


def test_the_rewrite_changes_no_number_and_is_a_fixpoint_of_the_committed_report() -> None:
    sys.path.insert(0, str(REPO / "docs/notes"))
    from compare_reports import compare

    report = json.loads((COMMITTED / "report.json").read_text())
    again = portable(report)
    assert again == report  # committed already migrated: rewriting it again changes nothing
    r = compare(report, again)
    assert r["compared"] > 10_000 and not r["differences"] and not r["missing"]


def test_paths_of_the_repository_and_the_output_folder_become_relative() -> None:
    report = {
        "command": "ema-boundary report --output_dir /scratch/run1",
        "plan": {"path": "/elsewhere/clone/hub_configs/report/default.yaml"},
        "stage": {"command": "python train.py --config /elsewhere/clone/hub_configs/spen-f48/train.yaml "
                             "--output_dir /scratch/.run1.tmp-ab12/work/lm --tokenizer /scratch/run1/work/tokenizer "
                             f"--data /data/mine.txt --init {REPO}/hub_configs/spen-tiny",
                  "models": "a=/scratch/run1/work/x,/scratch/run1/work/y", "loss": 3.25, "prose": "SPEN / GPT-2"},
    }
    new = portable(report)
    assert new["command"] == f"ema-boundary report --output_dir {DEFAULT_OUTPUT}"
    assert new["plan"]["path"] == "hub_configs/report/default.yaml"
    assert new["stage"]["command"] == ("python train.py --config hub_configs/spen-f48/train.yaml --output_dir "
                                       "outputs/report/work/lm --tokenizer outputs/report/work/tokenizer "
                                       "--data /data/mine.txt --init hub_configs/spen-tiny")  # a user's file stays
    assert new["stage"]["models"] == "a=outputs/report/work/x,outputs/report/work/y"
    assert new["stage"]["loss"] == 3.25 and new["stage"]["prose"] == "SPEN / GPT-2"
    assert portable(new) == new
    assert report["command"].endswith("/scratch/run1")  # the input is not changed in place


def test_an_output_folder_inside_the_repository_keeps_its_name() -> None:
    report = {"command": f"ema-boundary report --output_dir {REPO}/runs/mine",
              "x": f"{REPO}/runs/mine/work/tokenizer"}
    new = portable(report)
    assert new == {"command": "ema-boundary report --output_dir runs/mine", "x": "runs/mine/work/tokenizer"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="no git checkout")
def test_a_recorded_command_runs_from_a_fresh_clone(tmp_path: Path) -> None:
    # The grammar corpus stage as the committed report records it, run from the root of a clone; later flags
    # shrink it to seconds (argparse keeps the last value) and leave the recorded paths as they are.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    report = json.loads((COMMITTED / "report.json").read_text())
    for command in _commands(report):  # every repository path a command names is in the clone
        for arg in shlex.split(command):
            value = arg.split("=", 1)[-1]
            if value.startswith("hub_configs/"):  # an input of the repository
                assert (clone / value).exists(), (value, command[:120])
    build = next(c for c in report["structure"]["command"] if " build " in c)
    argv = shlex.split(build)
    assert argv[:3] == ["python", "-m", "grammar_probe"]
    out = argv[argv.index("--out") + 1]
    assert out.startswith(DEFAULT_OUTPUT + "/")
    small = ["--train-size", "40", "--validation_size", "10", "--test_size", "10", "--ceiling_sentences", "100",
             "--window_sentences", "100"]
    result = subprocess.run([sys.executable, *argv[1:], *small], cwd=clone, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                                              "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr[-2000:]
    assert (clone / out / "ceilings.json").is_file()
