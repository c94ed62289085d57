"""The research scripts under docs/notes: each imports and runs on today's code (a few steps, or ``--help`` where a
run takes minutes), and those whose output a note quotes reproduce it. A script added there without a test here
fails :func:`test_every_script_is_covered`."""

from __future__ import annotations

import ast
import importlib
import json
import math
import runpy
import sys
import sysconfig
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
NOTES = REPO / "docs" / "notes"
EXPLORATION = NOTES / "issue14" / "exploration"
SCRIPTS = sorted(p.relative_to(NOTES).as_posix() for p in NOTES.rglob("*.py"))

# Scripts whose real run takes minutes: only their command line is checked.
HELP_ONLY = ["issue14_prediction_loss.py", "issue14_recall_check.py", "issue14_recall_map.py", "issue20_regime.py"]
# Scripts run below, each by its own test.
RUN = ["compare_reports.py", "migrate_arms.py", "issue49_nan_check.py", "issue14_lm_regime.py",
       "issue14/exploration/ab.py", "issue14/exploration/docstrings.py", "issue14/exploration/ex2.py",
       "issue14/exploration/rr.py", "issue14/exploration/rr2.py"]  # fmt: skip


@pytest.fixture(autouse=True)
def _keep_threads():
    # The scripts set torch's thread count for their process; the test process keeps its own.
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _run(script: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """Run ``docs/notes/<script>`` as ``python <script> argv...`` from the repository root; its exit status."""
    monkeypatch.setattr(sys, "argv", [str(NOTES / script), *argv])
    monkeypatch.chdir(REPO)
    try:
        runpy.run_path(str(NOTES / script), run_name="__main__")
    except SystemExit as stop:
        return 0 if stop.code is None else int(stop.code) if isinstance(stop.code, int) else 1
    return 0


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_every_script_is_covered() -> None:
    assert sorted(HELP_ONLY + RUN) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_import_resolves(script: str) -> None:
    tree = ast.parse((NOTES / script).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name != "*" and not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")  # a submodule, or ImportError


@pytest.mark.parametrize("script", HELP_ONLY + ["compare_reports.py", "issue14_lm_regime.py",
                                                "issue14/exploration/ex2.py"])  # fmt: skip
def test_command_line_answers_help(script: str, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    assert _run(script, ["--help"], monkeypatch) == 0
    assert "usage:" in capsys.readouterr().out


def test_compare_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"a": 1.0, "b": [2, 3]}))
    after.write_text(json.dumps({"a": 1.0, "b": [2, 3], "c": 4}))
    assert _run("compare_reports.py", [str(before), str(after)], monkeypatch) == 0
    after.write_text(json.dumps({"a": 1.5, "b": [2, 3]}))
    assert _run("compare_reports.py", [str(before), str(after)], monkeypatch) == 1
    assert "differs: a: 1.0 -> 1.5" in capsys.readouterr().out


@pytest.mark.parametrize(("blows_up_at", "said"), [(None, "finished 4 steps; finite weights: True"),
                                                   (2, "first non-finite loss at step 2")])
def test_the_nan_check_finds_the_first_non_finite_loss(blows_up_at: int | None, said: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # a tiny recall run: trained as it comes it goes through; with the loss NaN from its third step the check says so
    import torch.nn.functional as F

    real, calls = F.cross_entropy, []

    def loss(*args, **kwargs):
        calls.append(1)
        out = real(*args, **kwargs)
        return out * math.nan if blows_up_at is not None and len(calls) > blows_up_at else out

    monkeypatch.setattr(F, "cross_entropy", loss)
    spec = {"trainer": "recall", "arm": "gpt2", "lr": 1e-2, "seed": 0, "steps": 4,
            "config": {"model": "gpt2", "width": 16, "layers": 1, "heads": 2, "task": {"vocab_size": 16, "pairs": [2]},
                       "recipe": {"batch_size": 4, "warmup_steps": 1}}}
    (tmp_path / "run.json").write_text(json.dumps(spec))
    assert _run("issue49_nan_check.py", ["--run", str(tmp_path)], monkeypatch) == 0
    assert said in capsys.readouterr().out
    assert F.cross_entropy is loss  # the check puts back the loss it wrapped


@pytest.mark.slow
def test_migrate_arms_lays_the_committed_arms_out_as_a_sweep_number_for_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # docs/structure/README.md: docs/sweeps/arms is docs/structure/arms_seed21 in the runner's layout, 0 values changed
    out = tmp_path / "arms"
    assert _run("migrate_arms.py", ["--output_dir", str(out)], monkeypatch) == 0
    assert "8 runs, complete: True" in capsys.readouterr().out
    assert len(list(out.glob("runs/*/*/seed_21/steps_*/result.json"))) == 8
    assert _run("compare_reports.py", ["docs/structure/arms_seed21/arms.json", str(out / "arms.json"), "--strings"],
                monkeypatch) == 0
    assert "3491 values" in capsys.readouterr().out and (out / "results.json").is_file()
    assert _run("migrate_arms.py", ["--output_dir", str(out)], monkeypatch) == 2  # nothing is overwritten


def test_issue20_parameter_counts_match_the_note(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # docs/notes/issue20_regime.md, "Parameter counts": the fair pair at width 48 (meta device: no weights).
    assert _run("issue20_regime.py", ["count", "hub_configs/spen-f48", "hub_configs/gpt2-f48"], monkeypatch) == 0
    out = capsys.readouterr().out
    assert "{'total': 124032, 'non_embedding': 74880}" in out
    assert "{'total': 130172, 'non_embedding': 74876}" in out


def test_lm_regime_runs_and_counts_the_notes_parameters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "lm_regime.json"
    argv = ["--out", str(out), "--threads", "1", "--widths", "32", "--batches", "1", "--repeats", "1"]
    assert _run("issue14_lm_regime.py", argv, monkeypatch) == 0
    rows = json.loads(out.read_text())["rows"]
    # docs/notes/issue14-phase1.md, "Throughput": SPEN w32 66,304 parameters, GPT-2 w32 66,432.
    assert {r["arch"]: r["params"] for r in rows} == {"spen": 66304, "gpt2": 66432}
    assert all(r["tokens_per_s"] > 0 for r in rows)


def test_exploration_ab_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import benchmarks.common
    from benchmarks.common import Timing
    from modeling_spen.modeling_spen import SparseFFN

    # The script swaps SparseFFN.forward for its A/B and leaves the last one in place: restore it afterwards.
    monkeypatch.setattr(SparseFFN, "forward", SparseFFN.forward)
    # One untimed-free call per measurement instead of 2 + 10: the script's path, not its timing, is under test.
    monkeypatch.setattr(benchmarks.common, "measure", lambda fn, repeats, warmup=1: (fn(), Timing([1e-3]))[1])
    assert _run("issue14/exploration/ab.py", [], monkeypatch) == 0
    out = capsys.readouterr().out
    assert all(f"{name} min ms" in out for name in ("old", "new", "dense (no mask, for scale)"))


def test_exploration_docstrings_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # A two-file "stdlib": one docstring over 40 characters counts; the tests folder is skipped.
    (tmp_path / "test").mkdir()
    doc = '"""' + "x" * 50 + '"""\n'
    (tmp_path / "mod.py").write_text(doc + "def f():\n    " + doc)
    (tmp_path / "test" / "skipped.py").write_text(doc)
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": str(tmp_path)})
    assert _run("issue14/exploration/docstrings.py", [], monkeypatch) == 0
    assert "1 files (tests and site-packages excluded), 2 docstrings > 40 chars, 100 chars" in capsys.readouterr().out


def test_exploration_ex2_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    argv = ["--steps", "2", "--every", "2", "--batch", "4", "--evalpairs", "2,4", "--warmup", "1"]
    assert _run("issue14/exploration/ex2.py", argv, monkeypatch) == 0
    (row,) = _json_lines(capsys.readouterr().out)
    assert row["step"] == 2 and set(row["acc"]) == {"2", "4"}


@pytest.mark.slow
def test_exploration_rr_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # rr.py keeps the recipe's 50 warm-up steps: 51 is its shortest run.
    assert _run("issue14/exploration/rr.py", ["gpt2", "1e-3", "0", "51"], monkeypatch) == 0
    (row,) = _json_lines(capsys.readouterr().out)
    assert row["name"] == "gpt2" and 1 <= row["steps"] <= 51 and set(row["acc"]) == {"2", "4", "8", "16"}


@pytest.mark.slow
def test_exploration_rr2_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    argv = ["linear", "1e-3", "0", "3", "4", json.dumps({"warmup_steps": 1})]
    assert _run("issue14/exploration/rr2.py", argv, monkeypatch) == 0
    (row,) = _json_lines(capsys.readouterr().out)
    assert row["name"] == "linear" and row["batch"] == 4 and set(row["acc"]) == {"2", "4", "8", "16"}
