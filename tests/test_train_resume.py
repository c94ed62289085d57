"""SIGKILL, resume, SIGKILL mid-checkpoint, resume: the same losses and the same batches as one run. Ctrl-C: a
checkpoint, the command that resumes, exit status 130."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

import train
from tests.train_testkit import ENV, ROOT, metrics, run_cmd, run_python, tokenizer_dir, write_config
from training.checkpoint import find_checkpoint

# Runs train.main in a real process that kills itself with SIGKILL (no cleanup, like a preempted node):
# after logging step KILL_AFTER_LOG, or inside the checkpoint save of step KILL_IN_SAVE, after Accelerate
# has written the whole state but before train.py renames the folder into place.
KILLER = """
import os, signal, sys
import train
from accelerate import Accelerator

kill_after_log, kill_in_save = int(sys.argv[1]), int(sys.argv[2])
log, save = train.JSONLTracker.log, Accelerator.save_state

def log_then_die(self, values, step=None, **kwargs):
    log(self, values, step, **kwargs)
    if step == kill_after_log:
        os.kill(os.getpid(), signal.SIGKILL)

def save_then_die(self, output_dir=None, **kwargs):
    save(self, output_dir, **kwargs)
    if output_dir.endswith(f".tmp_step_{kill_in_save}"):
        os.kill(os.getpid(), signal.SIGKILL)

train.JSONLTracker.log, Accelerator.save_state = log_then_die, save_then_die
train.main(sys.argv[3:])
"""


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic in-process as in the subprocesses (OMP_NUM_THREADS=1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt2-tiny", "spen-tiny"])
def test_two_kills_and_resumes_match_an_uninterrupted_run(tmp_path, model):
    # 16 steps, a checkpoint every 3, the last 2 kept
    cfg = write_config(tmp_path / "train.yaml", model_name_or_path=str(ROOT / "hub_configs" / model),
                       tokenizer_name=tokenizer_dir())
    reference = metrics(train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "ref")]))

    out = tmp_path / "killed"
    args = ["--config", str(cfg), "--output_dir", str(out), "--resume_from_checkpoint", "latest"]
    first = run_python(KILLER, "7", "0", *args)  # dies after step 7: latest checkpoint is step_6
    assert first.returncode == -9, first.stderr[-3000:]
    assert [m["step"] for m in metrics(out)] == list(range(1, 8))

    second = run_python(KILLER, "0", "12", *args)  # resumes at 6, dies while saving step 12
    assert second.returncode == -9, second.stderr[-3000:]
    assert "resumed from" in second.stdout + second.stderr
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert ckpts == [".tmp_step_12", "step_6", "step_9"]  # the half-saved one does not count
    assert find_checkpoint(out, "latest", True, False).name == "step_9"

    resumed = metrics(train.main(args))  # resumes at 9 and runs to the end (in-process: no kill needed)

    assert [m["step"] for m in resumed] == [m["step"] for m in reference] == list(range(1, 17))
    for ref, got in zip(reference, resumed, strict=True):
        assert got["loss"] == pytest.approx(ref["loss"], abs=1e-6), ref["step"]
        assert got["batch_crc32"] == ref["batch_crc32"], f"different batch at step {ref['step']}"
        assert got["data_pos"] == ref["data_pos"]
    assert resumed[-1]["val_loss"] == pytest.approx(reference[-1]["val_loss"], abs=1e-6)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_15", "step_16"]


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_prints_the_resume_command_and_exits_130(tmp_path):
    cfg = write_config(tmp_path / "train.yaml", max_steps=30, save_steps=100, eval_steps=30,
                       tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out)], cwd=ROOT,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    log = out / "metrics.jsonl"
    while not (log.exists() and log.read_text().count("\n") >= 3):  # mid-run: 3 steps logged
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=240)

    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    step = metrics(out)[-1]["step"]
    assert 3 <= step < 30
    resume = f"python train.py --config {cfg} --output_dir {out} --resume_from_checkpoint latest"
    assert stderr.splitlines()[-1] == (f"train.py: interrupted; checkpoint saved in {out}/checkpoints/step_{step}; "
                                       f"resume with: {resume}")
    state = json.loads((out / f"checkpoints/step_{step}/data_state.json").read_text())
    assert state["step"] == step and state["pos"] == metrics(out)[-1]["data_pos"]
    assert not (out / "final").exists()

    # The printed command, run as printed, continues from that step to the end.
    again = run_cmd([sys.executable, *shlex.split(resume)[1:]])
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed from {out}/checkpoints/step_{step} at step {step}" in again.stdout
    assert [m["step"] for m in metrics(out)] == list(range(1, 31))
    assert (out / "final/model.safetensors").is_file()


def test_resume_command_drops_what_would_start_over(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["train.py"])
    interrupt = train.Interrupt(["--config", "a b.yaml", "--overwrite_output_dir", "--resume_from_checkpoint", "x",
                                 "--lr", "0.1"])
    assert interrupt.resume_command() == ("python train.py --config 'a b.yaml' --lr 0.1 --resume_from_checkpoint "
                                          "latest")
    interrupt.processes = 2
    assert interrupt.resume_command().startswith("torchrun --standalone --nproc_per_node 2 train.py --config")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "no")  # under accelerate launch
    assert interrupt.resume_command().startswith("accelerate launch --num_processes 2 train.py --config")
    assert interrupt.message(None) == "train.py: interrupted before training started; nothing was written"
    with pytest.raises(KeyboardInterrupt):  # before the first step, Ctrl-C stops at once
        interrupt._handle(signal.SIGINT, None)
    interrupt.armed = True
    interrupt._handle(signal.SIGINT, None)
    assert interrupt.requested
    with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C does not wait for the checkpoint
        interrupt._handle(signal.SIGINT, None)


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs torch.distributed with gloo")
def test_ctrl_c_under_torchrun_saves_one_checkpoint_and_prints_one_line(tmp_path):
    # Ctrl-C at a terminal signals the whole foreground group: the launcher and both processes.
    cfg = write_config(tmp_path / "train.yaml", max_steps=400, save_steps=1000, eval_steps=400,
                       tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    torchrun = shutil.which("torchrun") or f"{sys.executable} -m torch.distributed.run"
    proc = subprocess.Popen([*torchrun.split(), "--standalone", "--nproc_per_node", "2", "train.py", "--config",
                             str(cfg), "--output_dir", str(out)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    log, deadline = out / "metrics.jsonl", time.monotonic() + 240
    while not (log.exists() and log.read_text().count("\n") >= 3):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=240)

    step = metrics(out)[-1]["step"]
    lines = [ln for ln in stderr.splitlines() if ln.startswith("train.py: interrupted")]
    assert lines == [f"train.py: interrupted; checkpoint saved in {out}/checkpoints/step_{step}; resume with: "
                     f"torchrun --standalone --nproc_per_node 2 train.py --config {cfg} --output_dir {out} "
                     "--resume_from_checkpoint latest"], stderr[-3000:]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [f"step_{step}"]
    assert json.loads((out / f"checkpoints/step_{step}/data_state.json").read_text())["step"] == step
