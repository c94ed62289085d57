"""The committed sweeps a report plan names (``committed:``), read through one reader.

A claim the report's own budget cannot decide is decided by a longer experiment, run once with the experiment
runner (``ema-boundary sweep``, eval/sweep/), committed (``docs/sweeps/<name>/``) and named in the plan::

    committed:
      recall_map: docs/sweeps/recall-map          # selection_escapes_recall
      recall_map_n64: docs/sweeps/escape-routes-n64   # the same protocol at N = 64: a condition of that row
      ladder: docs/sweeps/ladder                  # perplexity_gap_ladder
      ablation_predictor: docs/sweeps/ablation-predictor   # readers_identical_budgets
      ablation_trace: docs/sweeps/ablation-trace  # selection_escapes_budgets
      depth: docs/sweeps/depth                    # depth_selection_recovers
      data_axis: docs/sweeps/data-axis            # the trend among perplexity_gap_ladder's conditions

Each folder must hold a ``results.json`` of ``ema-boundary sweep`` (schema 1) whose analysis is the source's kind
(:data:`SOURCES`); it is checked once, when the plan is read, and kept in report.json's ``sweeps`` as the
claims read it (:func:`sweep_block`): the analysis as the sweep wrote it (its gates and verdicts come from
:mod:`eval.verdicts`; nothing is re-decided here), whether the sweep is complete and how many runs are still to
run (an incomplete sweep is read for what it has, and its row says so), each arm's budgets, parameters and
tokens, and the commands that reproduce it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ema_boundary.format import count
from ema_boundary.io import read_json
from ema_boundary.usage import UsageError
from ema_boundary.verdicts import A_HIGHER, A_LOWER, LETS_IT_ESCAPE, NOT_NEEDED, WORSE_THAN_REFERENCE
from ema_boundary.yamlio import YAMLFileError, read_yaml_file
from eval.plans import in_repo
from eval.report.conditions import conditions_block
from eval.scale.data_axis import overfit_text, trend_text
from eval.sweep.runner import RESULTS, SCHEMA, TOOL

# A claim source of the plan's ``committed:`` -> the analysis kind its sweep must have (eval/sweep/analyses.py).
SOURCES: dict[str, str] = {"recall_map": "recall_map", "recall_map_n64": "recall_map", "ladder": "ladder",
                           "ablation_predictor": "ablation", "ablation_trace": "ablation", "depth": "depth",
                           "arms": "arms", "data_axis": "data_axis"}
KEYS = ("tool", "schema", "name", "complete", "missing", "arms", "analysis", "commands")

ZOOLOGY = ("Zoology (Arora et al. 2023): associative-recall capacity grows with the state size for gated "
           "convolutions and recurrences, while attention solves it at any size")

__all__ = ["SOURCES", "ZOOLOGY", "ablation_conditions", "ablation_gate", "ablation_longest",
           "ablation_text", "budget_check_text", "cap", "data_axis_conditions", "depth_conditions",
           "depth_loss_conditions", "escape_arms", "escape_conditions", "escape_tables", "escape_row", "escape_text",
           "ladder_conditions", "ladder_deciding", "ladder_gate", "ladder_size_text", "larger_state_conditions",
           "partial", "read_sweep", "sweep_block", "sweeps_block"]


def read_sweep(folder: str | Path, source: str, name: str | None = None) -> dict[str, Any]:
    """The ``results.json`` of the sweep folder a plan names for ``source``, checked: one line naming the source
    and the folder (as ``name``, e.g. the path the plan wrote) when it cannot serve."""
    folder = Path(folder)
    where = f"committed.{source}: {name or folder}"
    if source not in SOURCES:
        raise UsageError(f"committed.{source}: not a claim source ({', '.join(SOURCES)})")
    if not folder.is_dir():
        raise UsageError(f"{where}: no such folder")
    results = read_json(folder / RESULTS, RESULTS, f"a sweep folder holds {RESULTS}: run `ema-boundary sweep "
                        f"--summarize {name or folder}` on a sweep folder", name=f"{where}: {RESULTS}")
    if not isinstance(results, dict) or results.get("tool") != TOOL:
        raise UsageError(f"{where}: {RESULTS} is not an `{TOOL}` result (its tool is "
                         f"{results.get('tool') if isinstance(results, dict) else None!r})")
    if results.get("schema") != SCHEMA:
        raise UsageError(f"{where}: {RESULTS} has schema {results.get('schema')!r}, expected {SCHEMA}")
    missing = [k for k in KEYS if k not in results]
    if missing:
        raise UsageError(f"{where}: {RESULTS} lacks {', '.join(missing)}")
    kind = (results["analysis"] or {}).get("kind") if isinstance(results["analysis"], dict) else None
    if kind != SOURCES[source]:
        raise UsageError(f"{where}: {RESULTS} holds a {kind!r} analysis, {source} needs {SOURCES[source]!r}")
    return results


def _arms(results: dict[str, Any]) -> dict[str, Any]:
    """Per arm: per budget (steps) the seeds finished and the tokens a run read, the parameters of its first
    finished run (what the claims need to say where a verdict was read) and its rate choices."""
    out = {}
    for arm, a in results["arms"].items():
        budgets = a.get("budgets") or {}
        first = next((r for seeds in budgets.values() for r in seeds.values()), {})
        out[arm] = {"budgets": {b: {"seeds": len(s), "tokens": next((r.get("tokens") for r in s.values()), None)}
                                for b, s in sorted(budgets.items(), key=lambda kv: int(kv[0]))},
                    "parameters": first.get("parameters"),
                    # each choosing seed's rate and whether it lies inside the rates tried (a row says so)
                    "choices": {k: {"chosen": v.get("chosen"), "interior": v.get("interior"),
                                    "tried": sorted(float(r) for r in (v.get("tried") or {}))}
                                for k, v in (a.get("choices") or {}).items()}}
    return out


def _corpus(results: dict[str, Any]) -> str | None:
    """The corpus the sweep's runs read (its base ``data``), when it names one."""
    base = ((results.get("plan") or {}).get("declared") or {}).get("base") or {}
    if isinstance(base, str):  # a train.py YAML the plan names
        try:
            base = read_yaml_file(in_repo(base))[0] or {}
        except YAMLFileError:
            return None
    data = base.get("data") if isinstance(base, dict) else None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    return data if isinstance(data, str) else None


def sweep_block(results: dict[str, Any], source: str, folder: str) -> dict[str, Any]:
    """report.json's ``sweeps[source]``: what the claims read of one committed sweep; ``folder`` is the folder the
    plan named (as written there). The grammar arms keep of their analysis only the structure conditions the
    claims read (:func:`eval.report.conditions.conditions_block`), not every arm's full rows."""
    analysis = results["analysis"]
    if analysis.get("kind") == "arms" and analysis.get("complete"):
        analysis = {"kind": "arms", "complete": True, "conditions": conditions_block(analysis, folder)}
    return {"source": folder, "name": results["name"], "kind": results["analysis"]["kind"],
            "plan": (results.get("plan") or {}).get("path"), "scored_on": results.get("scored_on"),
            "corpus": _corpus(results), "complete": bool(results["complete"]), "missing": len(results["missing"]),
            "seconds": results.get("seconds"), "commands": results["commands"], "arms": _arms(results),
            "settings": ((results.get("plan") or {}).get("declared") or {}).get("settings") or {},
            "analysis": analysis}


def sweeps_block(committed: dict[str, str]) -> dict[str, Any]:
    """report.json's ``sweeps``: every committed sweep a plan names (source -> folder)."""
    return {source: sweep_block(read_sweep(in_repo(folder), source, folder), source, folder)
            for source, folder in committed.items()}


def partial(block: dict[str, Any]) -> str | None:
    """``"partial: 12 runs still to run"`` for an incomplete sweep (never read silently); None when complete."""
    if block.get("complete"):
        return None
    n = block.get("missing", 0)
    return (f"partial: {count(n, 'run')} still to run (committed sweep `{block['source']}`; continue with "
            f"`{(block.get('commands') or {}).get('resume', 'ema-boundary sweep --resume_from ' + block['source'])}`)")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _interval(d: float, ci: Any, scale: float = 1.0, digits: int = 1, unit: str = "") -> str:
    text = f"{scale * d:+.{digits}f}"
    if ci and all(isinstance(x, (int, float)) and x == x for x in ci):
        text += f" [{scale * ci[0]:+.{digits}f}, {scale * ci[1]:+.{digits}f}]"
    return text + unit


def _joined(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "; ".join(kept) if kept else None


# ---------------------------------------------------------------------------------------------
# The recall map (analysis ``recall_map``): the escape at the headline state size, the others its conditions
# ---------------------------------------------------------------------------------------------


def escape_row(block: dict[str, Any]) -> dict[str, Any] | None:
    """The escape comparison that decides the row: at the sweep's headline state size, at the longer cap once both
    arms have their declared seeds there (``headline_at``), else at the cap (None when both arms have not run)."""
    a = block["analysis"]
    return (a.get(a.get("headline_at") or "escape") or {}).get(str(a.get("headline")))


def escape_other_cap(block: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The headline comparison at the cap that does not decide the row, with its setting's name, if it has run."""
    a = block["analysis"]
    other = "escape" if a.get("headline_at") == "escape_longer" else "escape_longer"
    row = (a.get(other) or {}).get(str(a.get("headline")))
    return (other, row) if row else None


def escape_arms(block: dict[str, Any], key: str, row: dict[str, Any],
                setting: str = "escape") -> tuple[str, str, float | None, float | None]:
    """(selective arm, fixed arm, their mean accuracies) of one escape comparison. A row written before the analysis
    kept the arms' names holds the means under ``selective``/``fixed``; its names are then read from the plan's
    ``settings.<setting>`` as the sweep declared it."""
    declared = ((block.get("settings") or {}).get(setting) or {}).get(key) or ["?", "?"]
    names = [row[w] if isinstance(row.get(w), str) else declared[i] for i, w in enumerate(("selective", "fixed"))]
    means = [row[w] if isinstance(row.get(w), (int, float)) else (block["analysis"]["arms"].get(names[i]) or {})
             .get("accuracy", {}).get("mean") for i, w in enumerate(("selective", "fixed"))]
    return names[0], names[1], means[0], means[1]


def escape_text(block: dict[str, Any], key: str, row: dict[str, Any], setting: str = "escape") -> str:
    """Both arms' accuracies at the pairs read, their state numbers and the paired difference."""
    sel, fix, mean_s, mean_f = escape_arms(block, key, row, setting)
    n = row["state_numbers"]
    diff = (f": difference {_interval(row['difference'], row.get('ci95'), 100, 1, ' points')}"
            if isinstance(row.get("difference"), (int, float)) and len(row.get("seeds") or []) > 1 else "")
    return (f"`{sel}` {_pct(mean_s)} vs `{fix}` {_pct(mean_f)} at {block['analysis']['pairs']} pairs (state per "
            f"layer {n['selective']:,} vs {n['fixed']:,} numbers){diff}")


def ablation_text(block: dict[str, Any]) -> str:
    """The ablation's answer and the field check of a recall sweep, as a clause ("" where the sweep has neither)."""
    a = block["analysis"]
    parts = [f"{r['part']}: {r['reading']} (`{r['without']}` "
             f"{_interval(r['difference'], r.get('ci95') if len(r['seeds']) > 1 else None, 100, 1, ' points')})"
             for r in a.get("ablation") or []]
    out = f"; which part of Mamba's block lets it escape: {', '.join(parts)}" if parts else ""
    f = a.get("field_check")
    if f:
        ci = f.get("ci95") if len(f.get("seeds") or []) > 1 else None  # one seed: no interval
        out += (f"; against the field's own model, `{f['ours']}` − `{f['theirs']}` "
                f"{_interval(f['difference'], ci, 100, 1, ' points')} ({count(len(f.get('seeds') or []), 'seed')}), "
                f"{f['verdict']}")
    return out


def escape_other_cap_text(block: dict[str, Any]) -> str | None:
    """The headline comparison at the other cap in words: its cap, its seeds so far and its reading."""
    found = escape_other_cap(block)
    if not found:
        return None
    setting, row = found
    a = block["analysis"]
    key = str(a.get("headline"))
    seeds = len(row.get("seeds") or [])
    want = ((block.get("settings") or {}).get("min_seeds")) or 5
    so_far = f"{seeds} of {want} seeds so far" if seeds < want else f"{seeds} seeds"
    which = "the longer cap (settings.escape_longer)" if setting == "escape_longer" else "the cap"
    return (f"at {which}, {row.get('cap', '?'):,} steps ({so_far}): {escape_text(block, key, row, setting)}, "
            f"{row['verdict']}")


def escape_conditions(block: dict[str, Any]) -> str | None:
    """The other state sizes, the write rules at about equal state, every other arm's accuracy with its cap."""
    a = block["analysis"]
    headline = str(a.get("headline"))
    parts = [escape_other_cap_text(block)]
    others = [(k, r) for k, r in (a.get("escape") or {}).items() if k != headline]
    if others:
        parts.append("other state sizes: " + ", ".join(
            f"N = {k}: {escape_text(block, k, r)}, {r['verdict']}" for k, r in others))
    # Against the fixed banks only (each pair's fixed arm of a declared comparison): every pair is in results.md.
    banks = {escape_arms(block, k, r, s)[1] for s in ("escape", "escape_longer") for k, r in (a.get(s) or {}).items()}
    rules = [r for r in a.get("write_rules") or [] if not banks or banks & {r["a"], r["b"]}]
    if rules:
        parts.append("write rules at about equal state, against the fixed bank (every pair: the sweep's results.md): "
                     + ", ".join(
            f"{r['rules'][0]} (`{r['a']}`, {r['state_numbers'][0]:,}) − {r['rules'][1]} (`{r['b']}`, "
            f"{r['state_numbers'][1]:,}) {_interval(r['difference'], r.get('ci95'), 100, 1, ' points')}, "
            f"{r['verdict']}{_unequal_states(*r['state_numbers'])}" for r in rules))
    parts.append(_escapes_text(a))
    checks = a.get("budget_check") or []
    if checks:
        parts.append(budget_check_text(block))
    named = {x for s in ("escape", "escape_longer") for k, r in (a.get(s) or {}).items()
             for x in escape_arms(block, k, r, s)[:2]}
    named |= {x for r in rules for x in (r["a"], r["b"])} | {(a.get("control") or {}).get("numbers", {})
                                                             .get("control")}
    named |= {c["longer"] for c in checks}
    rest = {k: v for k, v in (a.get("arms") or {}).items() if k not in named}
    if rest:
        parts.append("other arms: " + ", ".join(
            f"`{k}` {_pct(v['accuracy'].get('mean'))} ({count(v['accuracy'].get('n', 0), 'seed')}, cap "
            f"{cap(block, k)} steps)" for k, v in rest.items()))
    parts.append(ZOOLOGY)
    return _joined(*parts)


# A write-rule pair is read "at about equal state"; one whose states differ by more than this says by how much.
UNEQUAL_STATE = 1.5


def _unequal_states(a: int, b: int) -> str:
    """" (the states are not equal: 3.2x)" for a pair whose state numbers differ by more than UNEQUAL_STATE."""
    ratio = max(a, b) / min(a, b) if min(a, b) > 0 else float("inf")
    return f" (the states are not equal: {ratio:.1f}x)" if ratio > UNEQUAL_STATE else ""


def _pct_ci(e: dict[str, Any]) -> str:
    """An accuracy with its 95% interval over seeds, where it has one: "94.1% [91.9%, 96.3%]"."""
    ci = e.get("ci95")
    return _pct(e.get("accuracy")) + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "")


def _escapes_text(a: dict[str, Any]) -> str | None:
    """Every arm of a recall analysis against the floor + margin: its write rule, state numbers, accuracy with its
    interval over seeds and its reading (None before any arm has run)."""
    escaped = a.get("rule_escape") or {}
    if not escaped:
        return None
    level = (a.get("floor") or {}).get("name", "copying level")
    return (f"which arm escapes (accuracy at {a['pairs']} pairs, 95% interval over seeds, against the {level} + "
            f"margin, {_pct(a.get('copy_bar'))}): " + ", ".join(
                f"{e['rule']} (`{arm}`, {e['state_numbers']:,}) {_pct_ci(e)} {e['escape']} ({count(e['n'], 'seed')})"
                for arm, e in escaped.items()))


def larger_state_conditions(block: dict[str, Any]) -> str | None:
    """A recall sweep run at a larger state size under the headline sweep's protocol (``committed:
    recall_map_n64``), in words for the escape row's conditions: each declared comparison with its verdict and every
    arm against its floor + margin. It never decides the row (the headline sweep does); None before any arm has
    run."""
    a = block["analysis"]
    comparisons = [f"N = {k}: {escape_text(block, k, r)}, {r['verdict']} "
                   f"({count(len(r.get('seeds') or []), 'paired seed')})" for k, r in (a.get("escape") or {}).items()]
    escapes = _escapes_text(a)
    if not comparisons and not escapes:
        return None
    left = partial(block)
    head = (f"at a larger state, the same protocol (committed sweep `{block['source']}`, a condition: the headline "
            f"sweep decides the row" + (f"; {left}" if left else "") + ")")
    return head + ": " + "; ".join([*comparisons, *([escapes] if escapes else [])])


def escape_tables(block: dict[str, Any]) -> list[str]:
    """A committed recall sweep as the report's tables: every arm against the floor (its rate, seeds and 95% interval
    over seeds), each declared escape comparison, the ablation of Mamba's block and the field check. The claim row
    keeps one line of each; these are what a reader cites."""
    a = block["analysis"]
    pairs, bar, floor = a["pairs"], a.get("copy_bar"), a.get("floor") or {}
    strategies = {name: levels.get(str(pairs)) for name, levels in (floor.get("strategies") or {}).items()}
    others = ", ".join(f"{name} {_pct(v)}" for name, v in strategies.items()
                       if v is not None and v != floor.get("level"))
    random_value = (floor.get("random_context_value") or {}).get(str(pairs))
    lines = [f"From `{block['source']}` (`{block.get('plan')}`; {partial(block) or 'complete'}). Accuracy at {pairs} "
             "pairs on the evaluation sequences every model shares; the rate is the choosing seed's, from the rates "
             f"tried. The floor: {floor.get('name', 'copying level')} {_pct(floor.get('level', a.get('copying')))}"
             + (f" ({others}" + (f"; a uniformly random context value {_pct(random_value)}" if random_value else "")
                + ")" if others else "")
             + f"; an arm escapes where its 95% interval over seeds lies wholly above floor + margin, {_pct(bar)}.",
             "", f"| arm | write rule | state numbers per layer | non-embedding parameters | rate | seeds | "
             f"accuracy at {pairs} pairs [95% interval] | against {_pct(bar)} |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for arm, e in (a.get("rule_escape") or {}).items():
        info = (a.get("arms") or {}).get(arm) or {}
        chosen = sorted({c.get("chosen") for c in ((block.get("arms") or {}).get(arm) or {}).get("choices", {}).values()
                         if c.get("chosen") is not None})
        lines.append(f"| `{arm}` | {e['rule']} | {e['state_numbers']:,}{' (grows)' * bool(info.get('grows'))} | "
                     f"{info.get('non_embedding_parameters', 0):,} | {', '.join(f'{r:g}' for r in chosen) or '–'} | "
                     f"{e['n']} | {_pct_ci(e)} | {e['escape']} |")
    rows = [(k, r, s) for s in ("escape", "escape_longer") for k, r in (a.get(s) or {}).items()]
    if rows:
        lines += ["", "| comparison (paired by seed) | selective | fixed | selective − fixed, points [95%] | verdict |",
                  "|---|---|---|---|---|"]
        for k, r, s in rows:
            sel, fix, mean_s, mean_f = escape_arms(block, k, r, s)
            ci = r.get("ci95") if len(r.get("seeds") or []) > 1 else None
            lines.append(f"| {'N = ' + k}{' (longer cap)' * (s == 'escape_longer')} | `{sel}` {_pct(mean_s)} | "
                         f"`{fix}` {_pct(mean_f)} | {_interval(r['difference'], ci, 100, 1)} | {r['verdict']} |")
    if a.get("ablation"):
        lines += ["", "| part of Mamba's block | the block without it | with it | without − with, points [95%] | "
                  "reading |", "|---|---|---|---|---|"]
        for r in a["ablation"]:
            ci = r.get("ci95") if len(r["seeds"]) > 1 else None
            lines.append(f"| {r['part']} | `{r['without']}` ({r['escape'][0]}) | `{r['full']}` ({r['escape'][1]}) | "
                         f"{_interval(r['difference'], ci, 100, 1)} ({count(len(r['seeds']), 'seed')}) | "
                         f"{r['reading']} |")
        open_rows = [r for r in a["ablation"] if r["reading"] not in (LETS_IT_ESCAPE, NOT_NEEDED)]
        lines += ["", *[f"- {r['part']}, {r['reading']}: {r['reason']}" for r in open_rows]] if open_rows else []
    f = a.get("field_check")
    if f:
        ci = f.get("ci95") if len(f.get("seeds") or []) > 1 else None
        lines += ["", f"Against the field's own model: `{f['ours']}` − `{f['theirs']}` "
                  f"{_interval(f['difference'], ci, 100, 1, ' points')} "
                  f"({count(len(f.get('seeds') or []), 'paired seed')}): "
                  f"{f['verdict']} (equal only if the 90% interval lies inside the declared margin)."]
    return lines


def budget_check_text(block: dict[str, Any]) -> str | None:
    """The budget check in words: each checked arm at its cap and at the longer cap, seed by seed, and whether
    any crossed the escape bar (the floor + margin) with the longer budget (then the row's verdict is the cap's, not
    the arm's)."""
    checks = block["analysis"].get("budget_check") or []
    if not checks:
        return None

    def seed(c: dict[str, Any], k: str) -> str:
        line = f"seed {k}: {_pct(c['at_cap'][k])} at {c['cap']:,} → "
        cap_rate, longer_rate = (c.get("rates") or {}).get(k, (None, None))
        if cap_rate == longer_rate:
            return line + f"{_pct(c['at_longer'][k])} at {c['longer_cap']:,} steps"
        # the longer cap chose another rate (a wider grid): the budget is read at the cap's rate
        same = (c.get("at_longer_same_rate") or {}).get(k)
        own = f"{_pct(c['at_longer'][k])} at its own choice {longer_rate:g}"
        return line + (f"{_pct(same)} at {c['longer_cap']:,} steps, both at {cap_rate:g} ({own})" if same is not None
                       else f"{own} at {c['longer_cap']:,} steps (the cap's rate {cap_rate:g} did not run there)")

    words = ", ".join(f"`{c['arm']}` " + ", ".join(seed(c, k) for k in c["seeds"]) for c in checks)
    crossed = [c["arm"] for c in checks if c["crosses_copy_bar"]]
    bar = block["analysis"].get("copy_bar")
    decided_longer = block["analysis"].get("headline_at") == "escape_longer"
    tail = (f"{', '.join(crossed)} crossed the escape bar ({_pct(bar)}) with twice the budget: "
            + ("the row is read at the longer cap" if decided_longer else "the verdict holds under the cap only")
            if crossed else f"no arm crossed the escape bar ({_pct(bar)}) with the longer budget")
    n = max(len(c["seeds"]) for c in checks)
    return f"the budget check (twice the cap, {'one seed' if n == 1 else f'{n} seeds'}): {words}; {tail}"


def cap(block: dict[str, Any], arm: str) -> str:
    """The budget(s) an arm ran under, in steps (a recall run stops early once it solves the pairs)."""
    budgets = (block["arms"].get(arm) or {}).get("budgets") or {}
    return ", ".join(f"{int(b):,}" for b in budgets) or "?"


# ---------------------------------------------------------------------------------------------
# The ladder (analysis ``ladder``): the gap at the deciding size, every size its conditions
# ---------------------------------------------------------------------------------------------


def ladder_deciding(block: dict[str, Any]) -> dict[str, Any] | None:
    """The size the sweep's analysis decides at (both gates holding, an interval), None when there is none."""
    a = block["analysis"]
    return next((e for e in a.get("sizes") or [] if e["name"] == a.get("deciding_size")), None)


def ladder_size_text(block: dict[str, Any], e: dict[str, Any]) -> str:
    """One size in words: parameters, both losses, the n-gram line and the plain reference, the gap."""
    a = block["analysis"]
    an, bn, order = a["a"], a["b"], a.get("gate_ngram", "bigram")
    params = (e.get("parameters") or {}).get(an) or (e.get("parameters") or {}).get(bn) or {}
    n = e[an].get("n") or e[bn].get("n", 0)  # a size where one model has run so far counts that one's seeds
    if e[an].get("mean") is None and e[bn].get("mean") is None:
        return f"{e['name']}: not run yet"
    def loss(name: str) -> str:  # a size still running may lack one model's score
        return "–" if e[name].get("mean") is None else f"{e[name]['mean']:.3f}"

    text = (f"{e['name']} ({params.get('non_embedding', 0):,} non-embedding parameters, {count(n, 'seed')}): "
            f"{an} {loss(an)}, {bn} {loss(bn)}")
    if e.get("ngram"):
        text += f", Kneser-Ney {order} {e['ngram'][order]:.3f}"
    if (e.get("reference") or {}).get("mean") is not None:
        text += f", plain reference {e['reference']['mean']:.3f}"
    text += " nats"
    if not e.get("gate"):
        failed = [g["why"] for g in e.get("gates") or [] if g.get("holds") is not True]
        return text + f", not testable ({'; '.join(failed) or 'no gate evaluated'})"
    gap = e["gap"]
    text += f", gap {_interval(gap['mean'], gap.get('ci95'), 1, 3)}"
    if e.get("ratio") is not None:
        ci = e.get("ratio_ci95")
        text += f" (perplexity ratio {e['ratio']:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}])" if ci else ")")
    return text


def ladder_gate(block: dict[str, Any]) -> tuple[bool | None, str]:
    """Whether a size decides the ladder (every gate holding: the n-gram line and the plain-reference check of
    the baseline), with the numbers; where none does, the largest size's failed gates ("baseline
    worse than its plain reference" with both numbers when the reference check fails)."""
    a = block["analysis"]
    sizes = a.get("sizes") or []
    deciding = ladder_deciding(block)
    if deciding is not None:
        return True, f"{deciding['name']}: " + "; ".join(g["why"] for g in deciding["gates"])
    if not sizes:
        return None, "no size with both architectures run"
    last = sizes[-1]
    failed = []
    for g in last.get("gates") or []:
        if g.get("holds") is False and g.get("name") == "reference":
            why = g["why"].removesuffix(f": {WORSE_THAN_REFERENCE}")
            failed.append(f"{WORSE_THAN_REFERENCE} at {last['name']}: {why}")
        elif g.get("holds") is not True:
            failed.append(f"{last['name']}: {g['why']}")
    if not failed:
        failed.append(f"{last['name']}: no interval ({count(last['gap'].get('n', 0), 'paired seed')})")
    holds = False if any(g.get("holds") is False for g in last.get("gates") or []) or last.get("gate") else None
    return holds, "; ".join(failed)


def ladder_conditions(block: dict[str, Any]) -> str | None:
    """Every size of the ladder in words, with the sweep's source and scored blocks."""
    sizes = block["analysis"].get("sizes") or []
    if not sizes:
        return None
    return (f"committed ladder `{block['source']}` ({block['analysis']['a']} − {block['analysis']['b']} loss on the "
            f"{block.get('scored_on') or 'test'} blocks): " + "; ".join(ladder_size_text(block, e) for e in sizes))


# ---------------------------------------------------------------------------------------------
# The ablation (analysis ``ablation``): the longest budget decides, every budget its conditions
# ---------------------------------------------------------------------------------------------


def ablation_longest(block: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """(steps, entry) of the longest budget any run of the sweep has reached."""
    budgets = block["analysis"].get("budgets") or {}
    if not budgets:
        return None
    steps = max(budgets, key=int)
    return int(steps), budgets[steps]


def ablation_gate(block: dict[str, Any]) -> tuple[bool | None, str]:
    """The n-gram gate on the reference arm at the longest budget, as the sweep recorded it."""
    top = ablation_longest(block)
    if top is None:
        return None, "no budget has run"
    steps, entry = top
    gate = entry.get("gate")
    if not gate:
        return None, f"no n-gram line at {steps:,} steps"
    return gate.get("holds"), f"{steps:,} steps: {gate['why']}"


def _budget_text(block: dict[str, Any], steps: str, entry: dict[str, Any]) -> str:
    a = block["analysis"]
    ref = a["reference"]
    tokens = ((block["arms"].get(ref) or {}).get("budgets") or {}).get(steps, {}).get("tokens")
    text = f"{int(steps):,} steps" + (f" ({tokens:,} tokens)" if tokens else "")
    if ref in entry.get("arms", {}):
        text += f": `{ref}` {entry['arms'][ref]['mean']:.3f} nats"
    gate = entry.get("gate")
    if gate and gate.get("holds") is False:
        return text + f", not testable ({gate['why']})"
    comps = entry.get("comparisons") or {}
    if comps:
        text += "; " + ", ".join(f"`{arm}` {_interval(c['difference'], c.get('ci95'), 1, 3)} {c['verdict']}"
                                 for arm, c in comps.items())
    return text


def ablation_conditions(block: dict[str, Any]) -> str | None:
    """Every budget of the sweep in words (each arm minus the reference, paired by seed)."""
    a = block["analysis"]
    budgets = a.get("budgets") or {}
    if not budgets:
        return None
    return (f"committed ablation `{block['source']}` (each arm minus `{a['reference']}` on the "
            f"{block.get('scored_on') or 'test'} blocks, each arm at its own rate): "
            + "; ".join(_budget_text(block, s, e) for s, e in sorted(budgets.items(), key=lambda kv: int(kv[0]))))


# ---------------------------------------------------------------------------------------------
# Depth (analysis ``depth``)
# ---------------------------------------------------------------------------------------------


def depth_conditions(block: dict[str, Any]) -> str | None:
    """The measures that need no language-model gate (earlier blocks' shares per block), in words."""
    t = block["analysis"].get("table") or {}
    rows = t.get("block_share") or []
    if not rows:
        return None
    return ("each block's output recovered at the last layer, attention − add: "
            + ", ".join(f"block {i}: {_interval(r['difference'], r.get('ci95'), 100, 1, ' points')}"
                        for i, r in enumerate(rows)) + f" (committed sweep `{block['source']}`)")


def depth_loss_conditions(block: dict[str, Any]) -> str | None:
    """The loss row's conditions: the loss at equal CPU (the analysis' ``equal_cpu``: the selective arm against the
    residual sum trained for about as many CPU-seconds, paired by seed) before the probe measures."""
    e = block["analysis"].get("equal_cpu")
    text = None
    if e and e.get("difference") is None:  # declared, not run yet
        text = f"at equal CPU: {e['reason']}"
    elif e:
        cpu = e.get("cpu_seconds") or {}
        sel = next((k for k in cpu if k != e["arm"]), "attention")
        words = {A_HIGHER: f"`{e['arm']}` lower at equal CPU", A_LOWER: f"{sel} lower at equal CPU"}
        spent = (f", {cpu[sel]:.0f} vs {cpu[e['arm']]:.0f} CPU-s a run"
                 if cpu.get(sel) is not None and cpu.get(e["arm"]) is not None else "")
        text = (f"at equal CPU: {sel} − `{e['arm']}` (the sum trained {e['steps']:,} steps{spent}) "
                f"{_interval(e['difference'], e.get('ci95'), 1, 3, ' nats')}, {words.get(e['verdict'], e['verdict'])} "
                f"({len(e.get('seeds') or [])} paired seeds)")
    return _joined(text, depth_conditions(block))


# ---------------------------------------------------------------------------------------------
# The data axis (analysis ``data_axis``): the perplexity gap against distinct training tokens, a condition of the
# ladder's row (where its sign holds), not a verdict of its own
# ---------------------------------------------------------------------------------------------


def data_axis_conditions(block: dict[str, Any]) -> str | None:
    """Each setting's trend (the regime: who is better up to how many distinct tokens; how the gap moves per doubling
    of the data; where the fitted line crosses 0, or that it does not narrow) and the over-fitting check, in the words
    results.md uses (:mod:`eval.scale.data_axis`); None before any setting has run."""
    a = block["analysis"]
    # Every setting with a point run, a setting where no point passes its gates included: the row says where the
    # gap could not be read, not only where it could.
    fits = [f for f in (a.get("fits") or {}).values() if f.get("n") or f.get("excluded")]
    if not fits:
        return None
    left = partial(block)
    head = (f"along the data axis (committed sweep `{block['source']}`: {a['a']} − {a['b']} loss on the "
            f"{block.get('scored_on') or 'test'} blocks against log2 distinct training tokens, nested fractions of "
            f"the corpus, both gates at every point" + (f"; {left}" if left else "") + ")")
    return head + ": " + "; ".join([trend_text(f, a["a"], a["b"]) for f in fits]
                                   + [t for t in (overfit_text(a.get("overfit")),) if t])

