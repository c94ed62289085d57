"""The paper's claims as data: one table (:data:`CLAIMS`) that the report, the README block and the headline
are rendered from.

Each :class:`Claim` names the paper's sentence and value, the measurement it reads (a key path of report.json),
its verdict rule, its **preconditions** (the regime in which a verdict may be given at all) and its
**explanations**, each tied to the experiment of this suite that tested it. The pieces live beside this table:

- :mod:`eval.report.claim_rules`: what a rule answers (:class:`~eval.report.claim_rules.Outcome`) and each rule;
- :mod:`eval.report.claim_checks`: the preconditions and the experiments that test an explanation;
- :mod:`eval.report.claim_readers`: how a claim reads a committed sweep;
- :mod:`eval.report.claim_rows`: :func:`~eval.report.claim_rows.evaluate` turns a report into rows (report.json's
  ``claims``): a failed (or unmeasured) precondition makes the verdict "not testable in this regime", printed with
  the precondition's numbers; an explanation is printed only beside the numbers of the experiment that tested it,
  and only when that experiment's result supports it; disagreement with the paper is a property of the verdict
  (:attr:`ema_boundary.verdicts.Verdict.disagrees`), never of its words.

These modules are the one place that names the keys of grammar_probe's ``results.json`` that the claims read; they
read them defensively (a missing key makes a precondition unmeasured or a row "not run", never a crash).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ema_boundary.format import pct
from ema_boundary.paper import PAPER
from ema_boundary.verdicts import Verdict
from eval.report import committed as sweeps
from eval.report.claim_checks import (
    BIGRAM_LINE,
    CONTROL_GATE,
    DEPTH_GATE,
    READER_GATE,
    STRUCTURE_ROWS,
    TRACE_GATE,
    WINDOW_GATE,
    reachable_gate,
    shortcut_meets,
    state_fails_sequence_solves,
)
from eval.report.claim_readers import (
    DEPTH_LOSS_SWEEP,
    DEPTH_SWEEP,
    ESCAPE_SWEEP,
    GAP_LADDER_SWEEP,
    LADDER_SWEEP,
    PREDICTOR_SWEEP,
    TRACE_SWEEP,
    SweepReader,
    sweep_gap_rule,
    sweep_ladder_rule,
)
from eval.report.claim_rules import (
    RECALL_BAR,
    Explanation,
    Outcome,
    Precondition,
    Report,
    TestedAt,
    arm_trace,
    arms_conditions,
    by_scope,
    data_axis_conditions,
    depth_loss_rule,
    depth_rule,
    escape_rule,
    fixed_text,
    gap_rule,
    get,
    hebbian_rule,
    interval_text,
    ladder_conditions,
    perplexity_rule,
    readers_rule,
    recall_n64_conditions,
    recall_rule,
    safe_words,
    selection_rule,
    structure_paper,
    structure_rule,
    structure_value,
)

# Where the data-processing argument stops (said once; the report's probe section prints it from here).
INVERTIBILITY = ("the data-processing argument binds readers of the **current state** of fixed-rate traces; "
                 "readers of **every past state** (sequence scope) are not bound by it: the past states of "
                 "fixed-rate traces are invertible (u_t = (h_t − (1−a) h_{t−1}) / a), so attention over them can "
                 "look tokens up like attention over the tokens themselves")


@dataclass(frozen=True)
class Regime:
    """The conditions a claim is made in (the paper's model size and data). A verdict from data outside them is
    worded as such: a refutation reads ``refuted_as`` with the conditions it was seen in, a "met" says where."""

    text: str  # "130M parameters on C4"
    corpus: str  # the corpus name as plans write it ("c4")
    parameters: float | None = None  # the paper's model size; None: not reported
    refuted_as: Verdict = Verdict.OPPOSITE

    def holds(self, at: TestedAt) -> bool:
        return at.corpus.lower() == self.corpus and (self.parameters is None or at.parameters >= self.parameters / 2)


@dataclass(frozen=True)
class Claim:
    """One row of the paper's claims."""

    id: str
    side: str  # "structure" or "content"
    sentence: str  # what the paper says
    paper: Callable[[Report], str]  # the paper's value, as printed
    measurement: tuple[str, ...]  # the key path of report.json the rule reads
    rule: Callable[[Report, Any], Outcome]  # (report, the value at ``measurement``) -> the outcome
    rule_text: str  # the verdict rule in words
    preconditions: tuple[Precondition, ...] = ()
    explanations: tuple[Explanation, ...] = ()
    # Where the claim holds across the suite's committed arms (None: no arms for this claim, or not in the report)
    conditions: Callable[[Report], str | None] | None = None
    short: str = ""  # the claim in under ~12 words (the one-screen table); a claim read twice shares it
    regime: Regime | None = None  # where the paper makes it; None: it names none (any test may refute it)
    # The claim that reads the same sentence on a committed run (the ladder, the ablation at budgets): the
    # one-screen table prints one row for the two, the decided one.
    committed: str | None = None
    paper_short: str = ""  # the paper's value in a few words (the one-screen table)
    value: Callable[[Report], str | None] | None = None  # this run's number with its interval, in a few words
    # The committed sweep that carries the row when the plan names one (report.json's ``sweeps``); else the
    # row reads ``measurement`` as before.
    sweep: SweepReader | None = None

    @property
    def key(self) -> str:
        return ".".join(self.measurement)


def _budgets_conditions(axis: str) -> Callable[[Report], str | None]:
    """The claim at every budget of the committed ablation sweep, when the plan names one (``committed:
    ablation_<axis>``)."""
    def conditions(report: Report) -> str | None:
        if sweep := get(report, ("sweeps", f"ablation_{axis}")):
            words = (sweeps.partial(sweep), safe_words(sweeps.ablation_conditions, sweep))
            return "; ".join(p for p in words if p) or None
        return None
    return conditions


def _v_structure(row_id: str) -> Callable[[Report], str | None]:
    def value(report: Report) -> str | None:
        row = get(report, ("structure", "paper", row_id))
        return structure_value(row_id, row, row.get("ours")) if isinstance(row, Mapping) else None
    return value


def _v_hebbian(report: Report) -> str | None:
    c = get(report, ("structure", "hebbian_learning", "spcn_minus_spcn_frozen")) or {}
    return interval_text(c["mean"], c.get("ci95"), 100, 1, " pts") + " vs frozen" if "mean" in c else None


def _v_perplexity(report: Report) -> str | None:
    c = get(report, ("content",)) or {}
    if "perplexity_ratio" not in c:
        return None
    lo, hi = c["perplexity_ratio_ci95"]
    return f"{c['perplexity_ratio']:.2f}x [{lo:.2f}, {hi:.2f}]"


def _v_gap(report: Report) -> str | None:
    c = get(report, ("gap", "contrasts", "ar_hit - first")) or {}
    return interval_text(c["value"], c.get("ci95"), unit=" nats") if c.get("value") is not None else None


def _v_arms(*key: str) -> Callable[[Report], str | None]:
    """Every arm minus the reference (nats, interval), or the selective arm's alone for the trace axis."""
    def value(report: Report) -> str | None:
        a = get(report, key) or {}
        comps = a.get("comparisons") or {}
        if key[-1] in ("traces", "trace"):
            comps = {arm: c for arm, c in comps.items() if arm_trace(arm) == "selective"}
        if not comps:
            return None
        return "; ".join(interval_text(c["difference"], c.get("ci95")) for c in comps.values()) + " nats"
    return value


def _v_escape(report: Report) -> str | None:
    escape = get(report, ("probes", "recall_escape")) or {}
    row = (escape.get("comparisons") or {}).get(escape.get("headline"))
    if not row or row.get("difference") is None:
        return None
    return interval_text(row["difference"], row.get("ci95"), 100, 1, " pts")


def _v_depth(report: Report) -> str | None:
    acc = get(report, ("depth", "table", "token_accuracy")) or {}
    return interval_text(acc["difference"], acc.get("ci95"), 100, 1, " pts") if "difference" in acc else None


def _v_depth_loss(report: Report) -> str | None:
    loss = get(report, ("depth", "table", "val_loss")) or {}
    return interval_text(loss["difference"], loss.get("ci95"), 1.0, 3, " nats") if "difference" in loss else None


def _v_recall(report: Report) -> str | None:
    kinds = by_scope(report)
    parts = [f"{label} ≤ {pct(max(kinds[k].values()))}" for k, label in (("state", "state scope"),
                                                                           ("sequence", "sequence scope"))
             if kinds.get(k)]
    return ", ".join(parts) or None


# Where the paper makes its language-model claims. The structure claims are on the paper's grammar and name no
# regime; recall, selection and depth are stated as general principles.
GAP_SHORT = "SPEN's deficit is largest on associative-recall tokens"


PAPER_LM = Regime("130M parameters on C4", "c4", 130e6)


PAPER_ABLATION = Regime("the paper's ablation model on C4, smaller than 130M, size not reported", "c4", None,
                        refuted_as=Verdict.NOT_REPRODUCED)


_STRUCTURE_SHORT = {
    "ratio_within_a": "A trace probe reaches 96% of a supervised BiGRU",
    "transfer_b_accuracy": "The probe transfers to grammar B at 61.8%",
    "deep_accuracy": "The probe reaches 84% on deeper-embedded roles",
    "novel_structural_spcn_minus_bigru": "The probe beats the BiGRU on structural roles, unseen words",
    "counterfactual_spcn_minus_bigru": "The BiGRU memorised word→role shortcuts; the probe did not",
}


_STRUCTURE_PAPER = {"ratio_within_a": "0.96", "transfer_b_accuracy": "61.8%", "deep_accuracy": "84%",
                    "novel_structural_spcn_minus_bigru": "SPCN above (> 0)",
                    "counterfactual_spcn_minus_bigru": "SPCN above (> 0)"}


_STRUCTURE_SENTENCES = {
    "ratio_within_a": "a probe on the traces reaches 96% of the supervised BiGRU's accuracy with zero labels in "
                      "training (grammar A, held-out sentences)",
    "transfer_b_accuracy": "the probe transfers to grammar B at 61.8% accuracy",
    "deep_accuracy": "the probe reaches 84% on roles embedded deeper than in training",
    "novel_structural_spcn_minus_bigru": "on structure-dependent roles, even with never-seen words, the probe beats "
                                         "the BiGRU",
    "counterfactual_spcn_minus_bigru": "the BiGRU memorised word→role shortcuts; the probe, reading structure, "
                                       "does not",
}


PERPLEXITY_SHORT = f"SPEN's perplexity is {PAPER['perplexity_ratio']:.1f}x GPT-2's"


READERS_SHORT = "Identical loss across readers of the same traces"


SELECTION_SHORT = "Only input-dependent traces lower the language-model loss"


PERPLEXITY_PAPER = f"{PAPER['perplexity_ratio']:.1f}x (260 vs 33) at 130M, C4"


CLAIMS: tuple[Claim, ...] = (
    *(Claim(row, "structure", _STRUCTURE_SENTENCES[row], structure_paper(row), ("structure", "paper", row),
            structure_rule(row), "grammar_probe's verdict: met if SPCN's 95% interval lies at or above the paper's "
            "value (strictly above for 'beats'), refuted if below, else not resolved",
            (WINDOW_GATE, reachable_gate(row)),
            (Explanation("a shortcut without structure (the majority word, a k-token window) meets the row as well, so "
                         "meeting it is not evidence of structure", f"shortcuts:{row}",
                         shortcut_meets(row, ("majority_word", "window"))),
             Explanation("a plain EMA of the word codes (or SPCN with frozen weights) meets it as well: the fixed-rate "
                         "traces carry it, not SPCN's learning", f"shortcuts:{row}",
                         shortcut_meets(row, ("plain_ema", "spcn_frozen")))),
            conditions=arms_conditions(row), short=_STRUCTURE_SHORT[row], paper_short=_STRUCTURE_PAPER[row],
            value=_v_structure(row))
      for row in STRUCTURE_ROWS),
    Claim("hebbian_learning", "structure",
          "SPCN's precision-gated Hebbian learning is what lets its traces carry structure",
          fixed_text("learning without labels (PGHU) is the mechanism; no number reported"),
          ("structure", "hebbian_learning"), hebbian_rule,
          "met if SPCN is above its frozen twin (same traces, no Hebbian updates) on structural roles, paired by "
          "seed, after Holm; refuted if below or equivalent within the declared margin; otherwise not resolved",
          (WINDOW_GATE,), short="SPCN's Hebbian learning is what carries structure",
          paper_short="the mechanism (no number)", value=_v_hebbian),
    Claim("perplexity_gap", "content",
          f"SPEN's perplexity is {PAPER['perplexity_ratio']:.1f}x GPT-2's at 130M on C4",
          fixed_text(f"{PAPER['perplexity_spen_c4']:.0f} vs {PAPER['perplexity_gpt2_c4']:.0f}"),
          ("content", "comparison"), perplexity_rule,
          "only the sign transfers across scales: SPEN worse (paired difference shown) meets it; SPEN better or "
          "equivalent refutes it; otherwise not resolved",
          (BIGRAM_LINE,), conditions=ladder_conditions, short=PERPLEXITY_SHORT, regime=PAPER_LM,
          committed="perplexity_gap_ladder", paper_short=PERPLEXITY_PAPER, value=_v_perplexity),
    Claim("perplexity_gap_ladder", "content",
          f"SPEN's perplexity is {PAPER['perplexity_ratio']:.1f}x GPT-2's at 130M on C4 (read on the committed scale "
          "ladder)",
          fixed_text(f"{PAPER['perplexity_spen_c4']:.0f} vs {PAPER['perplexity_gpt2_c4']:.0f}"),
          ("sweeps", "ladder"), sweep_ladder_rule, LADDER_SWEEP.rule_text, (), conditions=data_axis_conditions,
          short=PERPLEXITY_SHORT, regime=PAPER_LM, paper_short=PERPLEXITY_PAPER, sweep=LADDER_SWEEP),
    Claim("gap_on_recall", "content",
          "SPEN's deficit is larger on AR hits than on first occurrences (the paper's mechanism: content lost in the "
          "traces costs most where a lookup in the context would predict the token)",
          fixed_text("no number; Zoology (Arora et al. 2023) found most of attention's lead over gated convolutions on "
                 "associative-recall tokens"),
          ("gap", "contrasts", "ar_hit - first"), gap_rule,
          "met if the 95% interval of (SPEN − GPT-2 on AR hits) − (SPEN − GPT-2 on first occurrences), paired by "
          "seed on the scored blocks, lies above 0; refuted if below 0; otherwise not resolved",
          (BIGRAM_LINE,), short=GAP_SHORT, regime=PAPER_LM, committed="gap_on_recall_ladder",
          paper_short="implied (no number)", value=_v_gap),
    Claim("gap_on_recall_ladder", "content",
          "SPEN's deficit is larger on AR hits than on first occurrences (read on the committed scale ladder)",
          fixed_text("no number; Zoology (Arora et al. 2023) found most of attention's lead over gated convolutions on "
                 "associative-recall tokens"),
          ("sweeps", "ladder"), sweep_gap_rule, GAP_LADDER_SWEEP.rule_text, (), short=GAP_SHORT, regime=PAPER_LM,
          paper_short="implied (no number)", sweep=GAP_LADDER_SWEEP),
    Claim("readers_identical", "content",
          "identical loss across readers (linear, linear attention, softmax attention)",
          fixed_text(str(PAPER["predictor_ablation"])), ("ablation",), readers_rule,
          "met if every arm is equivalent to the reference within the declared margin (TOST, Holm); refuted if any "
          "arm is shown different or the seed-blocked F test rejects equality; otherwise not resolved",
          (READER_GATE,), conditions=_budgets_conditions("predictor"), short=READERS_SHORT,
          regime=PAPER_ABLATION, committed="readers_identical_budgets", paper_short="identical (smaller model, C4)",
          value=_v_arms("ablation")),
    Claim("readers_identical_budgets", "content",
          "identical loss across readers (linear, linear attention, softmax attention; read on the committed "
          "ablation at several budgets)",
          fixed_text(str(PAPER["predictor_ablation"])), ("sweeps", "ablation_predictor"), PREDICTOR_SWEEP.rule,
          "at the committed ablation sweep's longest budget, each arm at its own rate: met if every arm is "
          "equivalent to the reference within the declared margin (TOST, Holm); refuted if any arm is shown "
          "different or the seed-blocked F test rejects equality; otherwise not resolved",
          (), short=READERS_SHORT, regime=PAPER_ABLATION, paper_short="identical (smaller model, C4)",
          sweep=PREDICTOR_SWEEP),
    Claim("selection_escapes", "content",
          "only input-dependent selection escapes (on language modelling)",
          fixed_text("selective traces lower the loss; fixed and learned rates do not"), ("traces",), selection_rule,
          "met if the selective arm is lower than the fixed-rate reference and every other arm equivalent; partly "
          "met if only the first; refuted if the selective arm is shown not lower; otherwise not resolved",
          (TRACE_GATE,), conditions=_budgets_conditions("trace"), short=SELECTION_SHORT,
          committed="selection_escapes_budgets", paper_short="selective lower, others equal",
          value=_v_arms("traces")),
    Claim("selection_escapes_budgets", "content",
          "only input-dependent selection escapes (on language modelling; read on the committed ablation at several "
          "budgets)",
          fixed_text("selective traces lower the loss; fixed and learned rates do not"), ("sweeps", "ablation_trace"),
          TRACE_SWEEP.rule,
          "at the committed ablation sweep's longest budget, each arm at its own rate: met if the selective arm is "
          "lower than the fixed-rate reference and every other arm equivalent; partly met if only the first; "
          "refuted if the selective arm is shown not lower; otherwise not resolved",
          (), short=SELECTION_SHORT, paper_short="selective lower, others equal", sweep=TRACE_SWEEP),
    Claim("selection_escapes_recall", "content",
          "only input-dependent selection escapes (associative recall, at equal state numbers)",
          fixed_text("input-dependent selection (gates as in Mamba, attention) escapes the dilution; fixed rates do "
                     "not"),
          ("probes", "recall_escape"), escape_rule,
          "met if the selective state (Mamba-style, input-dependent write) is higher than a bank of fixed rates with "
          "the same state numbers at 16 pairs (paired interval over at least 5 seeds); refuted if the bank is "
          "higher or the two are equivalent within the declared margin; otherwise not resolved",
          (CONTROL_GATE,), conditions=recall_n64_conditions,
          short="On recall, only a selective state escapes (equal state size)", paper_short="selective escapes",
          value=_v_escape, sweep=ESCAPE_SWEEP),
    Claim("depth_selection_recovers", "content",
          "fixed accumulation across depth dilutes; input-dependent depth selection recovers it",
          fixed_text("the residual sum dilutes each layer's contribution; Attention Residuals (selection over depth) "
                 "escape it (no number reported)"),
          ("depth",), depth_rule,
          "the probe part of eval.depth's rule (no language-model gate): refuted if attention residuals recover no "
          "more token identity at the last layer than the residual sum (add higher, or equivalent within the "
          "declared margin); met if they recover more and the sum's final stream grows more with depth; partly "
          "met if they recover more but the growth is not shown; otherwise not resolved (paired by seed, >= 5 "
          "seeds)",
          (), short="Selection over depth recovers what the residual sum dilutes",
          paper_short="AttnRes recovers it", value=_v_depth, sweep=DEPTH_SWEEP),
    Claim("depth_selection_loss", "content",
          "input-dependent depth selection lowers the loss the residual sum's dilution costs",
          fixed_text("Attention Residuals (selection over depth) improve on the residual sum (no number reported)"),
          ("depth",), depth_loss_rule,
          "the loss part of eval.depth's rule, behind the n-gram gate: met if attention residuals' loss is lower "
          "than the residual sum's (paired 95% interval below 0), refuted if higher or equivalent within the "
          "declared margin, otherwise not resolved (paired by seed, >= 5 seeds)",
          (DEPTH_GATE,), short="Selection over depth lowers the loss",
          paper_short="AttnRes lowers it", value=_v_depth_loss, sweep=DEPTH_LOSS_SWEEP),
    Claim("recall_lost", "content",
          "no reader of fixed-rate EMA traces recovers token identity (associative recall)",
          fixed_text("content is lost in the traces; no predictor recovers it"), ("probes", "recall"), recall_rule,
          f"refuted if a state-scope reader reaches {RECALL_BAR:.0%} at the largest pair count; partly refuted if "
          "only sequence-scope readers do; met if none does",
          (CONTROL_GATE,),
          (Explanation(INVERTIBILITY, "recall_by_scope", state_fails_sequence_solves),),
          short="No reader of fixed-rate traces recovers token identity", paper_short="none recovers it",
          value=_v_recall),
)


__all__ = ["CLAIMS", "Claim", "GAP_SHORT", "INVERTIBILITY", "PAPER_ABLATION", "PAPER_LM", "PERPLEXITY_PAPER",
           "PERPLEXITY_SHORT", "READERS_SHORT", "Regime", "SELECTION_SHORT"]
