"""`accelerate launch --cpu --num_processes 2 train.py` trains two processes (Accelerate's simple launcher starts
one; train.py becomes torchrun of itself), and a launch whose process count cannot be read is refused in one line
with the torchrun command that works."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

import train
import training.accelerator
from tests.train_testkit import metrics, run_cmd, tokenizer_dir, write_config


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs torch.distributed with gloo")
def test_accelerate_launch_cpu_two_processes_trains_two(tmp_path):
    cfg = write_config(tmp_path / "train.yaml", max_steps=2, save_steps=2, eval_steps=2, tokenizer_name=tokenizer_dir())
    accelerate = shutil.which("accelerate")
    launcher = [accelerate] if accelerate else [sys.executable, "-m", "accelerate.commands.launch"]
    run = run_cmd([*launcher, *([] if not accelerate else ["launch"]), "--cpu", "--num_processes", "2",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "train.py", "--config", str(cfg), "--output_dir", str(tmp_path / "out")], timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    assert ("train.py: accelerate launch started 1 process for 2 on the CPU; running torchrun --standalone "
            f"--nproc_per_node 2 train.py --config {cfg} --output_dir {tmp_path / 'out'}") in run.stdout
    assert "MULTI_CPU x 2 processes" in run.stdout + run.stderr
    assert [m["step"] for m in metrics(tmp_path / "out") if "loss" in m] == [1, 2]


def test_a_launch_of_unknown_size_is_refused_with_the_command_that_works(tmp_path, monkeypatch, capsys):
    for key, value in {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(training.accelerator, "_launcher_processes", lambda: None)
    cfg = write_config(tmp_path / "train.yaml", max_steps=1)
    assert train.cli(["--config", str(cfg), "--output_dir", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        "train.py: error: accelerate launch started 1 process, not several; run: torchrun --standalone "
        f"--nproc_per_node N train.py --config {cfg} --output_dir {tmp_path / 'out'}\n")
    assert not (tmp_path / "out").exists()
