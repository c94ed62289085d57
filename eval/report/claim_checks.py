"""The claims' preconditions (the regime in which a verdict may be given at all: the competence gate, the positive
control, the short-window check, reachability) and the experiments of this suite that test an explanation.

They read report.json defensively: a missing key makes a precondition unmeasured, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ema_boundary.format import pct
from ema_boundary.verdicts import Verdict
from eval import verdicts as sweep_verdicts
from eval.report.claim_rules import (
    RECALL_BAR,
    Check,
    Experiment,
    Precondition,
    Report,
    by_scope,
    get,
    structure_value,
    top_accuracy,
)

# Preconditions


def _both_below_bigram(report: Report) -> Check:
    ppl, bigram = get(report, ("content", "perplexity")), get(report, ("content", "ngram", "bigram"))
    if not ppl or bigram is None:
        return Check(None, "no perplexities or no bigram reference in this report")
    spen, gpt2 = ppl.get("spen"), ppl.get("gpt2_arch")
    if spen is None or gpt2 is None:
        return Check(None, "a perplexity is missing")
    scored = _scored_on(report)
    gate = sweep_verdicts.ngram_gate({"spen": math.log(spen), "gpt2_arch": math.log(gpt2)}, math.log(bigram))
    return Check(gate.holds,
                 f"{scored} perplexity SPEN {spen:.1f}, GPT-2 architecture {gpt2:.1f}; Kneser-Ney bigram "
                 f"{bigram:.1f} on the same tokens")


def _scored_on(report: Report) -> str:
    """The held-out blocks the headline pair is compared on, in words: the test blocks (with their size) when the
    runs held some out, else the validation blocks that also chose the rates."""
    content = get(report, ("content",)) or {}
    if content.get("scored_on") != "test":
        return "validation (the blocks that also chose the rates)"
    reg = content.get("regime") or {}
    if "test_tokens" not in reg:
        return "test"
    return f"test ({reg['test_tokens']:,} tokens of {reg['test_documents']} documents apart from validation)"


def _reference_below_bigram(section: str) -> Callable[[Report], Check]:
    def check(report: Report) -> Check:
        block, bigram = get(report, (section,)), get(report, ("content", "ngram", "bigram"))
        if not block or bigram is None:
            return Check(None, f"no {section} block or no bigram reference in this report")
        ref = block.get("reference")
        loss = (block.get("final_loss") or {}).get(ref)
        if loss is None:
            return Check(None, f"the reference arm `{ref}` has no loss")
        steps = (block.get("regime") or {}).get("steps")
        return Check(sweep_verdicts.ngram_gate({ref: loss}, math.log(bigram)).holds,
                     f"reference `{ref}` {loss:.3f} nats (perplexity {math.exp(loss):.1f})"
                     + (f" after {steps} steps" if steps else "")
                     + f"; Kneser-Ney bigram {math.log(bigram):.3f} nats (perplexity {bigram:.1f})")
    return check


def _control_solves(report: Report) -> Check:
    recall = get(report, ("probes", "recall")) or {}
    control = get(report, ("probes", "positive_control"))
    if control is None or control not in recall:
        return Check(None, "no positive control in this run")
    at, acc = top_accuracy(recall[control])
    return Check(acc >= RECALL_BAR, f"control `{control}` {pct(acc)} at {at} pairs (bar {RECALL_BAR:.0%})")


def _window_gap(report: Report) -> Check:
    gap = get(report, ("structure", "window_gap"))
    if not isinstance(gap, Mapping) or "passes" not in gap:
        return Check(None, "the structure results hold no window-gap measurement")
    try:
        numbers = (f"{gap['kind']} roles of {gap['split']}: causal ceiling {pct(gap['causal_ceiling'])}, best "
                   f"{gap['best_k']}-token window {pct(gap['best_window_ceiling'])}, gap "
                   f"{100 * gap['gap_ceiling']:.1f} points (required {100 * gap['required_gap']:.0f})")
    except (KeyError, TypeError):
        numbers = "window gap " + ("passes" if gap["passes"] else "fails")
    return Check(bool(gap["passes"]), numbers)


BIGRAM_LINE = Precondition(
    "both_below_bigram", "both language models below the Kneser-Ney bigram perplexity on the same held-out tokens "
    "(the test blocks when the runs hold them out; mean over seeds)", _both_below_bigram)


READER_GATE = Precondition(
    "reference_below_bigram", "the reference arm (the linear reader) below the Kneser-Ney bigram loss on the same "
    "tokens",
    _reference_below_bigram("ablation"))


TRACE_GATE = Precondition(
    "reference_below_bigram", "the reference arm (fixed-rate EMA traces) below the Kneser-Ney bigram loss on the "
    "same tokens",
    _reference_below_bigram("traces"))


CONTROL_GATE = Precondition(
    "control_solves", f"the positive control (the GPT-2 architecture) reaches {RECALL_BAR:.0%} at the largest pair "
    "count: otherwise a model that fails may fail for the recipe", _control_solves)


WINDOW_GATE = Precondition(
    "no_short_window", "the structural roles are ones no short window decides (the best k-token window's ceiling "
    "stays the required gap below the causal ceiling)", _window_gap)


def _reachable(row_id: str) -> Callable[[Report], Check]:
    """Whether the paper's number can be reached at all on this grammar by a reader that sees only the past
    (grammar_probe's ``reachable`` and ``causal_cap``; results.json from before they existed: not checked)."""
    def check(report: Report) -> Check:
        row = get(report, ("structure", "paper", row_id)) or {}
        if "reachable" not in row:
            return Check(True, "reachability not computed (an earlier grammar_probe results.json)")
        cap = (row.get("causal_cap") or {}).get("mean")
        numbers = f"causal cap {cap:.3f}" if isinstance(cap, (int, float)) else "causal cap not stated"
        return Check(bool(row["reachable"]), numbers + ("" if row["reachable"] else
                                                         ": the paper's value is out of reach on this grammar"))
    return check


def reachable_gate(row_id: str) -> Precondition:
    return Precondition("reachable", "the paper's number can be reached in principle on this grammar by a causal "
                        "reader (the exact causal ceiling)", _reachable(row_id))


def _scope_numbers(report: Report) -> str | None:
    kinds = by_scope(report)
    if not kinds.get("state") or not kinds.get("sequence"):
        return None
    at = max(top_accuracy(r)[0] for r in (get(report, ("probes", "recall")) or {}).values())
    parts = [f"{label} scope: " + ", ".join(f"`{n}` {pct(a)}" for n, a in sorted(kinds[k].items()))
             for k, label in (("state", "state"), ("sequence", "sequence"))]
    return f"recall at {at} pairs, " + "; ".join(parts)


def state_fails_sequence_solves(report: Report) -> bool:
    kinds = by_scope(report)
    return (any(a >= RECALL_BAR for a in kinds.get("sequence", {}).values())
            and not any(a >= RECALL_BAR for a in kinds.get("state", {}).values()))


def _shortcut_numbers(row_id: str) -> Callable[[Report], str | None]:
    def numbers(report: Report) -> str | None:
        row = get(report, ("structure", "paper", row_id))
        if not isinstance(row, Mapping) or not row.get("shortcuts"):
            return None
        return "; ".join(f"{m} {structure_value(row_id, row, c.get('value'))} ({c.get('verdict')})"
                         for m, c in row["shortcuts"].items())
    return numbers


def shortcut_meets(row_id: str, shortcuts: tuple[str, ...]) -> Callable[[Report], bool]:
    """Whether the row is met and so is one of ``shortcuts`` (grammar_probe's names) in SPCN's place."""
    def holds(report: Report) -> bool:
        row = get(report, ("structure", "paper", row_id)) or {}
        return row.get("verdict") == Verdict.MET.value and any(
            c.get("verdict") == Verdict.MET.value for m, c in (row.get("shortcuts") or {}).items() if m in shortcuts)
    return holds


STRUCTURE_ROWS = ("ratio_within_a", "transfer_b_accuracy", "deep_accuracy", "novel_structural_spcn_minus_bigru",
                  "counterfactual_spcn_minus_bigru")


EXPERIMENTS: dict[str, Experiment] = {
    "recall_by_scope": Experiment(
        "recall_by_scope", "the recall map: every SPEN reader of fixed-rate traces, state and sequence scope, "
        "under the recipe the positive control solves", ("probes", "recall"), _scope_numbers),
    **{f"shortcuts:{row}": Experiment(
        f"shortcuts:{row}", "the same measure with each shortcut (majority word, k-token window, plain EMA, "
        "frozen SPCN) in SPCN's place", ("structure", "paper", row, "shortcuts"), _shortcut_numbers(row))
       for row in STRUCTURE_ROWS},
}


def _depth_gate(report: Report) -> Check:
    """eval.depth's competence gate: both residual arms below the Kneser-Ney bigram loss on the same tokens."""
    gate = get(report, ("depth", "gate"))
    if not isinstance(gate, Mapping) or "holds" not in gate:
        return Check(None, "no depth experiment in this report")
    return Check(bool(gate["holds"]), gate.get("numbers", ""))


DEPTH_GATE = Precondition(
    "depth_below_bigram", "both residual arms of the depth experiment below the Kneser-Ney bigram loss on the same "
    "tokens", _depth_gate)


__all__ = ["BIGRAM_LINE", "CONTROL_GATE", "DEPTH_GATE", "EXPERIMENTS", "READER_GATE", "STRUCTURE_ROWS", "TRACE_GATE",
           "WINDOW_GATE", "reachable_gate", "shortcut_meets", "state_fails_sequence_solves"]
