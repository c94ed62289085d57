"""eval.compare on your own text (--text FILE, as eval.gap and eval.probes take it), NAME= labels in its table, and a
task whose data is not written yet: one line naming `python -m eval.make_data all`, from eval.compare and lm_eval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ema_boundary import corpus
from tests.eval_testkit import REPO, write_local_task, write_micro_config

OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
MAKE_DATA = ("outputs/eval_data/pydoc_validation.jsonl: no such file (the task's data is written by `python -m "
             "eval.make_data all`; run it first, from the folder lm_eval runs in)")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    import train

    tmp = tmp_path_factory.mktemp("spen")
    out = train.main(["--config", str(write_micro_config(tmp / "micro.yaml")), "--output_dir", str(tmp / "run")])
    return out / "final"


def _notes(folder: Path) -> Path:
    paras = [f"Note {i}: the tide came in at {i % 12} o'clock and the boats went out." for i in range(40)]
    path = folder / "my notes.txt"
    path.write_text("\n\n".join(paras) + "\n")
    return path


@pytest.mark.slow
def test_compare_scores_your_text_under_your_labels(checkpoint, tmp_path, capsys):
    from eval.compare import main

    text = _notes(tmp_path)
    held_out = [ex["text"] for ex in corpus.documents([str(text)], "validation", 10)]
    by_hand = write_local_task(tmp_path / "tasks", "by_hand", held_out)  # the hand-written YAML and JSONL
    out = tmp_path / "cmp"
    assert main(["--model_name_or_path", f"mine={checkpoint}", "--text", str(text), "--tasks", "by_hand",
                 "--include_path", str(by_hand), "--batch_size", "2", "--output_dir", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    assert list(result["models"]) == ["mine"] and result["tasks"] == ["by_hand", "text_my_notes"]
    assert result["text"] == {"task": "text_my_notes", "file": str(text), "split": "validation", "val_every": 10,
                              "test_every": 0, "documents": 4, "characters": sum(map(len, held_out))}
    metrics = result["models"]["mine"]["metrics"]
    assert metrics["text_my_notes"] == pytest.approx(metrics["by_hand"])  # the same documents, the same scores
    table = (out / "table.md").read_text()
    assert "| task | metric | `mine` |" in table and "| text_my_notes | bits_per_byte |" in table
    assert f"task text_my_notes: {text}, validation documents (4," in table
    capsys.readouterr()
    # Two models under one label, and a text that is not there: one line each, nothing written.
    assert main(["--model_name_or_path", f"a={checkpoint}", "a=gpt2", "--text", str(text),
                 "--output_dir", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == ("python -m eval.compare: error: --model_name_or_path: two models are labelled "
                                       "'a'; give each its own NAME=\n")
    assert main(["--model_name_or_path", str(checkpoint), "--text", str(tmp_path / "none.txt"),
                 "--output_dir", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == (f"python -m eval.compare: error: --text {tmp_path / 'none.txt'}: no such file "
                                       "(or give 'embedded')\n")
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_a_task_before_make_data_fails_in_one_line_naming_it(checkpoint, tmp_path, monkeypatch, capsys):
    from eval.compare import main

    monkeypatch.chdir(tmp_path)  # the task files are read relative to the working folder: none here
    assert main(["--model_name_or_path", str(checkpoint), "--tasks", "pydoc_val", "--output_dir", "cmp"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"python -m eval.compare: error: --tasks: {MAKE_DATA}"
    assert not (tmp_path / "cmp").exists()


@pytest.mark.slow
def test_lm_eval_before_make_data_fails_in_one_line_naming_it(checkpoint, tmp_path):
    run = subprocess.run([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
                          f"pretrained={checkpoint},trust_remote_code=True", "--tasks", "pydoc_val", "--include_path",
                          str(REPO / "eval" / "tasks"), "--batch_size", "8"],
                         cwd=tmp_path, env=OFFLINE, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.stderr.strip().splitlines()[-1] == MAKE_DATA
