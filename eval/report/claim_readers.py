"""How a claim reads a committed sweep (report.json's ``sweeps``, the plan's ``committed:``): the sweep's analysis
decides; each :class:`SweepReader` names its verdict rule, the gate the sweep recorded, the row's conditions and
its value in a few words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ema_boundary.format import count, pct
from ema_boundary.verdicts import Verdict
from eval.report import committed as sweeps
from eval.report.claim_rules import (
    Outcome,
    Report,
    TestedAt,
    arm_trace,
    committed_at,
    depth_loss_verdict,
    depth_ours,
    depth_probe_verdict,
    gap_outcome,
    interval_text,
    readers_rule,
    selection_rule,
)


@dataclass(frozen=True)
class SweepReader:
    """How a claim reads a committed sweep (report.json's ``sweeps[source]``, :mod:`eval.report.committed`): the
    verdict rule on the sweep's analysis, the gate the sweep recorded (a failed gate: not testable), the other
    runs of the sweep as the row's conditions and the row's value in a few words."""

    source: str  # a key of the plan's ``committed:`` (eval.report.committed.SOURCES)
    reads: str  # the analysis key the rule reads, for the row's ``measurement``
    rule: Callable[[Report, Mapping[str, Any]], Outcome]
    gate_text: str
    gate: Callable[[Mapping[str, Any]], tuple[bool | None, str]]  # (holds, numbers) as the sweep recorded it
    conditions: Callable[[Mapping[str, Any]], str | None]
    value: Callable[[Mapping[str, Any]], str | None]
    rule_text: str = ""  # the verdict rule in words, where it is not the claim's


# Committed sweeps (report.json's ``sweeps``, the plan's ``committed:``): the sweep's analysis decides; the
# gates and verdict words are eval.verdicts', read here, never re-decided


def _verdict_of(value: Any) -> Verdict:
    try:
        return Verdict(value)
    except ValueError:
        return Verdict.NOT_RESOLVED


def _sweep_escape_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
    """The recall map's escape at its headline state size (:func:`eval.verdicts.escape_verdict`): both arms'
    accuracies, the floor they are read against (the measured no-lookup floor; 1 / pairs in sweeps summarised before
    issue 49), the control's gate, the ablation's answer and the check against the field's own model."""
    a = block["analysis"]
    key, row = str(a.get("headline")), sweeps.escape_row(block)
    if row is None:
        return Outcome(Verdict.NOT_RUN, f"the committed sweep `{block['source']}` has not run both arms of its "
                                        f"headline comparison (N = {key}) yet")
    setting = a.get("headline_at") or "escape"
    sel, fix = sweeps.escape_arms(block, key, row, setting)[:2]
    control = a.get("control") or {}
    level = (a.get("floor") or {}).get("name") or "copying level"
    ours = (sweeps.escape_text(block, key, row, setting) + f"; {level} {pct(row['copying'])} (an arm escapes "
            f"above {pct(row['copy_bar'])})" + (f"; {control['why']}" if control.get("why") else "")
            + sweeps.ablation_text(block))
    chosen = {arm: [c for c in ((block["arms"].get(arm) or {}).get("choices") or {}).values()
                    if c.get("chosen") is not None] for arm in (sel, fix)}
    choices = [c for cs in chosen.values() for c in cs]
    edges = sum(not c.get("interior") for c in choices)
    # each arm's grid as tried, so that an edge choice reads against the rates it could have left (older reports
    # kept no rates tried: then the count alone)
    tried = {arm: sorted({r for c in cs for r in c.get("tried") or ()}) for arm, cs in chosen.items()}
    grids = ", ".join(f"`{arm}` {len(t)} ({t[0]:g} to {t[-1]:g})" for arm, t in tried.items() if len(t) > 1)
    grid = f" (rates tried: {grids})" if grids else ""
    strength = (f"{count(len(row.get('seeds') or []), 'paired seed')}, each at its own rate; a winner must lead by "
                f"{100 * row['min_effect']:g} points (declared before the run); cap {sweeps.cap(block, sel)} steps"
                + (f"; the rate at an edge of the rates tried in {edges} of {len(choices)} choices{grid}"
                   if edges else f"; every rate chosen inside the rates tried{grid}" if choices else ""))
    verdict = _verdict_of(row["verdict"])
    detail = row.get("reason", "") if verdict in (Verdict.NEITHER_ESCAPES, Verdict.NOT_RESOLVED) else ""
    return Outcome(verdict, ours, detail, strength)


def _sweep_escape_value(block: Mapping[str, Any]) -> str | None:
    row = sweeps.escape_row(block)
    if not row or not isinstance(row.get("difference"), (int, float)):
        return None
    seeds = len(row.get("seeds") or [])
    if seeds < 2:  # one seed has no interval (the paired t interval is infinite, clipped to the range)
        return f"{100 * row['difference']:+.1f} pts ({seeds} seed)"
    return interval_text(row["difference"], row.get("ci95"), 100, 1, " pts")


def _sweep_control(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    control = block["analysis"].get("control") or {}
    return control.get("holds"), control.get("why", "no positive control in the sweep")


_NAMES = {"spen": "SPEN", "gpt2": "GPT-2"}


def sweep_ladder_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
    """The gap a − b at the ladder sweep's deciding size (both gates holding, an interval); with none, the largest
    size's numbers (its gate then says why the row cannot be read)."""
    a = block["analysis"]
    sizes = a.get("sizes") or []
    if not sizes:
        return Outcome(Verdict.NOT_RUN, f"the committed ladder `{block['source']}` has no size with both "
                                        "architectures run yet")
    e = sweeps.ladder_deciding(block) or sizes[-1]
    an, gap = a["a"], e["gap"]
    params = (e.get("parameters") or {}).get(an) or {}
    budgets = (block["arms"].get(f"{e['name']}/{an}") or {}).get("budgets") or {}
    tokens = e.get("train_tokens") or next((b["tokens"] for b in reversed(budgets.values()) if b.get("tokens")),
                                           None)
    ours = (sweeps.ladder_size_text(block, e) + (f"; {tokens:,} training tokens" if tokens else "")
            + f", {block.get('scored_on') or 'test'} blocks")
    strength = (f"{count(gap.get('n', 0), 'paired seed')}, 95% t interval; another scale and "
                "corpus than the paper's, so only the sign of the gap is compared")
    at = (committed_at(report, params["total"], tokens, block.get("corpus"))
          if params.get("total") and tokens else None)
    if gap.get("ci95") is None:
        return Outcome(Verdict.NOT_RESOLVED, ours, "no interval at this size", strength, at)
    lo, hi = gap["ci95"]
    worse = _NAMES.get(an, an)
    if lo > 0:
        return Outcome(Verdict.MET, ours, f"{worse} worse (direction)", strength, at)
    if hi < 0:
        return Outcome(Verdict.REFUTED, ours, f"{worse} better", strength, at)
    return Outcome(Verdict.NOT_RESOLVED, ours, "", strength, at)


def _sweep_ladder_value(block: Mapping[str, Any]) -> str | None:
    """The perplexity ratio at the deciding size; with none, at the largest size, marked as not read (the
    one-screen table keeps a number, its section says which gate failed)."""
    e = sweeps.ladder_deciding(block)
    unread = e is None
    if unread:
        e = next((x for x in reversed(block["analysis"].get("sizes") or []) if x.get("ratio") is not None), None)
    if e is None or e.get("ratio") is None:
        return None
    ci = e.get("ratio_ci95")
    return (f"{e['ratio']:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
            + f" ({e['name']}{'; a gate fails' if unread else ''})")


def sweep_gap_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
    """eval.gap's AR-hit contrast at the ladder sweep's deciding size (where both models pass every gate, the
    attention baseline's retrieval from context included)."""
    e = _gap_size(block)
    gap = (e or {}).get("gap_decomposition")
    if e is None or not gap:
        return Outcome(Verdict.NOT_RUN, f"no size of the committed ladder `{block['source']}` has a gap "
                                        "decomposition yet (it is measured where both models pass the n-gram and "
                                        "reference gates)")
    c = (gap.get("contrasts") or {}).get("ar_hit - first") or {}
    params = (e.get("parameters") or {}).get(block["analysis"]["a"]) or {}
    tokens = e.get("train_tokens")
    at = (committed_at(report, params["total"], tokens, block.get("corpus"))
          if params.get("total") and tokens else None)
    strength = f"{e['name']}, {gap.get('interval') or 'paired by seed'}"
    return gap_outcome(gap, c, strength, at)


def _gap_size(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The deciding size; with none, the largest size with a decomposition (its failed gate then says why the row
    cannot be read: e.g. the baseline shows no retrieval from context)."""
    sizes = block["analysis"].get("sizes") or []
    return sweeps.ladder_deciding(block) or next((e for e in reversed(sizes) if e.get("gap_decomposition")), None)


def _sweep_gap_value(block: Mapping[str, Any]) -> str | None:
    e = _gap_size(block)
    c = (((e or {}).get("gap_decomposition") or {}).get("contrasts") or {}).get("ar_hit - first") or {}
    unread = "" if sweeps.ladder_deciding(block) else "; a gate fails"
    return (interval_text(c["value"], c.get("ci95"), unit=" nats") + f" ({e['name']}{unread})"
            if c.get("value") is not None else None)


def _sweep_gap_conditions(block: Mapping[str, Any]) -> str | None:
    """Every class of the deciding size's decomposition and the windowed context-use control of both models."""
    e = _gap_size(block)
    gap = (e or {}).get("gap_decomposition") or {}
    if not gap:
        return None
    parts = [f"{e['name']}: SPEN − GPT-2 by class: " + ", ".join(
        f"{g['class']} {interval_text(g['difference'], g.get('ci95'), unit='')} ({g['tokens']:,} tokens, "
        f"{g.get('share_of_gap', 0):.0%} of the gap)" for g in gap.get("groups", []))]
    use = gap.get("context_use") or {}
    controls = [f"{m['label']} {interval_text(m['control'], m.get('ci95'), unit='')}" for k in ("a", "b")
                if (m := use.get(k)) and m.get("control") is not None]
    if controls:
        parts.append(f"windowed context-use control (W = {use.get('window')}: the cost of cutting each target's "
                     "context to its last W tokens on AR hits beyond W minus on first occurrences, nats): "
                     + ", ".join(controls))
    return "; ".join(parts) + f" (committed sweep `{block['source']}`)"


def _sweep_ablation_view(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ablation sweep's longest budget in the shape the reader and trace rules read (report.json's
    ``ablation`` block); None before every arm has two seeds there."""
    top = sweeps.ablation_longest(block)
    if top is None or not top[1].get("comparisons"):
        return None
    steps, entry = top
    a, f = block["analysis"], entry.get("f_test") or {}
    comps = entry["comparisons"]
    return {"reference": a["reference"], "equivalence_margin": a.get("equivalence_margin") or 0.0,
            "comparisons": comps, "overall": f if "F" in f else None,
            "regime": {"seeds": max(c["n"] for c in comps.values()), "steps": steps}}


def _sweep_ablation_at(report: Report, block: Mapping[str, Any]) -> TestedAt | None:
    top = sweeps.ablation_longest(block)
    ref = block["analysis"]["reference"]
    arm = block["arms"].get(ref) or {}
    tokens = (arm.get("budgets") or {}).get(str(top[0]), {}).get("tokens") if top else None
    total = (arm.get("parameters") or {}).get("total")
    return committed_at(report, total, tokens, block.get("corpus")) if total and tokens else None


def _sweep_ablation_rule(rule: Callable[[Report, Any], Outcome]) -> Callable[[Report, Mapping[str, Any]], Outcome]:
    def read(report: Report, block: Mapping[str, Any]) -> Outcome:
        view = _sweep_ablation_view(block)
        if view is None:
            return Outcome(Verdict.NOT_RUN, f"the committed ablation `{block['source']}` has no paired comparison at "
                                            "its longest budget yet (every arm needs two or more seeds there)")
        outcome = rule(report, view)
        return Outcome(outcome.verdict, outcome.ours, outcome.detail, outcome.strength,
                       _sweep_ablation_at(report, block), outcome.short)
    return read


def _sweep_ablation_value(selective_only: bool) -> Callable[[Mapping[str, Any]], str | None]:
    def value(block: Mapping[str, Any]) -> str | None:
        view = _sweep_ablation_view(block)
        comps = (view or {}).get("comparisons") or {}
        if selective_only:
            comps = {arm: c for arm, c in comps.items() if arm_trace(arm) == "selective"}
        if not comps:
            return None
        return "; ".join(interval_text(c["difference"], c.get("ci95")) for c in comps.values()) + " nats"
    return value


def _sweep_depth_table(block: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, Outcome | None, str]:
    """The depth sweep's paired table (or the "not run" outcome) and the strength both depth rows print."""
    a = block["analysis"]
    t = a.get("table") or {}
    if "token_accuracy" not in t:
        return None, Outcome(Verdict.NOT_RUN, a.get("reason") or f"the committed sweep `{block['source']}` has no "
                                                                   "depth table yet"), ""
    ref = (block.get("settings") or {}).get("reference", "add")
    budgets = (block["arms"].get(ref) or {}).get("budgets") or {}
    steps = f", {max(int(b) for b in budgets):,} steps" if budgets else ""
    return t, None, (f"{len(t['token_accuracy'].get('seeds') or [])} paired seeds{steps}; loss on the "
                     f"{a.get('scored_on') or 'test'} blocks")


def _sweep_depth_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
    """The probe part of the depth sweep (no language-model gate), with every row of its table."""
    t, not_run, strength = _sweep_depth_table(block)
    if t is None:
        return not_run
    verdict, detail = depth_probe_verdict(t)
    return Outcome(verdict, depth_ours(t, loss_name=f"{block['analysis'].get('scored_on') or 'test'} loss"),
                   detail, strength)


def _sweep_depth_loss_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
    """The loss part of the depth sweep, behind its n-gram gate."""
    t, not_run, strength = _sweep_depth_table(block)
    if t is None:
        return not_run
    verdict, ours, detail = depth_loss_verdict(t, f"{block['analysis'].get('scored_on') or 'test'} loss")
    return Outcome(verdict, ours, detail, strength)


def _sweep_depth_gate(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    gate = block["analysis"].get("gate") or {}
    return gate.get("holds"), gate.get("why") or "no n-gram gate in the sweep"


def _sweep_probe_gate(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    """The probe part reads the final stream of trained models: no language-model gate applies."""
    return True, "token identity and each block's output are read by a linear probe: no language-model gate"


def _sweep_depth_loss_value(block: Mapping[str, Any]) -> str | None:
    loss = ((block["analysis"].get("table") or {}).get("val_loss")) or {}
    return interval_text(loss["difference"], loss.get("ci95"), 1.0, 3, " nats") if "difference" in loss else None


def _sweep_depth_value(block: Mapping[str, Any]) -> str | None:
    acc = ((block["analysis"].get("table") or {}).get("token_accuracy")) or {}
    return interval_text(acc["difference"], acc.get("ci95"), 100, 1, " pts") if "difference" in acc else None


def _sweep_ablation_gate(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    return sweeps.ablation_gate(block)


ESCAPE_SWEEP = SweepReader(
    "recall_map", "escape", _sweep_escape_rule,
    "the positive control (the GPT-2 architecture: attention over the tokens) reaches its declared bar at the "
    "pairs read: otherwise a model that fails may fail for the recipe", _sweep_control, sweeps.escape_conditions,
    _sweep_escape_value,
    rule_text="eval.verdicts.escape_verdict at the sweep's headline state size (at the declared longer cap once "
              "both arms have their seeds there, else at the cap), selective − fixed paired by seed: "
              "met (selective escapes) if the 95% interval lies above 0, the lead is at least the declared effect and "
              "the selective arm is above the floor by the declared margin, its own 95% interval over seeds wholly "
              "above floor + margin (the floor: the best no-lookup answer, "
              "the most frequent value in the context, measured on the evaluation sequences; 1 / pairs in sweeps "
              "summarised before issue 49); refuted if the fixed bank escapes the same way or the two are "
              "equivalent with both above the floor; neither escapes if a resolved difference (or equivalence) "
              "leaves both wholly at or below it; otherwise not resolved (an arm whose interval holds floor + "
              "margin, or equivalence with only one arm above it)")


LADDER_SWEEP = SweepReader(
    "ladder", "sizes", sweep_ladder_rule,
    "a size of the committed ladder where both models are below the declared Kneser-Ney line on the same test "
    "tokens and the baseline is within the declared margin of the plain reference, with an interval",
    sweeps.ladder_gate, sweeps.ladder_conditions, _sweep_ladder_value,
    rule_text="at the ladder sweep's deciding size (the largest with every gate holding and an interval): met if "
              "the 95% interval of SPEN − GPT-2 loss lies above 0 (SPEN worse: only the sign transfers), refuted if "
              "below 0, otherwise not resolved")


GAP_LADDER_SWEEP = SweepReader(
    "ladder", "sizes", sweep_gap_rule,
    "a size of the committed ladder where both models are below the declared Kneser-Ney line on the same test "
    "tokens, the baseline is within the declared margin of the plain reference and retrieves from context (the "
    "windowed control), with an interval",
    sweeps.ladder_gate, _sweep_gap_conditions, _sweep_gap_value,
    rule_text="eval.gap at the ladder sweep's deciding size: met if the 95% interval of (SPEN − GPT-2 on AR hits) − "
              "(SPEN − GPT-2 on first occurrences), paired by seed on the test blocks, lies above 0; refuted if "
              "below 0; otherwise not resolved")


_ABLATION_GATE = ("the committed ablation's reference arm below the declared Kneser-Ney line on the same tokens at "
                  "its longest budget")


PREDICTOR_SWEEP = SweepReader(
    "ablation_predictor", "budgets", _sweep_ablation_rule(lambda r, v: readers_rule(r, v)), _ABLATION_GATE,
    _sweep_ablation_gate, sweeps.ablation_conditions, _sweep_ablation_value(False))


TRACE_SWEEP = SweepReader(
    "ablation_trace", "budgets", _sweep_ablation_rule(lambda r, v: selection_rule(r, v)), _ABLATION_GATE,
    _sweep_ablation_gate, sweeps.ablation_conditions, _sweep_ablation_value(True))


DEPTH_SWEEP = SweepReader(
    "depth", "table", _sweep_depth_rule,
    "none: the probe part reads token identity and each block's output from the final stream (a linear probe on "
    "held-out blocks)", _sweep_probe_gate, sweeps.depth_conditions, _sweep_depth_value)


DEPTH_LOSS_SWEEP = SweepReader(
    "depth", "table", _sweep_depth_loss_rule,
    "both residual arms of the depth sweep below the declared Kneser-Ney line on the same tokens",
    _sweep_depth_gate, sweeps.depth_loss_conditions, _sweep_depth_loss_value)


__all__ = ["DEPTH_LOSS_SWEEP", "DEPTH_SWEEP", "ESCAPE_SWEEP", "GAP_LADDER_SWEEP", "LADDER_SWEEP", "PREDICTOR_SWEEP",
           "SweepReader", "TRACE_SWEEP", "sweep_gap_rule", "sweep_ladder_rule"]
