"""What clusters and people do to a run (issue 37): preemption signals, two writers, changed settings on resume,
torn and damaged files, a failed first attempt, Ctrl-C during --seeds. Each ends in one clear line and loses
nothing; the signals resume to the losses of an uninterrupted run."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import train
from ema_boundary.io import LOCK_INFO
from tests.train_testkit import ENV, ROOT, metrics, run_cmd, tokenizer_dir, write_config

STEPS = 30


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic in-process as in the subprocesses (OMP_NUM_THREADS=1)
    yield
    torch.set_num_threads(threads)


def _start(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "train.py", *argv], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_steps(proc: subprocess.Popen, log: Path, steps: int) -> None:
    deadline = time.monotonic() + 240
    while not (log.exists() and log.read_text().count("\n") >= steps):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The config of the signal tests and its uninterrupted run's metrics."""
    root = tmp_path_factory.mktemp("faults")
    cfg = write_config(root / "train.yaml", max_steps=STEPS, save_steps=100, eval_steps=STEPS,
                       tokenizer_name=tokenizer_dir())
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return cfg, metrics(train.main(["--config", str(cfg), "--output_dir", str(root / "ref")]))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_a_preemption_signal_checkpoints_prints_the_resume_command_and_resumes_exactly(tmp_path, reference, signum):
    cfg, ref = reference
    out = tmp_path / "out"
    proc = _start("--config", str(cfg), "--output_dir", str(out))
    _wait_for_steps(proc, out / "metrics.jsonl", 3)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=240)

    assert proc.returncode == 128 + signum, stderr[-3000:]  # 143 for SIGTERM, 138 for SIGUSR1, as a shell reports
    step = metrics(out)[-1]["step"]
    assert 3 <= step < STEPS
    name = signal.Signals(signum).name
    resume = f"python train.py --config {cfg} --output_dir {out} --resume_from_checkpoint latest"
    assert stderr.splitlines()[-1] == (f"train.py: interrupted by {name}; checkpoint saved in "
                                       f"{out}/checkpoints/step_{step}; resume with: {resume}"), stderr[-3000:]
    assert "Traceback" not in stderr and not (out / LOCK_INFO).exists()

    again = run_cmd([sys.executable, *shlex.split(resume)[1:]])
    assert again.returncode == 0, again.stderr[-3000:]
    got = metrics(out)
    assert [m["step"] for m in got] == list(range(1, STEPS + 1))
    for r, g in zip(ref, got, strict=True):
        assert g["loss"] == pytest.approx(r["loss"], abs=1e-6), r["step"]
        assert (g["batch_crc32"], g["data_pos"]) == (r["batch_crc32"], r["data_pos"])
    assert got[-1]["val_loss"] == pytest.approx(ref[-1]["val_loss"], abs=1e-6)


@pytest.mark.slow
def test_one_writer_per_folder_and_a_killed_writers_lock_is_taken_over(tmp_path, reference):
    cfg, _ = reference
    out = tmp_path / "out"
    first = _start("--config", str(cfg), "--output_dir", str(out), "--max_steps", "400", "--save_steps", "1000")
    _wait_for_steps(first, out / "metrics.jsonl", 2)
    second = run_cmd([sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out)])
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1, second.stderr[-3000:]
    assert lines[0].startswith(f"train.py: error: {out}: another train.py is writing this folder (pid {first.pid} on ")
    assert "train.py --config" in lines[0]

    first.kill()  # SIGKILL: no cleanup; the OS releases the lock, the record of its holder stays
    first.communicate(timeout=60)
    assert json.loads((out / LOCK_INFO).read_text())["pid"] == first.pid
    log = out / "metrics.jsonl"
    log.write_text(log.read_text() + '{"step": 99, "lo')  # and a line torn by the kill
    resumed = run_cmd([sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out), "--max_steps",
                       "4", "--eval_steps", "4"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"the run of pid {first.pid} on " in resumed.stderr and "taken over" in resumed.stderr
    assert "dropped its last line, torn by an interrupted write" in resumed.stderr
    assert [m["step"] for m in metrics(out)] == [1, 2, 3, 4]  # no checkpoint was saved: it started over
    assert not (out / LOCK_INFO).exists()


def _run(argv: list[str]) -> int:
    return train.cli(argv)


@pytest.mark.slow
def test_a_resume_under_other_settings_is_refused_or_recorded(tmp_path, capsys):
    cfg = write_config(tmp_path / "train.yaml", max_steps=4, save_steps=2, eval_steps=4, tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    argv = ["--config", str(cfg), "--output_dir", str(out)]
    assert _run(argv) == 0
    before = (out / "metrics.jsonl").read_text()
    capsys.readouterr()

    assert _run([*argv, "--learning_rate", "0.01", "--max_steps", "6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"train.py: error: {out}/checkpoints/step_4: the run to resume used another learning_rate (0.003 "
                   "in the checkpoint, 0.01 now); resume with the checkpoint's learning_rate, or start over with "
                   "--overwrite_output_dir"]
    # The model's config.json edited: refused, naming the field.
    model = tmp_path / "model"
    shutil.copytree(ROOT / "hub_configs/gpt2-tiny", model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "n_head": 2}))
    assert _run([*argv, "--model_name_or_path", str(model), "--max_steps", "6"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"train.py: error: {model}/config.json: n_head is 2, the checkpoint "
                                               f"{out}/checkpoints/step_4 was trained with 4"), err
    # The same model under another folder name is the same model.
    (model / "config.json").write_text(json.dumps(config))
    assert (out / "metrics.jsonl").read_text() == before  # nothing written by the refused resumes

    # --max_steps may change: recorded with its step in train_config.json and the model card.
    assert _run([*argv, "--model_name_or_path", str(model), "--max_steps", "6"]) == 0
    assert "max_steps changed from 4 to 6 at step 4" in capsys.readouterr().out
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["max_steps"] == 6 and {"step": 4, "setting": "max_steps", "from": 4, "to": 6} in saved["changes"]
    assert "- changed on resume at step 4: max_steps 4 -> 6" in (out / "final/README.md").read_text()
    assert [m["step"] for m in metrics(out)] == list(range(1, 7))


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_is_named_and_the_one_before_it_resumes(tmp_path, capsys):
    cfg = write_config(tmp_path / "train.yaml", max_steps=8, save_steps=3, eval_steps=8, tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    argv = ["--config", str(cfg), "--output_dir", str(out)]
    assert _run(argv) == 0  # checkpoints step_6 and step_8 kept
    ref = metrics(out)
    weights = out / "checkpoints/step_8/model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # truncated
    capsys.readouterr()
    assert _run(argv) == 0
    captured = capsys.readouterr()
    assert f"{out}/checkpoints/step_8: cannot resume from it (model.safetensors has 1,000 bytes" in captured.err
    assert f"resumed from {out}/checkpoints/step_6 at step 6" in captured.out
    got = metrics(out)
    assert [m["step"] for m in got] == list(range(1, 9))
    for r, g in zip(ref, got, strict=True):  # steps 7 and 8 redone, to the same losses
        assert g["loss"] == pytest.approx(r["loss"], abs=1e-6), r["step"]


@pytest.mark.slow
def test_a_run_that_failed_before_its_first_checkpoint_does_not_block_its_corrected_rerun(tmp_path, capsys,
                                                                                          monkeypatch):
    cfg = write_config(tmp_path / "train.yaml", max_steps=2, save_steps=2, eval_steps=2, tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    argv = ["--config", str(cfg), "--output_dir", str(out)]
    # A block beyond the model's positions is refused up front: nothing written.
    assert _run([*argv, "--block_size", "512"]) == 2
    assert "block_size 512 is more than the 256 positions of the model" in capsys.readouterr().err
    assert not out.exists()

    def fail(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(train, "train_losses", fail)
    with pytest.raises(RuntimeError):  # fails in its first step, after train_config.json is written
        train.main([*argv, "--block_size", "32"])
    assert (out / "train_config.json").is_file() and not (out / "checkpoints").exists()
    monkeypatch.undo()
    assert _run(argv) == 0  # the corrected rerun (another block_size) starts fresh
    assert json.loads((out / "train_config.json").read_text())["block_size"] == 64


@pytest.mark.slow
def test_ctrl_c_during_seeds_says_what_the_seed_folders_hold(tmp_path):
    cfg = write_config(tmp_path / "train.yaml", max_steps=400, save_steps=1000, eval_steps=400,
                       tokenizer_name=tokenizer_dir())
    out = tmp_path / "ens"
    proc = _start("--config", str(cfg), "--seeds", "0,1", "--output_dir", str(out))
    _wait_for_steps(proc, out / "seed_1" / "metrics.jsonl", 3)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 130, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    assert "nothing was written" not in last and "Traceback" not in stderr, stderr[-3000:]
    steps = max(len(metrics(out / f"seed_{s}")) for s in (0, 1))
    assert last == (f"train.py: interrupted; {out}/seed_* hold {steps} logged steps each and no checkpoint (an "
                    "ensemble run does not resume: rerun it with --overwrite_output_dir)")


def test_documents_shared_with_validation_are_left_out_of_training_with_the_flag(tmp_path, capsys):
    text = tmp_path / "notes.txt"
    text.write_text("\n\n".join(f"Paragraph {i} says " + "something about the weather and the sea " * 6
                                for i in range(31)))
    cfg = write_config(tmp_path / "train.yaml", data=[str(text), str(text)], val_every=5, block_size=16,
                       max_steps=2, save_steps=2, eval_steps=2, max_eval_samples=2, tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    assert _run(["--config", str(cfg), "--output_dir", str(out)]) == 2
    assert "13 training document(s) have the text of a validation or test document" in capsys.readouterr().err
    assert not out.exists()
    assert _run(["--config", str(cfg), "--output_dir", str(out), "--drop_shared_documents"]) == 0
    assert f"13 training document(s) left out: their text is held out ({text}: document 4" in capsys.readouterr().out
    # 62 documents: 13 validation, 49 training, 13 of them left out
    assert "passes over the 36 training documents" in (out / "final/README.md").read_text()
