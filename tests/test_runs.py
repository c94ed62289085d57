"""eval/runs.py: many train.py runs; runs that differ only by seed train as one ensemble with their own numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.runs import Job, Run, jobs, read_metrics, read_test, train_runs
from tests.train_testkit import metrics, tokenizer_dir, write_config


def _run(name: str, folder: str, seed: int, *extra: str) -> Run:
    return Run(name, ("--config", "c.yaml", "--output_dir", f"{folder}/seed_{seed}", "--seed", seed, *extra))


def test_runs_that_differ_only_by_seed_are_one_job():
    runs = [_run(f"a/seed_{s}", "out/a", s) for s in (0, 1, 2)] + [_run("b/seed_0", "out/b", 0, "--lr", "1e-3")]
    todo = jobs(runs)
    assert [len(j.runs) for j in todo] == [3, 1]
    ens = todo[0]
    assert ens.argv == ("--config", "c.yaml", "--seeds", "0,1,2", "--output_dir", "out/a")
    assert ens.name == "a/seeds_0_1_2" and ens.command.startswith("python train.py --config c.yaml --seeds 0,1,2")
    assert todo[1].argv == runs[3].argv  # alone: its own command line
    assert [len(j.runs) for j in jobs(runs, ensemble=False)] == [1, 1, 1, 1]


@pytest.mark.parametrize("run", [
    Run("other folder name", ("--output_dir", "out/a/run0", "--seed", "0")),
    Run("no seed", ("--output_dir", "out/a/seed_0",)),
    Run("resumes", ("--output_dir", "out/a/seed_1", "--seed", "1", "--resume_from_checkpoint", "latest")),
    Run("already an ensemble", ("--output_dir", "out/a", "--seeds", "0,1")),
])
def test_runs_that_cannot_join_an_ensemble_train_alone(run):
    assert run.ensemble_key() is None
    assert [j.runs for j in jobs([run, _run("x/seed_5", "out/a", 5)])] == [(run,), (_run("x/seed_5", "out/a", 5),)]


def test_groups_are_cut_to_keep_every_worker_busy():
    # The report's headline pair after the grid: 4 more seeds of each model, 2 workers -> 4 jobs of 2 seeds.
    runs = [_run(f"{m}/seed_{s}", f"out/{m}", s) for m in ("spen", "gpt2") for s in (1, 2, 3, 4)]
    assert sorted(len(j.runs) for j in jobs(runs, workers=2)) == [2, 2, 2, 2]
    assert [len(j.runs) for j in jobs(runs, workers=1)] == [4, 4]
    # Every run exactly once, whatever the cut.
    for workers in (1, 2, 3, 8):
        done = [r for j in jobs(runs, workers) for r in j.runs]
        assert sorted(r.name for r in done) == sorted(r.name for r in runs)
    assert isinstance(jobs(runs)[0], Job)


def test_train_runs_gives_each_seed_its_single_runs_numbers(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", tokenizer_name=tokenizer_dir(), max_steps=6, logging_steps=2,
                       eval_steps=3, save_steps=6)

    def runs(folder: Path) -> list[Run]:
        return [Run(f"seed_{s}", ("--config", cfg, "--output_dir", folder / f"seed_{s}", "--seed", s)) for s in (0, 1)]

    together, alone = runs(tmp_path / "together"), runs(tmp_path / "alone")
    ran = train_runs(together, tmp_path / "logs", workers=1, ensemble=True)
    assert [len(j.runs) for j in ran] == [2]
    assert (tmp_path / "logs" / "seeds_0_1.log").is_file()
    assert [len(j.runs) for j in train_runs(alone, tmp_path / "logs_alone", workers=1, ensemble=False)] == [1, 1]
    for a, b in zip(together, alone, strict=True):
        got, ref = metrics(a.output_dir), metrics(b.output_dir)
        assert [r["step"] for r in got] == [r["step"] for r in ref]
        for g, r in zip(got, ref, strict=True):
            for key in ("loss", "val_loss"):
                if key in r:
                    assert abs(g[key] - r[key]) <= 1e-4 * abs(r[key])
        assert read_metrics(a.output_dir / "metrics.jsonl")["val_loss"]
        assert (a.output_dir / "final" / "model.safetensors").is_file()


def test_by_default_runs_are_grouped_only_with_a_gpu(tmp_path, monkeypatch):
    import torch

    import eval.runs as runs_module

    seen = []
    monkeypatch.setattr(runs_module, "_train", lambda argv, log, threads: seen.append(argv))
    runs = [_run(f"a/seed_{s}", str(tmp_path / "a"), s) for s in (0, 1)]
    for gpu, expected in ((False, 2), (True, 1)):
        seen.clear()
        monkeypatch.setattr(torch.cuda, "is_available", lambda gpu=gpu: gpu)
        train_runs(runs, tmp_path / "logs", workers=1)
        assert len(seen) == expected


def test_read_test_is_the_last_records_test_score(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 2, "loss": 5.0, "tokens": 10}, {"step": 4, "loss": 4.0, "tokens": 20, "val_loss": 4.5},
            {"step": 4, "test_loss": 4.4, "test_ppl": 81.45, "test_tokens": 256, "test_documents": 3}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_test(path) == {"test_loss": 4.4, "test_ppl": 81.45, "test_tokens": 256, "test_documents": 3}
    assert read_metrics(path)["val_loss"] == [4.5] and read_metrics(path)["loss"] == [5.0, 4.0]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    assert read_test(path) is None  # a run without a test split
