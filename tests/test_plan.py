"""The report's plan (eval/report/plan.py): typed and checked once at load, each message naming the YAML line;
a bad plan is refused by the command line in seconds, before any work, with nothing written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ema_boundary.yamlio import YAMLFileError
from eval.report.plan import (
    PLANS,
    PREDICTOR_ARMS,
    RECALL_KEYS,
    RECALL_MODELS,
    REFERENCE_ARM,
    REPO,
    TRACE_ARMS,
    Plan,
    PlanError,
)


def test_shipped_plans_load() -> None:
    for path in set(PLANS.values()):
        plan = Plan.load(REPO / path)
        assert plan.language_model.rate.lr_grid and len(plan.ablation.seeds) >= 2
    default = Plan.load(REPO / PLANS["tiny", False])
    assert len(default.ablation.seeds) >= 5 and len(default.language_model.seeds) >= 5
    assert len(default.language_model.rate.lr_grid) >= 3
    assert isinstance(default.language_model.rate.lr_grid[0], float)  # typed: an int in the YAML is read as a float
    capped = Plan.make(max_steps=7)
    assert capped.language_model.max_steps == 7 and capped.recall.max_steps == 7 and capped.ablation.max_steps == 7


def test_the_names_are_the_variant_tables() -> None:
    # The plan check reads copies of the names (importing the tables imports torch); they must be the tables'.
    from eval.recall import RecallTask, default_map_configs
    from modeling_spen.variants import PREDICTOR_VARIANTS, REFERENCE_VARIANT, TRACE_VARIANTS

    assert PREDICTOR_ARMS == tuple(PREDICTOR_VARIANTS)
    assert TRACE_ARMS == tuple(TRACE_VARIANTS)
    assert REFERENCE_ARM == REFERENCE_VARIANT
    assert RECALL_MODELS == tuple(default_map_configs())
    assert RECALL_KEYS == RecallTask().num_keys


@pytest.mark.parametrize("text,line,message", [
    ("name: x\nrecall:\n  models: [gpt2, spen-linaer]\n", 3, "recall.models names an unknown model 'spen-linaer'"),
    ("language_model:\n  rate:\n    lr_grid: [1.0e-3,\n      2]\n", 4,
     "language_model.rate.lr_grid must be a rate in (0, 1), got 2.0"),
    ("recall: {lr_grid: [0]}\n", 1, "recall.lr_grid must be a rate in (0, 1)"),
    ("ablation:\n  equivalence_margin: 3\n", 2, "ablation.equivalence_margin must be a margin in nats"),
    ("language_model: {rate: {lr_grid: []}}\n", 1, "language_model.rate.lr_grid must be a non-empty list"),
    # issue 50: the headline pair's rule is a sweep plan's `rate:` section; the old fields say where they went
    ("language_model:\n  extend_grid: true\n", 2, "language_model.extend_grid is retired: write the rate rule under "
     "`rate:` as a sweep plan does (rate.extend"),
    ("language_model:\n  lr_grid: [1.0e-3]\n", 2, "language_model.lr_grid is retired"),
    ("\n\nablation:\n  seeds: [-1]\n", 4, "ablation.seeds must be a non-negative integer"),
    ("\n\nablation:\n  seeds: 5\n", 4,
     "ablation.seeds lists the seeds themselves (the sweep plans' word), not a count: write seeds: [0, 1, 2, 3, 4]"),
    ("language_model: {seeds: [0, 0]}\n", 1, "language_model.seeds lists 0 twice"),
    ("ablation: {predictors: [linear, bogus]}\n", 1, "ablation.predictors names an unknown arm 'bogus'"),
    ("ablation: {traces: [linear-selective]}\n", 1, "ablation.traces must include the reference arm 'linear'"),
    ("recall:\n  pairs: [2, 2]\n", 2, "recall.pairs lists 2 twice"),
    ("recall:\n  pairs: [2, 200]\n", 2, f"recall.pairs must be a pair count from 1 to {RECALL_KEYS}"),
    ("recall:\n  stepz: 3\n", 2, "recall.stepz is not a field"),
    ("language_model: {spen: nowhere.yaml}\n", 1, "language_model.spen 'nowhere.yaml': no such train.py YAML"),
    ("workers: two\n", 1, "workers must be int, got 'two'"),
    ("grammar: {quick: 1}\n", 1, "grammar.quick must be bool"),
    ("grammar:\n  arms: docs/structure/arms_seed21/arms.json\n", 2, "grammar.arms is retired: the grammar arms are a "
     "committed sweep now: name its folder under `committed: arms:`"),
    ("committed:\n  arms: docs/sweeps/ladder\n", 2, "committed.arms docs/sweeps/ladder: results.json holds a 'ladder' "
     "analysis, arms needs 'arms'"),
    # issue 32: the old ladder reader is retired; the plan says where the ladder goes now
    ("language_model:\n  ladder: docs/scale/report.json\n", 2, "language_model.ladder is retired: the old unshuffled "
     "ladder (docs/scale) no longer carries a row; name the ladder sweep under `committed: ladder:` instead"),
    # issue 32: one vocabulary with the sweep plans: the recall section's rate grid and step cap are renamed
    ("name: x\nrecall:\n  pairs: [2]\n  lrs: [1.0e-3]\n", 4, "recall.lrs is retired: write `lr_grid:` instead"),
    ("recall: {steps: 30}\n", 1, "recall.steps is retired: write `max_steps:` instead"),
    ("recall: [\n", 2, "invalid YAML"),
    # issue 37: a key written twice is refused with both lines (YAML would keep the later value silently)
    ("language_model:\n  rate:\n    lr_grid: [1.0e-3]\n    lr_grid: [3.0e+3]\n", 4,
     "language_model.rate.lr_grid is written twice (lines 3 and 4)"),
    ("workers: 2\nname: x\nworkers: 3\n", 3, "workers is written twice (lines 1 and 3)"),
    ("committed:\n  recall_map: nowhere/sweep\n", 2, "committed.recall_map nowhere/sweep: no such folder"),
    ("committed:\n  recal_map: docs\n", 2, "committed.recal_map is not a field"),
])
def test_bad_plans_name_the_line_and_the_field(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(YAMLFileError) as err:  # PlanError, or the reader's own (not YAML, a key written twice)
        Plan.load(path)
    assert str(err.value).startswith(f"{path}:{line}: "), str(err.value)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_report_plan_reads_the_plan_dialect() -> None:
    # One dialect (eval/plans.py): the report plan's checker and error are the dialect's, its file read by the one
    # YAML reader (ema_boundary.yamlio).
    from ema_boundary import yamlio
    from eval import plans
    from eval.report import plan as report_plan

    assert report_plan.PlanError is plans.PlanError and issubclass(plans.PlanError, yamlio.YAMLFileError)
    assert issubclass(report_plan._Checker, plans.Checker)
    assert report_plan.read_yaml_file is yamlio.read_yaml_file


def test_a_plan_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("[1, 2]\n")
    with pytest.raises(PlanError, match="a mapping of sections"):
        Plan.load(path)


def test_where_names_a_fields_line(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("name: x\n\nrecall:\n  lr_grid: [1.0e-3]\n  pairs: [2, 4]\n")
    plan = Plan.load(path)
    assert plan.where("recall", "pairs") == f"{path}:5: recall.pairs"
    assert plan.recall.pairs == (2, 4) and plan.recall.lr_grid == (1e-3,)


@pytest.mark.parametrize("text,needle", [
    ("recall:\n  models: [gpt2, spen-linaer]\n", "plan.yaml:2: recall.models names an unknown model 'spen-linaer'"),
    ("language_model:\n  rate: {lr_grid: [1.0e-3, 3]}\n",
     "plan.yaml:2: language_model.rate.lr_grid must be a rate in (0, 1)"),
])
def test_the_command_line_refuses_a_bad_plan_in_seconds(tmp_path: Path, text: str, needle: str) -> None:
    plan, out = tmp_path / "plan.yaml", tmp_path / "out"
    plan.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "eval.report", "report", "--plan", str(plan), "--output_dir",
                           str(out)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    seconds = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr
    assert seconds < 5, f"refused after {seconds:.1f} s"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml"]  # nothing written, no temporary left


def test_probe_settings_carry_the_plans_values(tmp_path: Path) -> None:
    from eval.report.stages import probe_settings

    path = tmp_path / "plan.yaml"
    path.write_text("recall: {max_steps: 30, lr_grid: [2.0e-3], pairs: [2, 4], quick: true}\n")
    settings = probe_settings(Plan.load(path, seed=3))
    assert settings.task.pairs == (2, 4) and settings.recipe.lrs == (2e-3,) and settings.recipe.steps == 30
    assert settings.seed == 3


def test_the_depth_section_is_optional_checked_and_capped(tmp_path: Path) -> None:
    from eval.report.plan import DepthPlan

    assert Plan.load(REPO / PLANS["tiny", False]).depth is None  # the default leaves it to the full plan
    full = Plan.load(REPO / "hub_configs/report/full.yaml")
    assert isinstance(full.depth, DepthPlan) and len(full.depth.seeds) >= 5
    assert (REPO / full.depth.config).is_file()
    path = tmp_path / "plan.yaml"
    path.write_text("name: t\ndepth:\n  seeds: [0, 1, 2, 3, 4]\n  max_steps: 40\n")
    plan = Plan.load(path)
    assert plan.depth == DepthPlan(seeds=(0, 1, 2, 3, 4), max_steps=40) and plan.depth.loss_margin == 0.02
    capped = Plan.make(plan=path, max_steps=7)
    assert capped.depth.max_steps == 7 and Plan.make(plan=path, max_steps=70).depth.max_steps == 40
    for text, needle in (("depth:\n  config: nope.yaml\n", ":2: depth.config 'nope.yaml': no such train.py YAML"),
                         ("depth:\n  seeds: 2\n", ":2: depth.seeds lists the seeds themselves"),
                         ("depth:\n  accuracy_margin: 1.5\n", ":2: depth.accuracy_margin must be a rate"),
                         ("depth:\n  residual: add\n", ":2: depth.residual is not a field")):
        path.write_text(text)
        with pytest.raises(PlanError) as err:
            Plan.load(path)
        assert needle in str(err.value), err.value


def test_the_grid_extends_beyond_an_edge_until_interior_or_the_cap(tmp_path: Path) -> None:
    # The section is the runner's one rate rule (eval.rates.RateRule), read by the sweep plans' own reader;
    # the rates the report's plans add keep three digits (they name run folders; docs/report's 0.0333 above 1e-2).
    from eval.rates import RateRule
    from eval.sweep.plan import load_plan

    path = tmp_path / "plan.yaml"
    path.write_text("language_model:\n  rate: {lr_grid: [1.0e-3, 3.0e-3, 1.0e-2], extend: true, max_extensions: 2, "
                    "digits: 3}\n")
    rule = Plan.load(path).language_model.rate
    assert rule == RateRule(lr_grid=(1e-3, 3e-3, 1e-2), choose="first_seed", extend=True, max_extensions=2, digits=3)
    assert rule.as_plan() == {"lr_grid": [1e-3, 3e-3, 1e-2], "choose": "first_seed", "extend": True,
                              "max_extensions": 2, "factor": None, "digits": 3}
    sweep = tmp_path / "sweep.yaml"  # the same section in a sweep plan reads as the same rule
    sweep.write_text("trainer: recall\narms: {a: {config: {model: gpt2}}}\nbudgets: [10]\nrate: {lr_grid: [1.0e-3, "
                     "3.0e-3, 1.0e-2], extend: true, max_extensions: 2, digits: 3}\n")
    assert load_plan(sweep).rate == rule
    losses = {1e-3: 4.5, 3e-3: 4.3, 1e-2: 4.2}
    assert rule.next_rate(losses, 0) == 0.0333  # best at the top: one rate above, the grid's ratio there
    assert rule.next_rate({**losses, 0.0333: 4.1}, 1) == 0.111  # still the edge: the next one
    assert rule.next_rate({**losses, 0.0333: 4.1, 0.111: 4.0}, 2) is None  # the cap: two rates added
    assert rule.next_rate({**losses, 0.0333: 4.25}, 1) is None  # interior
    assert rule.next_rate({1e-3: 4.0, 3e-3: 4.3, 1e-2: 4.2}, 0) == 0.000333  # best at the bottom: one below
    path.write_text("language_model: {rate: {lr_grid: [0.3, 0.6], extend: true, factor: 2.5}}\n")
    rule = Plan.load(path).language_model.rate
    assert rule.factor == 2.5 and rule.next_rate({0.3: 4.3, 0.6: 4.0}, 0) is None  # 1.5: no rate
    path.write_text("language_model: {rate: {lr_grid: [1.0e-2, 3.0e-2]}}\n")
    assert Plan.load(path).language_model.rate.extend is False  # no rule declared: the grid stands


@pytest.mark.parametrize("text,message", [
    ("language_model: {rate: {lr_grid: [1.0e-2], extend: true}}\n",
     "language_model.rate.factor must be set to extend a grid of one rate"),
    ("language_model: {rate: {factor: 1.0}}\n", "language_model.rate.factor must be a factor above 1"),
    ("language_model: {rate: {max_extensions: -1}}\n", "language_model.rate.max_extensions must be a non-negative"),
    ("language_model: {rate: {extend: yes please}}\n", "language_model.rate.extend must be bool"),
    ("language_model: {rate: {choose: each_seed}}\n", "language_model.rate.choose must be first_seed"),
    ("language_model: {rate: {grid: [1.0e-2]}}\n", "language_model.rate.grid is not a field"),
])
def test_bad_grid_rules_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError, match=re.escape(message)):
        Plan.load(path)


@pytest.mark.parametrize("path", ["hub_configs/report/default.yaml", "hub_configs/report/quick.yaml",
                                  "hub_configs/report/full.yaml"])
def test_the_shipped_headline_pairs_are_fair_and_hold_out_a_test_split(path: str) -> None:
    # Issue 20: each pair scored on test blocks of >= 100 documents apart from the validation blocks, and matched
    # on non-embedding parameters (within 0.1%); the full plan's pair is the width-64 one that beats the bigram.
    from transformers import AutoConfig

    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
    import train_config
    from ema_boundary import corpus
    from ema_boundary.params import parameter_counts
    from eval.probes.models import build_on_meta

    plan = Plan.load(REPO / path)
    cfgs = {w: train_config.read_yaml(plan.yaml_path(w)) for w in ("spen", "gpt2")}
    assert cfgs["spen"]["test_every"] == cfgs["gpt2"]["test_every"] > 0
    sizes = corpus.split_sizes(len(corpus.embedded_documents()), cfgs["spen"]["val_every"], cfgs["spen"]["test_every"])
    assert sizes["test"] >= 100 and cfgs["spen"]["max_test_samples"] is None  # every test block is scored
    counts = {w: parameter_counts(build_on_meta(AutoConfig.from_pretrained(cfg["model_name_or_path"]),
                                                cfg["model_name_or_path"])).non_embedding for w, cfg in cfgs.items()}
    assert abs(counts["spen"] - counts["gpt2"]) / counts["spen"] < 1e-3
    if path.endswith("full.yaml"):
        assert counts["spen"] == 132_608 and plan.language_model.max_steps is None
        assert cfgs["spen"]["max_steps"] == 2000 and plan.language_model.rate.extend


@pytest.mark.slow
def test_the_embedded_test_split_has_50k_tokens_of_the_reports_tokenizer() -> None:
    from ema_boundary import corpus, packing

    tok, _ = corpus.load_tokenizer(None, ["embedded"], 10, 1024, 100_000, "test", test_every=3)
    blocks, documents = packing.split_blocks(["embedded"], "test", 10, tok, 128, None, test_every=3)
    assert blocks.shape[0] * 128 >= 50_000 and documents >= 100
