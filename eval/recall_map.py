"""The recall map as a sweep (trainer and analysis ``recall``/``recall_map``): an arm's settings built into its model
config, task and recipe (:func:`build_arm`, what the runner's ``recall`` trainer trains), and the map read from the
runs: accuracy at ``pairs`` for every arm with its write rule and state numbers against the no-lookup floor; the
``escape`` comparisons (selective vs fixed at equal state) by :func:`eval.verdicts.escape_verdict`, behind the
control; the budget check, the write rules at equal state, the declared parts' ablation and the field check."""

from __future__ import annotations

import math
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
    higher,
)
from eval import verdicts
from eval.recall import RecallRecipe, RecallTask, default_map_configs, no_lookup_floor
from eval.recall_arms import describe_arm
from eval.results import Plan, Reads, interval


def build_arm(spec: dict[str, Any]) -> tuple[Any, RecallTask, RecallRecipe]:
    """A run's (or an arm's) model config, task and recipe from its spec: ``config`` (the arm's settings: ``model``,
    the control ``gpt2`` or a SPEN variant name; ``width``/``layers``/``heads``; ``set``, config fields replaced;
    ``task``, RecallTask fields; ``recipe``, RecallRecipe fields but ``steps`` and ``lrs``), ``steps``, ``lr`` and
    ``arm`` (its name, in messages)."""
    cfg = spec["config"]
    configs = default_map_configs(cfg.get("width", 64), cfg.get("layers", 2), cfg.get("heads", 4))
    if cfg["model"] not in configs:
        raise UsageError(f"arms.{spec['arm']}: model {cfg['model']!r} is not gpt2 or a SPEN variant "
                         f"({', '.join(configs)})")
    config = configs[cfg["model"]]
    for k, v in cfg.get("set", {}).items():
        setattr(config, k, v)
    task = RecallTask(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.get("task", {}).items()})
    recipe_kw = {k: tuple(v) if isinstance(v, list) else v for k, v in cfg.get("recipe", {}).items()}
    recipe = RecallRecipe(**recipe_kw, steps=spec["steps"], lrs=(spec["lr"],))
    return config, task, recipe


def _recall_at(reads: Reads, arm: str, lr: float, seed: str, steps: int, pairs: str) -> float | None:
    """Accuracy at ``pairs`` of one finished run of the sweep (any rate, chosen or not); None if it has not run."""
    score = reads.score_of(arm, lr, int(seed), steps)
    return None if score is None else score.get(pairs)


def recall_floor(plan: Plan, pairs: str) -> dict[str, Any]:
    """What answering without a lookup scores on the sweep's evaluation sequences (eval.recall.no_lookup_floor), and
    the level an arm must pass: that floor (settings ``floor: no_lookup``, the default) or ``1 / pairs`` (``floor:
    copying``, what the recall map read before issue 49)."""
    arm = plan.arms[0]
    _, task, recipe = build_arm({"config": plan.config_of(arm), "steps": plan.budgets_of(arm)[-1],
                                 "lr": plan.grid_of(arm)[0], "arm": arm.name})
    measured = no_lookup_floor(task, recipe.eval_examples, recall_evaluation_seed())
    kind = plan.settings.get("floor", "no_lookup")
    level = measured["floor"][pairs] if kind == "no_lookup" else 1 / int(pairs)
    name = f"no-lookup floor ({measured['best'][pairs]})" if kind == "no_lookup" else f"copying level 1/{pairs}"
    return {"kind": kind, "level": level, "name": name, **measured}


def _rule_label(plan: Plan, arm: str, recorded: dict[str, Any]) -> str:
    """Today's label of an arm's write rule (eval.recall_arms.describe_arm of the arm's config; a run records the label
    of its day), or the recorded one for an arm today's code no longer builds."""
    a = plan.arm(arm)
    try:
        config, task, _ = build_arm({"config": plan.config_of(a), "steps": plan.budgets_of(a)[-1],
                                     "lr": plan.grid_of(a)[0], "arm": arm})
    except (UsageError, ValueError):
        return recorded["write_rule_label"]
    return describe_arm(config, task.seq_len)["write_rule_label"]


def recall_map(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
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
                _recall_at(reads, longer, rates[k][0], k, int(caps[1]), pairs) for k in seeds}
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
        state, ci = verdicts.arm_escape(list(_ran(arms[arm]).values()), copy_bar, s.get("min_seeds", 5))
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
    """:func:`eval.results.interval` of accuracies, its 95% interval clipped to [0, 1] (eval.verdicts.unit_interval,
    the interval every escape reading uses)."""
    return {**interval(values), "ci95": verdicts.unit_interval(values)}


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
            if esc == (ESCAPES, ESCAPES) and kind in (A_LOWER, A_HIGHER):  # say which case of "otherwise" this is
                why = (f"both escape, and the block without it is {'lower' if kind == A_LOWER else 'higher'} by "
                       f"{abs(c.difference) * 100:.1f} points ({why}): the part moves the level, not the escape; "
                       "neither declared reading (lets it escape: only the full block escapes; not needed: "
                       "equivalent) applies")
        reading, why = verdicts.gated(reading, [control]) if control.holds is not True else (reading, why)
        rows.append({"part": part, "without": without, "full": full, "difference": c.difference, "ci95": ci,
                     "seeds": list(c.seeds), "escape": list(esc), "reading": reading, "reason": why})
    return rows


__all__ = ["build_arm", "recall_floor", "recall_map"]
