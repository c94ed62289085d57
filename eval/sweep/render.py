"""results.md of a sweep: short tables a reader compares (rates chosen, scores, the analysis' verdict)."""

from __future__ import annotations

from typing import Any

from ema_boundary.format import count
from eval.scale.data_axis import markdown


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 1e-3 or abs(v) >= 1e4 else f"{v:.{digits}f}"
    return str(v)


def _interval(m: dict[str, Any] | None) -> str:
    if not m or m.get("mean") is None:
        return "–"
    ci = m.get("ci95")
    return f"{m['mean']:.4f}" + (f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "") + f" (n={m['n']})"


def _cost(results: dict[str, Any]) -> list[str]:
    """Each arm's finished runs and CPU seconds (every rate tried), the sweep's cost on a shared machine."""
    by_arm = (results.get("seconds") or {}).get("cpu_by_arm")
    if not by_arm:  # summarised before the cost was recorded
        return []
    lines = ["", "## Cost (CPU seconds of the finished runs, every rate tried)", "",
             "| arm | runs | CPU seconds |", "|---|---|---|"]
    for arm, c in by_arm.items():
        note = f" ({c['unmeasured']} not measured)" if c.get("unmeasured") else ""
        lines.append(f"| `{arm}` | {c['runs']} | {c['cpu_seconds']:,.0f}{note} |")
    total = sum(c["cpu_seconds"] for c in by_arm.values())
    lines.append(f"| all | {sum(c['runs'] for c in by_arm.values())} | {total:,.0f} |")
    return lines


def render_markdown(results: dict[str, Any]) -> str:
    analysis = results.get("analysis") or {}
    kind = analysis.get("kind", "none")
    lines = [f"# Sweep `{results['name']}`", "",
             f"Plan `{results['plan']['path']}`, trainer `{results['trainer']}`, analysis `{kind}`; "
             f"every seed scored on the {results['scored_on']} split; "
             + ("complete." if results["complete"]
                else f"**{count(len(results['missing']), 'run')} still to run**."), "",
             f"- reproduce: `{results['commands']['reproduce']}`",
             f"- continue: `{results['commands']['resume']}`",
             f"- rebuild this file without training: `{results['commands']['summarize']}`", "",
             "## Rates chosen (on validation)", "",
             "| arm | choosing seed | rates tried (objective) | chosen | interior |", "|---|---|---|---|---|"]
    for arm, a in results["arms"].items():
        for seed, c in a["choices"].items():
            tried = ", ".join(f"{lr}: {_num(v)}" for lr, v in c["tried"].items()) or "–"
            lines.append(f"| `{arm}` | {seed} | {tried} | {_num(c['chosen'])} | "
                         f"{'yes' if c['interior'] else 'no (edge)' if c['chosen'] is not None else '–'} |")
    lines += ["", "## Scores", "", "| arm | steps | seeds | score per seed |", "|---|---|---|---|"]
    for arm, a in results["arms"].items():
        for steps, seeds in a["budgets"].items():
            per = ", ".join(f"{s}: {_score(r['score'])}" for s, r in seeds.items()) or "–"
            lines.append(f"| `{arm}` | {steps} | {len(seeds)} | {per} |")
    if "verdict" in analysis:
        lines += ["", "## Verdict", "", f"**{analysis['verdict']}**: {analysis.get('reason', '')}"]
    if kind == "ladder":
        lines += ["", "## Gap by size", "", f"| size | {analysis['a']} | {analysis['b']} | gap a − b (nats) | gates |",
                  "|---|---|---|---|---|"]
        for e in analysis["sizes"]:
            gates = "; ".join(g["why"] for g in e["gates"]) or "–"
            lines.append(f"| {e['name']} | {_interval(e[analysis['a']])} | {_interval(e[analysis['b']])} | "
                         f"{_interval(e['gap'])} | {gates} |")
    if kind == "recall_map":
        floor = analysis.get("floor")
        level = floor["name"] if floor else "copying level"  # results summarised before issue 49 have no floor
        lines += ["", f"## Accuracy at {analysis['pairs']} pairs ({level} {analysis['copying']:.3f})", ""]
        if floor:
            p = str(analysis["pairs"])
            lines += ["Without a lookup, on the evaluation sequences every arm is scored on "
                      f"({floor['examples']} per pair count), answering every query with:", ""]
            lines += [f"- {name}: {by[p]:.4f}" for name, by in floor["strategies"].items()]
            lines += [f"- (a uniformly random context value, expected: {floor['random_context_value'][p]:.4f})", "",
                      f"The floor is the best of them, {floor['level']:.4f}; an arm escapes above it by the declared "
                      f"margin ({analysis['copy_bar']:.4f}).", ""]
        lines += ["| arm | write rule | state numbers per layer | accuracy |", "|---|---|---|---|"]
        for arm, e in analysis["arms"].items():
            lines.append(f"| `{arm}` | {e['write_rule_label']} | {e['state_numbers'] if not e['grows'] else 'grows'} | "
                         f"{_interval(e['accuracy'])} |")
        lines += ["", f"Control: {analysis['control']['why']}", ""]
        rows = [(n, c) for key in ("escape", "escape_longer") for n, c in (analysis.get(key) or {}).items()]
        for name, c in rows:
            ci = c.get("ci95") or [None, None]
            interval = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if None not in ci else ""
            lines.append(f"- N = {name} at {c.get('cap', '?')} steps ({len(c.get('seeds') or [])} seeds): "
                         f"`{c['selective']}` − `{c['fixed']}` = {c['difference']:+.3f}{interval}: "
                         f"**{c['verdict']}** ({c['reason']})")
        if analysis.get("rule_escape"):
            lines += ["", f"## Which arm escapes (its 95% interval against {level} + margin, "
                          f"{analysis['copy_bar']:.4f})", "",
                      "| arm | write rule | state numbers | accuracy | escapes |", "|---|---|---|---|---|"]
            lines += [f"| `{arm}` | {e['rule']} | {e['state_numbers']} | "
                      f"{_interval({'mean': e['accuracy'], 'ci95': e['ci95'], 'n': e['n']})} | {e['escape']} |"
                      for arm, e in analysis["rule_escape"].items()]
            lines += [""] + [f"- `{w['a']}` − `{w['b']}` = {w['difference']:+.3f} [{w['ci95'][0]:+.3f}, "
                             f"{w['ci95'][1]:+.3f}]: {w['verdict']}" for w in analysis.get("write_rules", [])]
        if analysis.get("ablation"):
            lines += ["", "## Which part of the block lets selection escape (each arm against the full block)", "",
                      "| part | arm without it | − full arm (points) | escapes (without / full) | reading |",
                      "|---|---|---|---|---|"]
            for a in analysis["ablation"]:
                lo, hi = a["ci95"]
                lines.append(f"| {a['part']} | `{a['without']}` | {100 * a['difference']:+.1f} [{100 * lo:+.1f}, "
                             f"{100 * hi:+.1f}] | {a['escape'][0]} / {a['escape'][1]} | **{a['reading']}** "
                             f"({a['reason']}) |")
        if analysis.get("field_check"):
            f = analysis["field_check"]
            ci = (f" [{100 * f['ci95'][0]:+.1f}, {100 * f['ci95'][1]:+.1f}]"
                  if len(f.get("seeds") or []) > 1 else "")  # one seed: no interval
            lines += ["", f"Against the field's own model: `{f['ours']}` − `{f['theirs']}` = "
                      f"{100 * f['difference']:+.1f} points{ci}: {f['verdict']} ({f['reason']}); escapes: "
                      f"{f['escape'][0]} / {f['escape'][1]}."]
        if analysis.get("budget_check"):
            lines += ["", "## Budget check (the same arm at a longer cap, at the rate it chose at the cap)", "",
                      "| arm | seed | at the cap | at the longer cap | the longer cap's own choice "
                      "| crosses the escape bar |",
                      "|---|---|---|---|---|---|"]
            for c in analysis["budget_check"]:
                for k in c["seeds"]:
                    cap_rate, own_rate = (c.get("rates") or {}).get(k, (None, None))
                    same = (c.get("at_longer_same_rate") or c["at_longer"]).get(k)  # older results: no rates
                    crosses = (c.get("crosses") or {}).get(k, c["crosses_copy_bar"])
                    lines.append(f"| `{c['arm']}` | {k} | {c['at_cap'][k]:.4f} ({c['cap']} steps"
                                 f"{f', lr {cap_rate:g}' if cap_rate else ''}) | "
                                 f"{'–' if same is None else f'{same:.4f}'} ({c['longer_cap']} steps) | "
                                 f"{c['at_longer'][k]:.4f}{f' (lr {own_rate:g})' if own_rate else ''} | "
                                 f"{'yes' if crosses else 'no'} |")
    if kind == "ablation":
        for steps, e in analysis["budgets"].items():
            lines += ["", f"## {steps} steps", ""]
            if "gate" in e:
                lines.append(f"Gate: {e['gate']['why']}")
                lines.append("")
            lines += ["| arm | score | − reference | verdict |", "|---|---|---|---|"]
            for arm, m in e["arms"].items():
                c = e.get("comparisons", {}).get(arm)
                diff = f"{c['difference']:+.4f} [{c['ci95'][0]:+.4f}, {c['ci95'][1]:+.4f}]" if c else "reference"
                lines.append(f"| `{arm}` | {_interval(m)} | {diff} | {c['conclusion'] if c else ''} |")
    if kind == "data_axis":
        lines += markdown(analysis)
    lines += _cost(results)
    if results["missing"]:
        lines += ["", "## Still to run", ""] + [f"- {m}" for m in results["missing"][:40]]
        if len(results["missing"]) > 40:
            lines.append(f"- ... and {len(results['missing']) - 40} more")
    return "\n".join(lines) + "\n"


def _score(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {x:.3f}" for k, x in v.items()) + "}"
    return _num(v)
