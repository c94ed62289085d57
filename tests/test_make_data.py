"""eval.make_data's output folder: this tool's own, parts added freely, replaced only when asked, foreign refused.

(The content of the task files is tested with the tasks, in tests/test_eval_tasks.py.)"""

import json
from pathlib import Path

from ema_boundary.io import MARKER, output_owner
from eval.make_data import main


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_parts_are_added_replaced_with_the_flag_and_kept(tmp_path: Path, capsys) -> None:
    from grammar_probe.dataset import build_dataset, write_dataset

    corpus = write_dataset(build_dataset(train_size=20, validation_size=5, test_size=10), tmp_path / "corpus")
    out = tmp_path / "data"
    assert main(["pydoc", "--output_dir", str(out)]) == 0
    assert output_owner(out) == "eval.make_data" and len(_lines(out / "pydoc_validation.jsonl")) == 8
    # Adding the other part to the tool's own folder replaces nothing: no flag needed, the first part kept.
    assert main(["grammar", "--dataset", str(corpus), "--output_dir", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "grammar", "pydoc_validation.jsonl"]
    capsys.readouterr()
    # Writing a part that is there: only with --overwrite_output_dir; the other part survives the rewrite.
    assert main(["pydoc", "--output_dir", str(out)]) == 2
    assert "pass --overwrite_output_dir" in capsys.readouterr().err
    grammar = (out / "grammar" / "test_deep.jsonl").read_text()
    assert main(["pydoc", "--output_dir", str(out), "--overwrite_output_dir"]) == 0
    assert (out / "grammar" / "test_deep.jsonl").read_text() == grammar


def test_a_foreign_folder_and_the_working_folder_are_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("keep")
    assert main(["pydoc", "--out", str(foreign), "--overwrite_output_dir"]) == 2
    assert "is not an output of eval.make_data" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["precious.txt"]
    monkeypatch.chdir(foreign)
    assert main(["pydoc", "--output_dir", "."]) == 2
    assert "is the working folder" in capsys.readouterr().err
