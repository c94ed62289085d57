"""The picture of the boundary (eval/report/boundary.py): drawn from report.json alone, each claim's verdict on the
panel that holds its numbers, a panel whose data the report lacks saying "not run"."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from eval.report.boundary import boundary_figure, draw
from eval.report.claims import evaluate, one_screen, short_name, short_verdict
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
