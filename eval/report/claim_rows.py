"""The rows of report.json's ``claims``: each claim of :data:`eval.report.claims.CLAIMS` evaluated on a report
(:func:`evaluate`), and the words the report, the README block and the boundary figure print from a row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ema_boundary.verdicts import WORSE_THAN_REFERENCE, Verdict
from eval.report import committed as sweeps
from eval.report.claim_checks import EXPERIMENTS
from eval.report.claim_readers import SweepReader
from eval.report.claim_rules import Check, Outcome, Precondition, Report, get, safe_words
from eval.report.claims import CLAIMS, Claim


@dataclass(frozen=True)
class Row:
    """One evaluated claim, as stored in report.json (:meth:`as_dict`)."""

    id: str
    side: str
    sentence: str
    paper: str
    measurement: str
    rule: str
    verdict: Verdict
    detail: str
    ours: str
    strength: str
    preconditions: list[dict[str, Any]] = field(default_factory=list)
    explanations: list[dict[str, str]] = field(default_factory=list)
    conditions: str | None = None
    short: str = ""
    verdict_short: str = ""
    regime: str | None = None
    tested_at: str | None = None
    paper_short: str = ""
    value: str | None = None
    outside: str | None = None  # where the verdict was read, when that is outside the claim's regime

    def as_dict(self) -> dict[str, Any]:
        row = {"id": self.id, "side": self.side, "sentence": self.sentence, "paper": self.paper,
               "measurement": self.measurement, "rule": self.rule, "verdict": self.verdict.value,
               "detail": self.detail, "ours": self.ours, "strength": self.strength,
               "preconditions": self.preconditions, "explanations": self.explanations}
        if self.conditions:
            row["conditions"] = self.conditions
        row |= {"short": self.short, "verdict_short": self.verdict_short or self.verdict.short,
                "paper_short": self.paper_short or self.paper}
        if self.value:
            row["value"] = self.value
        if self.regime:
            row["regime"] = self.regime
        if self.tested_at:
            row["tested_at"] = self.tested_at
        if self.outside:
            row["outside"] = self.outside
        return row


def evaluate_claim(claim: Claim, report: Report) -> Row:
    """One claim against one report: its preconditions, then (only if they hold) its verdict rule. A claim whose
    committed sweep the report holds (``sweeps``) reads the sweep."""
    block = get(report, ("sweeps", claim.sweep.source)) if claim.sweep is not None else None
    if block:
        return _evaluate_sweep(claim, claim.sweep, block, report)
    value = get(report, claim.measurement)
    base = dict(id=claim.id, side=claim.side, sentence=claim.sentence, paper=claim.paper(report),
                measurement=claim.key, rule=claim.rule_text,
                conditions=claim.conditions(report) if claim.conditions is not None else None,
                short=claim.short or claim.sentence, regime=claim.regime.text if claim.regime else None,
                paper_short=claim.paper_short, value=_safe_value(claim, report))
    if value is None or value == {}:
        return Row(**base, verdict=Verdict.NOT_RUN, detail="", ours=f"no `{claim.key}` in this report", strength="")
    outcome = claim.rule(report, value)
    checks = [(p, p.check(report)) for p in claim.preconditions]
    return _decided(claim, report, base, outcome, checks)


def _evaluate_sweep(claim: Claim, reader: SweepReader, block: Mapping[str, Any], report: Report) -> Row:
    """The claim read on its committed sweep: the sweep's analysis and gate; an incomplete sweep is read for what
    it has and its conditions say how many runs are still to run."""
    conditions = [sweeps.partial(block), safe_words(reader.conditions, block),
                  claim.conditions(report) if claim.conditions is not None else None]  # read elsewhere in the report
    base = dict(id=claim.id, side=claim.side, sentence=claim.sentence, paper=claim.paper(report),
                measurement=f"sweeps.{reader.source}.analysis.{reader.reads}", rule=reader.rule_text or claim.rule_text,
                conditions="; ".join(c for c in conditions if c) or None,
                short=claim.short or claim.sentence, regime=claim.regime.text if claim.regime else None,
                paper_short=claim.paper_short, value=safe_words(reader.value, block))
    outcome = reader.rule(report, block)
    holds, numbers = reader.gate(block)
    gate = Precondition(f"sweep_gate:{reader.source}", reader.gate_text, lambda r: Check(holds, numbers))
    row = _decided(claim, report, base, outcome, [(gate, Check(holds, numbers))])
    if row.verdict is Verdict.NOT_TESTABLE and numbers.startswith(WORSE_THAN_REFERENCE):
        # The baseline failed its plain-reference check: the one-screen table says so, not only "not testable".
        row = replace(row, verdict_short=f"{Verdict.NOT_TESTABLE.short}: {WORSE_THAN_REFERENCE}")
    return row


def _decided(claim: Claim, report: Report, base: dict[str, Any], outcome: Outcome,
             checks: list[tuple[Precondition, Check]]) -> Row:
    """The row from the rule's outcome behind the preconditions (a failed one: not testable, with its numbers)
    and the claim's regime (a refutation read outside it is worded as such)."""
    preconditions = [{"id": p.id, "text": p.text, "holds": c.holds, "numbers": c.numbers} for p, c in checks]
    verdict, detail = outcome.verdict, outcome.detail
    failed = [c for _, c in checks if c.holds is not True]
    short, outside = outcome.short, None
    if failed and verdict is not Verdict.NOT_RUN:
        # The rule's outcome is kept in "ours"; the verdict says the regime cannot carry it.
        verdict, detail, short = Verdict.NOT_TESTABLE, "; ".join(c.numbers for c in failed), ""
    elif verdict.readable and claim.regime is not None and outcome.at is not None \
            and not claim.regime.holds(outcome.at):
        # Read outside the claim's own conditions: the words say where, and a refutation is not called one.
        if verdict in (Verdict.REFUTED, Verdict.PARTLY_REFUTED):
            verdict = claim.regime.refuted_as
        outside = f"at {outcome.at.text()}, outside the claim's regime ({claim.regime.text})"
    explanations = []
    if verdict is not Verdict.NOT_TESTABLE:
        for e in claim.explanations:
            experiment = EXPERIMENTS[e.experiment]
            numbers = experiment.numbers(report)
            if numbers is not None and e.holds(report):
                explanations.append({"text": e.text, "experiment": experiment.id, "numbers": numbers})
    return Row(**base, verdict=verdict, detail=detail, ours=outcome.ours, strength=outcome.strength,
               preconditions=preconditions, explanations=explanations, verdict_short=short,
               tested_at=outcome.at.text() if outcome.at is not None else None, outside=outside)


def _safe_value(claim: Claim, report: Report) -> str | None:
    """The claim's short value; None where the report lacks what it reads (never a crash)."""
    if claim.value is None:
        return None
    try:
        return claim.value(report)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def evaluate(report: Report, claims: tuple[Claim, ...] = CLAIMS) -> list[dict[str, Any]]:
    """report.json's ``claims``: every claim of the table, evaluated against ``report``."""
    return [evaluate_claim(c, report).as_dict() for c in claims]


def verdict_text(row: Mapping[str, Any]) -> str:
    """``"refuted: SPEN better"``: the verdict with its qualifier."""
    return row["verdict"] + (f": {row['detail']}" if row["detail"] else "")


def outside_text(row: Mapping[str, Any]) -> str:
    """``" (at 0.66M parameters ..., outside the claim's regime (130M parameters on C4))"``: where a verdict read
    outside its claim's regime was read, to print after :func:`verdict_text`; "" inside it."""
    return f" ({row['outside']})" if row.get("outside") else ""


def short_name(row: Mapping[str, Any]) -> str:
    """The claim in under ~12 words: the row's own, else today's table's (a report.json from before the field)."""
    if row.get("short"):
        return row["short"]
    claim = next((c for c in CLAIMS if c.id == row["id"]), None)
    return claim.short if claim is not None and claim.short else row["sentence"]


def short_verdict(row: Mapping[str, Any]) -> str:
    """The verdict in one or two words."""
    if row.get("verdict_short"):
        return row["verdict_short"]
    try:
        return Verdict(row["verdict"]).short
    except ValueError:
        return row["verdict"]


def one_screen(rows: list[Mapping[str, Any]], claims: tuple[Claim, ...] = CLAIMS
               ) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """One entry per claim, in the table's order: ``(the row shown, the other reading of the same claim or None)``.

    A claim read both by this run and by a committed run (:attr:`Claim.committed`) is shown once: the committed
    reading when it reads its measurement (:attr:`Verdict.readable`), else this run's when it does, else the one
    that ran; the other reading becomes one of its conditions."""
    by_id = {r["id"]: r for r in rows}
    partner = {c.id: c.committed for c in claims if c.committed}
    partner |= {v: k for k, v in partner.items()}
    committed_ids = {c.committed for c in claims if c.committed}
    out: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = []
    seen: set[str] = set()
    for row in rows:
        if row["id"] in seen:
            continue
        other = by_id.get(partner.get(row["id"], ""))
        seen |= {row["id"], *([other["id"]] if other else [])}
        if other is None:
            out.append((row, None))
            continue
        committed, this = (row, other) if row["id"] in committed_ids else (other, row)
        order = [committed, this] if _readable(committed) or not _readable(this) else [this, committed]
        if not _readable(order[0]) and order[0]["verdict"] == Verdict.NOT_RUN.value:
            order.reverse()
        out.append((order[0], order[1]))
    return out


def _readable(row: Mapping[str, Any]) -> bool:
    try:
        return Verdict(row["verdict"]).readable
    except ValueError:
        return True


__all__ = ["Row", "evaluate", "evaluate_claim", "one_screen", "outside_text", "short_name", "short_verdict",
           "verdict_text"]
