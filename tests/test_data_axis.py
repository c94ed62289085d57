"""The data-axis analysis (eval/scale/data_axis.py) on synthetic per-seed results in the runner's contract, read
against the declared plan (hub_configs/sweeps/data-axis.yaml): the fitted trend and its crossing, the gates at every
point (a failed one leaves the point out of the fit and hollow in the figure), the over-fitting check."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ema_boundary.verdicts import NARROWS, WIDENS, WORSE_THAN_REFERENCE
from eval.scale import data_axis as da
from eval.sweep.analyses import ANALYSES
from eval.sweep.plan import ANALYSES as DECLARED
from eval.sweep.plan import load_plan
from eval.sweep.render import render_markdown
from eval.sweep.runner import Sweep

PLAN = "hub_configs/sweeps/data-axis.yaml"
TOKENS = {"f1_8": 89_472, "f1_4": 175_360, "f1_2": 337_664, "f1": 675_840}  # the plan's table, as block targets
NOISE = [-0.01, 0.0, 0.01]  # seed 0, 1, 2 around the line


def _points(line: Any) -> list[dict[str, Any]]:
    return [{"name": k, "tokens": t, "gaps": [line(t) + e for e in NOISE]} for k, t in TOKENS.items()]


def test_a_narrowing_trend_crosses_zero_beyond_the_data_with_an_interval() -> None:
    # SPEN 0.30 nats better at 1/8, 0.05 nats less per doubling: 0 at 6 doublings above 89,472 tokens (5.7M).
    fit = da.fit_trend(_points(lambda t: -0.30 + 0.05 * math.log2(t / 89_472)))
    assert fit["reading"] == NARROWS and fit["slope"] == pytest.approx(0.05, abs=0.002)
    assert 0 < fit["slope_ci95"][0] < 0.05 < fit["slope_ci95"][1] and fit["df"] == 10
    c = fit["crossing"]
    assert c["where"] == "beyond the data" and c["tokens"] == pytest.approx(89_472 * 64, rel=0.15)
    assert c["ci95"][0] < c["tokens"] < c["ci95"][1]  # every resample narrows here: both bounds finite
    assert c["no_crossing_share"] == 0 and c["times_largest"] == pytest.approx(8, rel=0.15)
    text = da.trend_text({**fit, "setting": "w192-e6", "better": {"arch": "spen", "up_to": 675_840,
                                                                   "from": 89_472}, "excluded": []})
    assert text.startswith("w192-e6: SPEN better at <= 676k distinct tokens (every gated point from 89.5k); the gap "
                           "narrows by 0.050 [0.045, 0.055] nats per doubling of the data")
    assert "the fitted line crosses 0 at ~5.7M tokens [4.5M, 7.6M] (beyond the data, 8.5x the largest point)" in text


def test_a_flat_trend_does_not_narrow_and_names_no_crossing() -> None:
    fit = da.fit_trend(_points(lambda t: -0.20))
    assert fit["reading"] == da.FLAT and fit["crossing"] is None
    assert fit["slope_ci95"][0] < 0 < fit["slope_ci95"][1]
    assert "the gap does not narrow (slope +0.000 [" in da.trend_text({**fit, "setting": "w128-e6"})
    widening = da.fit_trend(_points(lambda t: -0.10 - 0.05 * math.log2(t / 89_472)))
    assert widening["reading"] == WIDENS and widening["crossing"]["where"] == "before the data"
    # SPEN's lead at 1/8 gone by 1/2 and reversed at all of the split: it narrows, and crossed within the data.
    crossed = da.fit_trend(_points(lambda t: -0.10 + 0.05 * math.log2(t / 89_472)))
    assert crossed["reading"] == NARROWS and crossed["crossing"]["where"] == "within the data"
    assert crossed["crossing"]["tokens"] == pytest.approx(89_472 * 4, rel=0.05)


def test_a_line_that_crosses_within_the_data_is_named_with_the_bounds_its_resamples_allow() -> None:
    # Not resolved (the slope's interval reaches 0), but the fitted line changes sign inside the data: the crossing
    # is said, and since 11% of the resamples turn the line the other way it has no upper bound.
    fit = da.fit_trend([{"name": k, "tokens": t, "gaps": [-0.05 + 0.02 * math.log2(t / 89_472) + e
                                                         for e in (-0.08, 0.0, 0.08)]} for k, t in TOKENS.items()])
    c = fit["crossing"]
    assert fit["reading"] == da.FLAT and c["where"] == "within the data" and c["no_crossing_share"] > 0.025
    assert c["ci95"][0] < c["tokens"] and c["ci95"][1] is None
    assert da.trend_text({**fit, "setting": "s"}) == (
        "s: neither model better at every point; the gap does not narrow (slope +0.020 [-0.022, +0.062] nats per "
        "doubling of the data); the fitted line crosses 0 at ~506k tokens [117k, none] (within the data); 4 points, "
        "12 seed gaps")


def test_too_few_points_are_no_trend() -> None:
    fit = da.fit_trend(_points(lambda t: -0.2)[:2])
    assert fit["fit"] is False and "at least 3 points" in fit["why"]
    assert da.trend_text({**fit, "setting": "w128-e1"}).startswith("w128-e1: no trend (2 points with both gates")


# ---------------------------------------------------------------------------------------------
# The analysis on the declared plan
# ---------------------------------------------------------------------------------------------


def _run(folder: Path, arm: str, seed: str, train: list[float], val: list[float]) -> str:
    """A run folder with a metrics.jsonl: the training loss and the validation curve at steps 1..n."""
    run = f"runs/{arm}/seed_{seed}"
    (folder / run / "train").mkdir(parents=True)
    rows = [{"step": i + 1, "loss": t, "tokens": 2048 * (i + 1)} for i, t in enumerate(train)]
    rows += [{"step": i + 1, "val_loss": v} for i, v in enumerate(val)]
    (folder / run / "train" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _seed(loss: float, tokens: int, steps: int, run: str | None = None) -> dict[str, Any]:
    return {"score": loss, "tokens": steps * 2048, "train_split_tokens": tokens,
            "distinct_train_tokens": min(tokens, steps * 2048), "run": run,
            "parameters": {"total": 1_380_864, "embedding": 196_608, "non_embedding": 1_184_256}}


def _results(plan: Any, losses: dict[str, tuple[list[float], list[float], float]],
             runs: dict[str, dict[str, str]] | None = None) -> dict[str, Any]:
    """The runner's results for ``plan``: point -> (SPEN's test losses by seed, GPT-2's, the plain reference's);
    every other arm declared and not run."""
    arms = {}
    for arm in plan.arms:
        point, arch = arm.name.rsplit("/", 1)
        steps = plan.budgets_of(arm)[0]
        tokens = TOKENS[point.split("/")[1]]
        seeds: dict[str, Any] = {}
        if point in losses:
            spen, gpt2, ref = losses[point]
            values = {"spen": spen, "gpt2": gpt2, "reference": [ref]}[arch]
            seeds = {str(i): _seed(x, tokens, steps, (runs or {}).get(arm.name, {}).get(str(i)))
                     for i, x in enumerate(values)}
        arms[arm.name] = {"choices": {"0": {"chosen": 7e-3, "interior": True, "tried": {}}},
                          "budgets": {str(steps): seeds}}
    return {"arms": arms}


def _trend(setting: str, gap: Any, gpt2: float = 3.40, reference: float = 3.40) -> dict[str, Any]:
    return {f"{setting}/{k}": ([gpt2 + gap(t) + e for e in NOISE], [gpt2 + e / 2 for e in NOISE], reference)
            for k, t in TOKENS.items()}


def test_the_analysis_is_declared_and_fits_only_the_points_whose_gates_hold(tmp_path: Path, monkeypatch) -> None:
    assert "data_axis" in DECLARED and ANALYSES["data_axis"] is da.data_axis
    plan = load_plan(PLAN)
    losses = _trend("w192-e6", lambda t: -0.30 + 0.05 * math.log2(t / 89_472))
    losses |= _trend("w128-e6", lambda t: -0.20)
    # w128-e6 at 1/4: GPT-2 worse than its plain reference by more than the margin: hollow, out of the fit.
    spen, gpt2, _ = losses["w128-e6/f1_4"]
    losses["w128-e6/f1_4"] = ([x + 0.5 for x in spen], [x + 0.5 for x in gpt2], 3.40)
    # The Kneser-Ney lines, counted on each fraction (the sweep's cache of them): trigram 3.6 nats. At w192-e6's 1/8
    # both models are above it (its reference with them: only that gate fails there).
    (tmp_path / "shared" / "tokenizer").mkdir(parents=True)
    for arm in plan.arms:
        fraction = plan.config_of(arm).get("train_fraction", 1.0)
        name = f"ngram_test_{plan.budgets_of(arm)[0] * 2048}{f'_f{fraction:g}' if fraction < 1 else ''}.json"
        (tmp_path / "shared" / name).write_text(json.dumps({"loss": {"unigram": 5.9, "bigram": 4.1, "trigram": 3.6}}))
    spen, gpt2, _ = losses["w192-e6/f1_8"]
    losses["w192-e6/f1_8"] = ([x + 0.5 for x in spen], [x + 0.5 for x in gpt2], 3.90)
    drawn: list[Any] = []
    monkeypatch.setattr("ema_boundary.figures.save", lambda fig, path, dpi=120: (drawn.append(fig), Path(path)
                                                                                  .write_bytes(b"png")))
    out = da.data_axis(plan, _results(plan, losses), tmp_path, Sweep(plan, tmp_path))
    points = {p["name"]: p for p in out["points"]}
    assert points["w128-e6/f1_4"]["gate"] is False and WORSE_THAN_REFERENCE in str(points["w128-e6/f1_4"]["gates"])
    assert points["w192-e6/f1_8"]["gate"] is False and "not all below the Kneser-Ney trigram on the same documents" \
        in points["w192-e6/f1_8"]["gates"][0]["why"]
    assert points["w192-e6/f1_2"]["gate"] is True and points["w192-e6/f1_2"]["distinct_tokens"] == 337_664
    assert points["w192-e6/f1_2"]["epochs"] == pytest.approx(999 * 2048 / 337_664)
    assert points["w192-e1/f1"]["gate"] is False and points["w192-e1/f1"]["spen"]["mean"] is None  # not run yet
    fit = out["fits"]["w192-e6"]
    assert fit["points"] == ["w192-e6/f1_4", "w192-e6/f1_2", "w192-e6/f1"] and fit["reading"] == NARROWS
    assert [e["name"] for e in fit["excluded"]] == ["w192-e6/f1_8"]
    assert fit["slope"] == pytest.approx(0.05, abs=0.005) and fit["better"]["up_to"] == 675_840
    flat = out["fits"]["w128-e6"]
    assert flat["reading"] == da.FLAT and "w128-e6/f1_4" not in flat["points"]
    assert out["fits"]["w128-e1"]["fit"] is False  # declared, not run: no trend, said so
    assert "w128-e12" not in out["fits"]  # one fraction: the over-fitting check's point, not a trend
    # The figure: a panel per number of epochs that has run (e1 has not), the two points whose gates fail hollow.
    assert (tmp_path / out["figure"]).is_file() and len(drawn) == 1
    hollow = [ln for ax in drawn[0].axes for ln in ax.get_lines()
              if ln.get_marker() == "o" and ln.get_markerfacecolor() == "white"]
    assert len(hollow) == 2 and [ax.get_title() for ax in drawn[0].axes] == ["e6: hollow = a gate fails"]
    # results.md reads the same sentences as the report.
    text = render_markdown({"name": "data-axis", "plan": {"path": PLAN}, "trainer": "train", "scored_on": "test",
                            "complete": False, "missing": ["x"], "commands": {"reproduce": "r", "resume": "c",
                                                                            "summarize": "s"},
                            "arms": {}, "analysis": {"kind": "data_axis", **out}})
    assert da.trend_text(fit).endswith("(left out: w192-e6/f1_8: not all below the Kneser-Ney trigram)")
    assert da.trend_text(flat).endswith(
        f"(left out: w128-e6/f1_4: not all below the Kneser-Ney trigram, {WORSE_THAN_REFERENCE})")
    assert da.trend_text(fit) in text and "**not read**: spen 3.700, gpt2 3.900 nats not all below" in text
    assert "| w128-e12/f1 | – | – | – | – | – | **not read**: not run yet |" in text


def test_a_point_whose_reference_ran_before_its_baseline_is_read_as_not_run(tmp_path: Path, monkeypatch) -> None:
    # A sweep stopped part-way: at w192-e6/f1 SPEN and the plain reference have scores, GPT-2 none yet.
    plan = load_plan(PLAN)
    monkeypatch.setattr("ema_boundary.figures.save", lambda fig, path, dpi=120: Path(path).write_bytes(b"png"))
    results = _results(plan, {"w192-e6/f1": ([3.20, 3.21, 3.22], [3.40, 3.41, 3.42], 3.38)})
    results["arms"]["w192-e6/f1/gpt2"]["budgets"] = {"2000": {}}
    out = da.data_axis(plan, results, tmp_path, Sweep(plan, tmp_path))
    point = next(p for p in out["points"] if p["name"] == "w192-e6/f1")
    assert point["gate"] is False and point["gpt2"]["mean"] is None and point["reference"]["mean"] == 3.38
    assert not any(g["name"] == "reference" for g in point["gates"])  # no check against a baseline not yet run
    # Both models run, no Kneser-Ney line to read (the folder lacks the sweep's tokenizer): not read, and said so.
    results = _results(plan, {"w192-e6/f1": ([3.20, 3.21, 3.22], [3.40, 3.41, 3.42], 3.38)})
    point = next(p for p in da.data_axis(plan, results, tmp_path, Sweep(plan, tmp_path))["points"]
                 if p["name"] == "w192-e6/f1")
    assert point["gate"] is False and point["gates"][0]["holds"] is None and "no Kneser-Ney trigram line" \
        in point["gates"][0]["why"]


def test_the_over_fitting_check_pairs_each_model_by_seed(tmp_path: Path, monkeypatch) -> None:
    plan = load_plan(PLAN)
    monkeypatch.setattr("ema_boundary.figures.save", lambda fig, path, dpi=120: Path(path).write_bytes(b"png"))
    losses = {"w128-e6/f1": ([3.23, 3.24, 3.235], [3.41, 3.42, 3.415], 3.44),
              "w128-e12/f1": ([3.27, 3.29, 3.265], [3.32, 3.335, 3.32], 3.41)}
    runs: dict[str, dict[str, str]] = {}
    for arm, train, val in (("w128-e12/f1/spen", [2.6, 2.4, 2.25], [3.25, 3.24, 3.30]),
                            ("w128-e12/f1/gpt2", [2.9, 2.7, 2.5], [3.45, 3.36, 3.33]),
                            ("w128-e6/f1/spen", [2.8, 2.6], [3.30, 3.24]),
                            ("w128-e6/f1/gpt2", [3.0, 2.85], [3.50, 3.41])):
        runs[arm] = {s: _run(tmp_path, arm, s, [x + 0.01 * int(s) for x in train],
                             [x + 0.002 * int(s) for x in val]) for s in ("0", "1", "2")}
    out = da.data_axis(plan, _results(plan, losses, runs), tmp_path, Sweep(plan, tmp_path))
    check = out["overfit"]
    spen, gpt2 = check["models"]["spen"], check["models"]["gpt2"]
    assert spen["test_change"]["mean"] == pytest.approx(0.04) and spen["over_fits"] is True
    assert spen["longer"]["val_rise"]["mean"] == pytest.approx(0.06) and spen["longer"]["val_min_step"] == [2, 2, 2]
    assert spen["longer"]["generalization"]["mean"] == pytest.approx(3.30 + 0.002 - 2.25 - 0.01)
    assert gpt2["test_change"]["mean"] == pytest.approx(-0.09) and gpt2["over_fits"] is False
    text = da.overfit_text(check)
    assert text.startswith("over-fitting, `w128-e6/f1` → `w128-e12/f1`: SPEN test loss +0.040 [")
    assert "validation +0.060 above its lowest" in text and "GPT-2 test loss -0.090" in text
    assert text.count(": over-fits") == 1 and text.endswith(": no over-fitting shown")
    assert 0 < spen["test_change"]["ci95"][0] and gpt2["test_change"]["ci95"][1] < 0  # paired: seed by seed


def test_the_plan_is_declared_as_issue_47_asks() -> None:
    plan, ladder = load_plan(PLAN), load_plan("hub_configs/sweeps/ladder.yaml")
    blocks = {k: (v + 1) // 128 for k, v in TOKENS.items()}  # the plan's table: 699, 1,370, 2,638, 5,280 blocks
    fractions = {"f1_8": 0.125, "f1_4": 0.25, "f1_2": 0.5, "f1": 1.0}
    for size in ("w128", "w192"):
        for epochs, steps_of in (("e6", lambda b: round(2000 * b / 5280)), ("e1", lambda b: math.ceil(b / 16))):
            for key, fraction in fractions.items():
                for arch in ("spen", "gpt2", "reference"):
                    arm = plan.arm(f"{size}-{epochs}/{key}/{arch}")
                    cfg, steps = plan.config_of(arm), plan.budgets_of(arm)
                    assert cfg.get("train_fraction", 1.0) == fraction and steps == (steps_of(blocks[key]),)
                    assert cfg["warmup_steps"] == min(50, round(steps[0] / 40))
                    assert cfg["eval_steps"] == math.ceil(steps[0] / 8)
                    pair = ladder.config_of(ladder.arm(f"{size}/{arch}"))["model"]
                    assert cfg["model"] == pair and cfg.get("loop", "train") == ("reference" if arch == "reference"
                                                                                else "train")
                    assert plan.seeds_of(arm) == ((0,) if arch == "reference" else (0, 1, 2))
                    assert plan.grid_of(arm) == ((3e-3,) if arch == "reference" else ladder.grid_of(
                        ladder.arm("w192/spen")))
    assert (plan.rate.choose, plan.rate.extend, plan.rate.max_extensions, plan.rate.factor) == (
        ladder.rate.choose, ladder.rate.extend, ladder.rate.max_extensions, ladder.rate.factor)
    assert plan.settings["gate_ngram"] == ladder.settings["gate_ngram"] == "trigram"
    assert plan.settings["reference_margin"] == ladder.settings["reference_margin"]
    # The e6 runs on all of the split are the ladder's runs: every train.py setting the same but how often the
    # training loss is logged (which changes no number of the run).
    for size in ("w128", "w192"):
        for arch in ("spen", "gpt2", "reference"):
            ours = plan.config_of(plan.arm(f"{size}-e6/f1/{arch}"))
            theirs = ladder.config_of(ladder.arm(f"{size}/{arch}"))
            assert {k: v for k, v in ours.items() if k != "logging_steps"} == \
                {k: v for k, v in theirs.items() if k != "logging_steps"}
            assert plan.budgets_of(plan.arm(f"{size}-e6/f1/{arch}")) == ladder.budgets_of(ladder.arm(f"{size}/{arch}"))
    # The over-fitting check: the ladder's 4,000 steps at w128, its regularised twin, both named in the settings.
    check = plan.settings["overfit"]
    assert plan.budgets_of(plan.arm(f"{check['longer']}/spen")) == ladder.budgets_of(ladder.arm("w128-4000/spen"))
    assert plan.config_of(plan.arm(f"{check['regularised']}/gpt2"))["weight_decay"] > plan.base["weight_decay"]
    assert {check["shorter"], check["longer"], check["regularised"]} <= {a.name.rsplit("/", 1)[0] for a in plan.arms}


def test_settings_at_different_epochs_on_one_axis_have_their_own_marker() -> None:
    from ema_boundary.figures import pyplot

    def point(setting: str, tokens: int, gap: float) -> dict[str, Any]:
        return {"setting": setting, "distinct_tokens": tokens, "gap": {"mean": gap, "ci95": None}, "gate": False}
    settings = ["w192-e6", "w128-e6", "w192-e1"]
    analysis = {"points": [point(s, t, -0.5) for s in settings for t in (89_472, 675_840)],
                "fits": {s: {"fit": False} for s in settings}}
    plt = pyplot()
    fig, ax = plt.subplots()
    da.draw_settings(ax, analysis, settings)
    markers = {ln.get_label(): ln.get_marker() for ln in ax.get_lines() if ln.get_label() in settings}
    assert markers == {"w192-e6": "o", "w128-e6": "o", "w192-e1": "^"}  # the inset of the boundary figure
    plt.close(fig)
