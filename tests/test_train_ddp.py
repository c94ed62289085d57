"""Two processes (torchrun, gloo, Accelerate MULTI_CPU) match one process with the same global batch."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

import train
from tests.train_testkit import ROOT, metrics, run_cmd, tokenizer_dir, write_config


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs torch.distributed with gloo")
@pytest.mark.parametrize("model", ["gpt2-tiny", "spen-tiny"])
def test_two_process_ddp_matches_one_process(tmp_path, model):
    # 8 sequences per step: one process accumulates 2 micro-batches of 4, two processes take 4 each.
    cfg = write_config(tmp_path / "train.yaml", model_name_or_path=str(ROOT / "hub_configs" / model),
                       max_steps=6, save_steps=6, eval_steps=6, tokenizer_name=tokenizer_dir())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = metrics(train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "one")]))
    finally:
        torch.set_num_threads(threads)

    torchrun = shutil.which("torchrun") or f"{sys.executable} -m torch.distributed.run"
    ddp = run_cmd([*torchrun.split(), "--standalone", "--nproc_per_node", "2", "train.py",
                   "--config", str(cfg), "--output_dir", str(tmp_path / "two")])
    assert ddp.returncode == 0, ddp.stderr[-4000:]
    assert "MULTI_CPU x 2 processes" in ddp.stdout + ddp.stderr
    double = metrics(tmp_path / "two")

    assert [m["step"] for m in double] == [m["step"] for m in single] == list(range(1, 7))
    for one, two in zip(single, double, strict=True):
        assert two["loss"] == pytest.approx(one["loss"], abs=1e-5), one["step"]
        assert two["batch_crc32"] == one["batch_crc32"]  # the same rows in the same order
        assert two["data_pos"] == one["data_pos"]
    assert double[-1]["val_loss"] == pytest.approx(single[-1]["val_loss"], abs=1e-5)
    assert (tmp_path / "two/final/model.safetensors").is_file()
