"""report.json's shape: its version, the JSON Schema that describes it (``report.schema.json``, shipped beside this
module) and the upgrade of reports written before it.

Version 2 holds every block once: the content probes' results live under ``probes`` only (version 1 also had
top-level copies ``identity_at_lag``, ``recall``, ``recall_control`` and ``probe_command``), and the paper's
claims are the rows of :mod:`eval.report.claims` (``claims``, structure and content alike) instead of the
hand-written ``paper_claims``.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

from eval.report.claim_rows import evaluate

SCHEMA_VERSION = "ema-boundary.report/2"
SCHEMA_FILE = Path(__file__).with_name("report.schema.json")

__all__ = ["SCHEMA_FILE", "SCHEMA_VERSION", "ReportSchemaError", "migrate", "schema", "validate"]


class ReportSchemaError(ValueError):
    """A report.json that does not match report.schema.json: one line naming the key path."""


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def validate(report: dict[str, Any]) -> None:
    """Raise :class:`ReportSchemaError` naming the first key path where ``report`` leaves the schema."""
    import jsonschema  # optional: the test extra's, as only the tests validate a report against the schema

    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(report))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ReportSchemaError(f"report.json {where}: {error.message[:300]}")


def migrate(report: dict[str, Any]) -> dict[str, Any]:
    """A version-1 report (no ``schema`` key) in version 2's shape; a version-2 report unchanged.

    No number changes: the top-level copies are dropped (their numbers are those under ``probes``: ``recall`` is
    ``probes.recall`` without the sweep, ``identity_at_lag.X.accuracy`` is ``probes.identity_at_lag.X.best``),
    ``probe_command`` moves to ``probes.command``, and ``paper_claims`` is replaced by the claims table evaluated
    on the report's own numbers (so its verdicts follow today's rules and preconditions).
    """
    if report.get("schema") == SCHEMA_VERSION:
        return report
    if "schema" in report:
        raise ReportSchemaError(f"report.json schema: unknown version {report['schema']!r}")
    if "probes" not in report:  # another tool's report.json (eval.scale writes one too): refused, not half-read
        tool = report.get("tool")
        raise ReportSchemaError("not a boundary report (no probes section" + (f"; written by {tool}" if tool else "")
                                + ")")
    old = copy.deepcopy(report)
    for key in ("identity_at_lag", "recall", "recall_control", "paper_claims"):
        old.pop(key, None)
    old["probes"]["command"] = old.pop("probe_command")
    order = ["schema", "question", "plan", "structure", "content", "claims", "ablation", "traces", "probes",
             "paper", "environment", "command", "figures"]
    new = {"schema": SCHEMA_VERSION, "claims": [], **old}
    new = {k: new[k] for k in order if k in new} | {k: v for k, v in new.items() if k not in order}
    new["claims"] = evaluate(new)
    return new
