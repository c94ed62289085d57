"""The picture of the boundary (eval/report/boundary.py): drawn from report.json alone, each claim's verdict on the
panel that holds its numbers, a panel whose data the report lacks saying "not run"."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from eval.report.boundary import boundary_figure, draw
from eval.report.claim_rows import evaluate, one_screen, short_name, short_verdict
from eval.report.plan import REPO
from eval.report.schema import migrate


@pytest.fixture(scope="module")
def committed() -> dict:
    report = migrate(json.loads((REPO / "docs/report/report.json").read_text()))
    return {**report, "claims": evaluate(report)}


def _texts(fig) -> list[str]:
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    return texts + [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]


def test_every_claim_is_marked_with_its_verdict(committed: dict) -> None:
    from matplotlib import pyplot as plt

    fig = draw(committed)
    items = _texts(fig)
    texts = "\n".join(items)
    plt.close(fig)
    # Every content and escape row of the one-screen table is on the figure with its verdict, as committed.
    for row, _ in one_screen(committed["claims"]):
        if row["side"] != "structure":
            assert f"{short_name(row)}: {short_verdict(row)}" in texts, row["id"]
    assert "No reader of fixed-rate traces recovers token identity: partly refuted" in texts
    assert "transfer to grammar B: met" in texts and "within A: SPCN/BiGRU (x100): refuted" in texts
    assert items.count("not run") == 0  # every panel has its data (depth from the committed sweep)


def test_a_panel_without_its_data_says_not_run(committed: dict, tmp_path: Path) -> None:
    from matplotlib import pyplot as plt

    bare = copy.deepcopy(committed)
    for key in ("depth", "content", "sweeps"):
        bare.pop(key, None)
    bare["probes"]["recall"] = {}
    bare["claims"] = [r for r in bare["claims"] if r["side"] == "structure"]
    fig = draw(bare)
    assert [t for t in _texts(fig) if t == "not run"] == ["not run"] * 4  # recall, scale, budgets, depth
    plt.close(fig)
    path = boundary_figure(bare, tmp_path / "figures" / "boundary.png")
    import matplotlib.image

    assert matplotlib.image.imread(path).shape[1] > 1000  # legible at page width


def test_the_perplexity_panel_shows_the_data_axis_when_the_plan_names_it(committed: dict, tmp_path: Path) -> None:
    from matplotlib import pyplot as plt

    from eval.report.committed import sweeps_block
    from tests.test_committed import NARROWING, data_axis_sweep

    data_axis_sweep(tmp_path / "data", NARROWING)
    report = copy.deepcopy(committed)
    report["sweeps"] = {**report.get("sweeps", {}), **sweeps_block({"data_axis": str(tmp_path / "data")})}
    report["claims"] = evaluate(report)
    fig = draw(report)
    insets = [c for ax in fig.axes for c in ax.child_axes if c.get_title() == "the data axis (committed sweep)"]
    assert len(insets) == 1
    labels = insets[0].get_legend_handles_labels()[1]
    assert labels == ["w192-e6", "w128-e6"]  # the two settings that ran, each with its fitted line
    filled = [ln for ln in insets[0].get_lines() if ln.get_marker() == "o" and ln.get_markerfacecolor() != "white"]
    assert len(filled) == 8 + 2  # every point of both settings passes its gates (and the two legend entries)
    plt.close(fig)
    # A report whose plan names no data-axis sweep draws no inset.
    without = draw({**committed, "sweeps": {k: v for k, v in (committed.get("sweeps") or {}).items()
                                            if k != "data_axis"}})
    assert not [c for ax in without.axes for c in ax.child_axes]
    plt.close(without)
