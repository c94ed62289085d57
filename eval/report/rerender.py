"""``ema-boundary render`` and ``readme``: a report folder's index.md, and the README's results block, re-rendered
from its report.json (an older schema read in today's; with ``--upgrade`` the committed sweeps re-read and the claims
evaluated again). Nothing trains; a bad folder or file is one line through the subcommand's parser."""

from __future__ import annotations

import json
from pathlib import Path

from ema_boundary.io import atomic_file, write_json
from ema_boundary.usage import UsageError, UsageParser, first_line
from eval.plans import in_repo
from eval.report.claim_rows import evaluate
from eval.report.committed import sweeps_block
from eval.report.figures import boundary_figures
from eval.report.paths import portable
from eval.report.plan import Plan
from eval.report.render import update_readme, write_index
from eval.report.schema import ReportSchemaError, migrate


def read_report(parser: UsageParser, path: Path) -> dict:
    """A report.json in the current schema (an older one is upgraded in memory, numbers unchanged)."""
    try:
        return migrate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        parser.error(f"{path}: no such file")
    except ValueError as e:  # not JSON, or an unknown schema version
        parser.error(f"{path}: {first_line(e)}" if isinstance(e, ReportSchemaError) else f"{path}: not JSON ({e})")
    raise AssertionError("unreachable")


def readme(parser: UsageParser, report: Path, readme: Path) -> int:
    data = read_report(parser, report)
    try:
        changed = update_readme(data, readme)
    except FileNotFoundError as e:
        parser.error(f"{e.filename}: no such file")
    except (ValueError, KeyError) as e:
        parser.error(f"{readme}: {first_line(e)}")
    print(f"{readme}: results block {'rewritten' if changed else 'already up to date'}")
    return 0


def attach_sweeps(parser: UsageParser, report: dict, command: str) -> None:
    """report.json's ``sweeps`` re-read from the committed sweeps that its plan (the file in the repository, as it
    is now) names in ``committed:``; a plan that names none leaves the report without them."""
    path = (report.get("plan") or {}).get("path")
    if not path or not in_repo(path).is_file():
        if report.get("sweeps"):
            print(f"report.json's plan {path}: no such file; its committed sweeps are kept as they were read")
        return
    try:
        plan = Plan.load(in_repo(path), scale=report["plan"].get("scale", "tiny"))
        block = sweeps_block(plan.committed)
    except UsageError as e:
        parser.error(first_line(e))
    if block:
        report["sweeps"] = {k: {**v, "attached_by": command} for k, v in block.items()}
    else:
        report.pop("sweeps", None)
    if "arms" in (report.get("sweeps") or {}):  # the structure conditions are read from the arms sweep now
        report.pop("structure_conditions", None)


def render(parser: UsageParser, folder: Path, upgrade: bool, command: str = "") -> int:
    """index.md from report.json; with ``upgrade`` report.json is first rewritten in the current schema, its claims
    evaluated by today's claims table."""
    if not (folder / "report.json").is_file():
        parser.error(f"{folder}: no report.json")
    report = read_report(parser, folder / "report.json")
    if upgrade:
        # The old unshuffled scale ladder (docs/scale, `scale_ladder`) and the old ablation reader (docs/ablation,
        # `ablation_budgets`) are retired: the plan's committed sweeps (`committed: ladder:`, `ablation_predictor:`,
        # `ablation_trace:`, re-read below) carry their rows, so an older report's blocks and figures go.
        report.pop("scale_ladder", None)
        report.pop("ablation_budgets", None)
        report["figures"] = {k: v for k, v in report.get("figures", {}).items()
                             if not k.startswith("ablation_budgets_")}
        attach_sweeps(parser, report, command)
    report = portable(report)  # recorded paths relative to the repository or the output folder
    if upgrade:
        report["claims"] = evaluate(report)
    # The picture of the boundary is drawn from report.json (its claims included), like index.md.
    report["figures"] = {**report.get("figures", {}), **boundary_figures(report, folder / "figures")}
    if upgrade:
        write_json(folder / "report.json", report)
    with atomic_file(folder / "index.md") as tmp:
        write_index(report, report.get("figures", {}), Path(tmp))
    print(f"wrote {folder / 'index.md'}" + (f" and upgraded {folder / 'report.json'}" if upgrade else ""))
    return 0
