"""The ladder's analysis (``analysis: ladder``): arms ``<size>/<a>`` and ``<size>/<b>`` (settings ``a``, ``b``: e.g.
spen, gpt2), the loss gap a - b at every size behind the n-gram gate and the plain-reference check of the baseline,
and where both hold and the plan declares ``context_window``, where the gap lives: eval.gap's measure of each size's
pair (:func:`gap_at`), with the gate that the attention baseline retrieves from context."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from ema_boundary.usage import UsageError, first_line
from eval import gap, verdicts
from eval.results import Plan, Reads, interval, scores, train_tokens


def ladder(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
    """The loss gap a - b at every size (arms ``<size>/<arch>``), behind the n-gram gate and the plain-reference
    check of the baseline b: the arm ``<size>/reference`` (the plain loop of eval.reference on the same tokens)
    where the sweep has one, else settings ``reference: {size: loss}``. A size is read only with both gates
    holding; the deciding size is the largest such size with an interval (two or more paired seeds)."""
    s = plan.settings
    a_name, b_name = s.get("a", "spen"), s.get("b", "gpt2")
    order, ref_margin = s.get("gate_ngram", "bigram"), s.get("reference_margin", 0.03)
    references = s.get("reference", {})
    sizes = []
    for size in dict.fromkeys(arm.name.split("/")[0] for arm in plan.arms):
        a_arm, b_arm = f"{size}/{a_name}", f"{size}/{b_name}"
        if a_arm not in results["arms"] or b_arm not in results["arms"]:
            continue
        a, b = scores(results, a_arm), scores(results, b_arm)
        entry: dict[str, Any] = {"name": size, a_name: interval(list(a.values())), b_name: interval(list(b.values()))}
        params = {}
        for arch, arm in ((a_name, a_arm), (b_name, b_arm)):
            seeds = next(iter(results["arms"][arm]["budgets"].values()), {})
            first = next(iter(seeds.values()), None)
            if first:
                params[arch] = first["parameters"]
        entry["parameters"] = params
        entry["rates"] = {arch: {k: {"chosen": c["chosen"], "interior": c["interior"], "tried": c["tried"]}
                                 for k, c in results["arms"][arm]["choices"].items()}
                          for arch, arm in ((a_name, a_arm), (b_name, b_arm))}
        common = [k for k in a if k in b]
        gaps = [a[k] - b[k] for k in common]
        entry["gap"] = interval(gaps)
        if len(gaps) >= 1:
            entry["ratio"] = math.exp(entry["gap"]["mean"])
            if entry["gap"]["ci95"]:
                entry["ratio_ci95"] = [math.exp(x) for x in entry["gap"]["ci95"]]
        tokens = train_tokens(results, a_arm, max(results["arms"][a_arm]["budgets"], key=int))
        lines = reads.ngram_lines(tokens) if tokens else None
        gates = []
        if lines is not None and a and b:
            entry["ngram"] = {k: lines["loss"][k] for k in ("unigram", "bigram", "trigram")}
            entry["train_tokens"] = tokens
        if a and b:  # no line: not measured, never a pass (a size is read only behind both gates)
            gates.append(verdicts.sweep_ngram_gate({a_name: entry[a_name]["mean"], b_name: entry[b_name]["mean"]},
                                                   lines, order))
        ref_scores = scores(results, f"{size}/reference") if f"{size}/reference" in results["arms"] else {}
        reference = interval(list(ref_scores.values()))["mean"] if ref_scores else references.get(size)
        if ref_scores:
            entry["reference"] = interval(list(ref_scores.values()))
        if b and reference is None and f"{size}/reference" in results["arms"]:  # declared, not finished yet
            gates.append(verdicts.Gate("reference", None, f"{b_name}'s plain reference has not run yet"))
        elif b:
            gates.append(verdicts.reference_gate(b_name, entry[b_name]["mean"], reference, ref_margin))
        # Where both models can speak and the baseline is sound: where the gap lives (eval.gap, with the windowed
        # context-use control), and the gate that the attention baseline retrieves from context.
        if gates and all(g.holds for g in gates) and s.get("context_window"):
            gap = gap_at(plan, results, folder, reads, size, a_arm, b_arm)
            if gap is not None:
                entry["gap_decomposition"] = {k: gap[k] for k in ("total", "groups", "contrasts", "context_use",
                                                                  "text", "interval", "command") if k in gap}
                gates.append(verdicts.context_gate(b_name, baseline_context_use(gap)))
        entry["gates"] = [g.as_dict() for g in gates]
        # A size is read only with both models scored (a partial size's reference check alone decides nothing).
        entry["gate"] = bool(a and b) and bool(gates) and all(g.holds for g in gates)
        entry["checked"] = any(g.name == "reference" and g.holds is not None for g in gates)
        sizes.append(entry)
    deciding = next((e for e in reversed(sizes) if e["gate"] and e["checked"] and e["gap"]["ci95"]), None)
    return {"a": a_name, "b": b_name, "gate_ngram": order, "reference_margin": ref_margin, "sizes": sizes,
            "deciding_size": deciding["name"] if deciding else None}


def baseline_context_use(gap: dict[str, Any]) -> dict[str, Any] | None:
    """The attention baseline's windowed control in an eval.gap result of :func:`gap_at`: eval.gap's first model
    (``a``) is the ladder's baseline ``b``."""
    return (gap.get("context_use") or {}).get("a")


def gap_at(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads, size: str, a_arm: str, b_arm: str
           ) -> dict[str, Any] | None:
    """eval.gap on the test split for one size, every common seed of both arms paired (a = the baseline b_arm, b =
    a_arm: "b - a" is a - b of the ladder), with ``--window``; written once to ``DIR/gap/<size>/`` and reused. Its
    paths are the sweep folder's (the command gap.json records runs from there); None where the trained models are
    not in the folder or eval.gap refuses them (said in one line)."""
    out = folder / "gap" / size
    if (out / "gap.json").is_file():
        return json.loads((out / "gap.json").read_text())
    budget = max(results["arms"][a_arm]["budgets"], key=int)
    seeds = [s for s in results["arms"][a_arm]["budgets"][budget] if s in results["arms"][b_arm]["budgets"][budget]]
    runs = {arm: [results["arms"][arm]["budgets"][budget][s].get("run") for s in seeds] for arm in (a_arm, b_arm)}
    finals = {arm: [f"{r}/train/final" for r in rs] for arm, rs in runs.items()}
    if not seeds or not all(r and (folder / f).is_dir() for arm in finals for r, f in zip(runs[arm], finals[arm],
                                                                                          strict=True)):
        return None  # the trained models are not here (a clone holds the numbers, not the weights)
    st = reads.train_settings(a_arm, relative_to=folder.resolve())
    s = plan.settings
    argv = ["--model_name_or_path", ",".join(finals[b_arm]), ",".join(finals[a_arm]),
            "--labels", s.get("b", "gpt2"), s.get("a", "spen"), "--text", st["data"][0], "--split", plan.score,
            "--val_every", str(st["val_every"]), "--test_every", str(st["test_every"]),
            "--block_size", str(st["block_size"]), "--max_tokens", str(s.get("context_max_tokens", 100_000)),
            "--window", str(s["context_window"]), "--output_dir", f"gap/{size}"]
    try:
        return gap.measure(gap.parse_args(argv), gap.command(argv), root=folder)
    except (ValueError, UsageError) as err:
        print(f"{gap.PROG}: error: {first_line(err)}", file=sys.stderr)
        return None


__all__ = ["baseline_context_use", "gap_at", "ladder"]
