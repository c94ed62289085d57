"""One table of bad inputs for every entry point: one clear line naming the field or file, a non-zero
exit, and nothing half-written.

Each row builds its bad input in a fresh folder, runs the entry point in-process, and checks:

- the exit status (or the exception, for Python APIs) is the documented one;
- stderr (or the exception message) is exactly one line and contains the named field or file;
- the output path was not created and no temporary file or folder was left beside it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.train_testkit import ROOT, tokenizer_dir, write_config

UNWRITABLE = Path("/proc/ema-boundary-test-output")  # the kernel refuses to create anything there, even for root


@dataclass
class Row:
    """``run(tmp) -> exit status``; ``needle`` must appear in the one line; ``out`` must not appear."""

    run: Callable[[Path], int]
    needle: str
    status: int
    out: str = "out"  # relative to the row's folder; an absolute path is taken as is


# ------------------------------------------------------------------------------------------------ helpers
def _binary(path: Path) -> Path:
    path.write_bytes(bytes(range(256)) * 4)
    return path


def _train(tmp: Path, *flags: str, config: Path | None = None) -> int:
    import train

    cfg = config or write_config(tmp / "train.yaml", max_steps=2, tokenizer_name=tokenizer_dir())
    argv = ["train.py", "--config", str(cfg), *flags]
    if "--output_dir" not in flags:
        argv += ["--output_dir", str(tmp / "out")]
    old, sys.argv = sys.argv, argv
    try:
        return train.cli()
    finally:
        sys.argv = old


def _grammar(*argv: str) -> int:
    from grammar_probe.__main__ import main

    return main(list(argv))


def _bad_model_config(tmp: Path) -> Path:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "spen", "hidden_size": ')  # truncated JSON
    return write_config(tmp / "train.yaml", model_name_or_path=str(folder), max_steps=2)


def _corrupt_dataset(tmp: Path) -> Path:
    """A grammar-corpus folder whose Arrow file has been cut in half."""
    from grammar_probe.dataset import build_dataset

    folder = tmp / "ds"
    build_dataset(seed=0, train_size=20, validation_size=5, test_size=5).save_to_disk(str(folder))
    arrow = next(folder.glob("train/*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])
    return folder


def _text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


ROWS: dict[str, Row] = {
    # train.py: settings, data, model config, output folder
    "train: missing YAML": Row(lambda t: _train(t, config=t / "none.yaml"), "none.yaml: no such file", 2),
    "train: binary YAML": Row(lambda t: _train(t, config=_binary(t / "bin.yaml")), "bin.yaml", 2),
    "train: wrong type": Row(lambda t: _train(t, config=write_config(t / "c.yaml", learning_rate="fast")),
                             "learning_rate must be float", 2),
    "train: out of range": Row(lambda t: _train(t, "--max_steps", "0"), "--max_steps: max_steps must be a positive", 2),
    "train: empty data file": Row(lambda t: _train(t, "--data", str(_text(t / "e.txt", ""))),
                                  "e.txt: file is empty", 2),
    "train: binary data file": Row(lambda t: _train(t, "--data", str(_binary(t / "b.txt"))),
                                   "b.txt:2: invalid UTF-8", 2),
    "train: config.json not JSON": Row(lambda t: _train(t, config=_bad_model_config(t)),
                                       "config.json: not a model config", 2),
    "train: output path is a file": Row(lambda t: _train(t, "--output_dir", str(_text(t / "f", "x"))),
                                        "exists and is not a folder", 2, out="f/final"),
    "train: duplicated YAML key": Row(
        lambda t: _train(t, config=_text(t / "c.yaml", f"model_name_or_path: {ROOT}/hub_configs/gpt2-tiny\nlr: 3e-3\n"
                                                        "max_steps: 2\nlr: 3e+3\n")),
        "c.yaml:4: lr is written twice (lines 2 and 4); keep one", 2),
    "train: block beyond the model's positions": Row(lambda t: _train(t, "--block_size", "512"),
                                                     "block_size 512 is more than the 256 positions", 2),
    "train: data file given twice": Row(
        lambda t: _train(t, "--data", str(_text(t / "e.txt", "\n\n".join(f"Paragraph {i}: " + "a long passage. " * 14
                                                                          for i in range(31)))),
                         str(t / "e.txt"), "--val_every", "5"),
        "e.txt: document 4, also document 35 (validation): 13 training document(s) have the text of a validation",
        2),
    "train: unwritable folder": Row(lambda t: _train(t, "--output_dir", str(UNWRITABLE)), "cannot write in /proc", 2,
                                    out=str(UNWRITABLE)),
    # python -m grammar_probe build | run
    "grammar build: output path is a file": Row(
        lambda t: _grammar("build", "--out", str(_text(t / "out", "x")), "--train-size", "20"),
        "exists and is not a folder", 2, out="out/dataset_dict.json"),
    "grammar build: out of range": Row(lambda t: _grammar("build", "--out", str(t / "out"), "--train-size", "0"),
                                       "--train_size/--train-size: must be a positive integer", 2),
    "grammar run: missing dataset": Row(
        lambda t: _grammar("run", "--dataset", str(t / "none"), "--out", str(t / "out")), "does not exist", 2),
    "grammar run: truncated Arrow file": Row(
        lambda t: _grammar("run", "--dataset", str(_corrupt_dataset(t)), "--out", str(t / "out")),
        "ds is not a saved DatasetDict", 2),
    "grammar run: wrong type": Row(
        lambda t: _grammar("run", "--dataset", str(t), "--out", str(t / "out"), "--seeds", "x"),
        "--seeds: must be a positive integer", 2),
}


def _module(module: str, *argv: str) -> int:
    """``python -m MODULE ARGV`` in-process (its ``main``)."""
    import importlib

    mod = importlib.import_module(module)  # a package's command is its __main__'s main (eval.depth, eval.ablation)
    return (mod if hasattr(mod, "main") else importlib.import_module(f"{module}.__main__")).main(list(argv))


def _truncated_checkpoint(tmp: Path) -> Path:
    """A saved tiny GPT-2 whose model.safetensors has been cut in half."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging

    folder = tmp / "model"
    logging.disable_progress_bar()  # the fixture's own progress is not the entry point's output
    try:
        GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=64, n_positions=32)).save_pretrained(
            folder)
    finally:
        logging.enable_progress_bar()
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return folder


def _not_json_model(tmp: Path) -> Path:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    return folder


ROWS.update({
    # python -m eval.compare | eval.ablation | eval.probes, ema-boundary report
    "compare: missing model folder": Row(
        lambda t: _module("eval.compare", "--model_name_or_path", str(t / "none"), "--tasks", "pydoc_val",
                          "--output_dir", str(t / "out")), "--model_name_or_path", 2),
    "compare: out of range": Row(
        lambda t: _module("eval.compare", "--models", "gpt2", "--tasks", "pydoc_val", "--limit", "-3", "--out",
                          str(t / "out")), "--limit", 2),
    "ablation: missing YAML": Row(lambda t: _module("eval.ablation", "--config", str(t / "none.yaml"), "--out",
                                                    str(t / "out")), "none.yaml: no such file", 2),
    "ablation: out of range": Row(lambda t: _module("eval.ablation", "--config", str(ROOT / "hub_configs/spen-w32/"
                                                    "train.yaml"), "--seeds", "0", "--out", str(t / "out")),
                                  "--seeds: must be a positive integer", 2),
    "probes: truncated model.safetensors": Row(
        lambda t: _module("eval.probes.__main__", "--model_name_or_path", str(_truncated_checkpoint(t)),
                          "--output_dir", str(t / "out")), "model.safetensors: unreadable weights", 2),
    "probes: config.json not JSON": Row(
        lambda t: _module("eval.probes.__main__", "--model_name_or_path", str(_not_json_model(t)), "--output_dir",
                          str(t / "out")), "config.json: not valid JSON", 2),
    "report: binary corpus": Row(
        lambda t: _module("eval.report", "report", "--corpus", str(_binary(t / "b.txt")), "--out", str(t / "out")),
        "--corpus", 2),
    "report: output path is a file": Row(
        lambda t: _module("eval.report", "report", "--out", str(_text(t / "f", "x"))), "exists and is not a folder", 2,
        out="f/index.md"),
    "report: wrong type in the plan": Row(
        lambda t: _module("eval.report", "report", "--plan", str(_text(t / "c.yaml", "workers: two\n")), "--out",
                          str(t / "out")), "workers must be int", 2),
})


def _leftovers(folder: Path, before: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in before)


@pytest.mark.parametrize("name", ROWS)
def test_bad_input_one_line_nonzero_exit_nothing_written(name: str, tmp_path: Path, capsys) -> None:
    row = ROWS[name]
    work = tmp_path / "row"
    work.mkdir()
    try:
        status = row.run(work)
    except SystemExit as e:  # argparse errors
        status = e.code
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip() and not ln.startswith("NO x ")]
    assert status == row.status, (name, status, captured.err[-2000:])
    assert len(lines) == 1 and "Traceback" not in captured.err, (name, captured.err[-2000:])
    assert row.needle in lines[0], (name, lines[0])
    out = Path(row.out) if Path(row.out).is_absolute() else work / row.out
    assert not out.exists(), (name, "output written")
    expected = {"train.yaml", "c.yaml", "bin.yaml", "e.txt", "b.txt", "model", "f", "out", "ds"}
    assert not [n for n in _leftovers(work, expected) if n.startswith(".")], (name, _leftovers(work, expected))


# -------------------------------------------------------------- output folders of eval.compare, ablation, ...
# Each tool that writes a folder: a folder holding a file of the user's is refused and the file survives; the
# working folder is refused up front; the tool's own earlier output is replaced only with --overwrite_output_dir.
OUTPUT_TOOLS: dict[str, tuple[str, Callable[[str], list[str]], str]] = {
    # tool -> (module whose main runs, argv for an output folder, a file of the tool's own output)
    "eval.compare": ("eval.compare", lambda out: ["--model_name_or_path", "gpt2", "--tasks", "pydoc_val",
                                                  "--output_dir", out], "results.json"),
    "eval.ablation": ("eval.ablation", lambda out: ["--config", str(ROOT / "hub_configs/spen-w32/train.yaml"),
                                                    "--output_dir", out], "ablation.json"),  # writes a sweep
    "eval.probes": ("eval.probes.__main__", lambda out: ["--model_name_or_path", "gpt2", "--output_dir", out],
                    "content_probes.json"),
    "eval.make_data": ("eval.make_data", lambda out: ["pydoc", "--output_dir", out], "pydoc_validation.jsonl"),
    "eval.ngram": ("eval.ngram", lambda out: ["--output_dir", out], "ngram.json"),
    "eval.gap": ("eval.gap", lambda out: ["--model_name_or_path", "gpt2", "gpt2", "--text", "embedded",
                                          "--output_dir", out], "gap.json"),
    "eval.depth": ("eval.depth", lambda out: ["--model_name_or_path", "gpt2", "--output_dir", out], "depth.json"),
    # The experiment runner (and its aliases: eval.scale, eval.ablation, eval.depth --config): its own earlier sweep
    # is continued, never replaced.
    "ema-boundary sweep": ("eval.sweep.cli", lambda out: [str(ROOT / "hub_configs/sweeps/ladder.yaml"),
                                                          "--output_dir", out], "results.json"),
}
OUTPUT_CASES = {"foreign folder": "is not an output of", "working folder": "is the working folder",
                "own output without the flag": "pass --overwrite_output_dir"}


@pytest.mark.parametrize("case", OUTPUT_CASES)
@pytest.mark.parametrize("tool", OUTPUT_TOOLS)
def test_output_folders_are_never_taken_from_the_user(tool: str, case: str, tmp_path: Path, capsys,
                                                      monkeypatch) -> None:
    from ema_boundary.io import MARKER

    module, argv, own_file = OUTPUT_TOOLS[tool]
    folder = tmp_path / "out"
    folder.mkdir()
    if case == "own output without the flag":
        (folder / MARKER).write_text(json.dumps({"tool": tool}))
        (folder / own_file).write_text("earlier output")
    else:
        (folder / "precious.txt").write_text("the user's")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.chdir(folder if case == "working folder" else tmp_path)
    status = _module(module, *argv("." if case == "working folder" else str(folder)))
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    expected = OUTPUT_CASES[case]
    if tool == "ema-boundary sweep" and case == "own output without the flag":
        expected = "continue it with --resume_from"
    if tool == "eval.ablation" and case == "own output without the flag":  # an alias of the sweep since issue 32
        expected = "holds an output of eval.ablation, not of ema-boundary sweep"
    assert status == 2 and len(lines) == 1 and expected in lines[0], (tool, case, lines)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before, (tool, case)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], (tool, case)  # nothing beside it either


# ----------------------------------------------------------------------------------- Python entry points
def _tiny_spen():
    from modeling_spen import SPENConfig, SPENForCausalLM

    torch.manual_seed(0)
    config = SPENConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, intermediate_size=32, num_attention_heads=4,
                        bos_token_id=0, eos_token_id=0)
    return SPENForCausalLM(config).eval()


API_ROWS: dict[str, tuple[Callable[[], object], str]] = {
    "SPENConfig: wrong type": (lambda: __import__("modeling_spen").SPENConfig(hidden_size="64"), "hidden_size"),
    "SPENConfig: out of range": (lambda: __import__("modeling_spen").SPENConfig(trace_rates=[0.5, 1.2]), "trace_rates"),
    "SPENConfig: unknown name": (lambda: __import__("modeling_spen").SPENConfig(predictor="gru"), "predictor"),
    "forward: token id out of range": (lambda: _tiny_spen()(torch.tensor([[1, 50]])), "input_ids must lie in"),
    "forward: mask of the wrong shape": (lambda: _tiny_spen()(torch.tensor([[1, 2]]), attention_mask=torch.ones(1, 3)),
                                         "attention_mask must have shape"),
    "generate: float ids": (lambda: _tiny_spen().generate(torch.tensor([[1.0, 2.0]]), max_new_tokens=2),
                            "input_ids must be an integer tensor"),
    "generate: empty prompt": (lambda: _tiny_spen().generate(torch.zeros(1, 0, dtype=torch.long), max_new_tokens=2,
                                                            bos_token_id=None, pad_token_id=0), "empty"),
}


@pytest.mark.parametrize("name", API_ROWS)
def test_python_entry_points_raise_one_line_naming_the_field(name: str) -> None:
    call, needle = API_ROWS[name]
    with pytest.raises(ValueError) as err:
        call()
    message = str(err.value)
    assert "\n" not in message and needle in message, message


def test_the_table_covers_every_kind_of_bad_input() -> None:
    # The list: missing, empty, binary, truncated or corrupted files, wrong types, out-of-range
    # values, an output path that is a file, an unwritable folder; at least 15 in all.
    names = " ".join([*ROWS, *API_ROWS])
    for kind in ("missing", "empty", "binary", "not JSON", "truncated", "wrong type", "out of range",
                 "output path is a file", "unwritable"):
        assert kind in names, kind
    assert len(ROWS) + len(API_ROWS) >= 15
    assert json.dumps(sorted(ROWS)) and ROOT.is_dir()


# ------------------------------------------------------------------- ema-boundary report's output folder
# The report writes a folder too: a file of the user's survives, '.' is refused up front, and an earlier report
# is replaced only with --overwrite_output_dir (checked before the plan, the corpus or any stage is read).
@pytest.mark.parametrize("case", [*OUTPUT_CASES, "own output with the flag"])
def test_the_report_never_takes_an_output_folder_from_the_user(case: str, tmp_path: Path, capsys,
                                                               monkeypatch) -> None:
    from ema_boundary.io import MARKER

    folder = tmp_path / "out"
    folder.mkdir()
    if case.startswith("own output"):
        (folder / MARKER).write_text(json.dumps({"tool": "ema-boundary report"}))
        (folder / "report.json").write_text("{}")
    else:
        (folder / "precious.txt").write_text("the user's")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.chdir(folder if case == "working folder" else tmp_path)
    argv = ["report", "--output_dir", "." if case == "working folder" else str(folder)]
    if case == "own output with the flag":  # the folder may be replaced: the (bad) plan is what is refused
        argv += ["--overwrite_output_dir", "--plan", str(_text(tmp_path / "c.yaml", "workers: 0\n"))]
    status = _module("eval.report", *argv)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    needle = OUTPUT_CASES.get(case, "workers must be positive")
    assert status == 2 and len(lines) == 1 and needle in lines[0], (case, lines)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before, case
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "c.yaml") == ["out"], case
