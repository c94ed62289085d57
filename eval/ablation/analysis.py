"""The ablation sweep's analysis (``analysis: ablation``): every arm against the ``reference`` arm at every budget
(Holm, TOST against ``equivalence_margin``), behind the n-gram gate on the reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ema_boundary import stats
from eval import verdicts
from eval.results import Plan, Reads, interval, scores, train_tokens


def ablation(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
    """Every arm against the reference at every budget, behind the n-gram gate on the reference."""
    s = plan.settings
    reference, margin = s.get("reference", plan.arms[0].name), s.get("equivalence_margin")
    order = s.get("gate_ngram", "bigram")
    budgets: dict[str, Any] = {}
    for steps in sorted({b for a in results["arms"].values() for b in a["budgets"]}, key=int):
        arms = {a: scores(results, a, steps) for a in results["arms"]}
        arms = {a: v for a, v in arms.items() if v}
        entry: dict[str, Any] = {"arms": {a: interval(list(v.values())) for a, v in arms.items()}}
        if reference in arms and len(arms) > 1 and all(len(v) >= 2 for v in arms.values()):
            comps = stats.compare_arms(arms, reference, margin)
            entry["comparisons"] = {a: c.as_dict() for a, c in comps.items()}
            try:
                entry["f_test"] = stats.blocked_f_test(arms)
            except ValueError as e:
                entry["f_test"] = {"error": str(e)}
        tokens = train_tokens(results, reference, steps) if reference in arms else None
        lines = reads.ngram_lines(tokens) if tokens else None
        if lines is not None:
            entry["ngram"] = lines
        if reference in arms:  # no line: the gate is not measured (never a pass)
            entry["gate"] = verdicts.sweep_ngram_gate({reference: entry["arms"][reference]["mean"]}, lines,
                                                      order).as_dict()
        budgets[steps] = entry
    return {"reference": reference, "equivalence_margin": margin, "gate_ngram": order, "budgets": budgets,
            "rates": {a: {k: c["chosen"] for k, c in v["choices"].items()} for a, v in results["arms"].items()}}


__all__ = ["ablation"]
