"""The paper's claims as data: one table (:data:`CLAIMS`) that the report, the README block and the headline
are rendered from.

Each :class:`Claim` names the paper's sentence and value, the measurement it reads (a key path of report.json),
its verdict rule, its **preconditions** (the regime in which a verdict may be given at all) and its
**explanations**, each tied to the experiment of this suite that tested it. :func:`evaluate` turns a report into
rows (report.json's ``claims``):

- a failed (or unmeasured) precondition makes the verdict :attr:`Verdict.NOT_TESTABLE`, printed with the
  precondition's numbers: two models that are both worse than a bigram model cannot speak to a perplexity gap;
- an explanation is printed only beside the numbers of the experiment that tested it, and only when that
  experiment's result supports it (:attr:`Explanation.holds`); there is no free-text "likely reason";
- disagreement with the paper is a property of the verdict (:attr:`Verdict.disagrees`), never of its words.

This module is the one place that names the keys of grammar_probe's ``results.json`` that the claims read; it
reads them defensively (a missing key makes a precondition unmeasured or a row "not run", never a crash).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from ema_boundary import stats
from ema_boundary.format import pct
from ema_boundary.paper import PAPER
from eval import verdicts as sweep_verdicts
from eval.probes.render import reader_kind
from eval.report import committed as sweeps

Report = Mapping[str, Any]

# Where the data-processing argument stops (said once; the report's probe section prints it from here).
INVERTIBILITY = ("the data-processing argument binds readers of the **current state** of fixed-rate traces; "
                 "readers of **every past state** (sequence scope) are not bound by it: the past states of "
                 "fixed-rate traces are invertible (u_t = (h_t − (1−a) h_{t−1}) / a), so attention over them can "
                 "look tokens up like attention over the tokens themselves")
RECALL_BAR = 0.95  # a model "recovers" content at >= 95% accuracy at the largest pair count (the control's bar)


class Verdict(str, Enum):
    """What a row concludes. Only :attr:`REFUTED` and :attr:`PARTLY_REFUTED` disagree with the paper."""

    MET = "met"
    PARTLY_MET = "partly met"
    REFUTED = "refuted"
    PARTLY_REFUTED = "partly refuted"
    NOT_RESOLVED = stats.NOT_RESOLVED
    NOT_TESTABLE = "not testable in this regime"
    NOT_RUN = "not run"
    # A refutation read outside the claim's regime (:class:`Regime`): it says what was seen, not that the claim
    # is false where it was made.
    OPPOSITE = "opposite direction"
    NOT_REPRODUCED = "not reproduced"
    # A resolved difference (or equivalence) between two arms that both stay at copying level
    # (eval.verdicts.escape_verdict): no arm escapes at the budget read, so the claim is neither met nor refuted.
    NEITHER_ESCAPES = sweep_verdicts.NEITHER_ESCAPES

    @property
    def disagrees(self) -> bool:
        return self in (Verdict.REFUTED, Verdict.PARTLY_REFUTED, Verdict.OPPOSITE, Verdict.NOT_REPRODUCED)

    @property
    def readable(self) -> bool:
        """Whether the row reads its measurement at all (not "not testable", not "not run")."""
        return self not in (Verdict.NOT_TESTABLE, Verdict.NOT_RUN)

    @property
    def short(self) -> str:
        """One or two words, for the one-screen table."""
        return sweep_verdicts.SHORT.get(self.value, self.value)


@dataclass(frozen=True)
class Outcome:
    """A verdict rule's answer: the verdict, a qualifier (``"SPEN better"``), this run's value as a sentence and
    how strongly the data support it."""

    verdict: Verdict
    ours: str
    detail: str = ""
    strength: str = ""
    at: TestedAt | None = None  # the conditions of the data the rule read (for the claim's regime)
    short: str = ""  # the verdict in one or two words where the enum's are not the reader's (e.g. "neither escapes")


@dataclass(frozen=True)
class TestedAt:
    """Where a rule's data come from: model size (total parameters), training tokens, the corpus and its size."""

    parameters: int
    train_tokens: int
    corpus: str
    corpus_tokens: int | None = None

    def text(self) -> str:
        """``"0.66M parameters, 0.68M tokens x 6.1 epochs (embedded corpus)"``."""
        if self.corpus_tokens:
            data = f"{self.corpus_tokens / 1e6:.2g}M tokens x {self.train_tokens / self.corpus_tokens:.1f} epochs"
        else:
            data = f"{self.train_tokens / 1e6:.2g}M training tokens"
        return f"{self.parameters / 1e6:.2g}M parameters, {data} ({self.corpus} corpus)"


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
class Check:
    """A precondition's answer: ``holds`` is None when the report lacks the numbers to decide."""

    holds: bool | None
    numbers: str


@dataclass(frozen=True)
class Precondition:
    """The regime in which a claim's verdict may be given (e.g. both models below the bigram line)."""

    id: str
    text: str
    check: Callable[[Report], Check]


@dataclass(frozen=True)
class Experiment:
    """An experiment of this suite, read from report.json at ``key``; ``numbers`` states its result in one
    phrase (None when the report does not hold it)."""

    id: str
    what: str
    key: tuple[str, ...]
    numbers: Callable[[Report], str | None]


@dataclass(frozen=True)
class Explanation:
    """Why a claim came out as it did, as tested by ``experiment``; printed only when ``holds(report)``."""

    text: str
    experiment: str  # an id of :data:`EXPERIMENTS`
    holds: Callable[[Report], bool]


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


def get(report: Report, path: tuple[str, ...]) -> Any:
    """The value at ``path``, or None when any key along it is missing."""
    obj: Any = report
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return None
        obj = obj[part]
    return obj


# ---------------------------------------------------------------------------------------------
# Preconditions
# ---------------------------------------------------------------------------------------------


def _both_below_bigram(report: Report) -> Check:
    ppl, bigram = get(report, ("content", "perplexity")), get(report, ("content", "ngram", "bigram"))
    if not ppl or bigram is None:
        return Check(None, "no perplexities or no bigram reference in this report")
    spen, gpt2 = ppl.get("spen"), ppl.get("gpt2_arch")
    if spen is None or gpt2 is None:
        return Check(None, "a perplexity is missing")
    scored = _scored_on(report)
    return Check(spen < bigram and gpt2 < bigram,
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
        return Check(loss < math.log(bigram),
                     f"reference `{ref}` {loss:.3f} nats (perplexity {math.exp(loss):.1f})"
                     + (f" after {steps} steps" if steps else "")
                     + f"; Kneser-Ney bigram {math.log(bigram):.3f} nats (perplexity {bigram:.1f})")
    return check


def _control_solves(report: Report) -> Check:
    recall = get(report, ("probes", "recall")) or {}
    control = get(report, ("probes", "positive_control"))
    if control is None or control not in recall:
        return Check(None, "no positive control in this run")
    at, acc = _top(recall[control])
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
def _budgets_conditions(axis: str) -> Callable[[Report], str | None]:
    """The claim at every budget of the committed ablation sweep, when the plan names one (``committed:
    ablation_<axis>``)."""
    def conditions(report: Report) -> str | None:
        if sweep := get(report, ("sweeps", f"ablation_{axis}")):
            return "; ".join(p for p in (sweeps.partial(sweep), _safe(sweeps.ablation_conditions, sweep)) if p) or None
        return None
    return conditions


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


def _reachable_gate(row_id: str) -> Precondition:
    return Precondition("reachable", "the paper's number can be reached in principle on this grammar by a causal "
                        "reader (the exact causal ceiling)", _reachable(row_id))


def _hebbian_rule(report: Report, h: Mapping[str, Any]) -> Outcome:
    """SPCN against its frozen twin (same traces, no Hebbian updates), paired by seed, on structural roles."""
    c = h.get("spcn_minus_spcn_frozen") or {}
    if "mean" not in c:
        return Outcome(Verdict.NOT_RUN, "no SPCN-vs-frozen comparison in this run")
    lo, hi = c.get("ci95") or (float("nan"), float("nan"))
    ours = (f"SPCN − frozen twin {100 * c['mean']:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}] "
            f"({h.get('split', '?')}, {h.get('kind', '?')} roles; margin ±{100 * h.get('margin', 0):.0f} point)")
    plain = h.get("spcn_minus_plain_ema") or {}
    if "mean" in plain:
        ours += f"; SPCN − plain EMA {100 * plain['mean']:+.1f} points"
    verdict = c.get("verdict")
    outcome = (Verdict.MET if verdict == "different" and c["mean"] > 0 else
               Verdict.REFUTED if verdict in ("different", "equivalent") else Verdict.NOT_RESOLVED)
    detail = "equivalent within the margin: the learning adds nothing measurable" if verdict == "equivalent" else ""
    return Outcome(outcome, ours, detail, f"{c.get('n', '?')} seeds, bootstrap over seeds and test sentences")


# ---------------------------------------------------------------------------------------------
# Experiments that test explanations
# ---------------------------------------------------------------------------------------------


def _top(result: Mapping[str, Any]) -> tuple[int, float]:
    """(the largest pair count, accuracy there) of one recall result."""
    acc = {int(n): a for n, a in result["accuracy"].items()}
    at = max(acc)
    return at, acc[at]


def _by_scope(report: Report) -> dict[str, dict[str, float]]:
    """kind -> {model: accuracy at the largest pair count} over the recall map."""
    recall = get(report, ("probes", "recall")) or {}
    models = get(report, ("probes", "models")) or {}
    out: dict[str, dict[str, float]] = {}
    for name, r in recall.items():
        out.setdefault(reader_kind(models.get(name, {})), {})[name] = _top(r)[1]
    return out


def _scope_numbers(report: Report) -> str | None:
    kinds = _by_scope(report)
    if not kinds.get("state") or not kinds.get("sequence"):
        return None
    at = max(_top(r)[0] for r in (get(report, ("probes", "recall")) or {}).values())
    parts = [f"{label} scope: " + ", ".join(f"`{n}` {pct(a)}" for n, a in sorted(kinds[k].items()))
             for k, label in (("state", "state"), ("sequence", "sequence"))]
    return f"recall at {at} pairs, " + "; ".join(parts)


def _state_fails_sequence_solves(report: Report) -> bool:
    kinds = _by_scope(report)
    return (any(a >= RECALL_BAR for a in kinds.get("sequence", {}).values())
            and not any(a >= RECALL_BAR for a in kinds.get("state", {}).values()))


def _shortcut_numbers(row_id: str) -> Callable[[Report], str | None]:
    def numbers(report: Report) -> str | None:
        row = get(report, ("structure", "paper", row_id))
        if not isinstance(row, Mapping) or not row.get("shortcuts"):
            return None
        return "; ".join(f"{m} {_structure_value(row_id, row, c.get('value'))} ({c.get('verdict')})"
                         for m, c in row["shortcuts"].items())
    return numbers


def _shortcut_meets(row_id: str, shortcuts: tuple[str, ...]) -> Callable[[Report], bool]:
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


# ---------------------------------------------------------------------------------------------
# Verdict rules
# ---------------------------------------------------------------------------------------------


def _corpus_tokens(report: Report) -> int | None:
    """The training split's size in tokens, from the headline pair's tokens and epochs."""
    reg = get(report, ("content", "regime")) or {}
    return round(reg["train_tokens"] / reg["epochs"]) if reg.get("epochs") else None


def _headline_at(report: Report) -> TestedAt | None:
    reg = get(report, ("content", "regime")) or {}
    if "parameters" not in reg:
        return None
    return TestedAt(reg["parameters"], reg["train_tokens"], str(get(report, ("plan", "corpus")) or "?"),
                    _corpus_tokens(report))


def _committed_at(report: Report, parameters: int, train_tokens: int, corpus: str | None) -> TestedAt:
    """A committed run's conditions; the corpus size is the headline pair's when the corpus is the same one."""
    ours = str(get(report, ("plan", "corpus")) or "?")
    corpus = corpus or ours
    return TestedAt(parameters, train_tokens, corpus, _corpus_tokens(report) if corpus == ours else None)


def _ablation_at(report: Report, a: Mapping[str, Any]) -> TestedAt | None:
    """The reference arm's size and the tokens it trained on in this run's ablation."""
    ref = a.get("reference")
    reg = a.get("regime") or {}
    params = (reg.get("parameters") or {}).get(ref)
    return None if params is None else TestedAt(params, reg["train_tokens"], str(get(report, ("plan", "corpus"))
                                                                              or "?"), _corpus_tokens(report))


def _perplexity_rule(report: Report, c: Mapping[str, Any]) -> Outcome:
    content = report["content"]
    (rlo, rhi), reg = content["perplexity_ratio_ci95"], content["regime"]
    ours = (f"{content['perplexity_ratio']:.2f}x [{rlo:.2f}, {rhi:.2f}] at {reg['parameters']:,} parameters, "
            f"{reg['tokens_per_parameter']:.1f} tokens/parameter"
            + (f", on {content['scored_on']} blocks" if "scored_on" in content else ""))
    strength = (f"{c['n']} paired seeds, p = {c['p_difference']:.3g}; another scale and corpus than the paper's, "
                "so the size of the gap is not comparable, only its sign")
    # Only the direction transfers across scales: SPEN worse meets it, equal or better refutes it.
    at = _headline_at(report)
    if c["verdict"] == "different":
        worse = c["difference"] > 0
        return Outcome(Verdict.MET if worse else Verdict.REFUTED, ours,
                       "SPEN worse (direction)" if worse else "SPEN better", strength, at)
    if c["verdict"] == "equivalent":
        return Outcome(Verdict.REFUTED, ours, "no gap (equivalent)", strength, at)
    return Outcome(Verdict.NOT_RESOLVED, ours, "", strength, at)


def _ladder_conditions(report: Report) -> str | None:
    """The perplexity gap along the committed ladder sweep, when the plan names one (``committed: ladder:``,
    report.json's ``sweeps.ladder``)."""
    sweep = get(report, ("sweeps", "ladder"))
    if not sweep:
        return None
    return "; ".join(p for p in (sweeps.partial(sweep), _safe(sweeps.ladder_conditions, sweep)) if p) or None


def _data_axis_conditions(report: Report) -> str | None:
    """Where the ladder's sign holds along the data: the committed data-axis sweep's trend per setting, when the plan
    names one (``committed: data_axis:``, report.json's ``sweeps.data_axis``)."""
    sweep = get(report, ("sweeps", "data_axis"))
    return _safe(sweeps.data_axis_conditions, sweep) if sweep else None


def _gap_rule(report: Report, c: Mapping[str, Any]) -> Outcome:
    """eval.gap's contrast on the headline pair: (SPEN − GPT-2 on AR hits) − (SPEN − GPT-2 on first occurrences)."""
    gap = report["gap"]
    return _gap_outcome(gap, c, gap.get("interval", ""), _headline_at(report))


def _gap_outcome(gap: Mapping[str, Any], c: Mapping[str, Any], strength: str, at: TestedAt | None) -> Outcome:
    """The AR-hit contrast of one eval.gap result (``b - a`` is SPEN − GPT-2), wherever it was measured."""
    groups = {g["class"]: g for g in gap.get("groups", [])}
    if c.get("value") is None or "ar_hit" not in groups or "first" not in groups:
        return Outcome(Verdict.NOT_RUN, "no AR hits or no first occurrences in the scored text")
    lo, hi = c.get("ci95") or (math.nan, math.nan)
    text, total = gap.get("text", {}), gap["total"]
    ours = (f"(SPEN − GPT-2 on AR hits) − (SPEN − GPT-2 on first occurrences) = {c['value']:+.3f} nats "
            f"[{lo:+.3f}, {hi:+.3f}]; SPEN − GPT-2 on AR hits {groups['ar_hit']['difference']:+.3f} "
            f"({groups['ar_hit']['tokens']:,} tokens), on first occurrences {groups['first']['difference']:+.3f} "
            f"({groups['first']['tokens']:,}), on all {total['difference']:+.3f} "
            f"({text.get('tokens', total.get('tokens', 0)):,} {text.get('split', '')} tokens of "
            f"{text.get('documents', total.get('documents', '?'))} documents)")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return Outcome(Verdict.NOT_RESOLVED, ours, "no interval", strength, at)
    # Larger on AR hits (the interval above 0) meets it; smaller (below 0) refutes it; "equal" needs a margin the
    # row does not declare, so an interval across 0 is not resolved.
    if lo > 0:
        return Outcome(Verdict.MET, ours, "larger on AR hits", strength, at)
    if hi < 0:
        return Outcome(Verdict.REFUTED, ours, "smaller on AR hits", strength, at)
    return Outcome(Verdict.NOT_RESOLVED, ours, "", strength, at)


def _readers_rule(report: Report, a: Mapping[str, Any]) -> Outcome:
    comps, overall = a["comparisons"], a.get("overall")
    equivalent = [x for x, c in comps.items() if c["verdict"] == "equivalent"]
    different = [x for x, c in comps.items() if c["verdict"] == "different"]
    arms_differ = overall is not None and overall["p"] < stats.ALPHA
    ours = (f"vs `{a['reference']}`: {len(equivalent)} arm(s) equivalent within ±{a['equivalence_margin']:g} nats, "
            f"{len(different)} different, {len(comps) - len(equivalent) - len(different)} not resolved"
            + (f"; any arm different: seed-blocked F = {overall['F']:.2f}, p = {overall['p']:.3g}"
               if overall is not None else ""))
    strength = f"{a['regime']['seeds']} seeds, {a['regime']['steps']} steps; TOST, Holm-adjusted"
    # The claim is equality of every reader: any arm shown different, or the seed-blocked F test, refutes it.
    verdict = (Verdict.MET if len(equivalent) == len(comps) else Verdict.REFUTED if different or arms_differ
               else Verdict.NOT_RESOLVED)
    return Outcome(verdict, ours, "", strength, _ablation_at(report, a))


def _trace(arm: str) -> str:
    """The trace an ablation arm uses: its SPEN variant's (reports before the variant table named arms by trace)."""
    from modeling_spen.variants import SPEN_VARIANTS

    return SPEN_VARIANTS.get(arm, {}).get("trace", arm)


def _selection_rule(report: Report, t: Mapping[str, Any]) -> Outcome:
    tc, ref = t["comparisons"], t["reference"]
    selective = [arm for arm in tc if _trace(arm) == "selective"]
    if not selective:
        return Outcome(Verdict.NOT_RUN, "the plan left the selective arm out")
    sel = tc[selective[0]]
    fixed = [x for x in tc if x != selective[0]]
    ours = (f"{selective[0]} − {ref} {sel['difference']:+.4f} nats [{sel['ci95'][0]:+.4f}, {sel['ci95'][1]:+.4f}]"
            + "".join(f"; {x} − {ref} {tc[x]['difference']:+.4f} ({tc[x]['verdict']})" for x in fixed))
    better = sel["verdict"] == "different" and sel["difference"] < 0
    others_equal = all(tc[x]["verdict"] == "equivalent" for x in fixed)
    verdict = (Verdict.MET if better and others_equal else Verdict.PARTLY_MET if better else
               Verdict.REFUTED if sel["verdict"] != "not resolved" else Verdict.NOT_RESOLVED)
    return Outcome(verdict, ours, "", f"{t['regime']['seeds']} seeds, {t['regime']['steps']} steps")


def _recall_rule(report: Report, recall: Mapping[str, Any]) -> Outcome:
    models = get(report, ("probes", "models")) or {}
    control = get(report, ("probes", "positive_control"))
    at = max(_top(r)[0] for r in recall.values())
    solved = sorted(n for n, r in recall.items() if _top(r)[1] >= RECALL_BAR)
    kinds = {n: reader_kind(models.get(n, {})) for n in recall}
    ours = (f"≥ {RECALL_BAR:.0%} at {at} pairs: {', '.join(f'`{n}`' for n in solved) or 'none'}"
            + (f" (control `{control}`: {pct(_top(recall[control])[1])})" if control in recall
               else "; no positive control") + _against_floor(report, recall, kinds, at))
    strength = "one seed per model, the one recipe the positive control must solve"
    if any(kinds[n] == "state" for n in solved):
        return Outcome(Verdict.REFUTED, ours, "a state-scope reader recovers it", strength)
    if any(kinds[n] == "sequence" for n in solved):
        return Outcome(Verdict.PARTLY_REFUTED, ours, "sequence-scope readers (outside the argument) recover it; "
                       "met for state-scope readers", strength)
    return Outcome(Verdict.MET, ours, "", strength)


def _against_floor(report: Report, recall: Mapping[str, Any], kinds: Mapping[str, str], at: int) -> str:
    """The state-scope readers' best accuracy beside the no-lookup floor of the sequences they were scored on
    (eval.recall.no_lookup_floor), as a clause; "" where the report kept no recall settings."""
    settings = get(report, ("probes", "recall_settings"))
    if not isinstance(settings, Mapping) or not settings.get("task"):
        return ""
    # delayed: eval.recall imports torch; the floor is a few thousand sampled sequences, no model
    from ema_boundary.seeding import recall_evaluation_seed
    from eval.recall import RecallTask, no_lookup_floor

    task = RecallTask(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings["task"].items()})
    floor = no_lookup_floor(task, settings["recipe"]["eval_examples"], recall_evaluation_seed())
    state = [_top(r)[1] for n, r in recall.items() if kinds[n] == "state"]
    best = f"; every state-scope reader ≤ {pct(max(state))}" if state else ""
    return f"{best} (the no-lookup floor on these sequences, {floor['best'][str(at)]}: {pct(floor['floor'][str(at)])})"


def _escape_rule(report: Report, escape: Mapping[str, Any]) -> Outcome:
    """eval.recall.escape_comparison's verdict at its headline state size: the selective state (an
    input-dependent write) against a bank of fixed rates with the same state numbers, paired by seed."""
    at = escape.get("headline")
    row = (escape.get("comparisons") or {}).get(at) if at is not None else None
    if not row:
        return Outcome(Verdict.NOT_RUN, "the plan's recall map has no selective state and fixed bank of equal state")
    lo, hi = row["ci95"] if row.get("ci95") else (float("nan"), float("nan"))
    ours = (f"`{row['selective']}` − `{row['fixed']}` at {row['pairs']} pairs: "
            f"{100 * row['difference']:+.1f} points [{100 * lo:+.1f}, {100 * hi:+.1f}] "
            f"(state per layer {row['state_numbers']['selective']:,} vs {row['state_numbers']['fixed']:,})"
            if row.get("difference") is not None else f"`{row['selective']}` vs `{row['fixed']}`: {row['reason']}")
    strength = f"{len(row.get('seeds') or [])} paired seed(s)"
    verdict = {"selective higher": Verdict.MET, "fixed higher": Verdict.REFUTED,
               "equivalent": Verdict.REFUTED}.get(row["verdict"], Verdict.NOT_RESOLVED)
    return Outcome(verdict, ours, "equal state, no escape" if row["verdict"] == "equivalent" else "", strength,
                   short="neither escapes" if row["verdict"] == "equivalent" else "")


def _depth_gate(report: Report) -> Check:
    """eval.depth's competence gate: both residual arms below the Kneser-Ney bigram loss on the same tokens."""
    gate = get(report, ("depth", "gate"))
    if not isinstance(gate, Mapping) or "holds" not in gate:
        return Check(None, "no depth experiment in this report")
    return Check(bool(gate["holds"]), gate.get("numbers", ""))


DEPTH_GATE = Precondition(
    "depth_below_bigram", "both residual arms of the depth experiment below the Kneser-Ney bigram loss on the same "
    "tokens", _depth_gate)


def _depth_ours(t: Mapping[str, Any], chance: float | None = None, loss_name: str = "validation loss") -> str:
    """eval.depth's paired table (attention − add) in words: token identity at the last layer, the earlier blocks'
    share recovered, the final stream's RMS growth and the loss."""
    def diff(row: Mapping[str, Any], scale: float = 1.0, unit: str = "", digits: int = 1) -> str:
        lo, hi = (x if x is not None else float("nan") for x in row["ci95"])
        return (f"{scale * row['difference']:+.{digits}f}{unit} [{scale * lo:+.{digits}f}, {scale * hi:+.{digits}f}] "
                f"({row['verdict']})")

    acc, share, growth, loss = t["token_accuracy"], t["earlier_share"], t["log_rms_growth"], t["val_loss"]
    return (f"token identity at the last layer, attention − add: {diff(acc, 100, ' points')} (add {pct(acc['add'])}, "
            f"attention {pct(acc['attention'])}" + (f"; majority token {pct(chance)}" if chance is not None else "")
            + "); "
            f"earlier blocks' share recovered {diff(share, 100, ' points')}; final-stream RMS growth add "
            f"{math.exp(growth['add']):.1f}x, attention {math.exp(growth['attention']):.1f}x; {loss_name} "
            f"{diff(loss, 1.0, ' nats', 3)}")


def _depth_rule(report: Report, d: Mapping[str, Any]) -> Outcome:
    """eval.depth's claim verdict (:func:`eval.depth.claim_verdict`): the residual sum against Attention Residuals,
    paired by seed: token identity at the last layer, the measured dilution (RMS growth, earlier blocks' shares)
    and the loss."""
    t = d.get("table") or {}
    if "token_accuracy" not in t:
        return Outcome(Verdict.NOT_RUN, "the depth experiment wrote no table")

    chance = [r["token_chance"] for r in (d.get("runs") or {}).get("add", {}).values()]
    ours = _depth_ours(t, sum(chance) / len(chance) if chance else None)
    verdict, detail = _depth_probe_verdict(t)
    return Outcome(verdict, ours, detail, _depth_strength(d))


def _depth_strength(d: Mapping[str, Any]) -> str:
    return (f"{len(d['table']['token_accuracy']['seeds'])} paired seeds, {d['num_layers']} blocks, "
            f"{d['max_steps']} steps; margins ±{100 * d['margins']['token_accuracy']:g} points, "
            f"±{d['margins']['val_loss']:g} nats")


def _depth_probe_verdict(t: Mapping[str, Any]) -> tuple[Verdict, str]:
    """The part of eval.depth's rule that needs no language-model gate (issue 34 item 5): token identity recovered
    at the last layer by a linear probe, and the stream's growth with depth (the dilution), attention − add."""
    acc, growth = t["token_accuracy"], t["log_rms_growth"]
    if acc["verdict"] in ("add higher", "equivalent"):
        return Verdict.REFUTED, f"token identity at the last layer: {acc['verdict']}"
    if acc["verdict"] != "attention higher":
        return Verdict.NOT_RESOLVED, ""
    if growth["verdict"] == "add higher":
        return Verdict.MET, ""
    return Verdict.PARTLY_MET, (f"attention recovers more token identity; the sum's stream is not shown to grow "
                                f"more ({growth['verdict']})")


def _depth_loss_verdict(t: Mapping[str, Any], loss_name: str) -> tuple[Verdict, str, str]:
    """The loss part (behind the n-gram gate): attention's loss against the sum's, paired by seed."""
    loss = t["val_loss"]
    lo, hi = (x if x is not None else float("nan") for x in loss["ci95"])
    ours = (f"{loss_name} attention − add {loss['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}] nats (add "
            f"{loss['add']:.3f}, attention {loss['attention']:.3f}; {loss['verdict']})")
    verdict = {"add higher": Verdict.MET, "attention higher": Verdict.REFUTED,
               "equivalent": Verdict.REFUTED}.get(loss["verdict"], Verdict.NOT_RESOLVED)
    detail = {"attention higher": "attention's loss higher",
              "equivalent": "equal within the declared margin"}.get(loss["verdict"], "")
    return verdict, ours, detail


def _depth_loss_rule(report: Report, d: Mapping[str, Any]) -> Outcome:
    t = d.get("table") or {}
    if "val_loss" not in t:
        return Outcome(Verdict.NOT_RUN, "the depth experiment wrote no table")
    verdict, ours, detail = _depth_loss_verdict(t, "validation loss")
    return Outcome(verdict, ours, detail, _depth_strength(d))


def _structure_value(row_id: str, row: Mapping[str, Any], value: Any) -> str:
    from grammar_probe.render import paper_row_value

    try:
        return paper_row_value(row_id, row, value)
    except (KeyError, TypeError, ValueError):
        return "–"


def _structure_rule(row_id: str) -> Callable[[Report, Any], Outcome]:
    def rule(report: Report, row: Mapping[str, Any]) -> Outcome:
        verdicts = {v.value: v for v in Verdict}
        n = (row.get("ours") or {}).get("n")
        return Outcome(verdicts.get(row.get("verdict"), Verdict.NOT_RESOLVED),
                       _structure_value(row_id, row, row.get("ours")), "",
                       f"{n} seeds; 95% interval against the paper's value" if n else "")
    return rule


def _structure_paper(row_id: str) -> Callable[[Report], str]:
    def paper(report: Report) -> str:
        value = (get(report, ("structure", "paper", row_id)) or {}).get("paper", PAPER.get(row_id, "–"))
        if isinstance(value, str):
            return value
        return f"{value:.2f}" if row_id == "ratio_within_a" else pct(value)
    return paper


def _arms_conditions(row_id: str) -> Callable[[Report], str | None]:
    """The row across the committed grammar arms sweep (labelled data size, unseen-word protocol), when the plan
    names it (:func:`eval.report.conditions.structure_conditions`)."""
    def conditions(report: Report) -> str | None:
        from eval.report.conditions import phrase, structure_conditions

        block = structure_conditions(report)
        return phrase(block, row_id) if block else None
    return conditions


def _fixed(text: str) -> Callable[[Report], str]:
    return lambda report: text


# ---------------------------------------------------------------------------------------------
# Committed sweeps (report.json's ``sweeps``, the plan's ``committed:``): the sweep's analysis decides; the
# gates and verdict words are eval.verdicts', read here, never re-decided
# ---------------------------------------------------------------------------------------------


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
    strength = (f"{len(row.get('seeds') or [])} paired seed(s), each at its own rate; a winner must lead by "
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
    return _interval(row["difference"], row.get("ci95"), 100, 1, " pts")


def _sweep_control(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    control = block["analysis"].get("control") or {}
    return control.get("holds"), control.get("why", "no positive control in the sweep")


_NAMES = {"spen": "SPEN", "gpt2": "GPT-2"}
UNDER_TRAINED = sweeps.UNDER_TRAINED


def _sweep_ladder_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
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
    strength = (f"{gap.get('n', 0)} paired seed{'s' * (gap.get('n', 0) != 1)}, 95% t interval; another scale and "
                "corpus than the paper's, so only the sign of the gap is compared")
    at = (_committed_at(report, params["total"], tokens, block.get("corpus"))
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


def _sweep_gap_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
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
    at = (_committed_at(report, params["total"], tokens, block.get("corpus"))
          if params.get("total") and tokens else None)
    strength = f"{e['name']}, {gap.get('interval') or 'paired by seed'}"
    return _gap_outcome(gap, c, strength, at)


def _gap_size(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The deciding size; with none, the largest size with a decomposition (its failed gate then says why the row
    cannot be read: e.g. the baseline shows no retrieval from context)."""
    sizes = block["analysis"].get("sizes") or []
    return sweeps.ladder_deciding(block) or next((e for e in reversed(sizes) if e.get("gap_decomposition")), None)


def _sweep_gap_value(block: Mapping[str, Any]) -> str | None:
    e = _gap_size(block)
    c = (((e or {}).get("gap_decomposition") or {}).get("contrasts") or {}).get("ar_hit - first") or {}
    unread = "" if sweeps.ladder_deciding(block) else "; a gate fails"
    return (_interval(c["value"], c.get("ci95"), unit=" nats") + f" ({e['name']}{unread})"
            if c.get("value") is not None else None)


def _sweep_gap_conditions(block: Mapping[str, Any]) -> str | None:
    """Every class of the deciding size's decomposition and the windowed context-use control of both models."""
    e = _gap_size(block)
    gap = (e or {}).get("gap_decomposition") or {}
    if not gap:
        return None
    parts = [f"{e['name']}: SPEN − GPT-2 by class: " + ", ".join(
        f"{g['class']} {_interval(g['difference'], g.get('ci95'), unit='')} ({g['tokens']:,} tokens, "
        f"{g.get('share_of_gap', 0):.0%} of the gap)" for g in gap.get("groups", []))]
    use = gap.get("context_use") or {}
    controls = [f"{m['label']} {_interval(m['control'], m.get('ci95'), unit='')}" for k in ("a", "b")
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
    return _committed_at(report, total, tokens, block.get("corpus")) if total and tokens else None


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
            comps = {arm: c for arm, c in comps.items() if _trace(arm) == "selective"}
        if not comps:
            return None
        return "; ".join(_interval(c["difference"], c.get("ci95")) for c in comps.values()) + " nats"
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
    verdict, detail = _depth_probe_verdict(t)
    return Outcome(verdict, _depth_ours(t, loss_name=f"{block['analysis'].get('scored_on') or 'test'} loss"),
                   detail, strength)


def _sweep_depth_loss_rule(report: Report, block: Mapping[str, Any]) -> Outcome:
    """The loss part of the depth sweep, behind its n-gram gate."""
    t, not_run, strength = _sweep_depth_table(block)
    if t is None:
        return not_run
    verdict, ours, detail = _depth_loss_verdict(t, f"{block['analysis'].get('scored_on') or 'test'} loss")
    return Outcome(verdict, ours, detail, strength)


def _sweep_depth_gate(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    gate = block["analysis"].get("gate") or {}
    return gate.get("holds"), gate.get("why") or "no n-gram gate in the sweep"


def _sweep_probe_gate(block: Mapping[str, Any]) -> tuple[bool | None, str]:
    """The probe part reads the final stream of trained models: no language-model gate applies."""
    return True, "token identity and each block's output are read by a linear probe: no language-model gate"


def _sweep_depth_loss_value(block: Mapping[str, Any]) -> str | None:
    loss = ((block["analysis"].get("table") or {}).get("val_loss")) or {}
    return _interval(loss["difference"], loss.get("ci95"), 1.0, 3, " nats") if "difference" in loss else None


def _sweep_depth_value(block: Mapping[str, Any]) -> str | None:
    acc = ((block["analysis"].get("table") or {}).get("token_accuracy")) or {}
    return _interval(acc["difference"], acc.get("ci95"), 100, 1, " pts") if "difference" in acc else None


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
              "the selective arm is above the floor by the declared margin (the floor: the best no-lookup answer, "
              "the most frequent value in the context, measured on the evaluation sequences; 1 / pairs in sweeps "
              "summarised before issue 49); refuted if the fixed bank escapes the same way or the two are "
              "equivalent with both above the floor; neither escapes if a resolved difference (or equivalence) "
              "leaves both at the floor; otherwise not resolved (equivalence with only one arm above it included)")
LADDER_SWEEP = SweepReader(
    "ladder", "sizes", _sweep_ladder_rule,
    "a size of the committed ladder where both models are below the declared Kneser-Ney line on the same test "
    "tokens and the baseline is within the declared margin of the plain reference, with an interval",
    sweeps.ladder_gate, sweeps.ladder_conditions, _sweep_ladder_value,
    rule_text="at the ladder sweep's deciding size (the largest with every gate holding and an interval): met if "
              "the 95% interval of SPEN − GPT-2 loss lies above 0 (SPEN worse: only the sign transfers), refuted if "
              "below 0, otherwise not resolved")
GAP_LADDER_SWEEP = SweepReader(
    "ladder", "sizes", _sweep_gap_rule,
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
    "ablation_predictor", "budgets", _sweep_ablation_rule(lambda r, v: _readers_rule(r, v)), _ABLATION_GATE,
    _sweep_ablation_gate, sweeps.ablation_conditions, _sweep_ablation_value(False))
TRACE_SWEEP = SweepReader(
    "ablation_trace", "budgets", _sweep_ablation_rule(lambda r, v: _selection_rule(r, v)), _ABLATION_GATE,
    _sweep_ablation_gate, sweeps.ablation_conditions, _sweep_ablation_value(True))
DEPTH_SWEEP = SweepReader(
    "depth", "table", _sweep_depth_rule,
    "none: the probe part reads token identity and each block's output from the final stream (a linear probe on "
    "held-out blocks)", _sweep_probe_gate, sweeps.depth_conditions, _sweep_depth_value)
DEPTH_LOSS_SWEEP = SweepReader(
    "depth", "table", _sweep_depth_loss_rule,
    "both residual arms of the depth sweep below the declared Kneser-Ney line on the same tokens",
    _sweep_depth_gate, sweeps.depth_conditions, _sweep_depth_loss_value)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

def _interval(mean: float, ci: Any, scale: float = 1.0, digits: int = 3, unit: str = "", sign: bool = True) -> str:
    fmt = f"{'+' if sign else ''}.{digits}f"
    if not ci or any(x is None or not math.isfinite(x) for x in ci):
        return f"{scale * mean:{fmt}}{unit}"
    return f"{scale * mean:{fmt}} [{scale * ci[0]:{fmt}}, {scale * ci[1]:{fmt}}]{unit}"


def _v_structure(row_id: str) -> Callable[[Report], str | None]:
    def value(report: Report) -> str | None:
        row = get(report, ("structure", "paper", row_id))
        return _structure_value(row_id, row, row.get("ours")) if isinstance(row, Mapping) else None
    return value


def _v_hebbian(report: Report) -> str | None:
    c = get(report, ("structure", "hebbian_learning", "spcn_minus_spcn_frozen")) or {}
    return _interval(c["mean"], c.get("ci95"), 100, 1, " pts") + " vs frozen" if "mean" in c else None


def _v_perplexity(report: Report) -> str | None:
    c = get(report, ("content",)) or {}
    if "perplexity_ratio" not in c:
        return None
    lo, hi = c["perplexity_ratio_ci95"]
    return f"{c['perplexity_ratio']:.2f}x [{lo:.2f}, {hi:.2f}]"


def _v_gap(report: Report) -> str | None:
    c = get(report, ("gap", "contrasts", "ar_hit - first")) or {}
    return _interval(c["value"], c.get("ci95"), unit=" nats") if c.get("value") is not None else None


def _v_arms(*key: str) -> Callable[[Report], str | None]:
    """Every arm minus the reference (nats, interval), or the selective arm's alone for the trace axis."""
    def value(report: Report) -> str | None:
        a = get(report, key) or {}
        comps = a.get("comparisons") or {}
        if key[-1] in ("traces", "trace"):
            comps = {arm: c for arm, c in comps.items() if _trace(arm) == "selective"}
        if not comps:
            return None
        return "; ".join(_interval(c["difference"], c.get("ci95")) for c in comps.values()) + " nats"
    return value


def _v_escape(report: Report) -> str | None:
    escape = get(report, ("probes", "recall_escape")) or {}
    row = (escape.get("comparisons") or {}).get(escape.get("headline"))
    if not row or row.get("difference") is None:
        return None
    return _interval(row["difference"], row.get("ci95"), 100, 1, " pts")


def _v_depth(report: Report) -> str | None:
    acc = get(report, ("depth", "table", "token_accuracy")) or {}
    return _interval(acc["difference"], acc.get("ci95"), 100, 1, " pts") if "difference" in acc else None


def _v_depth_loss(report: Report) -> str | None:
    loss = get(report, ("depth", "table", "val_loss")) or {}
    return _interval(loss["difference"], loss.get("ci95"), 1.0, 3, " nats") if "difference" in loss else None


def _v_recall(report: Report) -> str | None:
    kinds = _by_scope(report)
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
    *(Claim(row, "structure", _STRUCTURE_SENTENCES[row], _structure_paper(row), ("structure", "paper", row),
            _structure_rule(row), "grammar_probe's verdict: met if SPCN's 95% interval lies at or above the paper's "
            "value (strictly above for 'beats'), refuted if below, else not resolved",
            (WINDOW_GATE, _reachable_gate(row)),
            (Explanation("a shortcut without structure (the majority word, a k-token window) meets the row as well, so "
                         "meeting it is not evidence of structure", f"shortcuts:{row}",
                         _shortcut_meets(row, ("majority_word", "window"))),
             Explanation("a plain EMA of the word codes (or SPCN with frozen weights) meets it as well: the fixed-rate "
                         "traces carry it, not SPCN's learning", f"shortcuts:{row}",
                         _shortcut_meets(row, ("plain_ema", "spcn_frozen")))),
            conditions=_arms_conditions(row), short=_STRUCTURE_SHORT[row], paper_short=_STRUCTURE_PAPER[row],
            value=_v_structure(row))
      for row in STRUCTURE_ROWS),
    Claim("hebbian_learning", "structure",
          "SPCN's precision-gated Hebbian learning is what lets its traces carry structure",
          _fixed("learning without labels (PGHU) is the mechanism; no number reported"),
          ("structure", "hebbian_learning"), _hebbian_rule,
          "met if SPCN is above its frozen twin (same traces, no Hebbian updates) on structural roles, paired by "
          "seed, after Holm; refuted if below or equivalent within the declared margin; otherwise not resolved",
          (WINDOW_GATE,), short="SPCN's Hebbian learning is what carries structure",
          paper_short="the mechanism (no number)", value=_v_hebbian),
    Claim("perplexity_gap", "content",
          f"SPEN's perplexity is {PAPER['perplexity_ratio']:.1f}x GPT-2's at 130M on C4",
          _fixed(f"{PAPER['perplexity_spen_c4']:.0f} vs {PAPER['perplexity_gpt2_c4']:.0f}"),
          ("content", "comparison"), _perplexity_rule,
          "only the sign transfers across scales: SPEN worse (paired difference shown) meets it; SPEN better or "
          "equivalent refutes it; otherwise not resolved",
          (BIGRAM_LINE,), conditions=_ladder_conditions, short=PERPLEXITY_SHORT, regime=PAPER_LM,
          committed="perplexity_gap_ladder", paper_short=PERPLEXITY_PAPER, value=_v_perplexity),
    Claim("perplexity_gap_ladder", "content",
          f"SPEN's perplexity is {PAPER['perplexity_ratio']:.1f}x GPT-2's at 130M on C4 (read on the committed scale "
          "ladder)",
          _fixed(f"{PAPER['perplexity_spen_c4']:.0f} vs {PAPER['perplexity_gpt2_c4']:.0f}"),
          ("sweeps", "ladder"), _sweep_ladder_rule, LADDER_SWEEP.rule_text, (), conditions=_data_axis_conditions,
          short=PERPLEXITY_SHORT, regime=PAPER_LM, paper_short=PERPLEXITY_PAPER, sweep=LADDER_SWEEP),
    Claim("gap_on_recall", "content",
          "SPEN's deficit is larger on AR hits than on first occurrences (the paper's mechanism: content lost in the "
          "traces costs most where a lookup in the context would predict the token)",
          _fixed("no number; Zoology (Arora et al. 2023) found most of attention's lead over gated convolutions on "
                 "associative-recall tokens"),
          ("gap", "contrasts", "ar_hit - first"), _gap_rule,
          "met if the 95% interval of (SPEN − GPT-2 on AR hits) − (SPEN − GPT-2 on first occurrences), paired by "
          "seed on the scored blocks, lies above 0; refuted if below 0; otherwise not resolved",
          (BIGRAM_LINE,), short=GAP_SHORT, regime=PAPER_LM, committed="gap_on_recall_ladder",
          paper_short="implied (no number)", value=_v_gap),
    Claim("gap_on_recall_ladder", "content",
          "SPEN's deficit is larger on AR hits than on first occurrences (read on the committed scale ladder)",
          _fixed("no number; Zoology (Arora et al. 2023) found most of attention's lead over gated convolutions on "
                 "associative-recall tokens"),
          ("sweeps", "ladder"), _sweep_gap_rule, GAP_LADDER_SWEEP.rule_text, (), short=GAP_SHORT, regime=PAPER_LM,
          paper_short="implied (no number)", sweep=GAP_LADDER_SWEEP),
    Claim("readers_identical", "content",
          "identical loss across readers (linear, linear attention, softmax attention)",
          _fixed(str(PAPER["predictor_ablation"])), ("ablation",), _readers_rule,
          "met if every arm is equivalent to the reference within the declared margin (TOST, Holm); refuted if any "
          "arm is shown different or the seed-blocked F test rejects equality; otherwise not resolved",
          (READER_GATE,), conditions=_budgets_conditions("predictor"), short=READERS_SHORT,
          regime=PAPER_ABLATION, committed="readers_identical_budgets", paper_short="identical (smaller model, C4)",
          value=_v_arms("ablation")),
    Claim("readers_identical_budgets", "content",
          "identical loss across readers (linear, linear attention, softmax attention; read on the committed "
          "ablation at several budgets)",
          _fixed(str(PAPER["predictor_ablation"])), ("sweeps", "ablation_predictor"), PREDICTOR_SWEEP.rule,
          "at the committed ablation sweep's longest budget, each arm at its own rate: met if every arm is "
          "equivalent to the reference within the declared margin (TOST, Holm); refuted if any arm is shown "
          "different or the seed-blocked F test rejects equality; otherwise not resolved",
          (), short=READERS_SHORT, regime=PAPER_ABLATION, paper_short="identical (smaller model, C4)",
          sweep=PREDICTOR_SWEEP),
    Claim("selection_escapes", "content",
          "only input-dependent selection escapes (on language modelling)",
          _fixed("selective traces lower the loss; fixed and learned rates do not"), ("traces",), _selection_rule,
          "met if the selective arm is lower than the fixed-rate reference and every other arm equivalent; partly "
          "met if only the first; refuted if the selective arm is shown not lower; otherwise not resolved",
          (TRACE_GATE,), conditions=_budgets_conditions("trace"), short=SELECTION_SHORT,
          committed="selection_escapes_budgets", paper_short="selective lower, others equal",
          value=_v_arms("traces")),
    Claim("selection_escapes_budgets", "content",
          "only input-dependent selection escapes (on language modelling; read on the committed ablation at several "
          "budgets)",
          _fixed("selective traces lower the loss; fixed and learned rates do not"), ("sweeps", "ablation_trace"),
          TRACE_SWEEP.rule,
          "at the committed ablation sweep's longest budget, each arm at its own rate: met if the selective arm is "
          "lower than the fixed-rate reference and every other arm equivalent; partly met if only the first; "
          "refuted if the selective arm is shown not lower; otherwise not resolved",
          (), short=SELECTION_SHORT, paper_short="selective lower, others equal", sweep=TRACE_SWEEP),
    Claim("selection_escapes_recall", "content",
          "only input-dependent selection escapes (associative recall, at equal state numbers)",
          _fixed("input-dependent selection (gates as in Mamba, attention) escapes the dilution; fixed rates do not"),
          ("probes", "recall_escape"), _escape_rule,
          "met if the selective state (Mamba-style, input-dependent write) is higher than a bank of fixed rates with "
          "the same state numbers at 16 pairs (paired interval over at least 5 seeds); refuted if the bank is "
          "higher or the two are equivalent within the declared margin; otherwise not resolved",
          (CONTROL_GATE,), short="On recall, only a selective state escapes (equal state size)",
          paper_short="selective escapes", value=_v_escape, sweep=ESCAPE_SWEEP),
    Claim("depth_selection_recovers", "content",
          "fixed accumulation across depth dilutes; input-dependent depth selection recovers it",
          _fixed("the residual sum dilutes each layer's contribution; Attention Residuals (selection over depth) "
                 "escape it (no number reported)"),
          ("depth",), _depth_rule,
          "the probe part of eval.depth's rule (no language-model gate): refuted if attention residuals recover no "
          "more token identity at the last layer than the residual sum (add higher, or equivalent within the "
          "declared margin); met if they recover more and the sum's final stream grows more with depth; partly "
          "met if they recover more but the growth is not shown; otherwise not resolved (paired by seed, >= 5 "
          "seeds)",
          (), short="Selection over depth recovers what the residual sum dilutes",
          paper_short="AttnRes recovers it", value=_v_depth, sweep=DEPTH_SWEEP),
    Claim("depth_selection_loss", "content",
          "input-dependent depth selection lowers the loss the residual sum's dilution costs",
          _fixed("Attention Residuals (selection over depth) improve on the residual sum (no number reported)"),
          ("depth",), _depth_loss_rule,
          "the loss part of eval.depth's rule, behind the n-gram gate: met if attention residuals' loss is lower "
          "than the residual sum's (paired 95% interval below 0), refuted if higher or equivalent within the "
          "declared margin, otherwise not resolved (paired by seed, >= 5 seeds)",
          (DEPTH_GATE,), short="Selection over depth lowers the loss",
          paper_short="AttnRes lowers it", value=_v_depth_loss, sweep=DEPTH_LOSS_SWEEP),
    Claim("recall_lost", "content",
          "no reader of fixed-rate EMA traces recovers token identity (associative recall)",
          _fixed("content is lost in the traces; no predictor recovers it"), ("probes", "recall"), _recall_rule,
          f"refuted if a state-scope reader reaches {RECALL_BAR:.0%} at the largest pair count; partly refuted if "
          "only sequence-scope readers do; met if none does",
          (CONTROL_GATE,),
          (Explanation(INVERTIBILITY, "recall_by_scope", _state_fails_sequence_solves),),
          short="No reader of fixed-rate traces recovers token identity", paper_short="none recovers it",
          value=_v_recall),
)


# ---------------------------------------------------------------------------------------------
# Evaluation: the rows of report.json's ``claims``
# ---------------------------------------------------------------------------------------------


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
    conditions = [sweeps.partial(block), _safe(reader.conditions, block),
                  claim.conditions(report) if claim.conditions is not None else None]  # read elsewhere in the report
    base = dict(id=claim.id, side=claim.side, sentence=claim.sentence, paper=claim.paper(report),
                measurement=f"sweeps.{reader.source}.analysis.{reader.reads}", rule=reader.rule_text or claim.rule_text,
                conditions="; ".join(c for c in conditions if c) or None,
                short=claim.short or claim.sentence, regime=claim.regime.text if claim.regime else None,
                paper_short=claim.paper_short, value=_safe(reader.value, block))
    outcome = reader.rule(report, block)
    holds, numbers = reader.gate(block)
    gate = Precondition(f"sweep_gate:{reader.source}", reader.gate_text, lambda r: Check(holds, numbers))
    row = _decided(claim, report, base, outcome, [(gate, Check(holds, numbers))])
    if row.verdict is Verdict.NOT_TESTABLE and numbers.startswith(UNDER_TRAINED):
        # The baseline failed its plain-reference check: the one-screen table says so, not only "not testable".
        row = replace(row, verdict_short=f"{Verdict.NOT_TESTABLE.short}: {UNDER_TRAINED}")
    return row


def _safe(f: Callable[[Mapping[str, Any]], str | None], block: Mapping[str, Any]) -> str | None:
    """A sweep's words for a row; None where the sweep lacks what they read (never a crash)."""
    try:
        return f(block)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


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


__all__ = ["CLAIMS", "EXPERIMENTS", "INVERTIBILITY", "Check", "Claim", "Experiment", "Explanation", "Outcome",
           "Precondition", "Regime", "Row", "SweepReader", "TestedAt", "Verdict", "evaluate", "evaluate_claim", "get",
           "one_screen", "outside_text", "short_name", "short_verdict", "verdict_text"]
