"""The committed sweeps a report plan names (eval/report/committed.py): checked once at load in one line with the
YAML line, read through one reader, one row per claim, an incomplete sweep read for what it has and said so.

The sweep folders are built by the sweep's own analyses (registry: eval/sweep/analyses.py) on synthetic per-seed results
written in the runner's contract, so the rows read exactly what a real sweep writes; one test runs a tiny real
recall sweep end to end."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from ema_boundary import verdicts as words
from eval import verdicts
from eval.depth import claim_verdict, paired_table
from eval.report.claim_rows import evaluate, one_screen
from eval.report.claims import CLAIMS
from eval.report.committed import SOURCES, escape_tables, read_sweep, sweeps_block
from eval.report.plan import REPO, Plan, PlanError
from eval.sweep.analyses import ANALYSES
from eval.sweep.plan import plan_from_text
from eval.sweep.render import render_markdown
from eval.sweep.runner import RESULTS, SCHEMA, TOOL, Sweep

SEEDS = ["0", "1", "2", "3", "4"]


def write_sweep(folder: Path, plan_name: str, arms: dict[str, dict[str, dict[str, Any]]], *,
                missing: list[str] | None = None, patch: Any = None) -> dict[str, Any]:
    """A sweep folder whose results.json follows the runner's contract, its analysis computed by the sweep's own
    analysis on ``arms`` (arm -> budget -> seed -> result with ``score``)."""
    text = (REPO / "hub_configs" / "sweeps" / f"{plan_name}.yaml").read_text()
    plan = plan_from_text(text, f"{plan_name}.yaml")
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "tool": TOOL, "schema": SCHEMA, "name": plan.name, "trainer": plan.trainer,
        "plan": {"path": f"hub_configs/sweeps/{plan_name}.yaml", "declared": plan.declared},
        "folder": str(folder), "scored_on": plan.score, "complete": not missing, "missing": missing or [],
        "commands": {"resume": f"ema-boundary sweep --resume_from {folder.name}"},
        "arms": {arm: {"choices": {"0": {"chosen": 1e-3, "interior": True, "tried": {"0.001": 1.0}}},
                       "budgets": budgets} for arm, budgets in arms.items()},
        "seconds": {"runs": 1.0, "runs_count": 1, "this_invocation": None}}
    results["analysis"] = {"kind": plan.analysis, **ANALYSES[plan.analysis](plan, results, folder, Sweep(plan, folder))}
    if patch is not None:
        patch(results["analysis"])
    (folder / RESULTS).write_text(json.dumps(results))
    return results


def recall_seed(acc: float, arm: str, state: int, rule: str = "fixed") -> dict[str, Any]:
    return {"score": {"2": 1.0, "4": 1.0, "8": acc, "16": acc}, "steps": 2000, "chance": 1 / 128, "lr": 1e-3,
            "arm": {"write_rule": rule, "write_rule_label": rule, "state_numbers": state, "state_parts": {},
                    "state_grows_with_length": arm == "gpt2"},
            "parameters": {"total": 100_000, "embedding": 8_192, "non_embedding": 91_808}}


def recall_sweep(folder: Path, accuracies: dict[str, list[float]], **kw: Any) -> dict[str, Any]:
    states = {"gpt2": 0, "linear-ema16": 1024, "linear-selective_ssm": 1216, "linear_attention-sequence": 1280}
    rules = {"linear-ema16": "fixed", "linear-selective_ssm": "selective", "linear_attention-sequence": "outer"}
    arms = {arm: {"4000" if arm.endswith("-x2") else "2000": {
                s: recall_seed(a, arm, states[arm.removesuffix("-x2")], rules.get(arm.removesuffix("-x2"), "cache"))
                for s, a in zip(SEEDS, accs, strict=False)}} for arm, accs in accuracies.items()}
    return write_sweep(folder, "recall-map", arms, **kw)


def report_with(sweeps: dict[str, Any]) -> dict[str, Any]:
    return {"plan": {"corpus": "embedded"}, "sweeps": sweeps}


def row(rows: list[dict[str, Any]], claim_id: str) -> dict[str, Any]:
    return next(r for r in rows if r["id"] == claim_id)


SOLVED = [1.0, 1.0, 0.99, 1.0, 1.0]


def test_selective_escapes_reads_the_headline_with_both_numbers_and_its_conditions(tmp_path: Path) -> None:
    results = recall_sweep(tmp_path / "recall", {
        "gpt2": SOLVED, "linear-ema16": [0.10, 0.11, 0.09, 0.10, 0.12],
        "linear-selective_ssm": [0.40, 0.45, 0.38, 0.42, 0.44],
        "linear_attention-sequence": [0.9, 0.92, 0.9, 0.91, 0.9]})
    assert results["analysis"]["escape"]["16"]["verdict"] == words.MET
    block = sweeps_block({"recall_map": str(tmp_path / "recall")})
    rows = evaluate(report_with(block))
    r = row(rows, "selection_escapes_recall")
    assert r["verdict"] == "met" and r["measurement"] == "sweeps.recall_map.analysis.escape"
    assert "`linear-selective_ssm` 41.8% vs `linear-ema16` 10.4% at 16 pairs" in r["ours"]
    assert "no-lookup floor (most frequent value in the context) 12.3%" in r["ours"] and "control gpt2" in r["ours"]
    assert "cap 2,000 steps" in r["strength"]
    assert "write rules at about equal state" in r["conditions"] and "Zoology (Arora et al. 2023)" in r["conditions"]
    # Which arm escapes: each against the measured floor + margin (a bank at 10.4% [9.0, 11.8] is above 1/16 + 5
    # points' upper end no more, and below the floor's bar: it does not escape); each pair names the higher arm.
    assert ("against the no-lookup floor (most frequent value in the context) + margin, 17.3%): attention over "
            "tokens (`gpt2`, 0) 99.8% [99.2%, 100.0%] escapes (5 seeds), fixed (EMA rates) (`linear-ema16`, 1,024) "
            "10.4% [9.0%, 11.8%] does not escape (5 seeds), S6 decay and write, read one step late (SPEN's slots) "
            "(`linear-selective_ssm`, 1,216) 41.8% [38.2%, 45.4%] escapes (5 seeds), input-dependent outer-product "
            "sums (linear attention) (`linear_attention-sequence`, 1,280) 90.6% [89.5%, 91.7%] escapes (5 seeds)"
            ) in r["conditions"]
    assert "`linear_attention-sequence` higher" in r["conditions"] and "a lower" not in r["conditions"]
    assert "partial" not in r["conditions"]
    assert r["preconditions"][0]["holds"] is True and r["value"].startswith("+31.4")
    # One row per claim: every claim once, the recall claim read on the sweep.
    assert [x["id"] for x in rows] == [c.id for c in CLAIMS]
    shown = [a["id"] for a, _ in one_screen(rows)]
    assert len(shown) == len(set(shown)) and "selection_escapes_recall" in shown


def test_the_committed_recall_sweep_renders_as_tables_and_the_row_keeps_the_bank_pairs(tmp_path: Path) -> None:
    recall_sweep(tmp_path / "recall", {
        "gpt2": SOLVED, "linear-ema16": [0.10, 0.11, 0.09, 0.10, 0.12],
        "linear-selective_ssm": [0.40, 0.45, 0.38, 0.42, 0.44],
        "linear_attention-sequence": [0.9, 0.92, 0.9, 0.91, 0.9]})
    block = sweeps_block({"recall_map": str(tmp_path / "recall")})["recall_map"]
    text = "\n".join(escape_tables(block))
    # one row per arm: its write rule, state, rate, seeds, accuracy with the interval, and the reading against the bar
    assert ("| `linear-selective_ssm` | S6 decay and write, read one step late (SPEN's slots) | 1,216 | 91,808 | 0.001 "
            "| 5 | 41.8% [38.2%, 45.4%] | escapes |") in text, text
    assert ("| `linear-ema16` | fixed (EMA rates) | 1,024 | 91,808 | 0.001 | 5 | 10.4% [9.0%, 11.8%] "
            "| does not escape |") in text
    assert "| N = 16 | `linear-selective_ssm` 41.8% | `linear-ema16` 10.4% | +31.4 [" in text and "| met |" in text
    assert "an arm escapes where its 95% interval over seeds lies wholly above floor + margin, 17.3%" in text
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "recall")}))), "selection_escapes_recall")
    # the claim row keeps the pairs against the fixed bank; the pair of the two escaping arms is in the tables' file
    assert "against the fixed bank (every pair: the sweep's results.md)" in r["conditions"]
    assert "(`linear-selective_ssm`, 1,216) − input-dependent" not in r["conditions"]
    assert "(`linear-ema16`, 1,024) − input-dependent" in r["conditions"]


def n64_sweep(folder: Path, bank: list[float], missing: list[str] | None = None) -> dict[str, Any]:
    """escape-routes-n64's plan on synthetic runs: Mamba's block well above the floor, the bank of 64 at ``bank``."""
    states = {"gpt2": (0, "cache"), "mixer_mamba64": (4352, "selective_scan"), "hf-mamba64": (4352, "selective_scan"),
              "linear-s6lagged64": (4288, "input_dependent_outer_product"), "linear-ema64": (4096, "fixed")}
    accs = {"gpt2": SOLVED, "mixer_mamba64": [0.97, 0.95, 0.96, 0.98, 0.94],
            "hf-mamba64": [0.96, 0.93, 0.97, 0.95, 0.96],
            "linear-s6lagged64": [0.16, 0.15, 0.18, 0.14, 0.17], "linear-ema64": bank}
    arms = {arm: {"2000": {s: recall_seed(a, arm, states[arm][0], states[arm][1]) for s, a in zip(SEEDS, acc,
                                                                                                   strict=False)}}
            for arm, acc in accs.items()}
    return write_sweep(folder, "escape-routes-n64", arms, missing=missing)


def test_the_larger_state_is_a_condition_of_the_escape_row_its_tables_and_its_figure(tmp_path: Path) -> None:
    """The same protocol at N = 64 (``committed: recall_map_n64``) prints beside the row, in its own tables and on
    the figure's lines, and never decides the row: here its bank escapes too, so it would read "refuted" if it did."""
    from eval.report.boundary import draw
    from eval.report.render import escape_routes_section

    recall_sweep(tmp_path / "recall", {
        "gpt2": SOLVED, "linear-ema16": [0.10, 0.11, 0.09, 0.10, 0.12],
        "linear-selective_ssm": [0.40, 0.45, 0.38, 0.42, 0.44]})
    results = n64_sweep(tmp_path / "n64", [0.90, 0.92, 0.91, 0.93, 0.90])
    assert results["analysis"]["escape"]["64"]["verdict"] != words.MET
    report = report_with(sweeps_block({"recall_map": str(tmp_path / "recall"),
                                       "recall_map_n64": str(tmp_path / "n64")}))
    r = row(evaluate(report), "selection_escapes_recall")
    assert r["verdict"] == "met" and r["measurement"] == "sweeps.recall_map.analysis.escape"
    assert f"at a larger state, the same protocol (committed sweep `{tmp_path / 'n64'}`, a condition" in r["conditions"]
    assert "N = 64: `mixer_mamba64` 96.0% vs `linear-ema64` 91.2% at 16 pairs (state per layer 4,352 vs 4,096" \
        in r["conditions"]
    assert "(`linear-ema64`, 4,096) 91.2% [89.6%, 92.8%] escapes (5 seeds)" in r["conditions"]
    report["claims"] = [r]
    text = "\n".join(escape_routes_section(report, {}))
    assert "### In time: the same protocol at N = 64" in text
    assert "| `linear-s6lagged64` | " in text and "| N = 64-lagged | `linear-s6lagged64` 16.0% |" in text
    fig = draw(report)
    labels = [ax.get_xlabel() for ax in fig.axes]
    assert any(f"`{tmp_path / 'recall'}` and `{tmp_path / 'n64'}`" in x for x in labels), labels
    # a partial sweep says how much is still to run
    n64_sweep(tmp_path / "part", [0.1] * 5, missing=["linear-ema64/lr_0.001/seed_4/steps_2000"])
    part = sweeps_block({"recall_map_n64": str(tmp_path / "part")})["recall_map_n64"]
    from eval.report.committed import larger_state_conditions

    assert "partial: 1 run still to run" in larger_state_conditions(part)


def test_a_write_rule_pair_of_unequal_states_says_so() -> None:
    from eval.report.committed import _unequal_states

    assert _unequal_states(320, 1024) == " (the states are not equal: 3.2x)"
    assert _unequal_states(1024, 1216) == "" and _unequal_states(1216, 1024) == ""
    assert _unequal_states(0, 1024) == " (the states are not equal: infx)"


def test_the_report_schema_lists_every_claim_source() -> None:
    schema = json.loads((REPO / "eval/report/report.schema.json").read_text())
    assert schema["properties"]["sweeps"]["propertyNames"]["enum"] == list(SOURCES)


def test_the_escape_row_names_the_rates_tried_and_counts_edge_choices(tmp_path: Path) -> None:
    """An edge choice reads against the rates it could have left: the grid as tried, not as first declared."""
    accuracies = {"gpt2": SOLVED, "linear-ema16": [0.10, 0.11, 0.09, 0.10, 0.12],
                  "linear-selective_ssm": [0.40, 0.45, 0.38, 0.42, 0.44]}
    results = recall_sweep(tmp_path / "recall", accuracies)
    rates = {"0.001": 0.3, "0.003": 0.5, "0.01": 0.6, "0.03": 0.55}
    results["arms"]["linear-selective_ssm"]["choices"] = {
        s: {"chosen": 0.01, "interior": True, "tried": rates} for s in SEEDS}
    results["arms"]["linear-ema16"]["choices"] = {
        s: {"chosen": 0.03 if s == "0" else 0.003, "interior": s != "0", "tried": {**rates, "0.1": 0.2}}
        for s in SEEDS}
    (tmp_path / "recall" / RESULTS).write_text(json.dumps(results))
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "recall")}))), "selection_escapes_recall")
    assert ("the rate at an edge of the rates tried in 1 of 10 choices (rates tried: `linear-selective_ssm` 4 (0.001 "
            "to 0.03), `linear-ema16` 5 (0.001 to 0.1))") in r["strength"]
    for s in SEEDS:
        results["arms"]["linear-ema16"]["choices"][s]["interior"] = True
    (tmp_path / "recall" / RESULTS).write_text(json.dumps(results))
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "recall")}))), "selection_escapes_recall")
    assert "every rate chosen inside the rates tried (rates tried: `linear-selective_ssm` 4" in r["strength"]
    assert "edge" not in r["strength"]


def test_neither_escapes_and_a_failed_control(tmp_path: Path) -> None:
    recall_sweep(tmp_path / "a", {"gpt2": SOLVED, "linear-ema16": [0.06, 0.06, 0.07, 0.06, 0.06],
                                  "linear-selective_ssm": [0.08, 0.09, 0.08, 0.09, 0.08]})
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "a")}))), "selection_escapes_recall")
    assert r["verdict"] == words.NEITHER_ESCAPES and r["verdict_short"] == "neither escapes"
    assert "selective 0.084 [0.077, 0.091], fixed 0.062 [0.056, 0.068]: both at or below" in r["detail"]
    recall_sweep(tmp_path / "b", {"gpt2": [0.5] * 5, "linear-ema16": [0.1] * 5,
                                  "linear-selective_ssm": [0.4, 0.41, 0.42, 0.4, 0.43]})
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "b")}))), "selection_escapes_recall")
    assert r["verdict"] == words.NOT_TESTABLE
    assert "control gpt2: accuracy at 16 pairs 0.500 < its bar 0.95" in r["detail"]


def test_an_incomplete_sweep_is_read_for_what_it_has_and_says_so(tmp_path: Path) -> None:
    recall_sweep(tmp_path / "part", {"gpt2": SOLVED, "linear-ema16": [0.1] * 5},
                 missing=["runs/linear-selective_ssm/lr_0.001/seed_0/steps_2000", "x", "y"])
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "part")}))), "selection_escapes_recall")
    assert r["verdict"] == "not run"  # the headline pair has not both run: never a verdict
    assert r["conditions"].startswith("partial: 3 runs still to run")
    assert "ema-boundary sweep --resume_from part" in r["conditions"]


def write_ngram_lines(folder: Path, plan: Any, trigram: float = 3.6, bigram: float = 4.1) -> None:
    """The sweep's cache of its Kneser-Ney lines (nats) for every arm's budgets (2,048 tokens a step) and training
    fraction, as the runner names it (eval.sweep.trainers.ngram_lines), and the tokenizer folder that marks a train
    sweep: without them no size, point or budget is read."""
    (folder / "shared" / "tokenizer").mkdir(parents=True, exist_ok=True)
    for arm in plan.arms:
        fraction = plan.config_of(arm).get("train_fraction", 1.0)
        for steps in plan.budgets_of(arm):
            name = f"ngram_test_{steps * 2048}{f'_f{fraction:g}' if fraction < 1 else ''}.json"
            (folder / "shared" / name).write_text(json.dumps({"loss": {"unigram": 5.9, "bigram": bigram,
                                                                       "trigram": trigram}}))


def ladder_sizes(folder: Path, sizes: dict[str, tuple[list[float], list[float], float]],
                 **kw: Any) -> dict[str, Any]:
    """A ladder sweep (hub_configs/sweeps/ladder.yaml) with the given sizes: size -> (SPEN's losses by seed,
    GPT-2's, the plain reference's)."""
    params = {"total": 700_000, "embedding": 170_000, "non_embedding": 530_000}
    seed = lambda loss: {"score": loss, "tokens": 4_096_000, "parameters": params}  # noqa: E731
    arms = {}
    for size, (spen, gpt2, reference) in sizes.items():
        arms |= {f"{size}/spen": {"2000": {str(i): seed(x) for i, x in enumerate(spen)}},
                 f"{size}/gpt2": {"2000": {str(i): seed(x) for i, x in enumerate(gpt2)}},
                 f"{size}/reference": {"2000": {"0": seed(reference)}}}
    write_ngram_lines(folder, plan_from_text((REPO / "hub_configs/sweeps/ladder.yaml").read_text(), "ladder.yaml"),
                      trigram=3.7)  # above every model of the fixture
    return write_sweep(folder, "ladder", arms, **kw)


def ladder_sweep(folder: Path, spen: list[float], gpt2: list[float], reference: float, **kw: Any) -> dict[str, Any]:
    return ladder_sizes(folder, {"w128": (spen, gpt2, reference)}, **kw)


def test_the_ladder_row_reads_the_deciding_size_and_keeps_the_regime_wording(tmp_path: Path) -> None:
    ladder_sweep(tmp_path / "ok", [3.40, 3.41, 3.42], [3.50, 3.52, 3.51], 3.50)
    rows = evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "ok")})))
    r = row(rows, "perplexity_gap_ladder")
    # SPEN better on the embedded corpus at 0.7M parameters: outside the paper's regime, not a refutation.
    assert r["verdict"] == "opposite direction" and "outside the claim's regime (130M parameters on C4)" in r["outside"]
    assert r["measurement"] == "sweeps.ladder.analysis.sizes" and r["value"].endswith("(w128)")
    assert "committed ladder" in row(rows, "perplexity_gap")["conditions"]  # this run's row names it too
    ladder_sweep(tmp_path / "under", [3.40, 3.41, 3.42], [3.60, 3.62, 3.61], 3.45)
    r = row(evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "under")}))), "perplexity_gap_ladder")
    assert r["verdict"] == words.NOT_TESTABLE
    assert r["verdict_short"] == f"not testable: {words.WORSE_THAN_REFERENCE}"
    assert f"{words.WORSE_THAN_REFERENCE} at w128: gpt2 3.610 vs the plain reference 3.450 nats" in r["detail"]


WORSE = ([3.55, 3.56, 3.57], [3.50, 3.52, 3.51])  # SPEN worse at every seed
BETTER = ([3.40, 3.41, 3.42], [3.50, 3.52, 3.51])
UNCLEAR = ([3.45, 3.55, 3.50], [3.50, 3.49, 3.52])


@pytest.mark.parametrize("losses,verdict,detail", [
    (WORSE, "met", "SPEN worse (direction)"),
    (BETTER, "opposite direction", "SPEN better"),  # read on the embedded corpus, the claim's regime is C4
    (UNCLEAR, "not resolved at this budget", ""),
])
def test_the_ladder_row_follows_the_sign_of_the_paired_interval(tmp_path: Path, losses: Any, verdict: str,
                                                                detail: str) -> None:
    ladder_sweep(tmp_path / "l", *losses, 3.50)
    r = row(evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "l")}))), "perplexity_gap_ladder")
    assert r["verdict"] == verdict and r["detail"] == detail
    assert r["ours"].startswith("w128 (530,000 non-embedding parameters, 3 seeds)")
    assert r["preconditions"][0]["holds"] is True


def test_a_ladder_whose_largest_size_cannot_speak_is_not_testable(tmp_path: Path) -> None:
    # w96 passes its gates with one seed (no interval: never the deciding size); w128's baseline is worse than its
    # plain reference.
    ladder_sizes(tmp_path / "l", {"w96": ([3.60], [3.62], 3.62),
                                  "w128": ([3.40, 3.41, 3.42], [3.60, 3.62, 3.61], 3.45)})
    rows = evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "l")})))
    r = row(rows, "perplexity_gap_ladder")
    assert r["verdict"] == words.NOT_TESTABLE and "w128" in r["detail"] and r["ours"].startswith("w128")
    # The headline row keeps its own gate and says where along the ladder the gap can be read.
    head = row(rows, "perplexity_gap")
    assert f"committed ladder `{tmp_path / 'l'}`" in head["conditions"]
    assert "w96 (530,000 non-embedding parameters, 1 seed)" in head["conditions"]


DATA_TOKENS = {"f1_8": 89_472, "f1_4": 175_360, "f1_2": 337_664, "f1": 675_840}  # data-axis.yaml's fractions


def data_axis_sweep(folder: Path, settings: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A data-axis sweep (hub_configs/sweeps/data-axis.yaml): setting -> SPEN − GPT-2 as a function of the distinct
    training tokens, both models at 3 seeds and the plain reference (GPT-2's loss) at every fraction."""
    plan = plan_from_text((REPO / "hub_configs/sweeps/data-axis.yaml").read_text(), "data-axis.yaml")
    params = {"total": 1_380_864, "embedding": 196_608, "non_embedding": 1_184_256}
    arms: dict[str, Any] = {}
    for setting, gap in settings.items():
        for key, tokens in DATA_TOKENS.items():
            steps = plan.budgets_of(plan.arm(f"{setting}/{key}/spen"))[0]

            def seed(loss: float, steps: int = steps, tokens: int = tokens) -> dict[str, Any]:
                return {"score": loss, "tokens": steps * 2048, "train_split_tokens": tokens,
                        "distinct_train_tokens": min(tokens, steps * 2048), "parameters": params}

            noise = (-0.01, 0.0, 0.01)
            arms[f"{setting}/{key}/spen"] = {str(steps): {str(i): seed(3.40 + gap(tokens) + e)
                                                          for i, e in enumerate(noise)}}
            arms[f"{setting}/{key}/gpt2"] = {str(steps): {str(i): seed(3.40 + e / 2) for i, e in enumerate(noise)}}
            arms[f"{setting}/{key}/reference"] = {str(steps): {"0": seed(3.40)}}
    write_ngram_lines(folder, plan, trigram=3.6)  # above every model of the fixture
    return write_sweep(folder, "data-axis", arms, **kw)


NARROWING = {"w192-e6": lambda t: -0.30 + 0.05 * math.log2(t / 89_472), "w128-e6": lambda t: -0.20}


def test_the_perplexity_row_names_the_trend_along_the_data_axis(tmp_path: Path) -> None:
    import jsonschema

    ladder_sweep(tmp_path / "ladder", *BETTER, 3.50)
    data_axis_sweep(tmp_path / "data", NARROWING, missing=["a", "b"])
    block = sweeps_block({"ladder": str(tmp_path / "ladder"), "data_axis": str(tmp_path / "data")})
    schema = json.loads((REPO / "eval/report/report.schema.json").read_text())
    jsonschema.validate(block, schema["properties"]["sweeps"])  # report.json's sweeps may hold it
    rows = evaluate(report_with(block))
    r = row(rows, "perplexity_gap_ladder")
    assert r["verdict"] == "opposite direction" and r["conditions"].startswith("committed ladder")  # read as before
    words = r["conditions"]
    assert (f"along the data axis (committed sweep `{tmp_path / 'data'}`: spen − gpt2 loss on the test blocks "
            "against log2 distinct training tokens, nested fractions of the corpus, both gates at every point; "
            "partial: 2 runs still to run") in words
    assert ("w192-e6 (6.06 epochs): SPEN better at <= 676k distinct tokens (every gated point from 89.5k); the gap "
            "narrows by 0.050 [0.047, 0.053] nats per doubling of the data; the fitted line crosses 0") in words
    assert "crosses 0 at ~5.7M tokens [" in words and "(beyond the data, 8.5x the largest point)" in words
    assert ("w128-e6 (6.06 epochs): SPEN better at <= 676k distinct tokens (every gated point from 89.5k); the gap "
            "does not narrow (slope +0.000 [-0.003, +0.003] nats per doubling of the data)") in words
    assert "w192-e1" not in words  # declared, not run: not a condition yet
    # Without the ladder the row is not run, and still says where along the data its sign would be read.
    alone = row(evaluate(report_with(sweeps_block({"data_axis": str(tmp_path / "data")}))), "perplexity_gap_ladder")
    assert alone["verdict"] == "not run" and "w192-e6 (6.06 epochs)" in alone["conditions"]
    # A sweep of another kind under data_axis is refused when the plan is read.
    with pytest.raises(PlanError, match="holds a 'ladder' analysis, data_axis needs 'data_axis'"):
        Plan.load(plan_naming(tmp_path, {"data_axis": str(tmp_path / "ladder")}))


def test_a_setting_where_no_point_passes_its_gates_is_named_in_the_row(tmp_path: Path) -> None:
    # SPEN above the trigram line (3.6 nats) at every fraction of w128-e6: no point is read, and the row says so.
    ladder_sweep(tmp_path / "ladder", *BETTER, 3.50)
    data_axis_sweep(tmp_path / "data", {**NARROWING, "w128-e6": lambda t: 0.30})
    block = sweeps_block({"ladder": str(tmp_path / "ladder"), "data_axis": str(tmp_path / "data")})
    words = row(evaluate(report_with(block)), "perplexity_gap_ladder")["conditions"]
    assert ("w128-e6 (6.06 epochs): no trend (no point with both gates holding: a trend needs at least 3 points and "
            "4 gaps) (left out: w128-e6/f1_8: not all below the Kneser-Ney trigram; ") in words
    assert "w192-e6 (6.06 epochs): SPEN better" in words and "w192-e1" not in words


def test_the_ladder_sweep_is_in_the_readme_block() -> None:
    from eval.report.render import readme_results

    report = json.loads((REPO / "docs" / "report" / "report.json").read_text())
    report["sweeps"] = sweeps_block({"ladder": "docs/sweeps/ladder"})
    report["claims"] = evaluate(report)
    text = readme_results(report)
    assert "committed sweep `docs/sweeps/ladder`" in text and "docs/scale" not in text


def ablation_sweep(folder: Path, plan: str, arms: dict[str, list[float]], line: float) -> dict[str, Any]:
    params = {"total": 200_000, "embedding": 65_536, "non_embedding": 134_464}
    budgets = {arm: {steps: {s: {"score": x + (2000 - int(steps)) / 1000, "tokens": int(steps) * 2048,
                                 "parameters": params} for s, x in zip(SEEDS, losses, strict=False)}
                     for steps in ("200", "2000")} for arm, losses in arms.items()}
    write_ngram_lines(folder, plan_from_text((REPO / f"hub_configs/sweeps/{plan}.yaml").read_text(), f"{plan}.yaml"),
                      bigram=line)  # the plans gate on the bigram
    return write_sweep(folder, plan, budgets)


def test_the_reader_and_trace_rows_read_the_longest_budget(tmp_path: Path) -> None:
    base = [4.00, 4.02, 3.98, 4.01, 3.99]
    ablation_sweep(tmp_path / "pred", "ablation-predictor", {
        "linear": base, "linear_attention-state": [x + 0.001 for x in base],
        "softmax_attention-state": [x - 0.002 for x in base]}, line=4.5)
    ablation_sweep(tmp_path / "trace", "ablation-trace", {
        "linear": base, "linear-learned": [x + 0.001 for x in base],
        "linear-selective": [x - 0.2 + 0.01 * i for i, x in enumerate(base)]}, line=4.5)
    rows = evaluate(report_with(sweeps_block({"ablation_predictor": str(tmp_path / "pred"),
                                              "ablation_trace": str(tmp_path / "trace")})))
    r = row(rows, "readers_identical_budgets")
    assert r["verdict"] == "met" and "2000 steps" in r["strength"]
    assert r["measurement"] == "sweeps.ablation_predictor.analysis.budgets"
    assert "200 steps" in r["conditions"] and "2,000 steps" in r["conditions"]
    t = row(rows, "selection_escapes_budgets")
    assert t["verdict"] == "met" and t["value"].startswith("-0.1")
    assert "committed ablation" in row(rows, "selection_escapes")["conditions"]
    # The reference above the line at the longest budget: not testable, with the gate's numbers.
    ablation_sweep(tmp_path / "weak", "ablation-predictor", {"linear": base, "linear_attention-state": base}, 3.0)
    r = row(evaluate(report_with(sweeps_block({"ablation_predictor": str(tmp_path / "weak")}))),
            "readers_identical_budgets")
    assert r["verdict"] == words.NOT_TESTABLE and "2,000 steps: linear 4.000 nats not all below" in r["detail"]


@pytest.mark.parametrize("plan,block,row_id,order", [
    ("ladder", "ladder", "perplexity_gap_ladder", "trigram"),
    ("ablation-predictor", "ablation_predictor", "readers_identical_budgets", "bigram"),
])
def test_a_sweep_without_its_ngram_lines_is_not_read(tmp_path: Path, plan: str, block: str, row_id: str,
                                                     order: str) -> None:
    # A clone without the sweep's shared/ (its tokenizer and cached Kneser-Ney lines): the competence gate is not
    # measured, never passed on the other gates alone (the ladder read "opposite direction" from its reference check).
    base = [4.00, 4.02, 3.98, 4.01, 3.99]
    made = (ladder_sweep(tmp_path / "s", *BETTER, 3.50) if plan == "ladder" else
            ablation_sweep(tmp_path / "s", plan, {"linear": base, "linear_attention-state": base}, 4.5))
    assert row(evaluate(report_with(sweeps_block({block: str(tmp_path / "s")}))), row_id)["verdict"] != \
        words.NOT_TESTABLE
    shutil.rmtree(tmp_path / "s" / "shared")
    out = write_sweep(tmp_path / "s", plan, {arm: v["budgets"] for arm, v in made["arms"].items()})["analysis"]
    gates = ([g for g in out["sizes"][0]["gates"] if g["name"] == "ngram"] if plan == "ladder"
             else [out["budgets"]["2000"]["gate"]])
    assert [g["holds"] for g in gates] == [None]
    assert out.get("deciding_size") is None
    r = row(evaluate(report_with(sweeps_block({block: str(tmp_path / "s")}))), row_id)
    assert r["verdict"] == words.NOT_TESTABLE and f"no Kneser-Ney {order} line" in r["detail"]


def depth_sweep(folder: Path, attention_better: bool, gate_holds: bool) -> dict[str, Any]:
    """A depth sweep's results.json (its analysis from eval.depth's own table and verdict)."""
    def run(acc: float, growth: float, loss: float) -> dict[str, Any]:
        return {"token_accuracy": acc, "embedding_share": 0.5, "earlier_share": acc - 0.1, "rms_growth": growth,
                "val_loss": loss, "block_share": [0.5, 0.4]}
    lift = 0.1 if attention_better else 0.0
    runs = {"attention": {s: run(0.6 + lift + 0.01 * i, 2.0, 4.0 - lift) for i, s in enumerate(SEEDS)},
            "add": {s: run(0.6 + 0.012 * i, 4.0 + 0.1 * i, 4.0 + 0.01 * i) for i, s in enumerate(SEEDS)}}
    table = paired_table(runs)
    gate = verdicts.Gate("ngram", gate_holds, "`add` 4.0 nats vs Kneser-Ney bigram 4.2 nats")
    text = (REPO / "hub_configs/sweeps/depth.yaml").read_text()
    plan = plan_from_text(text, "depth.yaml")
    analysis = {"kind": "depth", "table": table, "gate": gate.as_dict(), "ngram": None, "scored_on": "test",
                **claim_verdict(table, {"holds": gate_holds})}
    folder.mkdir(parents=True)
    results = {"tool": TOOL, "schema": SCHEMA, "name": "depth", "plan": {"path": "hub_configs/sweeps/depth.yaml",
               "declared": plan.declared}, "scored_on": "test", "complete": True, "missing": [],
               "commands": {}, "arms": {a: {"choices": {}, "budgets": {"2000": {}}} for a in ("add", "attention")},
               "analysis": analysis}
    (folder / RESULTS).write_text(json.dumps(results))
    return results


def test_the_depth_rows_read_the_sweep_the_loss_behind_its_gate(tmp_path: Path) -> None:
    depth_sweep(tmp_path / "d", attention_better=True, gate_holds=True)
    rows = evaluate(report_with(sweeps_block({"depth": str(tmp_path / "d")})))
    r = row(rows, "depth_selection_recovers")
    assert r["verdict"] in ("met", "partly met") and r["measurement"] == "sweeps.depth.analysis.table"
    assert "token identity at the last layer, attention − add: +" in r["ours"] and "2,000 steps" in r["strength"]
    assert "block 0:" in r["conditions"]
    assert row(rows, "depth_selection_loss")["measurement"] == "sweeps.depth.analysis.table"
    depth_sweep(tmp_path / "g", attention_better=True, gate_holds=False)
    rows = evaluate(report_with(sweeps_block({"depth": str(tmp_path / "g")})))
    # The probe row needs no language-model gate; the loss row is not read behind a failed one.
    assert row(rows, "depth_selection_recovers")["verdict"] == r["verdict"]
    loss = row(rows, "depth_selection_loss")
    assert loss["verdict"] == words.NOT_TESTABLE and "Kneser-Ney bigram 4.2" in loss["detail"]


def test_the_depth_loss_row_prints_the_comparison_at_equal_cpu(tmp_path: Path) -> None:
    results = depth_sweep(tmp_path / "d", attention_better=True, gate_holds=False)
    results["analysis"]["equal_cpu"] = {"arm": "add-equal-cpu", "verdict": "not run",
                                        "reason": "add-equal-cpu has not run"}
    (tmp_path / "d" / RESULTS).write_text(json.dumps(results))
    loss = row(evaluate(report_with(sweeps_block({"depth": str(tmp_path / "d")}))), "depth_selection_loss")
    assert loss["conditions"].startswith("at equal CPU: add-equal-cpu has not run; each block's output")
    results["analysis"]["equal_cpu"] = {
        "arm": "add-equal-cpu", "steps": 4300, "difference": 0.071, "ci95": [0.061, 0.081], "seeds": list(SEEDS),
        "verdict": words.A_HIGHER, "reason": "95% interval [+0.0610, +0.0810] above 0",
        "cpu_seconds": {"attention": 512.7, "add-equal-cpu": 504.2}}
    (tmp_path / "d" / RESULTS).write_text(json.dumps(results))
    rows = evaluate(report_with(sweeps_block({"depth": str(tmp_path / "d")})))
    loss = row(rows, "depth_selection_loss")
    assert loss["verdict"] == words.NOT_TESTABLE  # a condition beside the row, never its verdict
    assert ("at equal CPU: attention − `add-equal-cpu` (the sum trained 4,300 steps, 513 vs 504 CPU-s a run) +0.071 "
            "[+0.061, +0.081] nats, `add-equal-cpu` lower at equal CPU (5 paired seeds)") in loss["conditions"]
    assert "equal CPU" not in row(rows, "depth_selection_recovers")["conditions"]  # the probe row reads no loss


def test_without_a_committed_sweep_the_rows_keep_their_older_readers() -> None:
    rows = evaluate({"plan": {"corpus": "embedded"}})
    assert row(rows, "selection_escapes_recall")["measurement"] == "probes.recall_escape"
    assert row(rows, "depth_selection_recovers")["verdict"] == "not run"
    # The ladder has no older reader (docs/scale is retired): without the sweep both ladder rows are not run.
    for claim in ("perplexity_gap_ladder", "gap_on_recall_ladder"):
        r = row(rows, claim)
        assert r["verdict"] == "not run" and r["measurement"] == "sweeps.ladder", r
    assert row(rows, "perplexity_gap").get("conditions") is None


def plan_naming(tmp_path: Path, committed: dict[str, str]) -> Path:
    path = tmp_path / "plan.yaml"
    lines = [f"  {k}: {v}" for k, v in committed.items()]
    path.write_text("name: t\nworkers: 1\n\ncommitted:\n" + "\n".join(lines) + "\n")
    return path


def test_a_plan_names_sweeps_checked_once_at_load(tmp_path: Path) -> None:
    recall_sweep(tmp_path / "recall", {"gpt2": SOLVED})
    plan = Plan.load(plan_naming(tmp_path, {"recall_map": str(tmp_path / "recall")}))
    assert plan.committed == {"recall_map": str(tmp_path / "recall")}
    assert set(SOURCES) == {"recall_map", "recall_map_n64", "ladder", "ablation_predictor", "ablation_trace",
                            "depth", "arms", "data_axis"}


@pytest.mark.parametrize("make,message", [
    (lambda d: None, "no such folder"),
    (lambda d: d.mkdir(), f"{RESULTS}: no such file"),
    (lambda d: (d.mkdir(), (d / RESULTS).write_text("{")), f"not a readable {RESULTS}"),
    (lambda d: (d.mkdir(), (d / RESULTS).write_text(json.dumps({"tool": "eval.scale"}))),
     "is not an `ema-boundary sweep` result (its tool is 'eval.scale')"),
    (lambda d: (d.mkdir(), (d / RESULTS).write_text(json.dumps({"tool": TOOL, "schema": 9}))),
     "has schema 9, expected 1"),
    (lambda d: ladder_sweep(d, [3.4, 3.4], [3.5, 3.5], 3.5),
     "holds a 'ladder' analysis, recall_map needs 'recall_map'"),
])
def test_a_bad_folder_is_refused_in_one_line_with_the_yaml_line(tmp_path: Path, make: Any, message: str) -> None:
    folder = tmp_path / "sweep"
    make(folder)
    path = plan_naming(tmp_path, {"recall_map": str(folder)})
    with pytest.raises(PlanError) as err:
        Plan.load(path)
    text = str(err.value)
    assert text.startswith(f"{path}:5: committed.recall_map {folder}"), text
    assert message in text and "\n" not in text


def test_render_upgrade_rereads_the_plans_committed_sweeps(tmp_path: Path) -> None:
    from ema_boundary.cli import main

    recall_sweep(tmp_path / "recall", {"gpt2": SOLVED, "linear-ema16": [0.10, 0.11, 0.09, 0.10, 0.12],
                                       "linear-selective_ssm": [0.40, 0.45, 0.38, 0.42, 0.44]})
    raw = yaml.safe_load((REPO / "hub_configs/report/default.yaml").read_text())
    raw["committed"] = {"recall_map": str(tmp_path / "recall")}
    plan = tmp_path / "default.yaml"
    plan.write_text(yaml.safe_dump(raw))
    folder = tmp_path / "report"
    shutil.copytree(REPO / "docs" / "report", folder)
    report = json.loads((folder / "report.json").read_text())
    report["plan"]["path"] = str(plan)
    (folder / "report.json").write_text(json.dumps(report))
    assert main(["render", str(folder), "--upgrade"]) == 0
    upgraded = json.loads((folder / "report.json").read_text())
    assert upgraded["sweeps"]["recall_map"]["source"] == str(tmp_path / "recall")
    assert row(upgraded["claims"], "selection_escapes_recall")["verdict"] == "met"
    assert "Zoology" in (folder / "index.md").read_text()
    # The plan names no sweep any more: the next upgrade drops it and the row reads its older source.
    plan.write_text(yaml.safe_dump({k: v for k, v in raw.items() if k != "committed"}))
    assert main(["render", str(folder), "--upgrade"]) == 0
    again = json.loads((folder / "report.json").read_text())
    assert "sweeps" not in again and row(again["claims"], "selection_escapes_recall")["verdict"] == "not run"


def test_a_real_tiny_recall_sweep_is_read(tmp_path: Path) -> None:
    from eval.sweep.cli import main as sweep_main

    plan = tmp_path / "recall.yaml"
    plan.write_text(yaml.safe_dump({
        "name": "recall-tiny", "trainer": "recall", "analysis": "recall_map", "seeds": [0, 1], "budgets": [4],
        "workers": 1, "rate": {"lr_grid": [1.0e-3], "choose": "each_seed"},
        "base": {"width": 32, "layers": 1, "heads": 2, "task": {"vocab_size": 32, "pairs": [2, 4]},
                 "recipe": {"batch_size": 8, "warmup_steps": 1, "select_examples": 8, "eval_examples": 8}},
        "arms": {"gpt2": {"config": {"model": "gpt2"}}, "linear": {"config": {"model": "linear"}},
                 "linear-ema16": {"config": {"model": "linear-ema16"}}},
        "settings": {"pairs": 4, "control": "gpt2", "escape": {"16": ["linear-ema16", "linear"]}, "headline": "16",
                     "min_seeds": 2}}))
    out = tmp_path / "out"
    assert sweep_main([str(plan), "--output_dir", str(out)]) == 0
    read_sweep(out, "recall_map")
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(out)}))), "selection_escapes_recall")
    # A toy budget: the control cannot pass, so no verdict; both arms' numbers are still printed.
    assert r["verdict"] == words.NOT_TESTABLE and "`linear-ema16`" in r["ours"] and "`linear`" in r["ours"]


def test_the_boundary_figure_draws_each_committed_sweep(tmp_path: Path) -> None:
    from eval.report.boundary import draw

    recall_sweep(tmp_path / "recall", {"gpt2": SOLVED, "linear-ema16": [0.1] * 5,
                                       "linear-selective_ssm": [0.40, 0.45, 0.38, 0.42, 0.44]})
    ladder_sweep(tmp_path / "ladder", [3.40, 3.41, 3.42], [3.50, 3.52, 3.51], 3.50)
    base = [4.00, 4.02, 3.98, 4.01, 3.99]
    ablation_sweep(tmp_path / "pred", "ablation-predictor", {"linear": base, "linear_attention-state": base}, 4.5)
    depth_sweep(tmp_path / "depth", attention_better=True, gate_holds=True)
    report = report_with(sweeps_block({"recall_map": str(tmp_path / "recall"), "ladder": str(tmp_path / "ladder"),
                                       "ablation_predictor": str(tmp_path / "pred"),
                                       "depth": str(tmp_path / "depth")}))
    report["claims"] = evaluate(report)
    fig = draw(report)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    # Only the structure panel (no grammar_probe results here) says "not run"; every sweep's panel is drawn.
    assert texts.count("not run") == 1
    assert any("no-lookup floor" in t for t in texts)


def test_the_shipped_plans_show_every_claim_source() -> None:
    # The `committed:` block of each shipped plan names exactly the sources the reader knows (attached or commented).
    import re

    for name in ("default", "quick", "full"):
        text = (REPO / "hub_configs" / "report" / f"{name}.yaml").read_text()
        assert set(re.findall(r"^(?:#   |  )(\w+): docs/sweeps/", text, re.M)) == set(SOURCES), name


def fake_gap(monkeypatch: pytest.MonkeyPatch, baseline_control: float, contrast: float) -> None:
    """eval.gap's result as the ladder analysis would get it (eval.gap's ``a`` is the ladder's baseline, GPT-2):
    the baseline's windowed control and the AR-hit contrast chosen by the test."""
    from eval.scale import analysis

    def control(label: str, value: float) -> dict[str, Any]:
        return {"label": label, "window": 16, "control": value, "ci95": [value - 0.01, value + 0.01],
                "positive": value - 0.01 > 0}

    def group(name: str, diff: float, tokens: int) -> dict[str, Any]:
        return {"class": name, "tokens": tokens, "difference": diff, "ci95": [diff - 0.02, diff + 0.02],
                "share_of_gap": 0.3}

    gap = {"total": {"difference": -0.1, "tokens": 1000, "documents": 5},
           "groups": [group("ar_hit", -0.1 + contrast, 200), group("first", -0.1, 600)],
           "contrasts": {"ar_hit - first": {"value": contrast, "ci95": [contrast - 0.02, contrast + 0.02]}},
           # SPEN's control strongly positive: a gate that read it instead of GPT-2's would always hold
           "context_use": {"window": 16, "a": control("gpt2", baseline_control), "b": control("spen", 0.3)},
           "text": {"split": "test", "tokens": 1000, "documents": 5}, "interval": "95% t interval over 3 seeds"}
    monkeypatch.setattr(analysis, "gap_at", lambda *a, **k: gap)


def test_the_gap_row_reads_the_ladder_where_the_baseline_retrieves(tmp_path: Path, monkeypatch) -> None:
    fake_gap(monkeypatch, baseline_control=0.2, contrast=0.08)
    ladder_sweep(tmp_path / "ok", [3.40, 3.41, 3.42], [3.50, 3.52, 3.51], 3.50)
    rows = evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "ok")})))
    r = row(rows, "gap_on_recall_ladder")
    assert r["verdict"] == "met" and r["value"] == "+0.080 [+0.060, +0.100] nats (w128)"
    assert "gpt2's windowed control (W = 16) +0.200 nats" in str(r["preconditions"])
    assert "gpt2 +0.200 [+0.190, +0.210], spen +0.300" in r["conditions"]
    # The one-screen table prints one row for the two readings of the claim: the committed one.
    assert [a["id"] for a, _ in one_screen(rows)].count("gap_on_recall_ladder") == 1
    assert "gap_on_recall" not in [a["id"] for a, _ in one_screen(rows)]
    # GPT-2 shows no retrieval (SPEN does): neither content row is read.
    fake_gap(monkeypatch, baseline_control=0.0, contrast=0.08)
    ladder_sweep(tmp_path / "blind", [3.40, 3.41, 3.42], [3.50, 3.52, 3.51], 3.50)
    rows = evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "blind")})))
    for claim in ("gap_on_recall_ladder", "perplexity_gap_ladder"):
        r = row(rows, claim)
        assert r["verdict"] == words.NOT_TESTABLE and "gpt2's windowed control" in r["detail"]
        assert "no retrieval shown" in r["detail"]


def test_a_ladder_size_not_run_yet_says_so(tmp_path: Path) -> None:
    params = {"total": 700_000, "embedding": 170_000, "non_embedding": 530_000}
    seed = lambda loss: {"score": loss, "tokens": 4_096_000, "parameters": params}  # noqa: E731
    arms = {"w48/spen": {"2000": {}}, "w48/gpt2": {"2000": {}},  # the runner lists every declared arm, run or not
            "w128/spen": {"2000": {str(i): seed(x) for i, x in enumerate([3.40, 3.41, 3.42])}},
            "w128/gpt2": {"2000": {str(i): seed(x) for i, x in enumerate([3.50, 3.52, 3.51])}},
            "w128/reference": {"2000": {"0": seed(3.50)}}}
    write_sweep(tmp_path / "l", "ladder", arms)
    r = row(evaluate(report_with(sweeps_block({"ladder": str(tmp_path / "l")}))), "perplexity_gap_ladder")
    assert "w48: not run yet" in r["conditions"] and "(0 non-embedding parameters" not in r["conditions"]


def test_the_budget_check_names_the_cap_the_verdict_holds_under(tmp_path: Path) -> None:
    fixed, selective = [0.10, 0.11, 0.09, 0.10, 0.12], [0.09, 0.10, 0.10, 0.11, 0.10]
    recall_sweep(tmp_path / "flat", {"gpt2": SOLVED, "linear-ema16": fixed, "linear-selective_ssm": selective,
                                     "linear-ema16-x2": [0.105], "linear-selective_ssm-x2": [0.11]})
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "flat")}))), "selection_escapes_recall")
    assert ("the budget check (twice the cap, one seed): `linear-ema16` seed 0: 10.0% at 2,000 → 10.5% at 4,000 "
            "steps") in r["conditions"]
    assert "no arm crossed the escape bar (17.3%) with the longer budget" in r["conditions"]
    assert "other arms" not in r["conditions"]  # the longer arms are named in the check, not again among others
    # The selective state escapes with twice the budget: the row says its verdict holds under the cap only.
    recall_sweep(tmp_path / "binds", {"gpt2": SOLVED, "linear-ema16": fixed, "linear-selective_ssm": selective,
                                      "linear-ema16-x2": [0.105], "linear-selective_ssm-x2": [0.6]})
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "binds")}))), "selection_escapes_recall")
    assert ("linear-selective_ssm crossed the escape bar (17.3%) with twice the budget: the verdict holds under the "
            "cap only") in r["conditions"]


def test_the_budget_check_reads_the_longer_cap_at_the_rate_chosen_at_the_cap(tmp_path: Path) -> None:
    """A wider grid at the longer cap: a seed crosses the escape bar by the budget only at the rate it chose at the
    cap; the longer cap's own choice is printed beside it, never read as the budget's effect."""
    folder = tmp_path / "wider"
    ran = folder / "runs" / "linear-selective_ssm-x2" / "lr_0.001" / "seed_0" / "steps_4000"
    ran.mkdir(parents=True)
    (ran / "result.json").write_text(json.dumps({"accuracy": {"16": 0.105}, "selection_accuracy": {"16": 0.1}}))

    def at(acc: float, arm: str, state: int, rule: str, lr: float, steps: int) -> dict[str, Any]:
        return {**recall_seed(acc, arm, state, rule), "lr": lr, "steps": steps}

    arms = {"gpt2": {"2000": {"0": at(1.0, "gpt2", 0, "cache", 1e-3, 2000)}},
            "linear-ema16": {"2000": {"0": at(0.10, "linear-ema16", 1024, "fixed", 1e-3, 2000)}},
            "linear-selective_ssm": {"2000": {"0": at(0.10, "linear-selective_ssm", 1216, "selective", 1e-3, 2000)}},
            "linear-ema16-x2": {"4000": {"0": at(0.105, "linear-ema16-x2", 1024, "fixed", 1e-3, 4000)}},
            "linear-selective_ssm-x2": {"4000": {"0": at(0.30, "linear-selective_ssm-x2", 1216, "selective", 1e-2,
                                                         4000)}}}
    results = write_sweep(folder, "recall-map", arms)
    check = next(c for c in results["analysis"]["budget_check"] if c["arm"] == "linear-selective_ssm")
    assert check["rates"] == {"0": [1e-3, 1e-2]} and check["at_longer_same_rate"] == {"0": 0.105}
    assert check["crosses"] == {"0": False} and not check["crosses_copy_bar"]
    md = render_markdown({**results, "commands": {"reproduce": "-", "resume": "-", "summarize": "-"}})
    assert ("| `linear-selective_ssm` | 0 | 0.1000 (2000 steps, lr 0.001) | 0.1050 (4000 steps) | 0.3000 (lr 0.01) "
            "| no |") in md
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(folder)}))), "selection_escapes_recall")
    assert ("`linear-selective_ssm` seed 0: 10.0% at 2,000 → 10.5% at 4,000 steps, both at 0.001 (30.0% at its own "
            "choice 0.01)") in r["conditions"]
    assert "no arm crossed the escape bar (17.3%) with the longer budget" in r["conditions"]
    # The cap's rate did not run at the longer cap: the longer cap's own choice is all there is, and says so.
    (ran / "result.json").unlink()
    results = write_sweep(folder, "recall-map", arms)
    check = next(c for c in results["analysis"]["budget_check"] if c["arm"] == "linear-selective_ssm")
    assert check["at_longer_same_rate"] == {"0": None} and check["crosses_copy_bar"]
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(folder)}))), "selection_escapes_recall")
    assert ("seed 0: 10.0% at 2,000 → 30.0% at its own choice 0.01 at 4,000 steps (the cap's rate 0.001 did not run "
            "there)") in r["conditions"]


def test_the_headline_moves_to_the_longer_cap_once_both_arms_have_their_seeds(tmp_path: Path) -> None:
    fixed, selective = [0.10, 0.11, 0.09, 0.10, 0.12], [0.09, 0.10, 0.10, 0.11, 0.10]
    # One seed at the longer cap: the row stays at the cap and prints the longer cap's reading so far.
    recall_sweep(tmp_path / "one", {"gpt2": SOLVED, "linear-ema16": fixed, "linear-selective_ssm": selective,
                                    "linear-ema16-x2": [0.105], "linear-selective_ssm-x2": [0.6]})
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "one")}))), "selection_escapes_recall")
    assert r["verdict"] == words.NEITHER_ESCAPES and "cap 2,000 steps" in r["strength"]
    assert ("at the longer cap (settings.escape_longer), 4,000 steps (1 of 5 seeds so far): "
            "`linear-selective_ssm-x2` 60.0% vs `linear-ema16-x2` 10.5% at 16 pairs (state per layer 1,216 vs 1,024 "
            "numbers), not resolved at this budget") in r["conditions"]
    # Five seeds of both: the row is read at 4,000 steps, the cap's reading beside it.
    recall_sweep(tmp_path / "five", {"gpt2": SOLVED, "linear-ema16": fixed, "linear-selective_ssm": selective,
                                     "linear-ema16-x2": [0.105, 0.10, 0.11, 0.10, 0.10],
                                     "linear-selective_ssm-x2": [0.6, 0.5, 0.55, 0.62, 0.58]})
    results = json.loads((tmp_path / "five" / RESULTS).read_text())
    assert results["analysis"]["headline_at"] == "escape_longer" and results["analysis"]["verdict"] == words.MET
    r = row(evaluate(report_with(sweeps_block({"recall_map": str(tmp_path / "five")}))), "selection_escapes_recall")
    assert r["verdict"] == "met" and "cap 4,000 steps" in r["strength"]
    assert "`linear-selective_ssm-x2` 57.0% vs `linear-ema16-x2` 10.3% at 16 pairs" in r["ours"]
    assert "at the cap, 2,000 steps (5 seeds): `linear-selective_ssm` 10.0% vs `linear-ema16` 10.4%" in r["conditions"]
    assert "the budget check (twice the cap, 5 seeds)" in r["conditions"]
    assert "the row is read at the longer cap" in r["conditions"]


def test_render_upgrade_drops_the_retired_scale_ladder(tmp_path: Path, capsys: Any) -> None:
    """An older report's ``scale_ladder`` (the retired docs/scale reader) goes on ``render --upgrade``; the plan's
    committed ladder sweep carries the row and nothing else moves. ``render --ladder`` is gone."""
    from ema_boundary.cli import main as ema_boundary
    from eval.report.schema import validate

    folder = tmp_path / "report"
    shutil.copytree(REPO / "docs" / "report", folder)
    before = json.loads((folder / "report.json").read_text())
    before.setdefault("scale_ladder", {"source": "docs/scale/report.json", "sizes": []})  # as older reports hold
    (folder / "report.json").write_text(json.dumps(before))
    assert ema_boundary(["render", str(folder), "--upgrade", "--ladder", "docs/scale/report.json"]) == 2
    assert "--ladder" in capsys.readouterr().err
    assert ema_boundary(["render", str(folder), "--upgrade"]) == 0
    after = json.loads((folder / "report.json").read_text())
    validate(after)
    assert "scale_ladder" not in after
    assert row(after["claims"], "perplexity_gap_ladder")["measurement"] == "sweeps.ladder.analysis.sizes"
    # sweeps: re-read from the plan's committed sweeps on --upgrade; the structure conditions with them (the arms
    # sweep, migrated from docs/structure/arms_seed21: every number the same)
    moved = ("claims", "scale_ladder", "sweeps", "structure_conditions")
    if "structure_conditions" in before:
        conditions = after["sweeps"]["arms"]["analysis"]["conditions"]
        assert "structure_conditions" not in after and conditions["rows"] == before["structure_conditions"]["rows"]
    assert {k: v for k, v in after.items() if k not in moved} == {k: v for k, v in before.items() if k not in moved}
    assert "docs/scale" not in (folder / "index.md").read_text()
