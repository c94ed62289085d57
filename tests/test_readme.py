"""Every ```python block of README.md runs as written, each in a fresh process with no terminal (stdin closed).

Two documented substitutions keep it fast and offline, and change no code of the block: the 130M config
(``hub_configs/spen-130m``) is replaced by the tiny one of the same architecture (``hub_configs/spen-tiny``), and
the trained folder the README names (``outputs/spen-tiny/final``, what ``python train.py --config
hub_configs/spen-tiny/train.yaml`` writes) by a folder that train.py trains here in a few steps. The blocks run in
a temporary working folder (what they save stays there), with the repository on PYTHONPATH as in a clone's root.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import train
from tests.train_testkit import ROOT, tokenizer_dir, write_config

BLOCKS = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
SUBSTITUTIONS = {"hub_configs/spen-130m": str(ROOT / "hub_configs/spen-tiny")}  # + the trained folder (below)
TRAINED = "outputs/spen-tiny/final"


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("readme")
    cfg = write_config(tmp / "train.yaml", model_name_or_path=str(ROOT / "hub_configs/spen-tiny"), max_steps=2,
                       save_steps=2, eval_steps=2, tokenizer_name=tokenizer_dir())
    return str(train.main(["--config", str(cfg), "--output_dir", str(tmp / "spen-tiny")]) / "final")


def test_the_substitutions_apply():
    # A renamed path in the README would silently run the 130M model or miss the trained folder.
    assert BLOCKS, "README.md has no ```python block"
    for old in (*SUBSTITUTIONS, TRAINED):
        assert any(old in block for block in BLOCKS), old


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index, trained_folder, tmp_path):
    code = BLOCKS[index]
    for old, new in {**SUBSTITUTIONS, TRAINED: trained_folder}.items():
        code = code.replace(old, new)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, f"README.md python block {index + 1}:\n{code}\n{result.stderr[-3000:]}"
    assert "Do you wish to run the custom code" not in result.stdout + result.stderr


@pytest.mark.slow
def test_the_first_train_command_trains_on_text_as_it_comes(tmp_path):
    # The README's first train.py command, on a file shaped like TinyShakespeare (repeated one-line speeches) in
    # place of my.txt, with no other flag than a shorter run.
    import random
    import shlex

    from tests.test_train_text_shapes import shakespeare
    from tests.train_testkit import run_cmd

    command = next(line for line in (ROOT / "README.md").read_text().splitlines()
                   if line.startswith("python train.py") and "--data my.txt" in line)
    text, _ = shakespeare(random.Random(0))
    (tmp_path / "my.txt").write_bytes(text)
    argv = [str(tmp_path / "my.txt") if a == "my.txt" else str(tmp_path / a) if a == "outputs/my-spen" else a
            for a in shlex.split(command)]
    run = run_cmd([sys.executable, *argv[1:], "--max_steps", "2", "--eval_steps", "2", "--save_steps", "2"])
    assert run.returncode == 0, run.stderr[-3000:]
    assert "held-out document(s) left out of validation and test: short texts" in run.stdout
    assert (tmp_path / "outputs/my-spen/final/model.safetensors").is_file()
