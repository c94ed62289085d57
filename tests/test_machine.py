"""The record of the machine (ema_boundary.machine) that report.json and every sweep's results.json carry."""

from __future__ import annotations

import subprocess
from importlib import metadata

import torch

from ema_boundary.machine import REPO, git_commit, machine_record


def test_the_record_names_cpu_threads_commit_and_versions(tmp_path):
    record = machine_record()
    assert record["cpu"] and record["cpu"] != "unknown"
    assert record["cores"] >= 1 and record["torch_threads"] == torch.get_num_threads()
    assert record["versions"] == {"python": record["versions"]["python"], "torch": torch.__version__,
                                  "transformers": metadata.version("transformers"),
                                  "datasets": metadata.version("datasets"),
                                  "accelerate": metadata.version("accelerate"), "lm-eval": metadata.version("lm-eval")}
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:  # a clone: the commit the code ran from
        assert record["git"]["commit"] == head.stdout.strip() and isinstance(record["git"]["dirty"], bool)
    assert git_commit(tmp_path) is None  # not a checkout: no commit, not a wrong one
    load = record["load_average"]  # Linux always has one: three non-negative numbers, 1, 5 and 15 minutes
    assert len(load) == 3 and all(isinstance(x, float) and x >= 0 for x in load)


def test_no_load_average_is_none_not_a_failure(monkeypatch):
    import os

    from ema_boundary import machine

    def unavailable():
        raise OSError("no load average")

    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert machine.load_average() is None and machine.machine_record()["load_average"] is None
