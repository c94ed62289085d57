"""Faults a user meets beyond a bad setting (issue 37), one row each: weights that do not fit their config.json
(another architecture's, another width's), a torn model.safetensors, a grammar build far beyond memory.

Every row runs the entry point in-process and checks: exit status 2; stderr (captured at the file descriptor, so
transformers' own load report would count) is one line naming the folder, file or flag; nothing was written.
The train.py faults (signals, locks, resumes, torn checkpoints) are in tests/test_bad_inputs.py and test_train*.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import GPT2LMHeadModel

from eval.probes.models import ModelError
from tests.test_gap import _gpt2, _gpt2_config, _paragraphs, _save, _spen


# ------------------------------------------------------------------------------------- broken model folders
def _foreign(tmp: Path) -> Path:
    """The issue's case: a SPEN checkpoint whose config.json was replaced by a GPT-2 one."""
    folder = _spen(tmp / "foreign")
    shutil.copy(_gpt2(tmp / "donor") / "config.json", folder / "config.json")
    return folder


def _resized(tmp: Path) -> Path:
    """GPT-2 weights of width 32 under the config of width 16: every name fits, no shape does."""
    folder = _save(GPT2LMHeadModel(_gpt2_config(n_embd=32)), tmp / "resized")
    shutil.copy(_gpt2(tmp / "donor") / "config.json", folder / "config.json")
    return folder


def _truncated(tmp: Path) -> Path:
    folder = _gpt2(tmp / "truncated")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size * 2 // 3])
    return folder


# folder builder -> (the file the line names, relative to the folder; the problem it states)
BROKEN: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "SPEN weights under a GPT-2 config.json": (_foreign, "", "the weights do not fit its config.json"),
    "weights of another width": (_resized, "", "of another shape (transformer."),
    "a truncated model.safetensors": (_truncated, "model.safetensors", "unreadable weights"),
}


def _module(module: str, *argv: str) -> int:
    mod = importlib.import_module(module)  # a package's command is its __main__'s main (eval.depth, eval.ablation)
    return (mod if hasattr(mod, "main") else importlib.import_module(f"{module}.__main__")).main(list(argv))


# tool -> argv given (the broken folder, a sound folder, the work folder); each writes into work/out
TOOLS: dict[str, Callable[[Path, Path, Path], int]] = {
    "eval.gap": lambda bad, good, t: _module("eval.gap", "--model_name_or_path", str(bad), str(good), "--text",
                                             str(_paragraphs(t)), "--output_dir", str(t / "out")),
    "eval.compare": lambda bad, good, t: _module("eval.compare", "--model_name_or_path", str(good), str(bad),
                                                 "--tasks", "pydoc_val", "--output_dir", str(t / "out")),
    "eval.probes": lambda bad, good, t: _module("eval.probes.__main__", "--model_name_or_path", str(good), str(bad),
                                                "--output_dir", str(t / "out")),
    "eval.depth": lambda bad, good, t: _module("eval.depth", "--model_name_or_path", str(bad), "--output_dir",
                                               str(t / "out")),
}


def _one_line(capfd: pytest.CaptureFixture) -> str:
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


@pytest.mark.parametrize("case", BROKEN)
@pytest.mark.parametrize("tool", TOOLS)
def test_every_loader_refuses_weights_that_do_not_fit(tool: str, case: str, tmp_path: Path,
                                                      capfd: pytest.CaptureFixture) -> None:
    build, file, problem = BROKEN[case]
    bad, good = build(tmp_path), _gpt2(tmp_path / "good")
    capfd.readouterr()  # the set-up's own output (save_pretrained's progress)
    status = TOOLS[tool](bad, good, tmp_path)
    line = _one_line(capfd)
    assert status == 2, (tool, case, line)
    assert f"{bad / file if file else bad}: " in line and problem in line, (tool, case, line)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out*")), (tool, case)


# The report scores its runs with these (the ladder's mean loss, the ablation's trace rates): the same loader.
REPORT_LOADS: dict[str, Callable[[Path], object]] = {
    "eval.scale.mean_loss": lambda f: importlib.import_module("eval.scale").mean_loss(f, torch.zeros(2, 9).long()),
    "eval.ablation.rates_moved": lambda f: importlib.import_module("eval.ablation").rates_moved(f),
}


@pytest.mark.parametrize("load", REPORT_LOADS)
def test_the_reports_loads_refuse_weights_that_do_not_fit(load: str, tmp_path: Path) -> None:
    bad = _foreign(tmp_path)
    with pytest.raises(ModelError) as err:
        REPORT_LOADS[load](bad)
    assert str(err.value).startswith(f"{bad}: the weights do not fit") and "\n" not in str(err.value)


# ------------------------------------------------------------------------------ a build beyond memory
def test_a_grammar_build_far_beyond_memory_is_refused_up_front(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from grammar_probe.__main__ import main

    out = tmp_path / "out"
    assert main(["build", "--output_dir", str(out), "--train-size", str(10**9)]) == 2  # ~6 TB: nothing starts
    line = _one_line(capfd)
    assert line.startswith("error: --train_size 1000000000: the build needs about ") and "GiB available" in line
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_the_memory_check_names_what_needs_the_most(tmp_path: Path, capfd: pytest.CaptureFixture,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from grammar_probe import dataset
    from grammar_probe.__main__ import main

    monkeypatch.setattr(dataset, "available_memory", lambda: 2**30)  # a 1 GiB job
    need = dataset.build_memory()  # the defaults: the ceilings' 200,000-sentence sample dominates (~2 GiB)
    assert sum(need.values()) > 2**30 and max(need, key=need.__getitem__) == "window_sentences"
    assert main(["build", "--output_dir", str(tmp_path / "out")]) == 2
    assert "--window_sentences 200000: " in _one_line(capfd) and not (tmp_path / "out").exists()
    # Sizes grow the estimate in proportion; deeper sentences are longer, so they cost more.
    assert dataset.build_memory(train_size=20000)["train_size"] == pytest.approx(2 * need["train_size"], rel=1e-6)
    assert dataset.build_memory(max_depth=4)["train_size"] > need["train_size"]


def test_available_memory_is_what_the_kernel_says_at_most() -> None:
    from grammar_probe.dataset import available_memory

    have = available_memory()
    total = next(int(ln.split()[1]) * 1024 for ln in Path("/proc/meminfo").read_text().splitlines()
                 if ln.startswith("MemTotal:"))
    assert have is not None and 0 < have <= total
