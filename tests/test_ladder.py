"""The perplexity claim read on a committed scale ladder: the file check, the deciding size, the claim rows, the
rendering and attaching a ladder to an existing report (``ema-boundary render --upgrade --ladder``)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from ema_boundary.cli import UsageError
from eval.report.claims import evaluate
from eval.report.cli import main as ema_boundary
from eval.report.ladder import MIN_SEEDS, deciding_size, ladder_block, phrase, read_ladder
from eval.report.render import ladder_section, readme_results
from eval.report.schema import validate

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "docs" / "report"


def _interval(values: list[float]) -> dict:
    """Mean, a 95% t interval with two or more values, and the values (the old ladder's report.json)."""
    from ema_boundary.stats import mean_ci

    m = mean_ci(values)
    return {"mean": m["mean"], "ci95": None if m["n"] < 2 else [float(x) for x in m["ci95"]], "n": m["n"],
            "per_seed": values}


def _gap(spen: dict[str, float], gpt2: dict[str, float]) -> dict:
    return _interval([spen[k] - gpt2[k] for k in spen if k in gpt2])


def _size(name: str, width: int, spen: list[float], gpt2: list[float], bigram: float) -> dict:
    """One ladder size as the old eval.scale wrote it (the keys the report's reader of docs/scale reads)."""
    from eval.scale import parameter_counts

    archs = {}
    for arch, losses in (("spen", spen), ("gpt2", gpt2)):
        counts = parameter_counts(arch, width, 2, 1024, 128)
        archs[arch] = {"label": arch, "parameters": counts, "lr": 1e-2, "lr_interior": True,
                       "lr_grid": {"0.005": 5.0, "0.01": 4.9, "0.02": 5.1}, "lr_extensions": [],
                       "tokens_per_parameter": {"total": 4_096_000 / counts["total"],
                                                "non_embedding": 4_096_000 / counts["non_embedding"]},
                       "seeds": {str(i): {"loss": x} for i, x in enumerate(losses)}, "loss": _interval(losses),
                       "below_bigram": all(x < bigram for x in losses)}
    gap = _gap({str(i): x for i, x in enumerate(spen)}, {str(i): x for i, x in enumerate(gpt2)})
    return {"name": name, "width": width, "layers": 2, "steps": 2000, "train_tokens": 4_096_000,
            "architectures": archs, "bigram_loss": bigram, "gate": archs["spen"]["below_bigram"]
            and archs["gpt2"]["below_bigram"], "gap": gap}


def _ladder(largest: tuple[list[float], list[float]]) -> dict:
    """Three sizes: w48 above the bigram, w96 below it with one seed, w192 (3 seeds) with the given losses."""
    return {"tool": "eval.scale", "plan": {"path": "hub_configs/report/scale.yaml"}, "scored_on": "test",
            "eval_tokens": 270_762, "eval_documents": 133, "corpus": "embedded", "command": "ema-boundary scale",
            "seconds": {"total": 7200.0}, "paper": {"gap": 2.06},
            "sizes": [_size("w48", 48, [4.20], [4.30], 4.10), _size("w96", 96, [4.00], [3.95], 4.10),
                      _size("w192", 192, *largest, 4.10)]}


WORSE = ([3.90, 3.91, 3.92], [3.80, 3.82, 3.81])  # SPEN worse at every seed
BETTER = ([3.70, 3.71, 3.69], [3.80, 3.82, 3.81])
UNCLEAR = ([3.80, 3.90, 3.70], [3.81, 3.80, 3.82])
SILENT = ([4.20, 4.21, 4.22], [3.80, 3.82, 3.81])  # SPEN above the bigram at the largest size


def _write(tmp_path: Path, ladder: dict) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(ladder))
    return path


def _committed() -> dict:
    """The committed report without the ladder sweep its plan names (which would carry the row): these tests
    read the older `ema-boundary scale` ladder block; the sweep's reader is tested in tests/test_committed.py."""
    report = json.loads((COMMITTED / "report.json").read_text())
    (report.get("sweeps") or {}).pop("ladder", None)
    return report


def _report_with(ladder: dict) -> dict:
    report = _committed()
    report["scale_ladder"] = ladder_block(ladder, "docs/scale/report.json")
    report["claims"] = evaluate(report)
    return report


def _row(report: dict, claim_id: str) -> dict:
    return next(r for r in report["claims"] if r["id"] == claim_id)


def test_reading_a_ladder_refuses_what_cannot_serve_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        read_ladder(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match="not a readable report.json"):
        read_ladder(tmp_path / "bad.json")
    with pytest.raises(UsageError, match="not an `ema-boundary scale` report.json"):
        read_ladder(_write(tmp_path, {"tool": "ema-boundary report", "sizes": []}))
    broken = _ladder(WORSE)
    del broken["sizes"][1]["gate"]
    with pytest.raises(UsageError, match=r"sizes\[1\] lacks gate") as err:
        read_ladder(_write(tmp_path, broken), name="docs/scale/report.json")
    assert str(err.value).startswith("language_model.ladder: docs/scale/report.json: ") and "\n" not in str(err.value)


def test_the_verdict_reads_the_largest_size_that_speaks_with_an_interval():
    block = ladder_block(_ladder(WORSE), "x")
    assert block["min_seeds"] == MIN_SEEDS and deciding_size(block)["name"] == "w192"
    # w96 can speak but has one seed: it is never the deciding size.
    assert deciding_size(ladder_block(_ladder(SILENT), "x")) is None
    assert "both models below the bigram at w96" in phrase(ladder_block(_ladder(SILENT), "x"))


@pytest.mark.parametrize("losses,verdict,detail", [
    (WORSE, "met", "SPEN worse (direction)"),
    (BETTER, "opposite direction", "SPEN better"),  # read on the embedded corpus, the claim's regime is C4
    (UNCLEAR, "not resolved at this budget", ""),
])
def test_the_ladder_row_follows_the_sign_of_the_paired_interval(losses, verdict, detail):
    row = _row(_report_with(_ladder(losses)), "perplexity_gap_ladder")
    assert row["verdict"] == verdict and row["detail"] == detail
    assert row["ours"].startswith("w192 (1,184,256 non-embedding parameters, 3 seeds)")
    assert row["preconditions"][0]["holds"] is True


def test_a_ladder_where_the_largest_size_cannot_speak_is_not_testable():
    report = _report_with(_ladder(SILENT))
    row = _row(report, "perplexity_gap_ladder")
    assert row["verdict"] == "not testable in this regime"
    assert "below the bigram at w96" in row["detail"] and "w192" in row["detail"]
    # The headline row keeps its own gate and now says where along the ladder the gap can be read.
    head = _row(report, "perplexity_gap")
    assert "committed ladder `docs/scale/report.json`" in head["conditions"]
    assert "w48 (74,880 non-embedding parameters, 1 seed)" in head["conditions"]


def test_a_report_without_a_ladder_has_the_row_not_run():
    report = _committed()
    report.pop("scale_ladder", None)
    row = _row({**report, "claims": evaluate(report)}, "perplexity_gap_ladder")
    assert row["verdict"] == "not run"


def test_the_ladder_renders_as_a_table_and_in_the_readme_block():
    report = _report_with(_ladder(WORSE))
    lines = ladder_section(report)
    assert any(line.startswith("| w192 | 1,184,256 / 1,184,252 |") for line in lines)
    assert any("| w48 |" in line and "| no |" in line for line in lines)
    assert any("**met: SPEN worse (direction)**" in line for line in lines)
    assert "committed ladder `docs/scale/report.json`" in readme_results(report)
    validate(report)


def test_render_attaches_a_ladder_to_an_existing_report(tmp_path, capsys):
    folder = tmp_path / "report"
    shutil.copytree(COMMITTED, folder)
    before = json.loads((folder / "report.json").read_text())
    ladder = _write(tmp_path, _ladder(BETTER))
    # Without --upgrade, report.json is not rewritten: one line, nothing changed.
    assert ema_boundary(["render", str(folder), "--ladder", str(ladder)]) == 2
    assert "give it with --upgrade" in capsys.readouterr().err
    assert ema_boundary(["render", str(folder), "--upgrade", "--ladder", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--ladder" in err and "no such file" in err and "\n" not in err
    assert json.loads((folder / "report.json").read_text()) == before
    assert ema_boundary(["render", str(folder), "--upgrade", "--ladder", str(ladder)]) == 0
    after = json.loads((folder / "report.json").read_text())
    validate(after)
    assert after["scale_ladder"]["attached_by"].startswith("ema-boundary render")
    # The default plan names the committed ladder sweep (committed.ladder): the sweep carries the row, the
    # attached ladder is kept beside it (scale_ladder) as the older, unshuffled condition.
    assert _row(after, "perplexity_gap_ladder")["measurement"] == "sweeps.ladder.analysis.sizes"
    # Nothing else moved: the other rows and every number are the report's own.
    moved = ("claims", "scale_ladder", "sweeps")  # sweeps: re-read from the plan's committed sweeps on --upgrade
    unchanged = {k: v for k, v in after.items() if k not in moved}
    assert unchanged == {k: v for k, v in copy.deepcopy(before).items() if k not in moved}
    assert "## The perplexity gap along the scale ladder (committed)" in (folder / "index.md").read_text()
