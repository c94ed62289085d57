"""How a sweep's results are read: one function per experiment, each from the runner's generic results.

Every analysis takes ``(plan, results, folder)`` (results: the runner's ``arms`` with each seed's ``score`` at
each budget, and each arm's rate choices) and returns a JSON-ready dict with the gates it passed or failed and
why (:mod:`eval.verdicts`), the paired comparisons with their intervals, and a ``verdict`` (with ``reason``)
where the experiment decides a claim. Its declared settings are the plan's ``settings`` mapping.

- ``ladder``: arms ``<size>/<a>`` and ``<size>/<b>`` (settings ``a``, ``b``: e.g. spen, gpt2): the loss gap a - b
  at every size behind the n-gram gate (and the plain-reference check of the baseline where one is declared);
- ``ablation``: every arm against the ``reference`` arm at every budget (Holm, TOST against
  ``equivalence_margin``), behind the n-gram gate on the reference;
- ``recall_map``: accuracy at ``pairs`` for every arm with its write rule and state numbers; the ``escape``
  comparisons (selective vs fixed at equal state) by :func:`eval.verdicts.escape_verdict`, behind the control;
- ``arms``: grammar_probe's paper rows at every labelled-data size and across the unseen-word protocol
  (``arms.json`` as ``grammar_probe arms`` wrote it);
- ``depth``: the residual sum against attention over depth (eval.depth's paired rows), the measures that need
  no language-model gate apart from the loss, which is read behind the n-gram gate;
- ``data_axis``: the ladder's gap against the distinct training tokens (:mod:`eval.sweep.data_axis`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ema_boundary import stats
from ema_boundary.seeding import recall_evaluation_seed
from ema_boundary.usage import UsageError
from ema_boundary.verdicts import (
    A_HIGHER,
    A_LOWER,
    DOES_NOT_ESCAPE,
    EQUIVALENT,
    ESCAPES,
    LETS_IT_ESCAPE,
    NOT_NEEDED,
    NOT_RESOLVED,
    NOT_RUN,
    UNRESOLVED,
    higher,
)
from eval import verdicts
from eval.plans import in_repo
from eval.sweep.data_axis import data_axis
from eval.sweep.execute import read_result
from eval.sweep.paths import RunPaths
from eval.sweep.plan import SweepPlan
from eval.sweep.trainers import TRAINERS, RecallTrainer, _data_paths, _defaults, _settings, ngram_lines


def _scores(results: dict[str, Any], arm: str, steps: int | str | None = None) -> dict[str, Any]:
    """``{seed: score}`` of an arm at a budget (its longest by default)."""
    budgets = results["arms"][arm]["budgets"]
    key = str(steps) if steps is not None else max(budgets, key=int)
    return {s: r["score"] for s, r in budgets.get(key, {}).items()}


def _interval(values: list[float]) -> dict[str, Any]:
    m = stats.mean_ci(values) if values else {"mean": math.nan, "n": 0, "ci95": (math.nan, math.nan)}
    ci = None if m["n"] < 2 else [float(x) for x in m["ci95"]]
    return {"mean": m["mean"] if values else None, "ci95": ci, "n": m["n"], "per_seed": values}


def _tokens(results: dict[str, Any], arm: str, steps: str) -> int | None:
    seeds = results["arms"][arm]["budgets"].get(steps, {})
    return next((r.get("tokens") for r in seeds.values() if r.get("tokens")), None)


def none(plan: SweepPlan, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """No experiment-specific reading: each arm's scores at each budget with their interval."""
    out = {}
    for arm, a in results["arms"].items():
        out[arm] = {}
        for steps, seeds in a["budgets"].items():
            values = [r["score"] for r in seeds.values()]
            out[arm][steps] = _interval(values) if values and isinstance(values[0], (int, float)) else {
                "per_seed": values}
    return {"scores": out}


def ablation(plan: SweepPlan, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Every arm against the reference at every budget, behind the n-gram gate on the reference."""
    s = plan.settings
    reference, margin = s.get("reference", plan.arms[0].name), s.get("equivalence_margin")
    order = s.get("gate_ngram", "bigram")
    budgets: dict[str, Any] = {}
    for steps in sorted({b for a in results["arms"].values() for b in a["budgets"]}, key=int):
        arms = {a: _scores(results, a, steps) for a in results["arms"]}
        arms = {a: v for a, v in arms.items() if v}
        entry: dict[str, Any] = {"arms": {a: _interval(list(v.values())) for a, v in arms.items()}}
        if reference in arms and len(arms) > 1 and all(len(v) >= 2 for v in arms.values()):
            comps = stats.compare_arms(arms, reference, margin)
            entry["comparisons"] = {a: c.as_dict() for a, c in comps.items()}
            try:
                entry["f_test"] = stats.blocked_f_test(arms)
            except ValueError as e:
                entry["f_test"] = {"error": str(e)}
        tokens = _tokens(results, reference, steps) if reference in arms else None
        lines = ngram_lines(plan, folder, tokens) if tokens else None
        if lines is not None:
            entry["ngram"] = lines
            ref_mean = entry["arms"][reference]["mean"]
            entry["gate"] = verdicts.ngram_gate({reference: ref_mean}, lines["loss"][order],
                                                f"Kneser-Ney {order}").as_dict()
        budgets[steps] = entry
    return {"reference": reference, "equivalence_margin": margin, "gate_ngram": order, "budgets": budgets,
            "rates": {a: {k: c["chosen"] for k, c in v["choices"].items()} for a, v in results["arms"].items()}}


def ladder(plan: SweepPlan, results: dict[str, Any], folder: Path) -> dict[str, Any]:
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
        a, b = _scores(results, a_arm), _scores(results, b_arm)
        entry: dict[str, Any] = {"name": size, a_name: _interval(list(a.values())), b_name: _interval(list(b.values()))}
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
        entry["gap"] = _interval(gaps)
        if len(gaps) >= 1:
            entry["ratio"] = math.exp(entry["gap"]["mean"])
            if entry["gap"]["ci95"]:
                entry["ratio_ci95"] = [math.exp(x) for x in entry["gap"]["ci95"]]
        tokens = _tokens(results, a_arm, max(results["arms"][a_arm]["budgets"], key=int))
        lines = ngram_lines(plan, folder, tokens) if tokens else None
        gates = []
        if lines is not None and a and b:
            entry["ngram"] = {k: lines["loss"][k] for k in ("unigram", "bigram", "trigram")}
            entry["train_tokens"] = tokens
            gates.append(verdicts.ngram_gate({a_name: entry[a_name]["mean"], b_name: entry[b_name]["mean"]},
                                             lines["loss"][order], f"Kneser-Ney {order}"))
        ref_scores = _scores(results, f"{size}/reference") if f"{size}/reference" in results["arms"] else {}
        reference = _interval(list(ref_scores.values()))["mean"] if ref_scores else references.get(size)
        if ref_scores:
            entry["reference"] = _interval(list(ref_scores.values()))
        if b and reference is None and f"{size}/reference" in results["arms"]:  # declared, not finished yet
            gates.append(verdicts.Gate("reference", None, f"{b_name}'s plain reference has not run yet"))
        elif b:
            gates.append(verdicts.reference_gate(b_name, entry[b_name]["mean"], reference, ref_margin))
        # Where both models can speak and the baseline is sound: where the gap lives (eval.gap, with the windowed
        # context-use control), and the gate that the attention baseline retrieves from context.
        if gates and all(g.holds for g in gates) and s.get("context_window"):
            gap = _gap_at(plan, results, folder, size, a_arm, b_arm)
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
    """The attention baseline's windowed control in an eval.gap result of :func:`_gap_at`: eval.gap's first model
    (``a``) is the ladder's baseline ``b``."""
    return (gap.get("context_use") or {}).get("a")


def _gap_at(plan: SweepPlan, results: dict[str, Any], folder: Path, size: str, a_arm: str, b_arm: str
            ) -> dict[str, Any] | None:
    """eval.gap on the test split for one size, every common seed of both arms paired (a = the baseline b_arm, b =
    a_arm: "b - a" is a - b of the ladder), with ``--window``; written once to ``DIR/gap/<size>/`` and reused."""
    from eval.gap import main as gap_main  # delayed: torch, which the other analyses need not import

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
    st = _defaults(_settings({"config": plan.config_of(plan.arm(a_arm))}))
    s = plan.settings
    before = Path.cwd()
    os.chdir(folder)  # the command eval.gap records runs from the sweep folder
    text = _data_paths([st["data"]] if isinstance(st["data"], str) else list(st["data"]), relative_to=Path.cwd())[0]
    argv = ["--model_name_or_path", ",".join(finals[b_arm]), ",".join(finals[a_arm]),
            "--labels", s.get("b", "gpt2"), s.get("a", "spen"), "--text", text, "--split", plan.score,
            "--val_every", str(st["val_every"]), "--test_every", str(st["test_every"]),
            "--block_size", str(st["block_size"]), "--max_tokens", str(s.get("context_max_tokens", 100_000)),
            "--window", str(s["context_window"]), "--output_dir", f"gap/{size}"]
    try:
        if gap_main(argv) != 0:
            return None
    finally:
        os.chdir(before)
    return json.loads((out / "gap.json").read_text())


def _recall_at(plan: SweepPlan, folder: Path, arm: str, lr: float, seed: str, steps: int, pairs: str) -> float | None:
    """Accuracy at ``pairs`` of one finished run of the sweep (any rate, chosen or not); None if it has not run."""
    r, _ = read_result(RunPaths.of(folder, arm, lr, int(seed), steps).result)  # unreadable: as not run
    return None if r is None else TRAINERS[plan.trainer].score(r, plan.score).get(pairs)


def recall_floor(plan: SweepPlan, pairs: str) -> dict[str, Any]:
    """What answering without a lookup scores on the sweep's evaluation sequences (eval.recall.no_lookup_floor), and
    the level an arm must pass: that floor (settings ``floor: no_lookup``, the default) or ``1 / pairs`` (``floor:
    copying``, what the recall map read before issue 49)."""
    from eval.recall import no_lookup_floor  # delayed: eval.recall imports torch, the other analyses need none

    arm = plan.arms[0]
    _, task, recipe = RecallTrainer.build({"config": plan.config_of(arm), "steps": plan.budgets_of(arm)[-1],
                                           "lr": plan.grid_of(arm)[0], "arm": arm.name})
    measured = no_lookup_floor(task, recipe.eval_examples, recall_evaluation_seed())
    kind = plan.settings.get("floor", "no_lookup")
    level = measured["floor"][pairs] if kind == "no_lookup" else 1 / int(pairs)
    name = f"no-lookup floor ({measured['best'][pairs]})" if kind == "no_lookup" else f"copying level 1/{pairs}"
    return {"kind": kind, "level": level, "name": name, **measured}


def _rule_label(plan: SweepPlan, arm: str, recorded: dict[str, Any]) -> str:
    """Today's label of an arm's write rule (eval.recall_arms.describe_arm of the arm's config; a run records the label
    of its day), or the recorded one for an arm today's code no longer builds."""
    from eval.recall_arms import describe_arm  # delayed: torch

    a = plan.arm(arm)
    try:
        config, task, _ = RecallTrainer.build({"config": plan.config_of(a), "steps": plan.budgets_of(a)[-1],
                                               "lr": plan.grid_of(a)[0], "arm": arm})
    except (UsageError, ValueError):
        return recorded["write_rule_label"]
    return describe_arm(config, task.seq_len)["write_rule_label"]


def recall_map(plan: SweepPlan, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Accuracy at ``pairs`` for every arm (with write rule and state numbers) against the no-lookup floor, the
    escape comparisons, the ablation of declared parts (``settings.ablation``: name -> [arm, full arm]) and the
    check of an arm against the field's own model (``settings.field_check``: [ours, theirs])."""
    s = plan.settings
    pairs = str(s.get("pairs", 16))
    floor = recall_floor(plan, pairs)
    arms: dict[str, Any] = {}
    for arm, a in results["arms"].items():
        seeds = next(iter(a["budgets"].values()), {}) if a["budgets"] else {}
        longest = a["budgets"].get(max(a["budgets"], key=int), {}) if a["budgets"] else {}
        seeds = longest or seeds
        if not seeds:
            continue
        first = next(iter(seeds.values()))
        acc = {k: r["score"].get(pairs) for k, r in seeds.items()}
        arms[arm] = {"accuracy": _unit_interval([v for v in acc.values() if v is not None]), "per_seed": acc,
                     # the label of today's table (a run records the one of its day)
                     "write_rule": first["arm"]["write_rule"], "write_rule_label": _rule_label(plan, arm, first["arm"]),
                     "state_numbers": first["arm"]["state_numbers"], "state_parts": first["arm"]["state_parts"],
                     "grows": first["arm"]["state_grows_with_length"], "chance": first["chance"],
                     "non_embedding_parameters": first["parameters"]["non_embedding"],
                     "steps": {k: r["steps"] for k, r in seeds.items()},
                     "rates": {k: r["lr"] for k, r in seeds.items()}}
    control_name = s.get("control", "gpt2")
    control_acc = arms.get(control_name, {}).get("accuracy", {}).get("mean")
    control = verdicts.control_gate(control_name, control_acc, s.get("control_bar", 0.95), f"accuracy at {pairs} pairs")
    copying = floor["level"]  # what an arm scores without a lookup; escaping means above it by copy_margin

    def escape(setting: str) -> dict[str, Any]:
        """Each declared comparison of ``settings.<setting>`` (N -> [selective, fixed]) whose arms have run."""
        rows = {}
        for name, (sel, fix) in (s.get(setting) or {}).items():
            if sel in arms and fix in arms:
                rows[name] = {"selective": sel, "fixed": fix, "cap": int(max(results["arms"][sel]["budgets"], key=int)),
                              "state_numbers": {"selective": arms[sel]["state_numbers"],
                                                "fixed": arms[fix]["state_numbers"]},
                              **verdicts.escape_verdict(
                                  {k: v for k, v in arms[sel]["per_seed"].items() if v is not None},
                                  {k: v for k, v in arms[fix]["per_seed"].items() if v is not None},
                                  copying=copying, min_effect=s.get("min_effect", 0.05),
                                  copy_margin=s.get("copy_margin", 0.05), margin=s.get("equivalence_margin", 0.05),
                                  control=control, min_seeds=s.get("min_seeds", 5))}
        return rows

    escapes = escape("escape")
    # The same comparisons at a longer cap (settings.escape_longer, declared before its runs): the headline is read
    # there once both arms have the declared seeds, since a verdict under a cap the selective state is still
    # learning at (the budget check) speaks for the cap, not for the write rule.
    escapes_longer = escape("escape_longer")
    headline = s.get("headline")
    read_longer = len((escapes_longer.get(headline) or {}).get("seeds") or []) >= s.get("min_seeds", 5)
    # The budget check (issue 34 item 3): an arm at its cap against the same arm at a longer cap, seed by seed; the
    # verdict holds under the cap only if no arm crosses the copying bar with the longer budget. The longer arm may
    # choose its rate on a wider grid: a seed is then compared at the rate it chose at the cap (its run at the longer
    # cap, where that rate ran), so that a crossing is the budget's and not a rate's; the longer cap's own choice is
    # kept beside it.
    copy_bar = copying + s.get("copy_margin", 0.05)
    checks = []
    for arm, longer in (s.get("budget_check") or {}).items():
        if arm not in arms or longer not in arms:
            continue
        seeds = [k for k in arms[longer]["per_seed"] if arms[arm]["per_seed"].get(k) is not None
                 and arms[longer]["per_seed"][k] is not None]
        if not seeds:
            continue
        at_cap = {k: arms[arm]["per_seed"][k] for k in seeds}
        at_longer = {k: arms[longer]["per_seed"][k] for k in seeds}
        caps = [max(results["arms"][x]["budgets"], key=int) for x in (arm, longer)]
        rates = {k: [arms[arm]["rates"][k], arms[longer]["rates"][k]] for k in seeds}
        same = {k: at_longer[k] if rates[k][0] == rates[k][1] else
                _recall_at(plan, folder, longer, rates[k][0], k, int(caps[1]), pairs) for k in seeds}
        crosses = {k: at_cap[k] < copy_bar <= (same[k] if same[k] is not None else at_longer[k]) for k in seeds}
        checks.append({"arm": arm, "longer": longer, "cap": int(caps[0]), "longer_cap": int(caps[1]), "seeds": seeds,
                       "at_cap": at_cap, "at_longer": at_longer, "rates": rates, "at_longer_same_rate": same,
                       "steps_longer": {k: arms[longer]["steps"][k] for k in seeds},
                       "crosses": crosses, "crosses_copy_bar": any(crosses.values())})
    # Write rules at about equal state (issue 34 item 4): each pair of a group, paired by seed, behind the control.
    rules = []
    for group in s.get("write_rules", []):
        ran = [a for a in group if a in arms]
        for i, a in enumerate(ran):
            for b in ran[i + 1:]:
                sa = {k: v for k, v in arms[a]["per_seed"].items() if v is not None}
                sb = {k: v for k, v in arms[b]["per_seed"].items() if v is not None}
                if len(set(sa) & set(sb)) < 2:
                    continue
                c = stats.compare(sa, sb, s.get("equivalence_margin", 0.05))
                kind, ci, why = verdicts.difference_verdict(c, s.get("min_seeds", 5), (-1.0, 1.0))
                verdict, why = verdicts.gated(kind, [control]) if control.holds is not True else (kind, why)
                named = {A_HIGHER: higher(f"`{a}`"), A_LOWER: higher(f"`{b}`")}
                kind, verdict = named.get(kind, kind), named.get(verdict, verdict)
                rules.append({"a": a, "b": b, "rules": [arms[a]["write_rule_label"], arms[b]["write_rule_label"]],
                              "state_numbers": [arms[a]["state_numbers"], arms[b]["state_numbers"]],
                              "difference": c.difference, "ci95": ci, "seeds": list(c.seeds), "verdict": verdict,
                              "reason": why})
    # Which write rule escapes (item 4): each arm of a write-rule group against the copying bar, its 95% interval
    # over seeds wholly above it (escapes), wholly below (does not), or across it (not resolved).
    escaped = {}
    for arm in arms:
        acc = arms[arm]["accuracy"]
        ci = acc.get("ci95")
        state = (UNRESOLVED if not ci or acc.get("n", 0) < s.get("min_seeds", 5) else
                 ESCAPES if ci[0] > copy_bar else DOES_NOT_ESCAPE if ci[1] < copy_bar else UNRESOLVED)
        escaped[arm] = {"rule": arms[arm]["write_rule_label"], "state_numbers": arms[arm]["state_numbers"],
                        "accuracy": acc.get("mean"), "ci95": ci, "n": acc.get("n", 0), "escape": state}
    decides = (escapes_longer if read_longer else escapes).get(headline, {})
    ablation = _recall_ablation(s, arms, escaped, control)
    field_check = None
    if s.get("field_check") and all(a in arms for a in s["field_check"]):
        ours, theirs = s["field_check"]
        c = stats.compare(_ran(arms[ours]), _ran(arms[theirs]), s.get("equivalence_margin", 0.05))
        kind, ci, why = verdicts.difference_verdict(c, s.get("min_seeds", 5), (-1.0, 1.0))
        field_check = {"ours": ours, "theirs": theirs, "difference": c.difference, "ci95": ci, "seeds": list(c.seeds),
                       "ci90": [x if math.isfinite(x) else None for x in c.ci90], "verdict": kind, "reason": why,
                       "escape": [escaped[ours]["escape"], escaped[theirs]["escape"]]}
    return {"pairs": int(pairs), "copying": copying, "floor": floor, "ablation": ablation, "field_check": field_check,
            "control": control.as_dict(), "arms": arms, "escape": escapes,
            "escape_longer": escapes_longer, "headline_at": "escape_longer" if read_longer else "escape",
            "write_rules": rules, "rule_escape": escaped, "budget_check": checks, "copy_bar": copy_bar,
            "headline": headline, "verdict": decides.get("verdict", NOT_RUN),
            "reason": decides.get("reason", "the headline comparison has not run")}


def _unit_interval(values: list[float]) -> dict[str, Any]:
    """:func:`_interval` of accuracies, its 95% interval clipped to [0, 1] (the range of an accuracy)."""
    out = _interval(values)
    if out["ci95"]:
        out["ci95"] = [max(0.0, out["ci95"][0]), min(1.0, out["ci95"][1])]
    return out


def _ran(arm: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in arm["per_seed"].items() if v is not None}


def _recall_ablation(s: dict[str, Any], arms: dict[str, Any], escaped: dict[str, Any],
                     control: verdicts.Gate) -> list[dict[str, Any]]:
    """Each declared part of a block (``settings.ablation``: part -> [the arm without it, the full arm]), paired by
    seed: the difference without - with, and the part's reading. The part **lets it escape** where the full arm
    escapes, the arm without it does not, and the paired 95% interval lies below 0 with a mean difference of at least
    ``min_effect``; **not needed** where both escape and the 90% interval lies inside the equivalence margin;
    otherwise **not resolved** (with why). Behind the positive control, as every recall verdict."""
    rows = []
    for part, (without, full) in (s.get("ablation") or {}).items():
        if without not in arms or full not in arms:
            continue
        c = stats.compare(_ran(arms[without]), _ran(arms[full]), s.get("equivalence_margin", 0.05))
        kind, ci, why = verdicts.difference_verdict(c, s.get("min_seeds", 5), (-1.0, 1.0))
        esc = escaped[without]["escape"], escaped[full]["escape"]
        if esc == (DOES_NOT_ESCAPE, ESCAPES) and kind == A_LOWER and -c.difference >= s.get("min_effect", 0.05):
            reading = LETS_IT_ESCAPE
        elif esc == (ESCAPES, ESCAPES) and kind == EQUIVALENT:
            reading = NOT_NEEDED
        else:
            reading = NOT_RESOLVED
        reading, why = verdicts.gated(reading, [control]) if control.holds is not True else (reading, why)
        rows.append({"part": part, "without": without, "full": full, "difference": c.difference, "ci95": ci,
                     "seeds": list(c.seeds), "escape": list(esc), "reading": reading, "reason": why})
    return rows


def depth(plan: SweepPlan, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Attention over depth against the residual sum: eval.depth's paired rows (the probe measures need no
    language-model gate); the loss row read as the ladder reads its rows, behind the n-gram gate on both arms
    (settings ``loss_gate_ngram``, else ``gate_ngram``: the order the sweep first declared) and the plain-reference
    check of the residual sum (settings ``plain_reference``: the arm trained by eval.reference's loop on the same
    tokens, within ``reference_margin`` nats); and the loss at equal CPU (settings ``equal_cpu``: the residual sum
    trained for as many CPU-seconds as attention's runs took)."""
    from eval.depth import MARGINS, claim_verdict, paired_table, run_scalars  # delayed: eval.depth imports torch

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
    tokens = _tokens(results, ref, max(results["arms"][ref]["budgets"], key=int))
    lines = ngram_lines(plan, folder, tokens) if tokens else None
    order = s.get("loss_gate_ngram", s.get("gate_ngram", "bigram"))
    means = {n: _interval([r["val_loss"] for r in runs[n].values()])["mean"] for n in runs}
    gates = [verdicts.ngram_gate(means, lines["loss"][order], f"Kneser-Ney {order}") if lines else verdicts.Gate(
        "ngram", None, "no n-gram line")]
    plain = s.get("plain_reference")
    if plain:
        scores = _scores(results, plain) if plain in results["arms"] else {}
        reference = _interval(list(scores.values()))["mean"] if scores else None
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
    if not other or other not in results["arms"] or not _scores(results, other):
        return None if not other else {"arm": other, "verdict": NOT_RUN, "reason": f"{other} has not run"}
    a, b = _scores(results, sel), _scores(results, other)
    c = stats.compare(a, b, s.get("equivalence_margin", 0.02))
    kind, ci, why = verdicts.difference_verdict(c, s.get("min_seeds", 5))

    def cpu(arm: str) -> float | None:
        seeds = results["arms"][arm]["budgets"].get(max(results["arms"][arm]["budgets"], key=int), {})
        values = [r["cpu_seconds"] for r in seeds.values() if r.get("cpu_seconds")]
        return sum(values) / len(values) if values else None

    return {"arm": other, "steps": int(max(results["arms"][other]["budgets"], key=int)), "difference": c.difference,
            "ci95": ci, "seeds": list(c.seeds), "verdict": kind, "reason": why,
            "cpu_seconds": {sel: cpu(sel), other: cpu(other)}}


def arms(plan: SweepPlan, results: dict[str, Any], folder: Path) -> dict[str, Any]:
    """grammar_probe's arms (trainer ``arms``): every paper row at every size and across the unseen-word protocol,
    as ``grammar_probe arms`` wrote ``arms.json`` (schema ``grammar_probe.arms/1``, which the report's structure
    conditions read); written beside results.json with ``arms.md`` and one figure per row
    (:func:`grammar_probe.arms.write_summary`), once every run is finished.

    Settings: ``size_arm`` (the arm whose budgets are the size arms ``size_<n>``: the protocol as fixed),
    ``protocol_size`` (the training sentences of the protocol 2 x 2) and ``protocol_arms`` (each cell of the 2 x 2
    -> the arm that ran it; the size arm where the cell is the fixed protocol: that run, not a second one)."""
    from grammar_probe.arms import ARMS_SCHEMA, conditions_of, write_summary  # delayed: its experiment imports torch

    s = plan.settings
    size_arm, n_protocol = s.get("size_arm", "size"), s.get("protocol_size")
    cells = s.get("protocol_arms", {})
    seed = str(plan.seeds[0])
    if results["missing"]:
        return {"complete": False, "reason": f"{len(results['missing'])} run(s) still to run"}

    def run(arm: str, steps: int) -> dict[str, Any]:
        return results["arms"][arm]["budgets"][str(steps)][seed]

    def facts(r: dict[str, Any], axis: str, value: Any, same: str | None) -> dict[str, Any]:
        return {"axis": axis, "value": value, "train_sentences": r["train_sentences"], "protocol": r["protocol"],
                "seeds": r["seeds"], "train_subsets_disjoint": r["train_subsets_disjoint"],
                "seconds": 0.0 if same else r["seconds"], "same_run_as": same, "rows": r["rows"]}

    sizes = list(plan.budgets_of(plan.arm(size_arm)))
    out = {f"size_{n}": facts(run(size_arm, n), "train_sentences", n, None) for n in sizes}
    for cell, arm in cells.items():
        same = f"size_{n_protocol}" if arm == size_arm else None
        out[f"protocol_{cell}"] = facts(run(arm, n_protocol), "protocol", cell, same)
    base = run(size_arm, sizes[0])
    # The run sizes but the budget, as the protocol arms ran them (the size arms differ in training sentences only).
    size = run(next(iter(cells.values())), n_protocol)["size"] if cells else base["size"]
    summary = {
        "schema": ARMS_SCHEMA, "size": size, "sizes": sizes, "protocol_size": n_protocol,
        "protocol_arms": {cell: dict(plan.arm(arm).config.get("protocol") or {}) if arm != size_arm else {}
                          for cell, arm in cells.items()},
        "base_protocol": base["protocol"], "seed": plan.seeds[0],
        "dataset": _dataset(plan.config_of(plan.arm(size_arm))["dataset"]), "arms": out,
        "conditions": conditions_of(out), "seconds": results["seconds"]["runs"]}
    write_summary(folder, summary)
    return {"complete": True, "arms_json": "arms.json", **summary}


def _dataset(declared: str) -> dict[str, Any] | None:
    """The arms' corpus as ``grammar_probe build`` recorded it, its folder as the plan names it (repository-relative:
    the committed summary names no path of the machine it ran on)."""
    from grammar_probe.arms import dataset_config  # delayed: its experiment imports torch

    found = dataset_config(in_repo(declared))
    return found and {**found, "path": declared}


ANALYSES: dict[str, Callable[[SweepPlan, dict[str, Any], Path], dict[str, Any]]] = {
    "none": none, "ablation": ablation, "ladder": ladder, "recall_map": recall_map, "depth": depth, "arms": arms,
    "data_axis": data_axis}

__all__ = ["ANALYSES", "ablation", "arms", "data_axis", "depth", "ladder", "none",
           "recall_map"]
