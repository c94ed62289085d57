"""The committed report reads in one minute: index.md opens with one table, one row per claim of the claims table
and no claim twice, then the picture of the boundary; the README's results block is that table and picture, and
no generated line runs on past ~300 characters outside a table."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import pytest

from eval.report.claims import CLAIMS
from eval.report.plan import REPO

INDEX = REPO / "docs/report/index.md"


def _first_table(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows[2:]  # without the header and its rule


def test_the_first_table_of_index_holds_one_row_per_claim() -> None:
    text = INDEX.read_text()
    rows = _first_table(text)
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)), "a claim printed twice"
    assert set(names) == {c.short for c in CLAIMS}  # every claim, the pairs (this run, committed run) once
    assert text.index("## The claims at a glance") < text.index("| claim |") < text.index("figures/boundary.png")
    for r in rows:  # each row links to the section holding its conditions, explanations and runs
        anchor = re.search(r"\(#(claim-[\w]+)\)", r[-1]).group(1)
        assert f'<a id="{anchor}"></a>' in text


def test_the_order_is_claims_picture_rows_then_the_appendix() -> None:
    text = INDEX.read_text()
    order = ["## The claims at a glance", "![The boundary", "## Content: language modelling", "## Escape routes",
             "## Structure: SPCN on the grammar", "# Appendix", "### Per role:"]
    positions = [text.index(h) for h in order]
    assert positions == sorted(positions)


def test_no_long_generated_line_outside_a_table() -> None:
    for path in (INDEX, REPO / "README.md"):
        long = [line[:80] for line in path.read_text().splitlines()
                if len(line) > 300 and not line.lstrip().startswith("|")]
        assert not long, (path.name, long)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_a_long_recorded_command_is_broken_into_lines_that_still_run_as_recorded() -> None:
    from eval.report.render import _shell

    command = json.loads((REPO / "docs/report/report.json").read_text())["gap"]["command"]
    shown = _shell(command)
    assert max(len(line) for line in shown.splitlines()) < 200 < len(command)
    argv = subprocess.run(["bash", "-c", 'f() { printf "%s\\n" "$@"; }; f ' + shown], capture_output=True,
                          text=True, check=True).stdout.splitlines()
    assert argv == shlex.split(command)


def test_the_readme_shows_the_table_and_the_picture() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index("<!-- results:"): readme.index("<!-- end of results -->")]
    assert len(_first_table(block)) == len({c.short for c in CLAIMS})
    assert "![The boundary, axis by axis](docs/report/figures/boundary.png)" in block
    assert (REPO / "docs/report/figures/boundary.png").is_file()
    assert "66k parameters" not in readme and "20 tokens per parameter" not in readme  # stale prose is gone
    heads = [readme.index(h) for h in ("pip install torch", "## What the report found", "## SPEN", "## Training",
                                       "## Evaluation", "## Experiments", "## Layout")]
    assert heads == sorted(heads)


def test_the_committed_figures_named_in_report_json_exist() -> None:
    report = json.loads((REPO / "docs/report/report.json").read_text())
    assert report["figures"]["boundary"] == "figures/boundary.png"
    for rel in report["figures"].values():
        assert (REPO / "docs/report" / rel).is_file(), rel
