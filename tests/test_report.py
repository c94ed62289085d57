"""`ema-boundary report` end to end on a reduced size: every field present and finite, PNGs readable."""

import json
import math
from pathlib import Path

import pytest

from eval.report import main

REQUIRED = [
    "structure.paper.ratio_within_a.verdict",
    "structure.paper.transfer_b_accuracy.ours.ci95",
    "structure.paper.deep_accuracy.ours.ci95",
    "structure.paper.novel_structural_spcn_minus_bigru.verdict",
    "structure.paper.counterfactual_spcn_minus_bigru.verdict",
    "structure.splits.test_within_a.spcn.accuracy.ci95",
    "structure.ceilings",
    "structure.learning.test_within_a",
    "structure.per_role.test_within_a",
    "content.perplexity.spen",
    "content.perplexity.gpt2_arch",
    "content.perplexity_ratio",
    "ablation.final_loss.linear",
    "ablation.final_loss.linear_attention-state",
    "ablation.final_loss.linear_attention-sequence",
    "ablation.final_loss.softmax_attention-state",
    "ablation.final_loss.softmax_attention-sequence",
    "ablation.spread.across_predictors",
    "ablation.spread.across_seeds",
    "traces.final_loss.ema",
    "traces.final_loss.learned",
    "traces.final_loss.selective",
    "identity_at_lag",
    "recall",
    "environment.seconds",
    "environment.torch",
    "environment.device",
    "command",
    "structure.command",
    "content.command",
    "ablation.command",
    "traces.command",
    "probe_command",
]


def _get(obj: dict, dotted: str):
    for part in dotted.split("."):
        obj = obj[part]
    return obj


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "out"
    assert main(["report", "--quick", "--max-steps", "3", "--out", str(out)]) == 0
    return out


def test_every_field_present_and_finite(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    for key in REQUIRED:
        value = _get(report, key)
        assert value is not None and value != {}, key
    numbers = list(_numbers({k: report[k] for k in ("structure", "content", "ablation", "traces")}))
    assert numbers and all(math.isfinite(x) for x in numbers)
    for name in ("SPEN-ema", "SPEN-learned", "SPEN-selective", "GPT-2 arch"):
        curve = report["identity_at_lag"][name]
        assert len(curve["accuracy"]) == len(curve["lags"]) and all(math.isfinite(a) for a in curve["accuracy"])
        assert all(math.isfinite(a) for a in report["recall"][name]["accuracy"])
    assert report["content"]["parameters"]["spen"] > 0


def test_figures_are_readable_pngs(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    assert {"content_perplexity", "ablation_predictor", "ablation_trace", "identity_at_lag", "recall",
            "structure_by_kind", "structure_per_role", "ceilings", "learning"} <= set(
        report["figures"]
    )
    import matplotlib.image

    for rel in report["figures"].values():
        image = matplotlib.image.imread(report_dir / rel)
        assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50


def test_index_shows_our_numbers_beside_the_papers(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    index = (report_dir / "index.md").read_text()
    assert f"{report['content']['perplexity_ratio']:.2f}x" in index
    assert "260 vs 33" in index and "61.8 %" in index and "84.0 %" in index
    for rel in report["figures"].values():
        assert f"]({rel})" in index
    # Paths in the report name the final folder, never the temporary one it was built in.
    assert ".tmp-" not in (report_dir / "report.json").read_text()


def test_bad_arguments_give_one_line(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["report", "--corpus", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--corpus" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "o").exists()
