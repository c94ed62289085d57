"""Verdicts and the gates in front of them: one vocabulary, one definition of each gate, one rule per interval.

A verdict counts only where it could have come out the other way, in a regime where the models can speak. So
every verdict here is a rule on an interval behind zero or more **gates**, and a failed gate turns any verdict
into "not testable in this regime", carrying the gate's numbers (the words: :mod:`ema_boundary.verdicts`):

- :func:`ngram_gate` (competence): every model's loss below a Kneser-Ney line on the same tokens (the
  declared order: the bigram, or a trigram for a claim about context use); :func:`sweep_ngram_gate` reads it from
  a sweep's cached lines, and a sweep without them is not measured, never passed;
- :func:`control_gate` (a positive control that must succeed): e.g. attention solves recall at the pairs read;
- :func:`reference_gate` (a baseline checked against a plain reference): the baseline no worse than the plain
  recipe's number on the same tokens, by more than a declared margin;
- :func:`interior_gate` (reachability of the tuning rule): every chosen rate inside the rates tried;
- :func:`decidability_gate` (a structure claim only on roles no short window decides).

Rules from intervals: :func:`difference_verdict` (a paired difference: higher / lower / equivalent within a declared
margin / not resolved), :func:`escape_verdict` (an escape from the floor, what an arm scores without a lookup, that
cannot be won at the floor); a number against the paper's: :func:`ema_boundary.stats.target_verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ema_boundary import stats
from ema_boundary.format import count
from ema_boundary.verdicts import (
    A_HIGHER,
    A_LOWER,
    DOES_NOT_ESCAPE,
    EQUIVALENT,
    ESCAPES,
    MET,
    NEITHER_ESCAPES,
    NOT_RESOLVED,
    NOT_RUN,
    NOT_TESTABLE,
    REFUTED,
    UNRESOLVED,
    WORSE_THAN_REFERENCE,
)


@dataclass(frozen=True)
class Gate:
    """One precondition of a verdict: whether it holds, why, and the numbers it read."""

    name: str
    holds: bool | None  # None: it could not be evaluated (nothing ran)
    why: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def ngram_gate(losses: Mapping[str, float], line: float, line_name: str = "Kneser-Ney bigram") -> Gate:
    """Competence: every model's loss (nats, ``{name: loss}``) below the n-gram line on the same tokens."""
    if not losses:
        return Gate("ngram", None, "no model scored")
    holds = all(v < line for v in losses.values())
    shown = ", ".join(f"{k} {v:.3f}" for k, v in losses.items())
    why = (f"{shown} nats {'all below' if holds else 'not all below'} the {line_name} {line:.3f} nats "
           f"(perplexity {math.exp(line):.1f}) on the same tokens")
    return Gate("ngram", holds, why, {"losses": dict(losses), "line": line, "line_name": line_name})


def sweep_ngram_gate(losses: Mapping[str, float], lines: Mapping[str, Any] | None, order: str,
                     line_name: str | None = None) -> Gate:
    """:func:`ngram_gate` on a sweep's Kneser-Ney lines (``Reads.ngram_lines``: ``{"loss": {order: nats}}``) at
    the declared ``order``. No lines (the folder lacks the sweep's ``shared/tokenizer`` and its cached lines): the
    gate is not measured, never a pass, so a point without its competence line is never read."""
    if lines is None:
        return Gate("ngram", None, f"no Kneser-Ney {order} line: the sweep's shared/tokenizer (or its cached lines) "
                                   "is not in the folder")
    return ngram_gate(losses, lines["loss"][order], line_name or f"Kneser-Ney {order}")


def control_gate(name: str, value: float | None, bar: float, what: str = "accuracy") -> Gate:
    """A positive control that must succeed: ``value`` at or above ``bar``."""
    if value is None:
        return Gate("control", None, f"the control {name} did not run")
    holds = value >= bar
    return Gate("control", holds, f"control {name}: {what} {value:.3f} {'>=' if holds else '<'} its bar {bar:g}",
                {"control": name, "value": value, "bar": bar})


def reference_gate(name: str, baseline: float, reference: float | None, margin: float) -> Gate:
    """A baseline checked against a plain reference on the same tokens (lower is better): the gate fails when it is
    worse than the reference by more than ``margin`` (:data:`WORSE_THAN_REFERENCE`, a fact, not a cause). No
    reference declared: the gate cannot hold."""
    if reference is None:
        return Gate("reference", None, f"no plain reference declared for {name}")
    holds = baseline <= reference + margin
    why = (f"{name} {baseline:.3f} vs the plain reference {reference:.3f} nats (margin {margin:g}): "
           + ("within" if holds else WORSE_THAN_REFERENCE))
    return Gate("reference", holds, why, {"baseline": baseline, "reference": reference, "margin": margin})


def interior_gate(choices: Mapping[str, Mapping[str, Any]]) -> Gate:
    """Reachability of the tuning rule: every chosen rate lies inside the rates its search tried."""
    edges = [k for k, c in choices.items() if c.get("chosen") is not None and not c.get("interior")]
    open_ = [k for k, c in choices.items() if c.get("chosen") is None]
    if open_:
        return Gate("interior", None, f"no rate chosen yet for {', '.join(open_)}")
    holds = not edges
    return Gate("interior", holds, "every chosen rate interior" if holds else
                f"rate at an edge of the rates tried for {', '.join(edges)}", {"edges": edges})


def context_gate(name: str, control: dict[str, Any] | None) -> Gate:
    """The attention baseline demonstrably retrieves from context (eval.context_use's windowed control: cutting
    each target's context to its last W tokens costs more on AR hits whose earlier occurrence lies beyond W than on
    first occurrences, the 95% interval above 0)."""
    if control is None or control.get("control") is None:
        return Gate("context_use", None, f"no windowed context-use control measured for {name}")
    ci = control["ci95"]
    holds = bool(control["positive"])
    why = (f"{name}'s windowed control (W = {control['window']}) {control['control']:+.3f} nats "
           f"[{ci[0]:+.3f}, {ci[1]:+.3f}]: " + ("retrieves from context" if holds else "no retrieval shown"))
    return Gate("context_use", holds, why, {"control": control["control"], "ci95": ci, "window": control["window"]})


def decidability_gate(window_accuracy: float, bar: float, window: int) -> Gate:
    """A structure claim is read only on roles that a ``window``-token shortcut does not already decide."""
    holds = window_accuracy < bar
    return Gate("decidability", holds, f"a {window}-token window reaches {window_accuracy:.3f} "
                f"({'below' if holds else 'at or above'} {bar:g})", {"window_accuracy": window_accuracy})


def gated(verdict: str, gates: Sequence[Gate]) -> tuple[str, str]:
    """``verdict`` behind ``gates``: the first gate that does not hold makes it :data:`NOT_TESTABLE` (or
    :data:`NOT_RUN` where nothing could be evaluated), with its reason."""
    for g in gates:
        if g.holds is None:
            return NOT_RUN, g.why
        if not g.holds:
            return NOT_TESTABLE, g.why
    return verdict, "; ".join(g.why for g in gates)


def difference_verdict(c: stats.Comparison, min_seeds: int = 5, bounds: tuple[float, float] | None = None,
                       digits: int = 4) -> tuple[str, list[float], str]:
    """A paired difference ``a - b``: :data:`A_HIGHER` (the 95% interval above 0), :data:`A_LOWER` (below 0),
    :data:`EQUIVALENT` (the 90% interval inside the declared margin) or :data:`NOT_RESOLVED` (also with fewer than
    ``min_seeds`` seeds). ``bounds`` clips the 95% interval to the quantity's range (a difference of fractions:
    (-1, 1)); ``digits``: the decimals the reason prints. Returns the verdict, the interval and why."""
    lo, hi = c.ci95
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    ci = [lo, hi]
    interval = f"95% interval [{lo:+.{digits}f}, {hi:+.{digits}f}]"
    if c.n < min_seeds:
        return NOT_RESOLVED, ci, (f"{count(c.n, 'paired seed')}, fewer than the {min_seeds} a verdict on a "
                                  "difference needs")
    if lo > 0:
        return A_HIGHER, ci, f"{interval} above 0"
    if hi < 0:
        return A_LOWER, ci, f"{interval} below 0"
    if c.verdict == EQUIVALENT:
        return EQUIVALENT, ci, (f"90% interval [{c.ci90[0]:+.{digits}f}, {c.ci90[1]:+.{digits}f}] inside "
                                f"±{c.equivalence_margin:g}")
    return NOT_RESOLVED, ci, f"{interval} holds 0" + (
        f" and the 90% interval is not inside ±{c.equivalence_margin:g}" if c.equivalence_margin else "")


def unit_interval(values: Sequence[float]) -> list[float] | None:
    """The 95% t interval over seeds of accuracies, clipped to [0, 1] (an accuracy's range); None under two values."""
    if len(values) < 2:
        return None
    lo, hi = stats.mean_ci(list(values))["ci95"]
    return [max(0.0, lo), min(1.0, hi)]


def arm_escape(values: Sequence[float], bar: float, min_seeds: int = 5) -> tuple[str, list[float] | None]:
    """One arm's accuracies over seeds against the escape bar (floor + margin): :data:`ESCAPES` where their
    :func:`unit_interval` lies wholly above ``bar``, :data:`DOES_NOT_ESCAPE` wholly below, otherwise (or under
    ``min_seeds`` seeds) :data:`UNRESOLVED`. Returns the state and the interval."""
    ci = unit_interval(values)
    if ci is None or len(values) < min_seeds:
        return UNRESOLVED, ci
    return (ESCAPES if ci[0] > bar else DOES_NOT_ESCAPE if ci[1] < bar else UNRESOLVED), ci


def escape_verdict(selective: Mapping[Any, float], fixed: Mapping[Any, float], *, copying: float, min_effect: float,
                   copy_margin: float, margin: float, control: Gate, min_seeds: int = 5) -> dict[str, Any]:
    """"Only input-dependent selection escapes", decided so that it cannot be won at the floor (``copying``: the
    level an arm reaches without a lookup; the recall analyses measure it, the most frequent context value's
    accuracy, or read 1 / pairs where a plan declares so).

    Paired over seeds, ``selective - fixed`` (accuracies at the pairs read):

    An arm is above the bar ``copying + copy_margin`` only where its own 95% interval over seeds lies wholly above
    it (:func:`arm_escape`, the reading of every arm in the recall analyses), and at or below it only where that
    interval lies wholly below: a mean above the bar with an interval across it is neither.

    - behind the positive control (``control``): without it, not testable;
    - "selective escapes" (:data:`MET`): the 95% interval of the difference above 0, the mean difference at least
      ``min_effect``, and the selective arm above the bar;
    - "fixed escapes" (:data:`REFUTED`): the same the other way;
    - :data:`NEITHER_ESCAPES`: a difference, or equivalence, with both arms at or below the bar (both numbers given);
    - "equivalent" within ``margin`` with both arms above the bar: refuted (the fixed bank escapes as well);
    - otherwise :data:`NOT_RESOLVED`: an arm whose interval holds the bar, equivalence with only one arm above it,
      or a lead below the declared effect: neither reading is earned.
    """
    c = stats.compare(dict(selective), dict(fixed), margin)
    kind, ci, why = difference_verdict(c, min_seeds, (-1.0, 1.0))
    seeds = list(c.seeds)
    mean_s = sum(selective[s] for s in seeds) / max(1, len(seeds))
    mean_f = sum(fixed[s] for s in seeds) / max(1, len(seeds))
    bar = copying + copy_margin
    state_s, ci_s = arm_escape(list(selective.values()), bar, min_seeds)
    state_f, ci_f = arm_escape(list(fixed.values()), bar, min_seeds)
    numbers = {"selective_mean": mean_s, "fixed_mean": mean_f, "difference": c.difference, "ci95": ci,
               "ci90": [_finite(x) for x in c.ci90], "seeds": seeds, "copying": copying, "copy_bar": bar,
               "min_effect": min_effect, "margin": margin, "selective_ci95": ci_s, "fixed_ci95": ci_f,
               "selective_escape": state_s, "fixed_escape": state_f}

    def shown(mean: float, arm_ci: list[float] | None) -> str:
        return f"{mean:.3f}" + (f" [{arm_ci[0]:.3f}, {arm_ci[1]:.3f}]" if arm_ci else "")

    above_s, above_f = state_s == ESCAPES, state_f == ESCAPES
    below_s, below_f = state_s == DOES_NOT_ESCAPE, state_f == DOES_NOT_ESCAPE
    where = f"the floor {copying:.3f} + {copy_margin:g}"
    if kind == A_HIGHER and c.difference >= min_effect and above_s:
        verdict, why = MET, f"selective escapes: {why}, effect {c.difference:+.3f} >= {min_effect:g}, " \
                            f"selective {shown(mean_s, ci_s)} above {where}"
    elif kind == A_LOWER and -c.difference >= min_effect and above_f:
        verdict, why = REFUTED, f"the fixed bank is higher: {why}, fixed {shown(mean_f, ci_f)} above the floor"
    elif kind in (A_HIGHER, A_LOWER, EQUIVALENT) and below_s and below_f:
        verdict, why = NEITHER_ESCAPES, (f"selective {shown(mean_s, ci_s)}, fixed {shown(mean_f, ci_f)}: both at or "
                                         f"below {where} ({why})")
    elif kind == EQUIVALENT and above_s and above_f:
        verdict, why = REFUTED, f"equivalent above the floor: the fixed bank escapes as well ({why})"
    elif kind in (A_HIGHER, A_LOWER, EQUIVALENT) and (state_s == UNRESOLVED or state_f == UNRESOLVED):
        across = [f"{name} {shown(m, arm_ci)}" for name, m, arm_ci, st in
                  (("selective", mean_s, ci_s, state_s), ("fixed", mean_f, ci_f, state_f)) if st == UNRESOLVED]
        verdict, why = NOT_RESOLVED, (f"{' and '.join(across)}: the interval over seeds holds {where} = {bar:.3f} "
                                      f"({why})")
    elif kind == EQUIVALENT:
        verdict, why = NOT_RESOLVED, (f"equivalent within ±{margin:g}, but only the "
                                      f"{'selective' if above_s else 'fixed'} arm is above {where} "
                                      f"(selective {shown(mean_s, ci_s)}, fixed {shown(mean_f, ci_f)}; {why})")
    elif kind in (A_HIGHER, A_LOWER):
        verdict, why = NOT_RESOLVED, f"a difference below the declared effect {min_effect:g} ({why})"
    else:
        verdict = NOT_RESOLVED
    verdict, why = gated(verdict, [control]) if control.holds is not True else (verdict, why)
    return {"verdict": verdict, "reason": why, **numbers}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


__all__ = ["Gate", "arm_escape", "context_gate", "control_gate", "decidability_gate", "difference_verdict",
           "escape_verdict", "gated", "interior_gate", "ngram_gate", "reference_gate", "sweep_ngram_gate",
           "unit_interval"]
