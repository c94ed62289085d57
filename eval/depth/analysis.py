"""The depth sweep's analysis (``analysis: depth``): the residual sum against attention over depth (eval.depth's paired
rows), the measures that need no language-model gate apart from the loss, which is read behind the n-gram gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ema_boundary import stats
from ema_boundary.verdicts import NOT_RUN
from eval import verdicts
from eval.depth import MARGINS, claim_verdict, paired_table, run_scalars
from eval.results import Plan, Reads, interval, scores, train_tokens


def depth(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
    """Attention over depth against the residual sum: eval.depth's paired rows (the probe measures need no
    language-model gate); the loss row read as the ladder reads its rows, behind the n-gram gate on both arms
    (settings ``loss_gate_ngram``, else ``gate_ngram``: the order the sweep first declared) and the plain-reference
    check of the residual sum (settings ``plain_reference``: the arm trained by eval.reference's loop on the same
    tokens, within ``reference_margin`` nats); and the loss at equal CPU (settings ``equal_cpu``: the residual sum
    trained for as many CPU-seconds as attention's runs took)."""
    s = plan.settings
    sel, ref = s.get("selection", "attention"), s.get("reference", "add")
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for name in (sel, ref):
        if name not in results["arms"]:
            return {"verdict": NOT_RUN, "reason": f"arm {name} has not run"}
        seeds = results["arms"][name]["budgets"].get(max(results["arms"][name]["budgets"], key=int), {})
        runs[name] = {k: {**run_scalars(r["depth"]), "val_loss": r["score"]} for k, r in seeds.items() if "depth" in r}
    if not runs[sel] or not runs[ref]:
        return {"verdict": NOT_RUN, "reason": "no finished run with depth measures"}
    table = paired_table({"attention": runs[sel], "add": runs[ref]}, {**MARGINS, **s.get("margins", {})},
                         s.get("min_seeds", 5))
    tokens = train_tokens(results, ref, max(results["arms"][ref]["budgets"], key=int))
    lines = reads.ngram_lines(tokens) if tokens else None
    order = s.get("loss_gate_ngram", s.get("gate_ngram", "bigram"))
    means = {n: interval([r["val_loss"] for r in runs[n].values()])["mean"] for n in runs}
    gates = [verdicts.sweep_ngram_gate(means, lines, order)]
    plain = s.get("plain_reference")
    if plain:
        ran = scores(results, plain) if plain in results["arms"] else {}
        reference = interval(list(ran.values()))["mean"] if ran else None
        gates.append(verdicts.reference_gate(ref, means[ref], reference, s.get("reference_margin", 0.03))
                     if reference is not None else verdicts.Gate("reference", None, f"{plain} has not run yet"))
    # a gate that fails decides (not testable) even while another could not be evaluated yet
    holds = False if any(g.holds is False for g in gates) else None if any(g.holds is None for g in gates) else True
    gate = verdicts.Gate("+".join(g.name for g in gates), holds, "; ".join(g.why for g in gates),
                         {g.name: g.numbers for g in gates})
    verdict = claim_verdict(table, {"holds": gate.holds})
    return {"table": table, "gate": gate.as_dict(), "gates": [g.as_dict() for g in gates],
            "ngram": lines and lines["loss"], "scored_on": plan.score,
            "equal_cpu": _equal_cpu(results, sel, s.get("equal_cpu"), s), **verdict}


def _equal_cpu(results: dict[str, Any], sel: str, other: str | None, s: dict[str, Any]) -> dict[str, Any] | None:
    """``sel`` against ``other`` (the reference trained for about as many CPU-seconds), paired by seed on the loss
    each seed is scored by: the difference sel − other with its reading, and each arm's CPU-seconds per run."""
    if not other or other not in results["arms"] or not scores(results, other):
        return None if not other else {"arm": other, "verdict": NOT_RUN, "reason": f"{other} has not run"}
    a, b = scores(results, sel), scores(results, other)
    c = stats.compare(a, b, s.get("equivalence_margin", 0.02))
    kind, ci, why = verdicts.difference_verdict(c, s.get("min_seeds", 5))

    def cpu(arm: str) -> float | None:
        seeds = results["arms"][arm]["budgets"].get(max(results["arms"][arm]["budgets"], key=int), {})
        values = [r["cpu_seconds"] for r in seeds.values() if r.get("cpu_seconds")]
        return sum(values) / len(values) if values else None

    return {"arm": other, "steps": int(max(results["arms"][other]["budgets"], key=int)), "difference": c.difference,
            "ci95": ci, "seeds": list(c.seeds), "verdict": kind, "reason": why,
            "cpu_seconds": {sel: cpu(sel), other: cpu(other)}}


__all__ = ["depth"]
