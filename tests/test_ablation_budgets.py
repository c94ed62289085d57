"""The reader and trace claims read on a committed ablation at several budgets: the folder check, the gate at the
longest budget, the claim rows that can come out either way, the conditions on the report's own rows, the
rendering, the plan field and attaching a committed folder to an existing report (``ema-boundary render --upgrade
--ablation``)."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from ema_boundary.cli import UsageError
from eval.ablation import analyse
from eval.report.ablation_budgets import budgets_block, phrase, read_budgets
from eval.report.claims import evaluate
from eval.report.cli import main as ema_boundary
from eval.report.paths import portable
from eval.report.render import ablation_budgets_section
from eval.report.schema import validate

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "docs" / "report"
BIGRAM = 4.08
SEEDS = [0, 1, 2, 3, 4]
# Offsets of each seed's loss (the paired design: a seed moves every arm alike).
SEED_SHIFT = [0.00, 0.010, -0.008, 0.004, -0.006]


def _losses(mean: float, jitter: float = 0.0) -> dict[str, float]:
    return {str(s): mean + SEED_SHIFT[i] + jitter * (-1) ** i for i, s in enumerate(SEEDS)}


def _budget(steps: int, means: dict[str, float], reference: str = "linear") -> dict:
    """One budget as eval.ablation --budgets writes it, its comparisons computed by eval.ablation's analysis."""
    final = {arm: _losses(m, 0.001 * k) for k, (arm, m) in enumerate(means.items())}
    analysis = analyse(final, reference, 0.02)
    mean = {arm: sum(v.values()) / len(v) for arm, v in final.items()}
    return {"max_steps": steps, "tokens": steps * 2048, "folder": f"steps_{steps}", "final_loss": final,
            "mean_loss": mean, **analysis, "reference_loss": mean[reference],
            "reference_below_bigram": mean[reference] < BIGRAM}


def _axis(axis: str, longest: dict[str, float], short: dict[str, float] | None = None) -> dict:
    arms = list(longest)
    short = short or {arm: 5.0 + 0.01 * i for i, arm in enumerate(arms)}
    params = {arm: {"total": 198_144 + 100 * i, "non_embedding": 132_608 + 100 * i} for i, arm in enumerate(arms)}
    return {"tool": "eval.ablation", "kind": "budgets", "axis": axis, "command": f"python -m eval.ablation {axis}",
            "config": "hub_configs/spen-f64/train.yaml", "reference": "linear", "equivalence_margin": 0.02,
            "seeds": SEEDS, "lr_grid": [0.003, 0.01, 0.03], "lrs": {arm: 0.01 for arm in arms},
            "rates": {arm: {"chosen": 0.01, "grid": {"0.003": 4.0, "0.01": 3.9, "0.03": 4.1}, "edge": False}
                      for arm in arms},
            "scored_on": "test", "eval_tokens": 272_768, "parameters": params,
            "parameter_difference": {arm: p["non_embedding"] - params["linear"]["non_embedding"]
                                     for arm, p in params.items()},
            "ngram": {"bigram": math.exp(BIGRAM)}, "bigram_loss": BIGRAM, "longest": 2000, "seconds": 3600.0,
            "budgets": [_budget(200, short), _budget(2000, longest)]}


READERS_EQUAL = {"linear": 3.70, "linear_attention-state": 3.701, "softmax_attention-state": 3.699}
READERS_DIFFER = {"linear": 3.70, "linear_attention-state": 3.60, "softmax_attention-state": 3.702}
SELECTION_LOWER = {"linear": 3.70, "linear-learned": 3.701, "linear-selective": 3.55}
SELECTION_NOT_LOWER = {"linear": 3.70, "linear-learned": 3.701, "linear-selective": 3.80}


def _folder(tmp_path: Path, predictor: dict | None, trace: dict | None) -> Path:
    root = tmp_path / "ablation"
    for axis, data in (("predictor", predictor), ("trace", trace)):
        if data is not None:
            (root / axis).mkdir(parents=True)
            (root / axis / "budgets.json").write_text(json.dumps(data))
    root.mkdir(exist_ok=True)
    return root


def _report_with(block: dict | None) -> dict:
    report = json.loads((COMMITTED / "report.json").read_text())
    report.pop("ablation_budgets", None)
    # the older reader under test: without the committed trace sweep the plan names (it would carry that row)
    report["sweeps"] = {k: v for k, v in (report.get("sweeps") or {}).items() if k != "ablation_trace"}
    if block is not None:
        report["ablation_budgets"] = block
    report["claims"] = evaluate(report)
    return report


def _row(report: dict, claim_id: str) -> dict:
    return next(r for r in report["claims"] if r["id"] == claim_id)


def test_reading_a_committed_folder_refuses_what_cannot_serve_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="no such folder"):
        read_budgets(tmp_path / "none")
    with pytest.raises(UsageError, match="holds neither predictor/budgets.json nor trace/budgets.json"):
        read_budgets(_folder(tmp_path, None, None))
    wrong = _axis("predictor", READERS_EQUAL)
    wrong["kind"] = "ablation"
    with pytest.raises(UsageError, match="not an `eval.ablation --budgets` summary"):
        read_budgets(_folder(tmp_path / "a", wrong, None))
    swapped = _axis("trace", SELECTION_LOWER)
    with pytest.raises(UsageError, match="holds the 'trace' ablation"):
        read_budgets(_folder(tmp_path / "b", swapped, None))
    broken = _axis("predictor", READERS_EQUAL)
    del broken["budgets"][1]["reference_below_bigram"]
    with pytest.raises(UsageError, match=r"budgets\[1\] lacks reference_below_bigram") as err:
        read_budgets(_folder(tmp_path / "c", broken, None), name="docs/ablation")
    assert str(err.value).startswith("ablation.committed: docs/ablation: ") and "\n" not in str(err.value)
    (tmp_path / "d" / "ablation" / "trace").mkdir(parents=True)
    (tmp_path / "d" / "ablation" / "trace" / "budgets.json").write_text("{")
    with pytest.raises(UsageError, match="trace/budgets.json: not a readable budgets.json"):
        read_budgets(tmp_path / "d" / "ablation")


@pytest.mark.parametrize("readers,verdict", [(READERS_EQUAL, "met"), (READERS_DIFFER, "not reproduced")])
def test_the_readers_row_reads_the_longest_budget(tmp_path, readers, verdict):
    block = budgets_block(read_budgets(_folder(tmp_path, _axis("predictor", readers), None)), "docs/ablation")
    row = _row(_report_with(block), "readers_identical_budgets")
    assert row["verdict"] == verdict
    assert row["preconditions"][0]["holds"] is True and "after 2,000 steps" in row["preconditions"][0]["numbers"]
    assert row["strength"].startswith("5 seeds, 2000 steps")


@pytest.mark.parametrize("traces,verdict", [(SELECTION_LOWER, "met"), (SELECTION_NOT_LOWER, "refuted")])
def test_the_selection_row_reads_the_longest_budget(tmp_path, traces, verdict):
    block = budgets_block(read_budgets(_folder(tmp_path, None, _axis("trace", traces))), "docs/ablation")
    report = _report_with(block)
    assert _row(report, "selection_escapes_budgets")["verdict"] == verdict
    # A folder without the predictor axis leaves that row "not run", never a crash.
    assert _row(report, "readers_identical_budgets")["verdict"] == "not run"


def test_a_reference_above_the_bigram_at_the_longest_budget_is_not_testable(tmp_path):
    above = {arm: m + 0.5 for arm, m in READERS_DIFFER.items()}  # 4.20 > 4.08
    block = budgets_block(read_budgets(_folder(tmp_path, _axis("predictor", above), None)), "docs/ablation")
    row = _row(_report_with(block), "readers_identical_budgets")
    assert row["verdict"] == "not testable in this regime"
    assert "reference `linear` 4.2" in row["detail"] and "bigram 4.080" in row["detail"]
    assert "shown different" not in row["detail"]


def test_the_report_rows_carry_every_budget_as_conditions(tmp_path):
    block = budgets_block(read_budgets(_folder(tmp_path, _axis("predictor", READERS_DIFFER),
                                               _axis("trace", SELECTION_LOWER))), "docs/ablation")
    report = _report_with(block)
    own = _row(report, "readers_identical")
    assert "committed ablation `docs/ablation/predictor`" in own["conditions"]
    assert "200 steps (409,600 tokens): `linear` 5.000 vs bigram 4.080 nats, not testable" in own["conditions"]
    assert "the reference below the bigram at 2,000 steps" in own["conditions"]
    assert "`linear_attention-state` -0.10" in own["conditions"]
    assert "committed ablation `docs/ablation/trace`" in _row(report, "selection_escapes")["conditions"]
    assert phrase(block, "trace") is not None and phrase({"source": "x"}, "trace") is None
    # Without a committed folder the report's own rows have no conditions and the committed rows are not run.
    bare = _report_with(None)
    assert _row(bare, "readers_identical").get("conditions") is None
    assert _row(bare, "selection_escapes_budgets")["verdict"] == "not run"


def test_the_committed_ablation_renders_with_rates_parameters_and_every_budget(tmp_path):
    block = budgets_block(read_budgets(_folder(tmp_path, _axis("predictor", READERS_DIFFER),
                                               _axis("trace", SELECTION_LOWER))), "docs/ablation")
    report = _report_with(block)
    text = "\n".join(ablation_budgets_section(report))
    assert "## The reader and trace ablations at several budgets (committed)" in text
    assert "| `softmax_attention-state` | 198,344 (132,808) | +200 | 0.01 |" in text
    assert "| 200 | 409,600 | 5.000 | 4.080 | no |" in text
    assert "| 2,000 | 4,096,000 |" in text and "different" in text
    assert "**not reproduced**" in text and "**met**" in text  # readers differ, outside the paper's regime
    validate(report)
    assert ablation_budgets_section(_report_with(None)) == []


def test_render_attaches_a_committed_ablation_to_an_existing_report(tmp_path, capsys):
    folder = tmp_path / "report"
    shutil.copytree(COMMITTED, folder)
    before = json.loads((folder / "report.json").read_text())
    committed = _folder(tmp_path, _axis("predictor", READERS_EQUAL), _axis("trace", SELECTION_NOT_LOWER))
    (committed / "predictor" / "budgets.png").write_bytes(b"a figure")  # the trace axis has none
    assert ema_boundary(["render", str(folder), "--ablation", str(committed)]) == 2
    assert "--ablation rewrites report.json: give it with --upgrade" in capsys.readouterr().err
    assert ema_boundary(["render", str(folder), "--upgrade", "--ablation", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--ablation" in err and "no such folder" in err and "\n" not in err
    assert json.loads((folder / "report.json").read_text()) == before
    assert ema_boundary(["render", str(folder), "--upgrade", "--ablation", str(committed)]) == 0
    after = json.loads((folder / "report.json").read_text())
    validate(after)
    assert after["ablation_budgets"]["attached_by"].startswith("ema-boundary render")
    assert _row(after, "readers_identical_budgets")["verdict"] == "met"
    # The trace row reads the plan's committed sweep (docs/sweeps/ablation-trace), which the older reader does not
    # override; the attached folder's trace axis is kept in ablation_budgets.
    assert _row(after, "selection_escapes_budgets")["measurement"].startswith("sweeps.ablation_trace")
    assert "trace" in after["ablation_budgets"]
    changed = ("claims", "ablation_budgets", "figures", "sweeps")  # sweeps: re-read on --upgrade (attached_by)
    unchanged = {k: v for k, v in after.items() if k not in changed}
    assert unchanged == {k: v for k, v in copy.deepcopy(before).items() if k not in changed}
    # The committed figures travel with the report: copied in, embedded in the section, the others kept.
    assert after["figures"] == {**{k: v for k, v in before["figures"].items() if not k.startswith("ablation_budgets")},
                                "ablation_budgets_predictor": "figures/ablation_budgets_predictor.png"}
    assert (folder / "figures" / "ablation_budgets_predictor.png").read_bytes() == b"a figure"
    index = (folder / "index.md").read_text()
    assert "(committed)" in index
    assert "](figures/ablation_budgets_predictor.png)" in index and "ablation_budgets_trace" not in index


def test_a_plan_names_a_committed_ablation_folder_checked_at_load(tmp_path):
    from eval.report.plan import Plan, PlanError

    plan = (REPO / "hub_configs" / "report" / "quick.yaml").read_text()
    good = _folder(tmp_path, _axis("predictor", READERS_EQUAL), None)
    assert "  committed: docs/ablation" in plan  # the plans name the committed folder
    (tmp_path / "good.yaml").write_text(plan.replace("committed: docs/ablation", f"committed: {good}", 1))
    assert Plan.load(tmp_path / "good.yaml").ablation.committed == str(good)
    (tmp_path / "bad.yaml").write_text(plan.replace("committed: docs/ablation", f"committed: {tmp_path}/none", 1))
    with pytest.raises(PlanError, match="ablation.committed") as err:
        Plan.load(tmp_path / "bad.yaml")
    assert "no such folder" in str(err.value) and "\n" not in str(err.value)


def test_the_committed_report_reads_the_committed_ablation():
    """docs/report holds docs/ablation: both committed rows speak (the reference below the bigram at 2,000 steps)
    and the report's own 100-step rows stay not testable, citing every budget."""
    report = json.loads((COMMITTED / "report.json").read_text())
    block = budgets_block(read_budgets(REPO / "docs" / "ablation"), "docs/ablation")
    block = portable({"ablation_budgets": block})["ablation_budgets"]  # its commands as they run from a clone
    assert {k: v for k, v in report["ablation_budgets"].items() if k != "attached_by"} == block
    assert _row(report, "readers_identical_budgets")["verdict"] == "met"
    assert _row(report, "selection_escapes_budgets")["verdict"] == "met"
    cited = {"readers_identical": "docs/ablation/", "selection_escapes": "docs/sweeps/ablation-trace"}
    for own, source in cited.items():  # the trace row is read on the shuffled sweep the plan names
        row = _row(report, own)
        assert row["verdict"] == "not testable in this regime" and source in row["conditions"]
