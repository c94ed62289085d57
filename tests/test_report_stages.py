"""The report's training stages are declarations on the experiment runner (eval.sweep): the headline pair and the
ablations run as sweeps into the report's work folder (the runner's layout, result.json per run, resume), their
rates chosen by the runner's one rule, their numbers read back from the runner's results. A stand-in trainer
(deterministic losses from the rate, the arm and the seed) keeps these tests at seconds."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from eval.rates import RateRule
from eval.report import stages
from eval.report.plan import Plan
from eval.sweep.paths import RunPaths
from eval.sweep.plan import load_plan
from eval.sweep.trainers import TRAINERS

PLAN = """\
name: test
workers: 1
language_model: {rate: {lr_grid: [1.0e-3, 3.0e-3, 1.0e-2], extend: true, max_extensions: 1, digits: 3},
                 seeds: [0, 1, 2], max_steps: 4}
ablation: {seeds: [0, 1], max_steps: 2, predictors: [none, linear], traces: [linear, linear-selective]}
"""


def loss(spec: dict) -> float:
    """SPEN's loss falls with the rate (its best stays at the top edge); the GPT-2 architecture's and the arms' have
    a valley at 1e-2; the seed and the budget shift every loss a little, the arm by its name."""
    lr, seed, steps = spec["lr"], spec["seed"], spec["steps"]
    arch = spec["config"]["model"]["from"]
    variant = spec["config"]["model"].get("variant", "")
    shape = -math.log10(lr) if "spen-f48" in arch and not variant else (math.log10(lr) + 2) ** 2
    return 4.0 + shape + 0.01 * seed + 1.0 / steps + 0.001 * len(variant)


@pytest.fixture
def trained(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every run the runner trains goes through a stand-in trainer (in this process: the plans have one worker);
    returns the runs trained, in order."""
    calls: list[str] = []

    def run(spec: dict, paths: RunPaths) -> dict:
        calls.append(paths.run)
        value = loss(spec)
        out = paths.file("train")
        (out / "final").mkdir(parents=True, exist_ok=True)
        rows = [{"step": s, "tokens": 64 * s, "loss": value + 1 / s} for s in range(1, spec["steps"] + 1)]
        rows.append({"step": spec["steps"], "val_loss": value})
        (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return {"val_loss": value, "test_loss": value + 0.1, "test_tokens": 1000, "test_documents": 7,
                "steps": spec["steps"], "tokens": 64 * spec["steps"],
                "parameters": {"total": 100, "embedding": 40, "non_embedding": 60}}

    monkeypatch.setattr(TRAINERS["train"], "run", run)
    return calls


def _plan(tmp_path: Path, text: str = PLAN) -> Plan:
    (tmp_path / "plan.yaml").write_text(text)
    (tmp_path / "corpus.txt").write_text("some text.\n\nmore text.\n")
    return Plan.load(tmp_path / "plan.yaml", corpus=str(tmp_path / "corpus.txt"))


def _tokenizer(tmp_path: Path) -> Path:
    folder = tmp_path / "tokenizer"
    folder.mkdir(exist_ok=True)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_the_pair_is_a_sweep_whose_rates_come_from_the_runners_rule(tmp_path: Path, trained: list[str]) -> None:
    plan = _plan(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    lm = stages.language_model(work, plan, _tokenizer(tmp_path))
    folder = work / "language_model"
    rule = RateRule(lr_grid=(1e-3, 3e-3, 1e-2), extend=True, max_extensions=1, digits=3)  # the report's
    for arch, (chosen, interior, words) in {"spen": (0.0333, False, "edge: the cap of 1 added rate"),
                                            "gpt2": (1e-2, True, "interior (1 rate added")}.items():
        a = lm["architectures"][arch]
        # The grid's seed tried the grid, then the rate the runner's rule asked for beyond the edge (3 digits).
        losses = {float(k): g["final_val_loss"] for k, g in a["grid"].items()}
        assert sorted(losses) == a["rates_tried"] == [1e-3, 3e-3, 1e-2, 0.0333]
        assert rule.next_rate({r: v for r, v in losses.items() if r != 0.0333}, 0) == 0.0333
        assert a["lr"] == chosen == min(losses, key=losses.get) and a["interior"] is interior
        assert a["grid_rule"].startswith(words) and a["grid"]["0.0333"]["extension"]
        # Every seed at the chosen rate, each in the runner's layout, its numbers those of its result.json.
        assert list(a["runs"]) == ["0", "1", "2"]
        for seed, r in a["runs"].items():
            run = folder / f"runs/{arch}/lr_{chosen:g}/seed_{seed}/steps_4"
            result = json.loads((run / "result.json").read_text())
            assert r["final_val_loss"] == result["val_loss"] and r["final_test_loss"] == result["test_loss"]
            assert r["final_dir"] == str(run / "train" / "final") and r["curve"]["step"] == [1, 2, 3, 4]
            assert r["command"] == f"cd {folder} && python -m train --config {run.relative_to(folder)}/train.yaml"
        assert a["parameter_counts"]["non_embedding"] == 60 and a["train_tokens"] == 4 * 16 * 128
    assert lm["scored_on"] == "test" and lm["split"]["test_tokens"] == 1000
    # 2 x 4 rates for the grid's seed, 2 x 2 more seeds: nothing else trained.
    assert len(trained) == 12 and len(set(trained)) == 12


def test_the_pair_stage_resumes_from_the_runner_layout(tmp_path: Path, trained: list[str]) -> None:
    plan = _plan(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    first = stages.language_model(work, plan, _tokenizer(tmp_path))
    trained.clear()
    assert stages.language_model(work, plan, _tokenizer(tmp_path)) == first and trained == []  # all reused
    # An unfinished run (no result.json): only it trains again, and the numbers are the same.
    unfinished = "runs/gpt2/lr_0.01/seed_2/steps_4"
    (work / "language_model" / unfinished / "result.json").unlink()
    assert stages.language_model(work, plan, _tokenizer(tmp_path)) == first and trained == [unfinished]
    # The folder keeps the plan it was declared with; the recorded command reproduces it from there.
    folder = work / "language_model"
    assert first["command"] == f"ema-boundary sweep {folder}/sweep.yaml --output_dir NEW_DIR"
    recorded = json.loads((folder / "sweep.json").read_text())
    assert len(recorded["invocations"]) == 3
    assert json.loads(json.dumps(load_plan(folder / "sweep.yaml").identity())) == recorded["identity"]
    # Another declaration (a changed grid) is refused, not mixed into the folder.
    changed = replace(plan, language_model=replace(plan.language_model,
                                                   rate=replace(plan.language_model.rate, lr_grid=(1e-3, 1e-2))))
    with pytest.raises(Exception, match="the plan differs from the one this sweep ran"):
        stages.language_model(work, changed, _tokenizer(tmp_path))


@pytest.mark.parametrize("axis, arms", [("predictor", ["none", "linear"]), ("trace", ["linear", "linear-selective"])])
def test_the_ablation_is_a_sweep_of_one_arm_per_variant(tmp_path: Path, trained: list[str], axis: str,
                                                        arms: list[str]) -> None:
    plan = _plan(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = stages.ablation(work, plan, axis, 3e-3, _tokenizer(tmp_path))
    folder = work / f"ablation_{axis}"
    assert list(result["variants"]) == arms and result["reference"] == "linear"
    assert result["lrs"] == {a: 3e-3 for a in arms} and result["max_steps"] == 2  # SPEN's rate, the plan's steps
    assert len(trained) == 2 * 2  # arms x seeds, nothing else
    from ema_boundary import stats

    final = {a: {s: json.loads((folder / f"runs/{a}/lr_0.003/seed_{s}/steps_2/result.json").read_text())["test_loss"]
                 for s in ("0", "1")} for a in arms}
    assert result["scored_on"] == "test" and result["final_test_loss"] == final
    other = arms[0] if arms[0] != "linear" else arms[1]
    expected = stats.compare_arms(final, "linear", plan.ablation.equivalence_margin)[other].as_dict()
    assert result["comparisons"][other] == expected
    # The checkpoints the probes read: the folder and each run's train.py folder.
    run_dir = result["variants"][other]["runs"]["0"]["run_dir"]
    assert (Path(result["folder"]) / run_dir / "final").is_dir()
    assert (folder / "loss_curves.png").is_file()  # the figure the report copies


def test_ablation_budgets_choose_each_arms_rate_at_the_longest(tmp_path: Path, trained: list[str]) -> None:
    plan = _plan(tmp_path)
    plan = replace(plan, ablation=replace(plan.ablation, max_steps=None, budgets=(3, 1, 2), lr_grid=(1e-3, 1e-2)))
    work = tmp_path / "work"
    work.mkdir()
    result = stages.ablation(work, plan, "trace", 3e-3, _tokenizer(tmp_path))
    # Each arm's rate from the plan's grid, chosen on validation by the first seed at the longest budget.
    for arm in ("linear", "linear-selective"):
        r = result["rates"][arm]
        assert r["chosen"] == 1e-2 == result["lrs"][arm] and r["edge"] and set(r["grid"]) == {"0.001", "0.01"}
    assert result["max_steps"] == 3 and list(result["budgets"]) == ["1", "2", "3"]
    assert result["budgets"]["3"]["comparisons"] == result["comparisons"]  # the verdict is the longest's
    assert result["budgets"]["1"]["tokens"] == 1 * 16 * 128
    # The grid at the longest (2 arms x 2 rates), the second seed there, then both seeds at the shorter budgets.
    assert len(trained) == 4 + 2 + 2 * 2 * 2
    assert not any("lr_0.001" in r and "steps_3" not in r for r in trained)  # shorter budgets at the chosen rate


def test_a_grid_of_one_rate_extends_only_by_a_declared_factor(tmp_path: Path) -> None:
    # The sweep plans' rule (eval.rates.read_rate): a lone rate has no ratio of its own.
    from eval.report.plan import PlanError

    with pytest.raises(PlanError, match="language_model.rate.factor must be set to extend a grid of one rate"):
        _plan(tmp_path, "language_model: {rate: {lr_grid: [1.0e-2], extend: true}}\n")
    plan = _plan(tmp_path, "language_model: {rate: {lr_grid: [1.0e-2], extend: true, factor: 2.0}}\n")
    assert plan.language_model.rate.next_rate({1e-2: 4.0}, 0) == 0.02


def test_a_lone_rate_trains_every_seed_in_one_batch(tmp_path: Path, trained: list[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The ablation at SPEN's rate: nothing to choose, so the runner launches every arm x seed at once (the workers
    # stay busy), not the first seed before the others.
    from eval.sweep.launch import LocalLauncher

    batches: list[int] = []
    launch = LocalLauncher.launch

    def record(self, sweep, feed, *stop):
        def counted() -> list[str]:
            runs = feed()
            batches.append(len(runs))
            return runs
        return launch(self, sweep, counted, *stop)

    monkeypatch.setattr(LocalLauncher, "launch", record)
    stages.ablation(tmp_path, _plan(tmp_path), "predictor", 3e-3, _tokenizer(tmp_path))
    assert batches[0] == 4 and sum(batches) == 4  # every arm x seed in the first call of the feed
