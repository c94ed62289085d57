"""The experiment runner (eval.sweep): plans checked at load, the rate rule, one layout, resume, summarize,
launchers, and commands that run from a clone."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ema_boundary.yamlio import YAMLFileError, read_yaml_text
from eval.plans import PlanError
from eval.rates import RateRule
from eval.sweep.cli import main as sweep_main
from eval.sweep.plan import load_plan, merge
from tests.train_testkit import ENV, ROOT, tokenizer_dir

TINY_BASE = {"block_size": 32, "total_train_batch_size": 4, "per_device_train_batch_size": 4,
             "warmup_steps": 1, "logging_steps": 1, "eval_steps": 2, "max_eval_samples": 4, "save_steps": 2,
             "val_every": 10, "test_every": 3, "max_test_samples": 8}


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small text corpus (150 paragraphs of made-up words): tokenized and counted in a blink, unlike the
    embedded corpus, and enough for every split."""
    import random

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghiklmnoprstuw") for _ in range(rng.randint(2, 7))) for _ in range(300)]
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n\n".join(" ".join(rng.choice(words) for _ in range(90)) + "." for _ in range(150)) + "\n")
    return str(path)


def tiny_plan(tmp_path: Path, data: str, name: str = "tiny.yaml", **over) -> Path:
    plan = {"name": "tiny", "trainer": "train", "analysis": "ablation", "seeds": [0, 1], "budgets": [4],
            "workers": 1, "rate": {"lr_grid": [1.0e-3, 3.0e-3]},
            "base": {**TINY_BASE, "data": data, "tokenizer_name": tokenizer_dir()},
            "arms": {"linear": {"config": {"model": "hub_configs/spen-tiny"}}},
            "settings": {"reference": "linear", "equivalence_margin": 0.02}}
    plan = merge(plan, over)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def scores(folder: Path) -> dict:
    results = json.loads((folder / "results.json").read_text())
    return {arm: {b: {s: r["score"] for s, r in seeds.items()} for b, seeds in a["budgets"].items()}
            for arm, a in results["arms"].items()}


# ------------------------------------------------------------------------------------------ plans


def test_duplicate_key_refused_with_both_lines() -> None:
    with pytest.raises(YAMLFileError, match=r"plan.yaml:3: rate.lr_grid is written twice \(lines 2 and 3\)"):
        read_yaml_text("rate:\n  lr_grid: [0.1]\n  lr_grid: [3000.0]\n", "plan.yaml")


@pytest.mark.parametrize("patch, message", [
    ({"trainer": "keras"}, r"tiny.yaml:\d+: trainer names an unknown trainer 'keras'"),
    ({"rate": {"lr_grid": [3000.0]}}, r"rate.lr_grid must be a rate in \(0, 1\), got 3000.0"),
    ({"seeds": 3}, r"seeds must be a non-empty list, got 3"),
    ({"arms": {"linear": {"lr_grid": [2.0]}}}, r"arms.linear.lr_grid must be a rate"),
    ({"arms": {"linear": {"sedes": [1]}}}, r"arms.linear.sedes is not a field"),
    ({"bogus": 1}, r"bogus is not a field"),
])
def test_bad_plan_is_one_line_with_the_yaml_line(tmp_path: Path, corpus_file: str, patch: dict,
                                                 message: str) -> None:
    with pytest.raises(PlanError, match=message):
        load_plan(tiny_plan(tmp_path, corpus_file, **patch))


def test_rate_rule_extends_until_interior_and_caps() -> None:
    rule = RateRule(lr_grid=(1e-3, 3e-3), extend=True, max_extensions=2)
    assert rule.next_rate({1e-3: 2.0, 3e-3: 1.0}, 0) == pytest.approx(9e-3)
    assert rule.next_rate({1e-3: 1.0, 3e-3: 2.0}, 0) == 0.000333333  # six digits: it names a run folder
    assert RateRule(lr_grid=(1e-3, 3e-3), extend=True, digits=3).next_rate({1e-3: 1.0, 3e-3: 2.0}, 0) == 0.000333
    assert rule.next_rate({1e-3: 2.0, 3e-3: 1.0, 9e-3: 1.5}, 1) is None  # interior: chosen
    assert rule.next_rate({1e-3: 2.0, 3e-3: 1.0}, 2) is None  # the cap
    assert rule.next_rate({1e-3: 0.2, 3e-3: 0.9}, 0, lower_is_better=False) == pytest.approx(9e-3)
    assert RateRule(lr_grid=(1e-3, 3e-3)).next_rate({1e-3: 2.0, 3e-3: 1.0}, 0) is None  # no extension declared
    # A lone rate extends only by a declared factor: above it first, then toward the better side by the same rule.
    lone = RateRule(lr_grid=(1e-3,), extend=True, max_extensions=2, factor=3.0)
    assert lone.next_rate({1e-3: 2.0}, 0) == pytest.approx(3e-3)
    assert lone.next_rate({1e-3: 1.0, 3e-3: 2.0}, 1) == pytest.approx(3.33333e-4)
    assert RateRule(lr_grid=(1e-3,), extend=True).next_rate({1e-3: 2.0}, 0) is None  # no factor: no side to go


def test_the_rate_rule_has_one_home() -> None:
    # Issue 50: the rule (RateRule, its search, choose, the reading of a `rate:` section) is defined in
    # eval/rates.py only; the runner, the recall trainer and the report plan use it.
    import ast

    names = {"RateRule", "RateSearch", "choose", "next_rate", "read_rate", "rate_rule", "map_rule"}
    homes = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "docs", ".venv", "build"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names:
                homes.setdefault(node.name, set()).add(str(rel))
    assert homes == {"RateRule": {"eval/rates.py"}, "RateSearch": {"eval/rates.py"},
                     "choose": {"eval/rates.py"}, "next_rate": {"eval/rates.py"},
                     "read_rate": {"eval/rates.py"}, "map_rule": {"eval/recall.py"}}, homes


def test_rate_search_is_the_rule_applied() -> None:
    # RateRule.search: the grid ascending, then beyond the edge while the best is there; what the runner and the
    # recall trainer both run. A rate whose objective is not known yet (None) stops the search and is named.
    losses = {1e-3: 2.0, 3e-3: 1.0, 9e-3: 0.5, 0.027: 0.7}
    asked = []

    def objective(lr: float) -> float:
        asked.append(lr)
        return losses[min(losses, key=lambda r: abs(r - lr))]

    search = RateRule(lr_grid=(3e-3, 1e-3), extend=True, max_extensions=3).search(objective)
    assert asked == [1e-3, 3e-3, 9e-3, 0.027] and search.extensions == [9e-3, 0.027]
    assert search.chosen == 9e-3 and search.need == []
    asked.clear()  # no extension (or none allowed): the best of the grid, a tie keeping the smaller rate
    for rule in (RateRule(lr_grid=(1e-3, 3e-3)), RateRule(lr_grid=(1e-3, 3e-3), extend=True, max_extensions=0)):
        assert rule.search(lambda lr: 1.0).chosen == 1e-3
        assert rule.search(lambda lr: {1e-3: 0.2, 3e-3: 0.9}[lr], lower_is_better=False).chosen == 3e-3
    pending = RateRule(lr_grid=(1e-3, 3e-3), extend=True).search(lambda lr: None if lr == 3e-3 else 1.0)
    assert pending.need == [3e-3] and pending.chosen is None and pending.extensions == []


# ------------------------------------------------------------------------------------------ runs


@pytest.mark.slow
def test_sweep_layout_rates_scores_and_summarize(tmp_path: Path, corpus_file: str, capsys) -> None:
    plan = tiny_plan(tmp_path, corpus_file, rate={"lr_grid": [1.0e-3, 3.0e-3], "extend": True, "max_extensions": 1},
                     budgets=[2, 4])
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and not results["missing"]
    choice = results["arms"]["linear"]["choices"]["0"]
    # Two grid rates at the longest budget; a choice at an edge extends once (the cap), else it is interior.
    assert len(choice["tried"]) in (2, 3)
    assert choice["chosen"] == min(map(float, choice["tried"]), key=lambda r: choice["tried"][f"{r:g}"])
    lr = choice["chosen"]
    for seed in (0, 1):
        for steps in (2, 4):
            run = out / f"runs/linear/lr_{lr:g}/seed_{seed}/steps_{steps}"
            assert (run / "run.json").is_file() and (run / "result.json").is_file()
            spec = json.loads((run / "run.json").read_text())
            assert (spec["seed"], spec["steps"], spec["lr"]) == (seed, steps, lr)
    # Every seed scored on the test blocks, the shorter budget at the longest's rate.
    assert set(results["arms"]["linear"]["budgets"]) == {"2", "4"}
    assert results["scored_on"] == "test"
    assert results["machine"]["versions"]["torch"] and results["machine"]["cpu"]  # ema_boundary.machine
    # The cost: every finished run of the arm (every rate tried) and the CPU seconds they recorded, in results.md.
    cost = results["seconds"]["cpu_by_arm"]["linear"]
    ran = [json.loads(p.read_text()) for p in out.glob("runs/linear/*/*/*/result.json")]
    assert cost["runs"] == len(ran) == 2 * 2 + len(choice["tried"]) - 1 and cost["unmeasured"] == 0
    assert cost["cpu_seconds"] == pytest.approx(sum(r["cpu_seconds"] for r in ran)) and cost["cpu_seconds"] > 0
    assert f"| `linear` | {cost['runs']} | {cost['cpu_seconds']:,.0f} |" in (out / "results.md").read_text()
    # No absolute path in the commands the sweep records, nor in the train.yaml they run: they run from a clone.
    text = json.dumps(results["commands"]) + (out / "results.md").read_text()
    for result in out.glob("runs/**/result.json"):
        text += json.loads(result.read_text())["command"] + (result.parent / "train.yaml").read_text()
    assert not re.search(r"(?<![.\w])/(tmp|root|work|home)/", text)
    # Summarised again without training: the same numbers.
    before = scores(out)
    assert sweep_main(["--summarize", str(out)]) == 0
    assert scores(out) == before


def test_changed_plan_refused_on_resume(tmp_path: Path, corpus_file: str, capsys) -> None:
    plan = tiny_plan(tmp_path, corpus_file, seeds=[0])
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out), "--max_runs", "1"]) == 0
    assert not json.loads((out / "results.json").read_text())["complete"]
    changed = tiny_plan(tmp_path, corpus_file, "changed.yaml", seeds=[0], rate={"lr_grid": [1.0e-3, 1.0e-2]})
    capsys.readouterr()
    assert sweep_main([str(changed), "--resume_from", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rate.lr_grid" in err and "differs" in err
    # An existing sweep folder is never started over.
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 2
    assert "--resume_from" in capsys.readouterr().err
    # The recorded plan continues to the end.
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["complete"]


@pytest.mark.slow
def test_a_plan_with_arms_added_grows_the_sweep(tmp_path: Path, corpus_file: str, capsys) -> None:
    """The recorded plan plus new arms continues the sweep (finished runs reused, the plan copy and identity
    updated, the invocation naming the added arms); an added arm beside a changed one is still refused."""
    plan = tiny_plan(tmp_path, corpus_file, seeds=[0], rate={"lr_grid": [1.0e-3]})
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    before = scores(out)
    run_json = next(out.glob("runs/linear/*/seed_0/steps_4/result.json"))
    stamp = run_json.stat().st_mtime_ns
    extra = {"arms": {"linear": {"config": {"model": "hub_configs/spen-tiny"}},
                      "wide": {"config": {"model": "hub_configs/spen-tiny"}, "seeds": [1]}}}
    grown = tiny_plan(tmp_path, corpus_file, "grown.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]}, **extra)
    changed = tiny_plan(tmp_path, corpus_file, "changed.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]},
                        arms={"linear": {"seeds": [0, 1]}, "wide": extra["arms"]["wide"]})
    capsys.readouterr()
    assert sweep_main([str(changed), "--resume_from", str(out)]) == 2
    assert "arms.linear.seeds" in capsys.readouterr().err
    assert sweep_main([str(grown), "--resume_from", str(out)]) == 0
    after = scores(out)
    assert after["linear"] == before["linear"] and set(after["wide"]["4"]) == {"1"}
    assert run_json.stat().st_mtime_ns == stamp  # the finished run was reused, not retrained
    identity = json.loads((out / "sweep.json").read_text())
    assert identity["invocations"][-1]["added_arms"] == ["wide"]
    assert "wide:" in (out / "sweep.yaml").read_text()
    # The grown sweep now resumes as itself, with or without its plan.
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert sweep_main([str(grown), "--resume_from", str(out)]) == 0
    # Seeds added to an arm's own list grow it too (the first seed still chooses); others removed do not.
    more = tiny_plan(tmp_path, corpus_file, "more.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]},
                     arms={**extra["arms"], "wide": {**extra["arms"]["wide"], "seeds": [1, 2]}})
    assert sweep_main([str(more), "--resume_from", str(out)]) == 0
    assert set(scores(out)["wide"]["4"]) == {"1", "2"} and scores(out)["linear"] == before["linear"]
    assert json.loads((out / "sweep.json").read_text())["invocations"][-1]["added_arms"] == ["wide: seeds 2"]
    # A setting the analysis reads may be added after the runs (it changes no run); a declared one may not change.
    noted = tiny_plan(tmp_path, corpus_file, "noted.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]},
                      arms={**extra["arms"], "wide": {**extra["arms"]["wide"], "seeds": [1, 2]}},
                      settings={"note": "added"})
    assert sweep_main([str(noted), "--resume_from", str(out)]) == 0
    assert json.loads((out / "sweep.json").read_text())["invocations"][-1]["added_arms"] == ["settings: note"]
    assert scores(out)["linear"] == before["linear"]
    moved = tiny_plan(tmp_path, corpus_file, "moved.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]},
                      arms={**extra["arms"], "wide": {**extra["arms"]["wide"], "seeds": [1, 2]}},
                      settings={"note": "added", "equivalence_margin": 0.5})
    capsys.readouterr()
    assert sweep_main([str(moved), "--resume_from", str(out)]) == 2
    assert "settings.equivalence_margin" in capsys.readouterr().err
    fewer = tiny_plan(tmp_path, corpus_file, "fewer.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]},
                      arms={**extra["arms"], "wide": {**extra["arms"]["wide"], "seeds": [2]}})
    assert sweep_main([str(fewer), "--resume_from", str(out)]) == 2
    # A rate added to an arm's own grid trains that rate only; the rule then chooses among all of them.
    rated = tiny_plan(tmp_path, corpus_file, "rated.yaml", seeds=[0], rate={"lr_grid": [1.0e-3]},
                      arms={"linear": {**extra["arms"]["linear"], "lr_grid": [1.0e-3, 3.0e-3]},
                            "wide": {**extra["arms"]["wide"], "seeds": [1, 2]}}, settings={"note": "added"})
    assert sweep_main([str(rated), "--resume_from", str(out)]) == 0
    assert json.loads((out / "sweep.json").read_text())["invocations"][-1]["added_arms"] == ["linear: rates 0.003"]
    assert run_json.stat().st_mtime_ns == stamp and list(out.glob("runs/linear/lr_0.003/seed_0/steps_4/result.json"))


def test_a_diverged_rate_is_never_chosen() -> None:
    """NaN compares false both ways: left to min/max, a diverged run could be chosen depending on its place."""
    from eval.rates import choose

    nan = float("nan")
    assert choose({1e-3: nan, 3e-3: 3.2, 1e-2: 3.1}) == 1e-2
    assert choose({1e-3: 3.2, 3e-3: nan, 1e-2: 3.3}) == 1e-3
    assert choose({1e-3: 0.2, 3e-3: 0.5, 1e-2: nan}, lower_is_better=False) == 3e-3
    assert choose({1e-3: 0.4, 3e-3: 0.4}) == 1e-3  # a tie keeps the smaller rate


def test_rates_added_to_an_arms_grid_grow_the_sweep() -> None:
    """An arm's own grid may gain rates (its finished runs keep theirs); dropping a rate it ran is a change."""
    from eval.sweep.runner import _added

    arm = {"config": {"model": "m"}, "lr_grid": None, "seeds": [0, 1], "budgets": [40]}
    recorded = {"rate": {"lr_grid": [1e-3, 3e-3]}, "settings": {}, "arms": {"x2": arm}}
    wider = {**recorded, "arms": {"x2": {**arm, "lr_grid": [1e-3, 3e-3, 1e-2]}}}
    assert _added(recorded, wider) == ["x2: rates 0.01"]
    both = {**recorded, "arms": {"x2": {**arm, "lr_grid": [1e-3, 3e-3, 1e-2], "seeds": [0, 1, 2]}}}
    assert _added(recorded, both) == ["x2: seeds 2", "x2: rates 0.01"]
    assert _added(recorded, {**recorded, "arms": {"x2": {**arm, "lr_grid": [3e-3, 1e-2]}}}) == []  # 1e-3 dropped
    assert _added(recorded, {**recorded, "arms": {"x2": {**arm, "lr_grid": [1e-3, 3e-3, 1e-2],
                                                           "budgets": [80]}}}) == []  # a run changed


def _runs_done_and_half_trained(sweep_dir: Path) -> tuple[list[str], list[str]]:
    """The finished runs and the runs with a checkpoint but no result, read while the sweep writes. os.walk skips a
    folder that vanishes between listing and reading (the trainer rotates its checkpoints); Path.glob raises."""
    done, half_trained = [], []
    for folder, subdirs, files in os.walk(sweep_dir / "runs"):
        if "result.json" in files:
            done.append(folder)
        elif "train" in subdirs and os.path.isdir(os.path.join(folder, "train", "checkpoints")):
            try:
                if os.listdir(os.path.join(folder, "train", "checkpoints")):
                    half_trained.append(folder)
            except FileNotFoundError:
                pass
    return done, half_trained


@pytest.mark.slow
def test_killed_sweep_resumes_to_the_uninterrupted_results(tmp_path: Path, corpus_file: str) -> None:
    """kill -9 in the middle of a sweep (a run half-trained, with a checkpoint), then --resume_from: the same
    scores as a sweep that was never interrupted."""
    # 40 steps, a checkpoint every 2: long enough that a poll every 0.05 s finds a run half-trained even on quiet
    # cores (at 6 steps a run took under a second and the sweep could finish between two polls).
    plan = tiny_plan(tmp_path, corpus_file, seeds=[0, 1], budgets=[40])
    whole = tmp_path / "whole"
    assert sweep_main([str(plan), "--output_dir", str(whole)]) == 0
    killed = tmp_path / "killed"
    cmd = [sys.executable, "-m", "eval.sweep", str(plan), "--output_dir", str(killed)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        # Wait until one run is complete and the next has saved a checkpoint, then kill.
        while time.time() < deadline:
            done, half_trained = _runs_done_and_half_trained(killed)
            if done and half_trained:
                break
            if proc.poll() is not None:
                pytest.fail(f"the sweep ended (exit {proc.returncode}) before a half-trained run was seen")
            time.sleep(0.05)
        else:
            pytest.fail("the sweep did not reach a half-trained run in time")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sweep_main(["--resume_from", str(killed)]) == 0
    assert scores(killed) == scores(whole)


@pytest.mark.slow
def test_the_local_pool_asks_the_feed_after_every_finished_run(tmp_path: Path) -> None:
    """A run that becomes ready (a rate extension, a seed at the chosen rate) starts as soon as a worker is free:
    the launcher asks the feed once up front and once after each run, and never holds more than its workers."""
    from eval.sweep.launch import LocalLauncher

    batches = [["runs/a", "runs/b", "runs/c"], ["runs/d"], [], [], ["runs/e"]]
    calls = []

    def feed() -> list[str]:
        calls.append(len(calls))
        return batches.pop(0) if batches else []

    # No run.json in these folders: each run fails at once and is reported with its error; the others go on.
    outcomes = list(LocalLauncher(2).launch(tmp_path, feed))
    assert sorted(run for run, _ in outcomes) == ["runs/a", "runs/b", "runs/c", "runs/d", "runs/e"]
    assert all(error is not None for _, error in outcomes)
    assert len(calls) == 1 + len(outcomes)


@pytest.mark.slow
def test_submitit_local_launcher_matches_local(tmp_path: Path, corpus_file: str) -> None:
    """The cluster path through submitit's local executor: the same runs, the same numbers."""
    plan = tiny_plan(tmp_path, corpus_file, seeds=[0], rate={"lr_grid": [3.0e-3]}, budgets=[2])
    local, sub = tmp_path / "local", tmp_path / "sub"
    assert sweep_main([str(plan), "--output_dir", str(local)]) == 0
    assert sweep_main([str(plan), "--output_dir", str(sub), "--launcher", "submitit-local",
                       "--launcher_args", "timeout_min=10"]) == 0
    assert scores(sub) == scores(local)
    assert list((sub / "submitit").iterdir())  # submitit's own job folders


def test_recall_trainer_each_seed_chooses(tmp_path: Path) -> None:
    plan = tmp_path / "recall.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "recall-tiny", "trainer": "recall", "analysis": "recall_map", "seeds": [0, 1], "budgets": [8],
        "workers": 1, "rate": {"lr_grid": [1.0e-3, 3.0e-3], "choose": "each_seed"},
        "base": {"width": 32, "layers": 1, "heads": 2, "task": {"vocab_size": 32, "pairs": [2, 4]},
                 "recipe": {"batch_size": 8, "warmup_steps": 1, "select_examples": 8, "eval_examples": 8}},
        "arms": {"gpt2": {"config": {"model": "gpt2"}}, "linear": {"config": {"model": "linear"}},
                 "linear-ema16": {"config": {"model": "linear-ema16"}}},
        "settings": {"pairs": 4, "control": "gpt2", "escape": {"16": ["linear", "linear-ema16"]}, "headline": "16",
                     "min_seeds": 2}}))
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert set(results["arms"]["gpt2"]["choices"]) == {"0", "1"}  # each seed chose its own rate
    assert not list(out.glob("runs/**/recall_checkpoint.pt*"))  # a finished run keeps its numbers, not its state
    analysis = results["analysis"]
    assert analysis["kind"] == "recall_map" and analysis["pairs"] == 4
    assert analysis["arms"]["linear-ema16"]["state_numbers"] == 16 * 32
    # A toy budget: the control cannot pass, so the escape is not testable (never a verdict without it).
    assert analysis["control"]["holds"] is False
    assert analysis["escape"]["16"]["verdict"] == "not testable in this regime"


def test_help_lists_the_flags(capsys) -> None:
    assert sweep_main(["--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--output_dir", "--resume_from", "--summarize", "--launcher", "--arms", "--max_runs"):
        assert flag in out


def test_bad_command_lines_one_line(tmp_path: Path, corpus_file: str, capsys) -> None:
    assert sweep_main(["--summarize", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err
    plan = tiny_plan(tmp_path, corpus_file)
    assert sweep_main([str(plan), "--output_dir", str(tmp_path / "o"), "--arms", "nope"]) == 2
    assert "--arms nope: not an arm" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_depth_sweep_measures_every_final_model(tmp_path: Path, corpus_file: str) -> None:
    plan = tiny_plan(tmp_path, corpus_file, analysis="depth", seeds=[0, 1], budgets=[3], rate={"lr_grid": [3.0e-3]},
                     base={"measure": ["depth"], "depth": {"num_sequences": 8, "seq_len": 16}},
                     arms={"linear": None, "add": {"config": {"model": "hub_configs/spen-depth8"}},
                           "attention": {"config": {"model": "hub_configs/spen-depth8-attention"}},
                           "add-reference": {"config": {"model": "hub_configs/spen-depth8", "loop": "reference"},
                                             "seeds": [0]},
                           "add-equal-cpu": {"config": {"model": "hub_configs/spen-depth8"}, "budgets": [6]}},
                     settings={"selection": "attention", "reference": "add", "min_seeds": 2,
                               "loss_gate_ngram": "trigram", "plain_reference": "add-reference",
                               "equal_cpu": "add-equal-cpu"})
    raw = yaml.safe_load(plan.read_text())
    del raw["arms"]["linear"]
    plan.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    run = results["arms"]["attention"]["budgets"]["3"]["0"]
    assert run["depth"]["num_layers"] == 8 and len(run["depth"]["rms"]) == 9
    analysis = results["analysis"]
    assert set(analysis["table"]) >= {"token_accuracy", "val_loss", "log_rms_growth"}
    # 3 steps: the loss cannot pass the trigram, so the claim is not testable whatever the probes say.
    assert analysis["gate"]["holds"] is False and analysis["conclusion"] == "not testable in this regime"
    # Read as the ladder's rows: the n-gram line and the plain reference of the residual sum, each with its numbers.
    assert [g["name"] for g in analysis["gates"]] == ["ngram", "reference"]
    assert "Kneser-Ney trigram" in analysis["gates"][0]["why"] and "plain reference" in analysis["gates"][1]["why"]
    # And at equal CPU: attention against the sum trained longer, paired by seed, with each arm's CPU per run.
    equal = analysis["equal_cpu"]
    assert equal["arm"] == "add-equal-cpu" and equal["steps"] == 6 and equal["seeds"] == ["0", "1"]
    assert all(v > 0 for v in equal["cpu_seconds"].values())


@pytest.mark.slow
def test_gpu_ladder_plan_dry_run(tmp_path: Path, corpus_file: str) -> None:
    """hub_configs/sweeps/ladder-gpu.yaml (C4, shuffle buffer, trigram gate, plain reference) through the same
    code on tiny data: its smallest pair and the reference, every budget capped at 3 steps (--max_steps)."""
    raw = yaml.safe_load((ROOT / "hub_configs/sweeps/ladder-gpu.yaml").read_text())
    raw["base"].update({"data": corpus_file, "tokenizer_name": tokenizer_dir(), "block_size": 32,
                        "mixed_precision": "no", "total_train_batch_size": 4, "per_device_train_batch_size": 4,
                        "test_every": 3, "max_test_samples": 8, "max_eval_samples": 4, "eval_steps": 3,
                        "save_steps": 3})
    assert raw["base"]["shuffle"] is True and raw["settings"]["gate_ngram"] == "trigram"
    ref = raw["arms"]["w512-l8/reference"]
    ref["config"]["model"]["fair_pair"].update({"width": 128, "layers": 2, "block_size": 32})
    raw["arms"] = {"w128-l2/spen": raw["arms"]["w128-l2/spen"], "w128-l2/gpt2": raw["arms"]["w128-l2/gpt2"],
                   "w128-l2/reference": ref}
    for arm in ("w128-l2/spen", "w128-l2/gpt2"):
        raw["arms"][arm]["config"]["model"]["fair_pair"]["block_size"] = 32
        raw["arms"][arm]["lr_grid"] = [3.0e-3]
    ref["lr_grid"] = [3.0e-3]
    plan = tmp_path / "gpu.yaml"
    plan.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out), "--max_steps", "3"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["complete"]
    assert {b for a in results["arms"].values() for b in a["budgets"]} == {"3"}
    size = results["analysis"]["sizes"][0]
    assert size["name"] == "w128-l2" and size["reference"]["n"] == 1
    assert [g["name"] for g in size["gates"]] == ["ngram", "reference"]
    assert "trigram" in size["gates"][0]["why"]
    # A capped sweep is its own: resuming it without the cap in its plan is refused.
    assert sweep_main([str(ROOT / "hub_configs/sweeps/ladder-gpu.yaml"), "--resume_from", str(out)]) == 2


def test_a_run_another_process_trains_is_left_to_it(tmp_path: Path, corpus_file: str, capsys) -> None:
    """Two invocations on one sweep folder never train the same run: a held run lock is respected, the other
    runs go on, and the run is reported as still to run."""
    import filelock

    from eval.sweep.execute import RunBusy, execute
    from eval.sweep.paths import LOCK

    plan = tiny_plan(tmp_path, corpus_file, seeds=[0], rate={"lr_grid": [1.0e-3, 3.0e-3]}, budgets=[2])
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out), "--max_runs", "1"]) == 0
    held = out / "runs/linear/lr_0.003/seed_0/steps_2"
    held.mkdir(parents=True)
    (held / "run.json").write_text((out / "runs/linear/lr_0.001/seed_0/steps_2/run.json").read_text()
                                   .replace('"lr": 0.001', '"lr": 0.003'))
    with filelock.FileLock(held / LOCK):
        with pytest.raises(RunBusy):
            execute(out, "runs/linear/lr_0.003/seed_0/steps_2")
        assert sweep_main(["--resume_from", str(out)]) == 0
        assert "left to the other process" in capsys.readouterr().out
        results = json.loads((out / "results.json").read_text())
        assert not results["complete"] and "runs/linear/lr_0.003/seed_0/steps_2" in results["missing"]
    assert sweep_main(["--resume_from", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["complete"]


def test_an_alias_names_itself_in_the_runners_errors(tmp_path: Path, capsys) -> None:
    """The runner's errors carry the command the user typed (an alias of the runner says its own name)."""
    from eval.sweep.cli import scale_main

    assert scale_main(["--resume_from", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m eval.scale: error:") and "not a sweep folder" in err
    assert sweep_main(["--resume_from", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("ema-boundary sweep: error:")


def test_the_recall_trainer_refuses_an_arm_it_cannot_read(tmp_path: Path) -> None:
    """One line naming the plan and the arm: a key the recall trainer does not read, an arm without its model,
    a recipe field the sweep sets itself."""
    from ema_boundary.usage import UsageError
    from eval.sweep.trainers import TRAINERS

    raw = yaml.safe_load((ROOT / "hub_configs/sweeps/recall-map.yaml").read_text())
    for arm, words in (({"model": "gpt2", "lr": 0.1}, r"arms.bad: lr is not a recall setting \(model, width"),
                       ({"width": 64}, r"arms.bad: no `model` \(gpt2 or a SPEN variant name\)"),
                       ({"model": "gpt2", "recipe": {"steps": 9}}, r"arms.bad: recipe.steps is set by the sweep")):
        (tmp_path / "p.yaml").write_text(yaml.safe_dump({**raw, "arms": {"bad": {"config": arm}}}))
        with pytest.raises(UsageError, match=words):
            TRAINERS["recall"].check(load_plan(tmp_path / "p.yaml"))


def test_every_committed_sweep_resumes_under_its_plan() -> None:
    """Each committed sweep's plan in hub_configs is the one it ran, or that plan grown (arms, seeds or settings
    added, declared before they run): an edit that changes what a finished run ran fails here, not on a resume."""
    from eval.sweep.runner import _added, _first_difference

    folders = sorted((ROOT / "docs" / "sweeps").glob("*/sweep.json"))
    assert len(folders) >= 6
    for path in folders:
        recorded = json.loads(path.read_text())
        identity = json.loads(json.dumps(load_plan(ROOT / recorded["plan"]).identity()))
        diff = _first_difference(recorded["identity"], identity)
        assert diff is None or _added(recorded["identity"], identity), f"{path.parent.name}: {diff}"


def test_a_runs_paths_come_from_one_place(tmp_path) -> None:
    from eval.sweep.paths import RunPaths, run_id, run_pattern

    paths = RunPaths.of(tmp_path, "spen", 0.01, 2, 100)
    assert paths.run == run_id("spen", 0.01, 2, 100) == "runs/spen/lr_0.01/seed_2/steps_100"
    assert paths.result == tmp_path / "runs/spen/lr_0.01/seed_2/steps_100/result.json"
    assert (paths.spec.name, paths.log.name, paths.file("train").name) == ("run.json", "log.txt", "train")
    assert paths.relative("train.yaml") == "runs/spen/lr_0.01/seed_2/steps_100/train.yaml"  # as records name it
    nested = RunPaths.of(tmp_path, "w128/spen", 0.003, 0, 50)  # the ladder names arms by folders
    for run in (paths, nested):
        run.folder.mkdir(parents=True)
    assert sorted(tmp_path.glob(run_pattern())) == sorted([paths.folder, nested.folder])
    assert list(tmp_path.glob(run_pattern("spen"))) == [paths.folder]
