"""The claims' verdict rules: what a rule answers (:class:`Outcome`, where its data come from: :class:`TestedAt`), the
checks a row runs before it (:class:`Check`, :class:`Precondition`), the experiments that test an explanation
(:class:`Experiment`, :class:`Explanation`), and each claim's rule on the numbers report.json holds.

The claims themselves (data) are :mod:`eval.report.claims`; the preconditions and experiments :mod:`.claim_checks`;
the committed sweeps' readers :mod:`.claim_readers`; the rows of report.json's ``claims`` :mod:`.claim_rows`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ema_boundary import stats
from ema_boundary.format import count, pct
from ema_boundary.paper import PAPER
from ema_boundary.seeding import recall_evaluation_seed
from ema_boundary.verdicts import DIFFERENT, EQUIVALENT, UNRESOLVED, Verdict, higher
from eval.probes.render import reader_kind
from eval.recall import RecallTask, no_lookup_floor
from eval.report import committed as sweeps
from eval.report.conditions import phrase, structure_conditions
from grammar_probe.render import paper_row_value
from modeling_spen.variants import SPEN_VARIANTS

Report = Mapping[str, Any]


RECALL_BAR = 0.95  # a model "recovers" content at >= 95% accuracy at the largest pair count (the control's bar)


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


def get(report: Report, path: tuple[str, ...]) -> Any:
    """The value at ``path``, or None when any key along it is missing."""
    obj: Any = report
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return None
        obj = obj[part]
    return obj


def hebbian_rule(report: Report, h: Mapping[str, Any]) -> Outcome:
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
    outcome = (Verdict.MET if verdict == DIFFERENT and c["mean"] > 0 else
               Verdict.REFUTED if verdict in (DIFFERENT, EQUIVALENT) else Verdict.NOT_RESOLVED)
    detail = "equivalent within the margin: the learning adds nothing measurable" if verdict == EQUIVALENT else ""
    return Outcome(outcome, ours, detail, f"{c.get('n', '?')} seeds, bootstrap over seeds and test sentences")


# The recall map read by the rules and by the experiments that test explanations (eval.report.claim_checks).


def top_accuracy(result: Mapping[str, Any]) -> tuple[int, float]:
    """(the largest pair count, accuracy there) of one recall result."""
    acc = {int(n): a for n, a in result["accuracy"].items()}
    at = max(acc)
    return at, acc[at]


def by_scope(report: Report) -> dict[str, dict[str, float]]:
    """kind -> {model: accuracy at the largest pair count} over the recall map."""
    recall = get(report, ("probes", "recall")) or {}
    models = get(report, ("probes", "models")) or {}
    out: dict[str, dict[str, float]] = {}
    for name, r in recall.items():
        out.setdefault(reader_kind(models.get(name, {})), {})[name] = top_accuracy(r)[1]
    return out


# Verdict rules: (report, the value at the claim's measurement) -> Outcome.


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


def committed_at(report: Report, parameters: int, train_tokens: int, corpus: str | None) -> TestedAt:
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


def perplexity_rule(report: Report, c: Mapping[str, Any]) -> Outcome:
    content = report["content"]
    (rlo, rhi), reg = content["perplexity_ratio_ci95"], content["regime"]
    ours = (f"{content['perplexity_ratio']:.2f}x [{rlo:.2f}, {rhi:.2f}] at {reg['parameters']:,} parameters, "
            f"{reg['tokens_per_parameter']:.1f} tokens/parameter"
            + (f", on {content['scored_on']} blocks" if "scored_on" in content else ""))
    strength = (f"{c['n']} paired seeds, p = {c['p_difference']:.3g}; another scale and corpus than the paper's, "
                "so the size of the gap is not comparable, only its sign")
    # Only the direction transfers across scales: SPEN worse meets it, equal or better refutes it.
    at = _headline_at(report)
    if c["verdict"] == DIFFERENT:
        worse = c["difference"] > 0
        return Outcome(Verdict.MET if worse else Verdict.REFUTED, ours,
                       "SPEN worse (direction)" if worse else "SPEN better", strength, at)
    if c["verdict"] == EQUIVALENT:
        return Outcome(Verdict.REFUTED, ours, "no gap (equivalent)", strength, at)
    return Outcome(Verdict.NOT_RESOLVED, ours, "", strength, at)


def ladder_conditions(report: Report) -> str | None:
    """The perplexity gap along the committed ladder sweep, when the plan names one (``committed: ladder:``,
    report.json's ``sweeps.ladder``)."""
    sweep = get(report, ("sweeps", "ladder"))
    if not sweep:
        return None
    return "; ".join(p for p in (sweeps.partial(sweep), safe_words(sweeps.ladder_conditions, sweep)) if p) or None


def data_axis_conditions(report: Report) -> str | None:
    """Where the ladder's sign holds along the data: the committed data-axis sweep's trend per setting, when the plan
    names one (``committed: data_axis:``, report.json's ``sweeps.data_axis``)."""
    sweep = get(report, ("sweeps", "data_axis"))
    return safe_words(sweeps.data_axis_conditions, sweep) if sweep else None


def recall_n64_conditions(report: Report) -> str | None:
    """The escape routes at a larger state under the same protocol, when the plan names that sweep (``committed:
    recall_map_n64:``, report.json's ``sweeps.recall_map_n64``): a condition beside the headline's verdict."""
    sweep = get(report, ("sweeps", "recall_map_n64"))
    return safe_words(sweeps.larger_state_conditions, sweep) if sweep else None


def gap_rule(report: Report, c: Mapping[str, Any]) -> Outcome:
    """eval.gap's contrast on the headline pair: (SPEN − GPT-2 on AR hits) − (SPEN − GPT-2 on first occurrences)."""
    gap = report["gap"]
    return gap_outcome(gap, c, gap.get("interval", ""), _headline_at(report))


def gap_outcome(gap: Mapping[str, Any], c: Mapping[str, Any], strength: str, at: TestedAt | None) -> Outcome:
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


def readers_rule(report: Report, a: Mapping[str, Any]) -> Outcome:
    comps, overall = a["comparisons"], a.get("overall")
    equivalent = [x for x, c in comps.items() if c["verdict"] == EQUIVALENT]
    different = [x for x, c in comps.items() if c["verdict"] == DIFFERENT]
    arms_differ = overall is not None and overall["p"] < stats.ALPHA
    ours = (f"vs `{a['reference']}`: {count(len(equivalent), 'arm')} equivalent within "
            f"±{a['equivalence_margin']:g} nats, "
            f"{len(different)} different, {len(comps) - len(equivalent) - len(different)} not resolved"
            + (f"; any arm different: seed-blocked F = {overall['F']:.2f}, p = {overall['p']:.3g}"
               if overall is not None else ""))
    strength = f"{a['regime']['seeds']} seeds, {a['regime']['steps']} steps; TOST, Holm-adjusted"
    # The claim is equality of every reader: any arm shown different, or the seed-blocked F test, refutes it.
    verdict = (Verdict.MET if len(equivalent) == len(comps) else Verdict.REFUTED if different or arms_differ
               else Verdict.NOT_RESOLVED)
    return Outcome(verdict, ours, "", strength, _ablation_at(report, a))


def arm_trace(arm: str) -> str:
    """The trace an ablation arm uses: its SPEN variant's (reports before the variant table named arms by trace)."""
    return SPEN_VARIANTS.get(arm, {}).get("trace", arm)


def selection_rule(report: Report, t: Mapping[str, Any]) -> Outcome:
    tc, ref = t["comparisons"], t["reference"]
    selective = [arm for arm in tc if arm_trace(arm) == "selective"]
    if not selective:
        return Outcome(Verdict.NOT_RUN, "the plan left the selective arm out")
    sel = tc[selective[0]]
    fixed = [x for x in tc if x != selective[0]]
    ours = (f"{selective[0]} − {ref} {sel['difference']:+.4f} nats [{sel['ci95'][0]:+.4f}, {sel['ci95'][1]:+.4f}]"
            + "".join(f"; {x} − {ref} {tc[x]['difference']:+.4f} ({tc[x]['verdict']})" for x in fixed))
    better = sel["verdict"] == DIFFERENT and sel["difference"] < 0
    others_equal = all(tc[x]["verdict"] == EQUIVALENT for x in fixed)
    verdict = (Verdict.MET if better and others_equal else Verdict.PARTLY_MET if better else
               Verdict.REFUTED if sel["verdict"] != UNRESOLVED else Verdict.NOT_RESOLVED)
    return Outcome(verdict, ours, "", f"{t['regime']['seeds']} seeds, {t['regime']['steps']} steps")


def recall_rule(report: Report, recall: Mapping[str, Any]) -> Outcome:
    models = get(report, ("probes", "models")) or {}
    control = get(report, ("probes", "positive_control"))
    at = max(top_accuracy(r)[0] for r in recall.values())
    solved = sorted(n for n, r in recall.items() if top_accuracy(r)[1] >= RECALL_BAR)
    kinds = {n: reader_kind(models.get(n, {})) for n in recall}
    ours = (f"≥ {RECALL_BAR:.0%} at {at} pairs: {', '.join(f'`{n}`' for n in solved) or 'none'}"
            + (f" (control `{control}`: {pct(top_accuracy(recall[control])[1])})" if control in recall
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
    task = RecallTask(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings["task"].items()})
    floor = no_lookup_floor(task, settings["recipe"]["eval_examples"], recall_evaluation_seed())
    state = [top_accuracy(r)[1] for n, r in recall.items() if kinds[n] == "state"]
    best = f"; every state-scope reader ≤ {pct(max(state))}" if state else ""
    return f"{best} (the no-lookup floor on these sequences, {floor['best'][str(at)]}: {pct(floor['floor'][str(at)])})"


def escape_rule(report: Report, escape: Mapping[str, Any]) -> Outcome:
    """eval.recall_arms.escape_comparison's verdict at its headline state size: the selective state (an
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
    strength = count(len(row.get('seeds') or []), "paired seed")
    verdict = {higher("selective"): Verdict.MET, higher("fixed"): Verdict.REFUTED,
               EQUIVALENT: Verdict.REFUTED}.get(row["verdict"], Verdict.NOT_RESOLVED)
    return Outcome(verdict, ours, "equal state, no escape" if row["verdict"] == EQUIVALENT else "", strength,
                   short=Verdict.NEITHER_ESCAPES.short if row["verdict"] == EQUIVALENT else "")


def depth_ours(t: Mapping[str, Any], chance: float | None = None, loss_name: str = "validation loss") -> str:
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


def depth_rule(report: Report, d: Mapping[str, Any]) -> Outcome:
    """eval.depth's claim verdict (:func:`eval.depth.claim_verdict`): the residual sum against Attention Residuals,
    paired by seed: token identity at the last layer, the measured dilution (RMS growth, earlier blocks' shares)
    and the loss."""
    t = d.get("table") or {}
    if "token_accuracy" not in t:
        return Outcome(Verdict.NOT_RUN, "the depth experiment wrote no table")

    chance = [r["token_chance"] for r in (d.get("runs") or {}).get("add", {}).values()]
    ours = depth_ours(t, sum(chance) / len(chance) if chance else None)
    verdict, detail = depth_probe_verdict(t)
    return Outcome(verdict, ours, detail, _depth_strength(d))


def _depth_strength(d: Mapping[str, Any]) -> str:
    return (f"{len(d['table']['token_accuracy']['seeds'])} paired seeds, {d['num_layers']} blocks, "
            f"{d['max_steps']} steps; margins ±{100 * d['margins']['token_accuracy']:g} points, "
            f"±{d['margins']['val_loss']:g} nats")


def depth_probe_verdict(t: Mapping[str, Any]) -> tuple[Verdict, str]:
    """The part of eval.depth's rule that needs no language-model gate (issue 34 item 5): token identity recovered
    at the last layer by a linear probe, and the stream's growth with depth (the dilution), attention − add."""
    acc, growth = t["token_accuracy"], t["log_rms_growth"]
    if acc["verdict"] in (higher("add"), EQUIVALENT):
        return Verdict.REFUTED, f"token identity at the last layer: {acc['verdict']}"
    if acc["verdict"] != higher("attention"):
        return Verdict.NOT_RESOLVED, ""
    if growth["verdict"] == higher("add"):
        return Verdict.MET, ""
    return Verdict.PARTLY_MET, (f"attention recovers more token identity; the sum's stream is not shown to grow "
                                f"more ({growth['verdict']})")


def depth_loss_verdict(t: Mapping[str, Any], loss_name: str) -> tuple[Verdict, str, str]:
    """The loss part (behind the n-gram gate): attention's loss against the sum's, paired by seed."""
    loss = t["val_loss"]
    lo, hi = (x if x is not None else float("nan") for x in loss["ci95"])
    ours = (f"{loss_name} attention − add {loss['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}] nats (add "
            f"{loss['add']:.3f}, attention {loss['attention']:.3f}; {loss['verdict']})")
    verdict = {higher("add"): Verdict.MET, higher("attention"): Verdict.REFUTED,
               EQUIVALENT: Verdict.REFUTED}.get(loss["verdict"], Verdict.NOT_RESOLVED)
    detail = {higher("attention"): "attention's loss higher",
              EQUIVALENT: "equal within the declared margin"}.get(loss["verdict"], "")
    return verdict, ours, detail


def depth_loss_rule(report: Report, d: Mapping[str, Any]) -> Outcome:
    t = d.get("table") or {}
    if "val_loss" not in t:
        return Outcome(Verdict.NOT_RUN, "the depth experiment wrote no table")
    verdict, ours, detail = depth_loss_verdict(t, "validation loss")
    return Outcome(verdict, ours, detail, _depth_strength(d))


def structure_value(row_id: str, row: Mapping[str, Any], value: Any) -> str:
    try:
        return paper_row_value(row_id, row, value)
    except (KeyError, TypeError, ValueError):
        return "–"


def structure_rule(row_id: str) -> Callable[[Report, Any], Outcome]:
    def rule(report: Report, row: Mapping[str, Any]) -> Outcome:
        verdicts = {v.value: v for v in Verdict}
        n = (row.get("ours") or {}).get("n")
        return Outcome(verdicts.get(row.get("verdict"), Verdict.NOT_RESOLVED),
                       structure_value(row_id, row, row.get("ours")), "",
                       f"{n} seeds; 95% interval against the paper's value" if n else "")
    return rule


def structure_paper(row_id: str) -> Callable[[Report], str]:
    def paper(report: Report) -> str:
        value = (get(report, ("structure", "paper", row_id)) or {}).get("paper", PAPER.get(row_id, "–"))
        if isinstance(value, str):
            return value
        return f"{value:.2f}" if row_id == "ratio_within_a" else pct(value)
    return paper


def arms_conditions(row_id: str) -> Callable[[Report], str | None]:
    """The row across the committed grammar arms sweep (labelled data size, unseen-word protocol), when the plan
    names it (:func:`eval.report.conditions.structure_conditions`)."""
    def conditions(report: Report) -> str | None:
        block = structure_conditions(report)
        return phrase(block, row_id) if block else None
    return conditions


def fixed_text(text: str) -> Callable[[Report], str]:
    """A claim's paper value that does not depend on the report."""
    return lambda report: text


# Numbers in words, for the rules, the committed sweeps' readers and the claims table.


def interval_text(mean: float, ci: Any, scale: float = 1.0, digits: int = 3, unit: str = "", sign: bool = True) -> str:
    """``mean [lo, hi]`` scaled, with its unit; the mean alone where the interval is missing or not finite."""
    fmt = f"{'+' if sign else ''}.{digits}f"
    if not ci or any(x is None or not math.isfinite(x) for x in ci):
        return f"{scale * mean:{fmt}}{unit}"
    return f"{scale * mean:{fmt}} [{scale * ci[0]:{fmt}}, {scale * ci[1]:{fmt}}]{unit}"


def safe_words(f: Callable[[Mapping[str, Any]], str | None], block: Mapping[str, Any]) -> str | None:
    """A sweep's words for a row; None where the sweep lacks what they read (never a crash)."""
    try:
        return f(block)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


__all__ = ["Check", "Experiment", "Explanation", "Outcome", "Precondition", "RECALL_BAR", "Report", "TestedAt",
           "arm_trace", "arms_conditions", "by_scope", "committed_at", "data_axis_conditions", "depth_loss_rule",
           "depth_loss_verdict", "depth_ours", "depth_probe_verdict", "depth_rule", "escape_rule", "fixed_text",
           "gap_outcome", "gap_rule", "get", "hebbian_rule", "interval_text", "ladder_conditions", "perplexity_rule",
           "readers_rule", "recall_n64_conditions", "recall_rule", "safe_words", "selection_rule", "structure_paper",
           "structure_rule", "structure_value", "top_accuracy"]
