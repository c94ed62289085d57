"""Bad input fails before training with one line naming the file (and line), and writes nothing."""

from __future__ import annotations

import json
import shutil
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import train
import train_config
from ema_boundary import corpus
from ema_boundary.io import LOCK, MARKER
from tests.train_testkit import ROOT, run_cmd, write_config


def _files(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "bad_utf8.txt").write_bytes(b"first paragraph\n\nsecond\nthird \xff\xfe line\n")
    lines = [json.dumps({"text": "fine"}), json.dumps({"body": "no text"})]
    (tmp_path / "no_text.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "bad_json.jsonl").write_text('{"text": "fine"}\n{"text": \n')
    (tmp_path / "one_word.txt").write_text("\n\n  Supercalifragilistic \n")
    (tmp_path / "blank.txt").write_text(" \n\t\n \n")
    (tmp_path / "bom_crlf_bad.txt").write_bytes(b"\xef\xbb\xbffirst\r\nsecond \xc3\x28\r\n")
    pq.write_table(pa.table({"body": ["no text column"]}), tmp_path / "no_text.parquet")
    pq.write_table(pa.table({"text": ["fine", None]}), tmp_path / "null.parquet")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 this is not parquet PAR1")


CASES = {
    "empty file": (["--data", "{tmp}/empty.txt"], "{tmp}/empty.txt: file is empty"),
    "invalid UTF-8": (["--data", "{tmp}/bad_utf8.txt"], "{tmp}/bad_utf8.txt:4: invalid UTF-8"),
    "JSON line without text": (["--data", "{tmp}/no_text.jsonl"],
                               '{tmp}/no_text.jsonl:2: JSON line without a "text"'),
    "invalid JSON": (["--data", "{tmp}/bad_json.jsonl"], "{tmp}/bad_json.jsonl:2: invalid JSON"),
    "missing path": (["--data", "{tmp}/nowhere.txt"], "{tmp}/nowhere.txt: no such file"),
    "one word": (["--data", "{tmp}/one_word.txt"],
                 "{tmp}/one_word.txt: 1 document(s) in the data; need at least 2 (train + validation)"),
    "whitespace only": (["--data", "{tmp}/blank.txt"], "{tmp}/blank.txt: contains no text"),
    "invalid UTF-8 after a BOM, CRLF": (["--data", "{tmp}/bom_crlf_bad.txt"],
                                        "{tmp}/bom_crlf_bad.txt:2: invalid UTF-8"),
    "parquet without text": (["--data", "{tmp}/no_text.parquet"],
                             '{tmp}/no_text.parquet: no "text" column (columns: body)'),
    "parquet null text": (["--data", "{tmp}/null.parquet"], '{tmp}/null.parquet: row 1: "text" is null'),
    "corrupt parquet": (["--data", "{tmp}/corrupt.parquet"], "{tmp}/corrupt.parquet: not a readable parquet"),
    "unknown embedded part": (["--data", "embedded:docs"], "data: 'embedded:docs' is not an embedded corpus"),
    "tokenizer too big": (["--tokenizer", "{tmp}/big_tokenizer"],
                          "{tmp}/big_tokenizer: tokenizer vocabulary of 2000 tokens exceeds the model's "
                          f"vocab_size 1024 ({ROOT}/hub_configs/gpt2-tiny/config.json)"),
    "unknown setting": (["--config", "{tmp}/typo.yaml"],
                        "{tmp}/typo.yaml:3: unknown setting 'learning_rat'"),
    "missing config": (["--config", "{tmp}/none.yaml"], "{tmp}/none.yaml: no such file"),
}


@pytest.fixture(scope="module")
def big_tokenizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok") / "big_tokenizer"
    corpus.train_bpe(corpus.embedded_documents(corpus.EMBEDDED_PYDOC), 2000).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("case", CASES)
def test_bad_input_one_line_nothing_written(tmp_path, case, big_tokenizer, capsys, monkeypatch):
    _files(tmp_path)
    (tmp_path / "big_tokenizer").symlink_to(big_tokenizer)
    cfg = write_config(tmp_path / "train.yaml")
    (tmp_path / "typo.yaml").write_text(f"model_name_or_path: {ROOT}/hub_configs/gpt2-tiny\nmax_steps: 2\n"
                                        "learning_rat: 0.1\n")
    flags, expected = CASES[case]
    flags = [f.format(tmp=tmp_path) for f in flags]
    argv = ["--config", str(cfg), *flags, "--output_dir", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", ["train.py", *argv])

    assert train.cli() == train_config.EXIT_BAD_INPUT == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"train.py: error: {expected.format(tmp=tmp_path)}"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_command_line_error_has_no_traceback(tmp_path):
    cfg = write_config(tmp_path / "train.yaml")
    result = run_cmd([sys.executable, "train.py", "--config", str(cfg), "--data",
                      str(tmp_path / "nowhere.jsonl"), "--output_dir", str(tmp_path / "out")])
    assert result.returncode == 2
    assert result.stderr == f"train.py: error: {tmp_path}/nowhere.jsonl: no such file\n"
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_not_train_py_output_is_refused(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    cfg = write_config(tmp_path / "train.yaml")
    for extra in ([], ["--overwrite_output_dir"]):
        monkeypatch.setattr(sys, "argv", ["train.py", "--config", str(cfg), "--output_dir", str(out), *extra])
        assert train.cli() == 2
        assert capsys.readouterr().err == (f"train.py: error: {out}: exists, is not empty and is not an output of "
                                           "train.py; nothing was written (choose a new or empty --output_dir)\n")
    assert [p.name for p in out.iterdir()] == ["precious.txt"] and (out / "precious.txt").read_text() == "mine"


@pytest.mark.slow
def test_resume_with_other_data_settings_is_refused(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    cfg = write_config(tmp_path / "train.yaml")
    saved = train_config.load_config(train_config.parse_args(["--config", str(cfg)])) | {"block_size": 32}
    (out / "train_config.json").write_text(json.dumps(saved))
    train_config.write_marker(out, ["train.py"])  # an earlier run of train.py with a checkpoint (of an older
    (out / "checkpoints" / "step_3").mkdir(parents=True)  # train.py: its settings are the run's)
    (out / "checkpoints" / "step_3" / "data_state.json").write_text(json.dumps({"step": 3, "pos": [0, 0, 0]}))
    monkeypatch.setattr(sys, "argv", ["train.py", "--config", str(cfg), "--output_dir", str(out),
                                      "--resume_from_checkpoint", "latest"])
    assert train.cli() == 2
    assert capsys.readouterr().err == (f"train.py: error: {out}/train_config.json: the run to resume used another "
                                       "block_size (32 in the checkpoint, 64 now); resume with the checkpoint's "
                                       "block_size, or start over with --overwrite_output_dir\n")
    # Nothing written but the (empty) lock file, which stays: removing it could let two writers in.
    assert sorted(p.name for p in out.iterdir()) == [MARKER, LOCK, "checkpoints", "train_config.json"]
    # Without a checkpoint nothing was trained: the run starts fresh under its corrected settings.
    shutil.rmtree(out / "checkpoints")
    monkeypatch.setattr(sys, "argv", ["train.py", "--config", str(cfg), "--output_dir", str(out), "--max_steps", "1"])
    assert train.cli() == 0
    assert json.loads((out / "train_config.json").read_text())["block_size"] == 64