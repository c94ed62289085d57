"""What clusters and careless users do to a sweep (issue 46), one test each: stop signals to the process group, to
the sweep alone or to one of its workers (local pool of 1 and 2, submitit-local), kill -9 of the sweep, broken
result.json / run.json / sweep.json, checkpoints that cannot be resumed, data changed between resumes, arm names
that leave the folder, bad launcher arguments and seeds, runs that diverge, and models that read later tokens.

Every case ends in one line (no traceback), loses nothing, and a resumed sweep gives the uninterrupted sweep's
numbers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ema_boundary.io import LOCK_INFO
from eval.sweep.cli import main as sweep_main
from tests.test_sweep import corpus_file, scores, tiny_plan  # noqa: F401  (corpus_file: a fixture)
from tests.train_testkit import ENV, ROOT

STEPS = 150  # long enough that a stop signal finds every run mid-training, short enough to resume in seconds
LONG = {"budgets": [STEPS], "seeds": [0, 1, 2], "rate": {"lr_grid": [3.0e-3]}, "analysis": "none",
        "base": {"save_steps": 1000, "eval_steps": 1000}}  # no checkpoint but the one a stop saves


def _one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def long_plan(tmp_path_factory: pytest.TempPathFactory, corpus_file: str) -> tuple[Path, dict]:  # noqa: F811
    """The signal tests' plan (three seeds of 300 steps) and its uninterrupted sweep's scores."""
    tmp = tmp_path_factory.mktemp("long")
    plan = tiny_plan(tmp, corpus_file, **LONG)
    assert sweep_main([str(plan), "--output_dir", str(tmp / "whole")]) == 0
    return plan, scores(tmp / "whole")


def _start(plan: Path, out: Path, launcher: str) -> subprocess.Popen:
    flags = ["--workers", launcher] if launcher != "submitit-local" else ["--launcher", launcher, "--workers", "2"]
    return subprocess.Popen([sys.executable, "-m", "eval.sweep", str(plan), "--output_dir", str(out), *flags],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: the group a terminal or Slurm signals


def _steps(metrics: Path) -> int:
    try:
        return metrics.read_text().count("\n")
    except FileNotFoundError:  # replaced while it was listed
        return 0


def _live(out: Path) -> list[Path]:
    """The run folders whose train.py has logged steps and is not finished."""
    return [m.parent.parent for m in out.glob("runs/**/train/metrics.jsonl")
            if _steps(m) >= 2 and not (m.parent.parent / "result.json").exists()]


def _wait_for_live_runs(proc: subprocess.Popen, out: Path, n: int) -> list[Path]:
    deadline = time.monotonic() + 240
    while len(live := _live(out)) < n:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
        time.sleep(0.05)
    return live


def _group(pgid: int) -> list[str]:
    """The processes of a process group that still run (zombies, dead and waiting to be reaped, do not)."""
    ps = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [line for line in ps.splitlines() if line.split() and "Z" not in line.split()[1]]


def _group_left(pgid: int, seconds: float = 10) -> list[str]:
    """:func:`_group` once it is empty or ``seconds`` have passed: a process can still be on its way out when the sweep
    returns (under load a child was seen exiting, `[python]` in state R, CI 2026-12-07), or after a kill -9."""
    deadline = time.monotonic() + seconds
    while (left := _group(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.slow
@pytest.mark.parametrize("signum, target, launcher", [
    (signal.SIGINT, "group", "2"),  # Ctrl-C in a terminal
    (signal.SIGUSR1, "group", "2"),  # Slurm's --signal=USR1 warning (it killed multiprocessing's resource tracker)
    (signal.SIGTERM, "sweep", "1"),  # scancel of the sweep's process: the run in this process
    (signal.SIGTERM, "worker", "2"),  # one worker alone: the whole sweep stops
    (signal.SIGINT, "group", "submitit-local"),
    (signal.SIGUSR1, "sweep", "submitit-local"),
], ids=lambda v: v.name if isinstance(v, signal.Signals) else str(v))
def test_a_stop_signal_saves_every_live_run_stops_the_sweep_and_resumes_exactly(
        tmp_path: Path, long_plan: tuple[Path, dict], signum: int, target: str, launcher: str) -> None:
    plan, whole = long_plan
    out = tmp_path / "out"
    proc = _start(plan, out, launcher)
    try:
        live = _wait_for_live_runs(proc, out, 1 if launcher == "1" else 2)
        if target == "group":
            os.killpg(proc.pid, signum)
        elif target == "sweep":
            os.kill(proc.pid, signum)
        else:  # the worker training the first live run (its train.py holds the run folder's lock)
            os.kill(json.loads((live[0] / "train" / LOCK_INFO).read_text())["pid"], signum)
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signum, stderr[-3000:]
    line = _one_line(stderr)  # no traceback, no "resources might leak"
    assert line.startswith(f"ema-boundary sweep: stopped by {'Ctrl-C' if signum == signal.SIGINT else signum.name}")
    assert f"--resume_from {out}" in line
    runs = sorted(out.glob("runs/linear/*/seed_*/steps_*"))
    # A run can finish before a slow neighbour logs its second step (a loaded machine): the next run then starts
    # before the signal, legitimately. Every other run that started is one of those live when the signal came.
    finished = [r for r in runs if (r / "result.json").exists()]
    started = [r for r in runs if (r / "train").is_dir() and r not in finished]
    assert len(runs) == 3 and sorted(started) == sorted(live)  # a run queued at the signal never started
    assert len(finished) + len(live) <= 3
    for run in started:  # one checkpoint each (the plan saves none of its own), no result, nothing locked
        assert [c.name for c in (run / "train" / "checkpoints").glob("step_*")] != [], run
        assert len(list((run / "train" / "checkpoints").glob("step_*"))) == 1 and not (run / "result.json").exists()
        assert not (run / "train" / LOCK_INFO).exists()
    stopped = json.loads((out / "sweep.json").read_text())["invocations"][-1]["stopped"]
    assert stopped["signal"] == signum.name and sorted(stopped["runs"]) == sorted(str(r.relative_to(out))
                                                                                   for r in started)
    assert "stopped by" in stdout  # a line per stopped run
    assert not (left := _group_left(proc.pid)), left  # no process left
    assert sweep_main(["--resume_from", str(out), "--workers", "1"]) == 0
    assert scores(out) == whole


@pytest.mark.slow
def test_kill_9_of_the_sweep_leaves_no_process_and_no_lock(tmp_path: Path, long_plan: tuple[Path, dict]) -> None:
    plan, whole = long_plan
    out = tmp_path / "out"
    proc = _start(plan, out, "2")
    try:
        live = _wait_for_live_runs(proc, out, 2)
        proc.kill()  # SIGKILL to the sweep's process alone: its workers are orphans
        proc.communicate(timeout=60)
        assert not (left := _group_left(proc.pid)), left
    finally:
        subprocess.run(["pkill", "-KILL", "-g", str(proc.pid)], check=False)
    for run in live:  # the workers stopped their runs well: the locks released, a checkpoint each
        assert not (run / "train" / LOCK_INFO).exists() and list((run / "train" / "checkpoints").glob("step_*"))
    assert sweep_main(["--resume_from", str(out), "--workers", "1"]) == 0
    assert scores(out) == whole


# ------------------------------------------------------------------------------------------ broken files


@pytest.fixture
def finished(tmp_path: Path, corpus_file: str) -> tuple[Path, dict]:  # noqa: F811
    """A finished two-seed sweep (one rate, 4 steps, a checkpoint every 2) and its scores."""
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [3.0e-3]})
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    return out, scores(out)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["", '{"val_loss": 4.', "[1, 2]"], ids=["empty", "truncated", "not-an-object"])
def test_an_unreadable_result_is_reported_summarised_around_and_trained_again(
        finished: tuple[Path, dict], damage: str, capsys: pytest.CaptureFixture) -> None:
    out, before = finished
    broken = out / "runs/linear/lr_0.003/seed_1/steps_4/result.json"
    broken.write_text(damage)
    capsys.readouterr()
    assert sweep_main(["--summarize", str(out)]) == 0
    err = capsys.readouterr().err
    assert _one_line(err).startswith(f"ema-boundary sweep: {broken}: not ")
    results = json.loads((out / "results.json").read_text())
    assert results["missing"] == ["runs/linear/lr_0.003/seed_1/steps_4"] and "runs/linear/lr_0.003/seed_1/steps_4/" \
        "result.json" in results["unreadable"]
    assert scores(out)["linear"]["4"] == {"0": before["linear"]["4"]["0"]}  # the rest summarised
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert f"{broken}: not " in capsys.readouterr().out  # said, and the run trained again
    assert scores(out) == before and "unreadable" not in json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_an_unreadable_run_json_is_written_again(finished: tuple[Path, dict], capsys: pytest.CaptureFixture) -> None:
    out, before = finished
    spec = out / "runs/linear/lr_0.003/seed_0/steps_4/run.json"
    text = spec.read_text()
    spec.write_text(text[:20])
    capsys.readouterr()
    assert sweep_main(["--summarize", str(out)]) == 0
    assert f"{spec}: not readable JSON" in _one_line(capsys.readouterr().err)
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert f"{spec}: not readable JSON" in capsys.readouterr().out
    assert json.loads(spec.read_text()) == json.loads(text) and scores(out) == before
    spec.write_text("")  # and a run to train again whose spec is unreadable
    (spec.parent / "result.json").unlink()
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert json.loads(spec.read_text()) == json.loads(text) and scores(out) == before


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["", '{"plan": "x", "identity": {'])
def test_an_unreadable_sweep_json_is_refused_on_resume_and_summarised_around(
        finished: tuple[Path, dict], damage: str, capsys: pytest.CaptureFixture) -> None:
    out, before = finished
    record = out / "sweep.json"
    record.write_text(damage)
    capsys.readouterr()
    assert sweep_main(["--resume_from", str(out)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"ema-boundary sweep: error: {record}: not readable JSON")
    assert record.read_text() == damage  # nothing appended, nothing replaced
    assert sweep_main(["--summarize", str(out)]) == 0
    assert f"{record}: " in _one_line(capsys.readouterr().err) and scores(out) == before


@pytest.mark.slow
def test_nothing_is_recorded_before_every_check_passes(finished: tuple[Path, dict],
                                                       capsys: pytest.CaptureFixture) -> None:
    """A run declared with other settings is refused before the invocation is appended to sweep.json."""
    out, _ = finished
    spec = out / "runs/linear/lr_0.003/seed_1/steps_4/run.json"
    spec.write_text(spec.read_text().replace('"block_size": 32', '"block_size": 64'))
    (spec.parent / "result.json").unlink()
    record = (out / "sweep.json").read_text()
    capsys.readouterr()
    assert sweep_main(["--resume_from", str(out)]) == 2
    assert "config.block_size" in _one_line(capsys.readouterr().err)
    assert (out / "sweep.json").read_text() == record


def _damage(checkpoint: Path) -> None:
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])


@pytest.mark.slow
def test_a_run_whose_checkpoints_are_all_unreadable_starts_over_saying_so(finished: tuple[Path, dict],
                                                                          capsys: pytest.CaptureFixture) -> None:
    out, before = finished
    run = out / "runs/linear/lr_0.003/seed_0/steps_4"
    (run / "result.json").unlink()
    shutil.rmtree(run / "train" / "final")
    for ckpt in (run / "train" / "checkpoints").glob("step_*"):
        _damage(ckpt)
    capsys.readouterr()
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert "no checkpoint can be resumed" in (run / "log.txt").read_text() and "starts over" in (
        run / "log.txt").read_text()
    assert "started over: checkpoints/step_2: model.safetensors has 100 bytes" in capsys.readouterr().out
    assert scores(out) == before


@pytest.mark.slow
def test_a_run_whose_newest_checkpoint_is_unreadable_resumes_from_the_one_before(finished: tuple[Path, dict]) -> None:
    out, before = finished
    run = out / "runs/linear/lr_0.003/seed_1/steps_4"
    (run / "result.json").unlink()
    shutil.rmtree(run / "train" / "final")
    _damage(run / "train" / "checkpoints" / "step_4")
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert "trying the checkpoint before it" in (run / "log.txt").read_text()
    assert scores(out) == before


# ------------------------------------------------------------------------------------------ identity


@pytest.mark.slow
def test_a_resume_on_other_data_is_refused_naming_both_fingerprints(tmp_path: Path, corpus_file: str,  # noqa: F811
                                                                     capsys: pytest.CaptureFixture) -> None:
    data = tmp_path / "corpus.txt"
    shutil.copy(corpus_file, data)
    plan = tiny_plan(tmp_path, str(data), rate={"lr_grid": [3.0e-3]})
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out), "--max_runs", "1"]) == 0
    recorded = json.loads((out / "sweep.json").read_text())["fingerprints"]
    assert set(recorded) == {"data", "tokenizer"} and recorded["data"].startswith("sha256:")
    data.write_text(data.read_text()[: len(data.read_text()) // 3])  # the corpus rewritten between resumes
    before = (out / "sweep.json").read_text()
    capsys.readouterr()
    assert sweep_main(["--resume_from", str(out)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "the data differs" in line and recorded["data"] in line and "sha256:" in line.split(recorded["data"])[1]
    assert (out / "sweep.json").read_text() == before and len(list(out.glob("runs/**/result.json"))) == 1


@pytest.mark.slow
def test_a_sweep_recorded_before_fingerprints_resumes_and_records_them(tmp_path: Path, corpus_file: str,  # noqa: F811
                                                                       capsys: pytest.CaptureFixture) -> None:
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [3.0e-3]})
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out), "--max_runs", "1"]) == 0
    record = json.loads((out / "sweep.json").read_text())
    fingerprints = record.pop("fingerprints")
    (out / "sweep.json").write_text(json.dumps(record))  # as the committed sweeps were recorded
    capsys.readouterr()
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert "recorded the data and tokenizer fingerprints" in capsys.readouterr().out
    assert json.loads((out / "sweep.json").read_text())["fingerprints"] == fingerprints
    assert json.loads((out / "results.json").read_text())["complete"]


@pytest.mark.parametrize("name", ["../../../evil", "a/../../b", "/abs", ".hidden", "a//b"])
def test_an_arm_name_that_leaves_the_folder_is_refused_at_its_line(tmp_path: Path, corpus_file: str,  # noqa: F811
                                                                   name: str, capsys: pytest.CaptureFixture) -> None:
    plan = tiny_plan(tmp_path, corpus_file, arms={name: {"config": {"model": "hub_configs/spen-tiny"}}})
    raw = yaml.safe_load(plan.read_text())
    del raw["arms"]["linear"]
    plan.write_text(yaml.safe_dump(raw, sort_keys=False))
    line_no = next(i for i, ln in enumerate(plan.read_text().splitlines(), 1) if name in ln)
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out")]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{plan}:{line_no}: arms.{name} is not a usable arm name" in line
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "evil").exists()


@pytest.mark.parametrize("flags, words", [
    (["--launcher", "submitit-local", "--launcher_args", "no_such_parameter=1"], "--launcher submitit-local"),
    (["--launcher", "submitit-local", "--launcher_args", "nodes=2"], "one node"),
])
def test_bad_launcher_arguments_are_refused_before_anything_is_written(
        tmp_path: Path, corpus_file: str, flags: list[str], words: str,  # noqa: F811
        capsys: pytest.CaptureFixture) -> None:
    plan = tiny_plan(tmp_path, corpus_file)
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out"), *flags]) == 2
    assert words in _one_line(capsys.readouterr().err) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("seeds", [[2**32], [0, 2**40]])
def test_a_seed_out_of_range_is_refused_at_its_line(tmp_path: Path, corpus_file: str, seeds: list[int],  # noqa: F811
                                                    capsys: pytest.CaptureFixture) -> None:
    plan = tiny_plan(tmp_path, corpus_file, seeds=seeds)
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out")]) == 2
    assert "seeds must be a seed in [0, 2**32)" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_a_test_score_without_test_documents_is_refused_before_anything_is_written(
        tmp_path: Path, corpus_file: str, capsys: pytest.CaptureFixture) -> None:  # noqa: F811
    plan = tiny_plan(tmp_path, corpus_file, base={"test_every": 0})  # score: test (the default), no test split
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out")]) == 2
    assert "score: test needs test documents held out" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_a_missing_data_file_is_refused_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture
                                                                   ) -> None:
    plan = tiny_plan(tmp_path, str(tmp_path / "nowhere.txt"))
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out")]) == 2
    assert "nowhere.txt: no such file" in _one_line(capsys.readouterr().err) and not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------------ divergence


@pytest.fixture
def diverging(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """Runs at the rates named here see their validation loss replaced (``nan``: a training loss that became NaN;
    800: one whose perplexity overflows ``math.exp``): what a rate far too high does to a larger model."""
    import train

    bad: dict[str, float] = {}
    main, evaluate = train.main, train.evaluate
    current: dict[str, float | None] = {"loss": None}

    def main_at_rate(argv: list[str]) -> Path:
        current["loss"] = next((v for lr, v in bad.items() if f"/lr_{lr}/" in argv[1]), None)
        return main(argv)

    def evaluate_diverged(*args, **kwargs) -> float:
        loss = evaluate(*args, **kwargs)
        return loss if current["loss"] is None else current["loss"]

    monkeypatch.setattr(train, "main", main_at_rate)
    monkeypatch.setattr(train, "evaluate", evaluate_diverged)
    return bad


@pytest.mark.slow
def test_a_diverged_run_is_recorded_never_chosen_and_the_sweep_goes_on(tmp_path: Path, corpus_file: str,  # noqa: F811
                                                                       diverging: dict[str, float]) -> None:
    diverging.update({"0.01": float("nan"), "0.001": 800.0})
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [1.0e-3, 3.0e-3, 1.0e-2]})
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0  # no OverflowError from exp(800)
    results = json.loads((out / "results.json").read_text())
    choice = results["arms"]["linear"]["choices"]["0"]
    assert choice["chosen"] == 3.0e-3 and choice["diverged"] == ["0.01"] and results["complete"]
    assert results["diverged"] == ["runs/linear/lr_0.01/seed_0/steps_4"]
    assert json.loads((out / "runs/linear/lr_0.01/seed_0/steps_4/result.json").read_text())["diverged"] is True
    assert "perplexity inf" in (out / "runs/linear/lr_0.001/seed_0/steps_4/train/final/README.md").read_text() or \
        json.loads((out / "runs/linear/lr_0.001/seed_0/steps_4/result.json").read_text())["val_loss"] == 800.0


@pytest.mark.slow
def test_when_every_rate_diverges_no_rate_is_chosen(tmp_path: Path, corpus_file: str,  # noqa: F811
                                                     diverging: dict[str, float]) -> None:
    diverging.update({"0.001": float("nan"), "0.003": float("inf")})
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [1.0e-3, 3.0e-3]})
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    choice = results["arms"]["linear"]["choices"]["0"]
    assert choice["chosen"] is None and choice["no_rate"] == "every rate tried diverged"
    assert results["complete"] and results["arms"]["linear"]["budgets"]["4"] == {}  # nothing scored, nothing owed


# ------------------------------------------------------------------------------------------ watching


@pytest.mark.slow
def test_a_piped_sweep_prints_a_line_per_finished_run_with_its_eta(tmp_path: Path, corpus_file: str  # noqa: F811
                                                                   ) -> None:
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [3.0e-3]}, seeds=[0, 1, 2])
    log = tmp_path / "sweep.log"
    with log.open("w") as f:  # output to a file, as `... > sweep.log` (not a terminal)
        proc = subprocess.Popen([sys.executable, "-m", "eval.sweep", str(plan), "--output_dir", str(tmp_path / "out")],
                                cwd=ROOT, env=ENV, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while "[1/3 runs]" not in log.read_text():  # the first line is there while the sweep still runs
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        assert proc.wait(timeout=240) == 0
    lines = [ln for ln in log.read_text().splitlines() if "runs/linear/" in ln]
    assert len(lines) == 3 and all("done in" in ln and "val_loss" in ln for ln in lines), log.read_text()
    assert "2 left, ETA" in lines[0] and "1 left, ETA" in lines[1] and "nothing left" in lines[2]


@pytest.mark.slow
def test_submitit_local_runs_at_most_workers_jobs_at_once(tmp_path: Path, corpus_file: str,  # noqa: F811
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import submitit

    from eval.sweep.launch import SubmititLauncher

    running, most = set(), [0]
    done = submitit.local.local.LocalJob.done

    def watched_done(job, *args, **kwargs) -> bool:
        finished = done(job, *args, **kwargs)
        (running.discard if finished else running.add)(job.job_id)
        most[0] = max(most[0], len(running))
        return finished

    monkeypatch.setattr(submitit.local.local.LocalJob, "done", watched_done)
    monkeypatch.setattr(SubmititLauncher, "poll_seconds", 0.1)
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [3.0e-3]}, seeds=[0, 1], budgets=[2])
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out"), "--launcher", "submitit-local",
                       "--workers", "1"]) == 0
    assert most[0] == 1 and len([d for d in (tmp_path / "out" / "submitit").iterdir() if d.name.isdigit()]) == 2


# ------------------------------------------------------------------------------------------ foreign models


def _bert(folder: Path) -> Path:
    """The issue's case: a saved BertForMaskedLM (transformers loads it as a BertLMHeadModel that reads ahead)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM

    from tests.test_gap import _save, _tiny_tokenizer

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(_tiny_tokenizer()), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    return _save(BertForMaskedLM(config), folder)


@pytest.mark.parametrize("tool", ["eval.gap", "eval.probes"])
def test_a_model_that_reads_later_tokens_is_refused(tool: str, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from tests.test_faults import TOOLS
    from tests.test_gap import _gpt2

    bad, good = _bert(tmp_path / "bert"), _gpt2(tmp_path / "good")
    capfd.readouterr()
    assert TOOLS[tool](bad, good, tmp_path) == 2
    line = _one_line(capfd.readouterr().err)
    assert f"{bad}: not a causal language model" in line and "BertLMHeadModel" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sweep", ["ablation-trace", "ablation-predictor", "depth", "ladder", "recall-map"])
def test_every_analysis_writes_a_figure(sweep: str, tmp_path: Path) -> None:
    """From each committed sweep's analysis (the figure code reads nothing else)."""
    from eval.sweep.figures import write_figures

    analysis = json.loads((ROOT / "docs" / "sweeps" / sweep / "results.json").read_text())["analysis"]
    names = write_figures(analysis, tmp_path)
    assert names == [f"{analysis['kind']}.png"] and (tmp_path / names[0]).stat().st_size > 10_000


@pytest.mark.slow
def test_a_sweep_without_an_analysis_draws_its_scores(tmp_path: Path, corpus_file: str) -> None:  # noqa: F811
    plan = tiny_plan(tmp_path, corpus_file, analysis="none", rate={"lr_grid": [3.0e-3]}, budgets=[2, 4])
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["figures"] == ["none.png"]
    assert (tmp_path / "out" / "none.png").is_file()


def test_a_handler_on_several_loggers_gets_its_own_stream_back_after_a_run(tmp_path: Path) -> None:
    """pytest 9.2 puts one capture handler (a StringIO) on several loggers; the run's redirect must hand each
    handler its own stream back, not the worker's stderr (pytest then failed every later test: no getvalue)."""
    import io
    import logging

    from eval.sweep.execute import _log_records_to

    handler = logging.StreamHandler(io.StringIO())
    own = handler.stream
    loggers = [logging.getLogger(f"test_runner_faults.shared{i}") for i in range(3)]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        with open(tmp_path / "run.txt", "a") as log, _log_records_to(log):
            loggers[1].warning("during the run")
        assert handler.stream is own
        loggers[2].warning("after the run")
        assert own.getvalue() == "after the run\n"
        assert (tmp_path / "run.txt").read_text().startswith("during the run\n")
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def test_a_log_handler_made_during_one_run_writes_to_the_next_runs_log(tmp_path: Path) -> None:
    """transformers makes its stderr handler at its first warning, inside a run's redirect; the worker's next run
    gets its warnings in its own log (it used to print "--- Logging error ---": I/O on the first run's closed log)."""
    import contextlib
    import logging

    from eval.sweep.execute import _log_records_to

    logger = logging.getLogger("test_runner_faults.library")
    logger.propagate = False
    try:
        for run in ("first", "second"):
            with (open(tmp_path / f"{run}.txt", "a") as log, contextlib.redirect_stderr(log),
                  _log_records_to(log)):
                if not logger.handlers:  # made once per process, with the stderr of that moment
                    logger.addHandler(logging.StreamHandler())
                logger.warning("warned in the %s run", run)
        assert (tmp_path / "first.txt").read_text() == "warned in the first run\n"
        assert (tmp_path / "second.txt").read_text() == "warned in the second run\n"
        assert logger.handlers[0].stream is sys.__stderr__  # between runs: the worker's own stderr
    finally:
        logger.handlers.clear()
