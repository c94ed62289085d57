"""--report_to, --run_name and --tracker_project_name reach Accelerate's trackers; a tracker that is not installed
is refused in one line; settings go to trackers typed; the resume bookkeeping stays in metrics.jsonl."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import train
import train_config
import training.accelerator
from tests.train_testkit import ENV, ROOT, metrics, tokenizer_dir, write_config

# A stand-in for wandb with what Accelerate's WandBTracker calls, writing each call to $FAKE_WANDB_LOG.
FAKE_WANDB = '''
import json, os

def _write(call, **data):
    with open(os.environ["FAKE_WANDB_LOG"], "a") as f:
        f.write(json.dumps({"call": call, **data}) + "\\n")

class _Config:
    def update(self, values, allow_val_change=False):
        _write("config", values=values)

class _Run:
    def log(self, values, step=None, **kwargs):
        _write("log", values=values, step=step)

    def finish(self):
        _write("finish")

config = _Config()

def init(project=None, **kwargs):
    _write("init", project=project, **kwargs)
    return _Run()
'''


@pytest.mark.slow
def test_report_to_wandb_with_a_run_name_and_project_gets_typed_settings_and_measurements(tmp_path):
    site = tmp_path / "site"
    (site / "wandb").mkdir(parents=True)
    (site / "wandb/__init__.py").write_text(FAKE_WANDB)
    (site / "wandb-0.0.1.dist-info").mkdir()  # Accelerate reads the package's metadata to call it installed
    (site / "wandb-0.0.1.dist-info/METADATA").write_text("Metadata-Version: 2.1\nName: wandb\nVersion: 0.0.1\n")
    calls_file = tmp_path / "wandb.jsonl"
    cfg = write_config(tmp_path / "train.yaml", max_steps=3, eval_steps=3, save_steps=3, tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    env = {**ENV, "PYTHONPATH": f"{ROOT}{os.pathsep}{site}", "FAKE_WANDB_LOG": str(calls_file)}
    run = subprocess.run([sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out), "--report_to",
                          "wandb", "--run_name", "first-try", "--tracker_project_name", "lobsters"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    calls = [json.loads(line) for line in calls_file.read_text().splitlines()]
    assert calls[0] == {"call": "init", "project": "lobsters", "name": "first-try"}
    (config,) = [c["values"] for c in calls if c["call"] == "config"]
    assert config["learning_rate"] == 3e-3 and config["max_steps"] == 3 and config["shuffle"] is True
    assert config["data"] == "embedded" and config["run_name"] == "first-try"
    logged = [c for c in calls if c["call"] == "log"]
    assert [c["step"] for c in logged if "loss" in c["values"]] == [1, 2, 3]
    assert any("val_loss" in c["values"] for c in logged)
    assert not any(k in c["values"] for c in logged for k in ("batch_crc32", "data_pos"))
    assert all("batch_crc32" in m and "data_pos" in m for m in metrics(out) if "loss" in m)  # kept for resumes
    assert calls[-1] == {"call": "finish"}


def test_a_tracker_that_is_not_installed_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(training.accelerator, "get_available_trackers", lambda: [])
    cfg = write_config(tmp_path / "train.yaml", max_steps=1, tokenizer_name=tokenizer_dir())
    assert train.cli(["--config", str(cfg), "--output_dir", str(tmp_path / "out"), "--report_to", "wandb"]) == 2
    err = capsys.readouterr().err
    assert err == ("train.py: error: report_to wandb: the wandb package is not installed (pip install wandb); "
                   "metrics.jsonl is written without it\n")
    assert not (tmp_path / "out").exists()
    # 'all' is every tracker installed (here none: metrics.jsonl alone); unknown names are refused by the settings.
    assert training.accelerator.trackers({"report_to": "all"}) == []
    monkeypatch.setattr(training.accelerator, "get_available_trackers", lambda: [train_config.LoggerType("wandb")])
    assert training.accelerator.trackers({"report_to": "all"}) == ["wandb"]
    with pytest.raises(train_config.ConfigError, match=r"--report_to: report_to must be 'none', 'all' or tracker "
                                                       r"names, comma-separated \(aim, tensorboard, wandb"):
        train_config.read_yaml(cfg, {"report_to": "wandb,neptune"})
