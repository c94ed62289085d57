"""The content probes in words and figures: the markdown section, the PNGs, and the verdict of each model.

The report's content section (``eval/report/render.py``) and ``python -m eval.probes`` both call
:func:`render_content_probes_markdown` and :func:`render_content_probes_figures` on the content of
``content_probes.json``; nothing here runs a model.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ema_boundary.figures import pyplot, save
from ema_boundary.format import pct as _pct
from eval.recall_arms import CONTROL_BAR, ESCAPE_PAIRS, WRITE_RULES

__all__ = ["ABOVE_COPYING", "CONTROL_BAR", "CONTROL_PAIRS", "KIND_LABELS", "LAG_MARKS", "find_control",
           "reader_kind", "recall_verdict", "render_content_probes_figures", "render_content_probes_markdown"]

# Issue 14's bar for the positive control (CONTROL_BAR, eval.recall), at the pair count the claim is about.
CONTROL_PAIRS = ESCAPE_PAIRS
# A model that copies some value of the context without matching its key scores 1/n at n pairs; a
# model counts as reading identity beyond that when it clears it by this much (declared, not tuned).
ABOVE_COPYING = 0.10
# The identity table's lags (and the figure's ticks).
LAG_MARKS = (1, 2, 4, 8, 16, 32, 64)


def find_control(models: Mapping[str, Mapping[str, Any]], recall: Mapping[str, Any]) -> str | None:
    """The positive control: the first model with recall results whose architecture is GPT-2's."""
    return next((n for n in recall if models.get(n, {}).get("model_type") == "gpt2"), None)


def reader_kind(info: Mapping[str, Any]) -> str:
    """Where a model sits on the map: "control" (GPT-2 architecture: attention over tokens), "state"
    (a SPEN reader of the current state of fixed-rate traces), "sequence" (a SPEN reader of every past
    state of fixed-rate traces), "selective" (SPEN with input-dependent traces: gated rates or a selective
    state space), "other"."""
    if info.get("model_type") == "gpt2":
        return "control"
    spen = info.get("spen")
    if info.get("model_type") != "spen" or not spen:
        return "other"
    if spen.get("trace") in ("selective", "selective_ssm"):
        return "selective"
    attends = spen.get("predictor") in ("linear_attention", "softmax_attention")
    return "sequence" if attends and spen.get("predictor_scope") == "sequence" else "state"


KIND_LABELS = {
    "control": "attention over tokens (positive control)",
    "state": "state scope, fixed-rate traces",
    "sequence": "sequence scope, fixed-rate traces",
    "selective": "input-dependent (selective) traces",
    "other": "other architecture",
}


def recall_verdict(result: Mapping[str, Any]) -> str:
    """One model's verdict from its accuracies: recovers content (>= 95% at the largest count, the
    control's bar), up to some count, partly (above copying a context value by 10 points somewhere), or
    not beyond copying."""
    acc = {int(n): a for n, a in result["accuracy"].items()}
    largest = max(acc)
    recalled = [n for n in sorted(acc) if acc[n] >= CONTROL_BAR]
    if largest in recalled:
        return f"recovers content (≥ {CONTROL_BAR:.0%} at {largest} pairs)"
    if recalled:
        return f"recovers up to {max(recalled)} pairs"
    above = [n for n in sorted(acc) if acc[n] >= 1 / n + ABOVE_COPYING]
    if above:
        n = max(above, key=lambda k: acc[k] - 1 / k)
        return f"partly (best {_pct(acc[n])} at {n} pairs, copying {_pct(1 / n)})"
    return "no lookup beyond copying"


def _control_status(results: Mapping[str, Any]) -> tuple[str | None, bool, list[str]]:
    """(control name, passed, sentences) for the map's positive control."""
    recall = results["recall"]
    control = results.get("positive_control") or find_control(results.get("models", {}), recall)
    if control is None or control not in recall:
        return None, False, [
            "**No positive control in this run** (the GPT-2 architecture, `--config hub_configs/gpt2-tiny`): "
            "without a model known to solve the task under this recipe, a model that fails may fail for the "
            "recipe; only positive results (a model that recovers content) say anything."]
    r = recall[control]
    pairs = sorted(int(n) for n in r["accuracy"])
    at = CONTROL_PAIRS if CONTROL_PAIRS in pairs else pairs[-1]
    acc = r["accuracy"][str(at)]
    passed = acc >= CONTROL_BAR and at >= CONTROL_PAIRS
    steps = f"{r['steps']:,} of at most {r['max_steps']:,} steps"
    if acc >= CONTROL_BAR:
        lines = [f"**Positive control:** `{control}` reaches {_pct(acc)} at {at} pairs ({steps}, lr {r['best_lr']:g})"
                 f" against the bar of {CONTROL_BAR:.0%}: the recipe is long enough for attention to learn the "
                 "lookup, so a model that fails under it fails for its architecture (at this size, budget and "
                 "seed)."]
    else:
        lines = [f"**The positive control `{control}` did not reach {CONTROL_BAR:.0%} at {at} pairs "
                 f"({_pct(acc)}, {steps}): this run is too short to say anything about the models that fail.** "
                 "Their failures may be the recipe's, not their architecture's; only positive results stand."]
    if at < CONTROL_PAIRS:
        lines.append(f"This map stops at {at} pairs (e.g. the `--quick` recipe): a smoke test. Issue 14's bar is "
                     f"{CONTROL_BAR:.0%} at {CONTROL_PAIRS} pairs with the default recipe.")
    return control, passed, lines


def _identity_markdown(results: Mapping[str, Any]) -> list[str]:
    s = results.get("identity_settings", {})
    curves = results.get("identity_at_lag", {})
    lines = ["### Token identity at lag", "",
             "What it measures: from the hidden state at position t of each layer, a linear probe (ridge "
             f"classifier, closed form) predicts the token at t − k, among the {s.get('num_classes', 32)} most "
             "frequent tokens of the probe text; fit on 80% of the sequences "
             f"({s.get('num_sequences', '?')} of {s.get('seq_len', '?')} tokens), scored on the other 20%; the "
             "best layer at each lag is shown. Chance is the majority class. For SPEN the hidden state is all "
             "the memory there is; a transformer keeps its memory in the key/value cache and need not copy "
             "past tokens into its residual stream, so what it can *retrieve* is measured by the recall map "
             "below, not here.", ""]
    if curves:
        max_lag = max(len(r["lags"]) for r in curves.values())
        marks = [k for k in LAG_MARKS if k <= max_lag]
        lines += ["| model | " + " | ".join(f"k={k}" for k in marks) + " | chance |",
                  "|---|" + "---:|" * (len(marks) + 1)]
        for name, r in curves.items():
            cells = [_pct(r["best"][k - 1]) if k <= len(r["best"]) else "—" for k in marks]
            lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {_pct(statistics.fmean(r['chance']))} |")
    else:
        lines.append("Not run on any model.")
    skipped = [(n, m.get("identity_at_lag")) for n, m in results.get("models", {}).items()
               if m.get("identity_at_lag") not in (None, "ran", "not asked for")]
    if skipped:  # one line per reason: a recall map's configs all share "no trained weights"
        reasons: dict[str, list[str]] = {}
        for n, why in skipped:
            reasons.setdefault(why, []).append(f"`{n}`")
        lines += [""] + [f"- skipped ({why}): {', '.join(names)}." for why, names in reasons.items()]
    return lines


def _recall_markdown(results: Mapping[str, Any]) -> list[str]:
    recall = results.get("recall") or {}
    lines = ["### Associative recall (MQAR): the map", ""]
    if not recall:
        return lines + ["Not run on any model."]
    settings = results["recall_settings"]
    task, recipe = settings["task"], settings["recipe"]
    models = results.get("models", {})
    pairs = sorted({int(n) for r in recall.values() for n in r["accuracy"]})
    values = task["vocab_size"] - task["vocab_size"] // 2
    lines += [
        f"A context of n key-value pairs, then every key again in a random order; the model must give each key's "
        f"value (vocabulary {task['vocab_size']}, {values} values: chance {_pct(settings['chance'])}). A model "
        "that copies some value of the context without matching its key scores 1/n. Every model is a fresh "
        f"one of its architecture trained with the same recipe (batch {recipe['batch_size']}, at most "
        f"{recipe['steps']:,} steps per rate, curriculum by competence, early stop), one run per rate of the "
        f"grid {{{', '.join(f'{lr:g}' for lr in recipe['lrs'])}}} declared in advance, the rate chosen on "
        f"{recipe['select_examples']} held-out sequences per pair count and the chosen model scored on "
        f"{recipe['eval_examples']} others (the same for every model); "
        + (f"seeds {', '.join(map(str, settings['seeds']))}." if len(settings.get("seeds") or []) > 1
           else f"seed {settings['seed']}."), ""]
    control, passed, control_lines = _control_status(results)
    seeds = settings.get("seeds") or [settings["seed"]]
    over = "one seed" if len(seeds) == 1 else f"mean of {len(seeds)} seeds"
    lines += [f"Each model is described on two axes: its **write rule** (how its decoding state is written: "
              f"{', '.join(WRITE_RULES.values())}) and its **state per layer** (the numbers one layer keeps to "
              f"continue a sequence, at the task's length of {_seq_len(task)} tokens; attention's grows with "
              "it)." + ("" if len(seeds) == 1 else f" Accuracies are the mean over seeds {', '.join(map(str, seeds))} "
                        "(each seed chose its own rate on its own held-out sequences) with a 95% interval "
                        "(percentile bootstrap over seeds)."), ""]
    lines += ["| model | kind | write rule | state / layer | parameters | " + " | ".join(f"{n} pairs" for n in pairs)
              + f" | steps | best lr | verdict ({over}) |",
              "|---|---|---|---:|---:|" + "---:|" * len(pairs) + "---:|---:|---|"]
    order = sorted(recall, key=lambda n: (n != control, list(KIND_LABELS).index(reader_kind(models.get(n, {})))))
    for name in order:
        r = recall[name]
        cells = [_accuracy_cell(r, n, len(seeds) > 1) for n in pairs]
        steps = f"{r['steps']:,}" + (" (stopped early)" if r["steps"] < r["max_steps"] else " (max)")
        lines.append(f"| `{name}` | {KIND_LABELS[reader_kind(models.get(name, {}))]} | "
                     f"{WRITE_RULES.get(r.get('write_rule'), '—')} | {_state_cell(r)} | {r['parameters']:,} | "
                     + " | ".join(cells) + f" | {steps} | {r['best_lr']:g} | {recall_verdict(r)} |")
    lines += ["| chance (a uniform guess among the values) | | | | | "
              + " | ".join(_pct(settings["chance"]) for _ in pairs) + " | | | |",
              "| copying a context value, keys ignored | | | | | " + " | ".join(_pct(1 / n) for n in pairs)
              + " | | | |",
              "", *control_lines, "", "#### What the map says about the traces", "",
              "- **State-scope readers** of fixed-rate traces (SPEN's `none` and `linear` predictors, and the "
              "attention predictors at `state` scope) see at position t only the current trace state: a "
              "fixed-rate mixture of the past. By the data-processing argument no reader of that state can "
              "recover more token identity than the mixture keeps, however it is trained.",
              "- **Sequence-scope readers** (the attention predictors at `sequence` scope) see the trace state of "
              "every past position, and the past states of fixed-rate traces are invertible: "
              "u_t = (h_t − (1 − a) h_{t−1}) / a. They have every input token and are not bound by the "
              "argument: a failure there is the reader's or the recipe's, not the traces'.",
              "- **Input-dependent (selective) traces** choose what to write from the input, as Mamba's gates do: "
              "the paper's escape route, outside the fixed-rate argument. Zoology: recall capacity grows with the "
              "state, so the map sets each selective state beside a bank of fixed rates with the same numbers per "
              "layer (below).", "", "In this run:", ""]
    for kind in ("state", "sequence", "selective", "other"):
        names = [n for n in order if reader_kind(models.get(n, {})) == kind]
        if names:
            lines.append(f"- {KIND_LABELS[kind]}: " + "; ".join(f"`{n}` {recall_verdict(recall[n])}"
                                                                for n in names) + ".")
    if not passed:
        lines.append("- These verdicts are not backed by a positive control that passed: "
                     + ("a model that recovers content does, but 'no lookup' says nothing." if control
                        else "only 'recovers' verdicts mean anything."))
    if len(seeds) == 1:
        lines += ["", f"Every verdict rests on one seed (seed {settings['seed']}) and one training run per learning "
                  "rate: a lookup that forms late in one seed can fail to form in another. Read them as this run's, "
                  "not as settled properties of the architectures."]
    else:
        lines += ["", f"The verdicts read the mean over {len(seeds)} seeds; the intervals beside each accuracy say how "
                  "far the seeds spread."]
    return lines + [""] + _escape_markdown(results)


def _seq_len(task: Mapping[str, Any]) -> int:
    """The recall task's sequence length (3 x its largest pair count)."""
    return 3 * max(task["pairs"])


def _accuracy_cell(r: Mapping[str, Any], n: int, interval: bool) -> str:
    if str(n) not in r["accuracy"]:
        return "—"
    cell = _pct(r["accuracy"][str(n)])
    bounds = (r.get("interval") or {}).get(str(n))
    return f"{cell} [{_pct(bounds[0])}, {_pct(bounds[1])}]" if interval and bounds else cell


def _state_cell(r: Mapping[str, Any]) -> str:
    if r.get("state_numbers") is None:
        return "—"
    return f"{r['state_numbers']:,}" + (f" (T = {r['state_seq_len']})" if r.get("state_grows_with_length") else "")


def _escape_markdown(results: Mapping[str, Any]) -> list[str]:
    """The claim row's measurement (:func:`eval.recall_arms.escape_comparison`) as a table, with its reasons."""
    escape = results.get("recall_escape") or {}
    comparisons = escape.get("comparisons") or {}
    lines = ["#### Only input-dependent selection escapes? The selective state against fixed rates, equal state", ""]
    if not comparisons:
        # The report's claim row may still carry a verdict, read from a committed sweep: say where it comes from.
        return lines + ["Not measured in this run: its map did not run both arms of any state size (a selective "
                        "state `linear-selective_ssm*` and its bank of fixed rates: `linear`, `linear-ema16`, "
                        "`linear-ema64`). The full map, 5 seeds of each pair, is its own sweep "
                        "(`hub_configs/sweeps/recall-map.yaml`); a report given one reads its claim row there."]
    lines += [f"Per seed, the accuracy of the selective state (D x N per channel, input-dependent step, key and read "
              f"vectors) minus that of a bank of N fixed rates (N x D) at {escape['pairs']} pairs, paired by seed; "
              f"95% t interval, clipped to [−1, 1]. A verdict needs ≥ {escape['min_seeds']} paired seeds and comes "
              f"from the interval only; \"equivalent\" needs the 90% interval inside ±{escape['margin']:g} and a "
              "positive control that passed. The selective state also keeps its read-out slots for the next token "
              "(S x D), counted in its state numbers.", "",
              "| N | selective (state / layer) | fixed (state / layer) | seeds | selective | fixed | copying "
              "| selective − fixed [95% interval] | verdict |", "|---:|---|---|---:|---:|---:|---:|---|---|"]
    for c in comparisons.values():
        mean = {arm: sum(c[f"{arm}_accuracy"].values()) / len(c[f"{arm}_accuracy"]) for arm in ("selective", "fixed")}
        sizes = {arm: f"{n:,}" if isinstance(n := c["state_numbers"][arm], int) else "—" for arm in mean}
        lines.append(f"| {c['state_size']} | `{c['selective']}` ({sizes['selective']}) | `{c['fixed']}` "
                     f"({sizes['fixed']}) | {len(c['seeds'])} | {_pct(mean['selective'])} | {_pct(mean['fixed'])} | "
                     f"{_pct(c['copying'])} | {c['difference']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] | "
                     f"{c['verdict']} ({c['reason']}) |")
    head = escape.get("headline")
    lines += ["", f"The claim row reads N = {head}: **{escape['verdict']}**"
              + ("" if escape.get("control_passed") else " (the positive control did not pass, or did not run)") + "."]
    return lines


def render_content_probes_markdown(results: Mapping[str, Any]) -> str:
    """The content probes as markdown (headings from ``###``): identity at lag (what it measures, a table
    at lags 1, 2, 4, ..., 64 against chance) and the recall map (every model x pair count with its steps,
    beside the positive control and chance; what state- and sequence-scope readers can recover and what
    this run shows, marked as one seed's)."""
    lines = _identity_markdown(results) + [""] + _recall_markdown(results)
    return "\n".join(lines) + "\n"


def render_content_probes_figures(results: Mapping[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """PNG figures in ``out_dir``: ``identity_at_lag`` (best-layer accuracy against lag, chance dotted)
    and ``recall`` (the map as grouped bars: one group per model, one bar per pair count, the chance line
    and the control's bar), ``recall_state`` (accuracy at 16 pairs against state numbers per layer, one line
    per write rule, for maps whose entries carry their two axes). Returns name -> path for the figures drawn
    (a probe that did not run has none)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    curves = results.get("identity_at_lag") or {}
    plt = pyplot()
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, r in curves.items():
            ax.plot(r["lags"], r["best"], label=name, marker=".", markersize=3)
        first = next(iter(curves.values()))
        ax.plot(first["lags"], first["chance"], color="gray", linestyle=":", label="chance (majority class)")
        ax.set_xscale("log", base=2)
        ax.set_xticks([k for k in LAG_MARKS if k <= len(first["lags"])],
                      [str(k) for k in LAG_MARKS if k <= len(first["lags"])])
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("lag k (tokens back)")
        ax.set_ylabel("probe accuracy, token at t-k (best layer)")
        ax.set_title("Token identity recoverable from the hidden state")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        paths["identity_at_lag"] = out_dir / "identity_at_lag.png"
        save(fig, paths["identity_at_lag"])
    recall = results.get("recall") or {}
    if recall:
        models = results.get("models", {})
        control = results.get("positive_control")
        names = sorted(recall, key=lambda n: (n != control, list(KIND_LABELS).index(reader_kind(models.get(n, {})))))
        pairs = sorted({int(n) for r in recall.values() for n in r["accuracy"]})
        width = 0.8 / len(pairs)
        fig, ax = plt.subplots(figsize=(max(6.0, 1.0 + 0.75 * len(names)), 4))
        colors = plt.get_cmap("viridis")([i / max(1, len(pairs) - 1) * 0.85 for i in range(len(pairs))])
        for j, n in enumerate(pairs):
            xs = [i + (j - (len(pairs) - 1) / 2) * width for i in range(len(names))]
            ax.bar(xs, [recall[m]["accuracy"].get(str(n), float("nan")) for m in names], width,
                   color=colors[j], label=f"{n} pairs")
        chance = (results.get("recall_settings") or {}).get("chance") or next(iter(recall.values()))["chance"]
        ax.axhline(chance, color="black", linestyle=":", linewidth=1, label=f"chance ({_pct(chance)})")
        ax.axhline(CONTROL_BAR, color="tab:red", linestyle="--", linewidth=0.8,
                   label=f"control's bar ({CONTROL_BAR:.0%})")
        ax.set_xticks(range(len(names)), [f"{m}\n(control)" if m == control else m for m in names],
                      rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("recall accuracy at the queries")
        ax.set_title("Multi-query associative recall: one recipe for every model")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(axis="y", alpha=0.3)
        paths["recall"] = out_dir / "recall.png"
        save(fig, paths["recall"])
    if any(r.get("state_numbers") for r in recall.values()):
        paths["recall_state"] = out_dir / "recall_state.png"
        _state_figure(results, paths["recall_state"])
    return paths


def _state_figure(results: Mapping[str, Any], path: Path) -> None:
    """Accuracy at 16 pairs (the map's largest count if smaller) against state numbers per layer, log x, one
    line per write rule through the mean at each state size, every arm a point with its interval; the
    copying level, chance and the control marked."""
    plt = pyplot()
    recall = results["recall"]
    control = results.get("positive_control")
    pairs = sorted({int(n) for r in recall.values() for n in r["accuracy"]})
    at = str(CONTROL_PAIRS if CONTROL_PAIRS in pairs else pairs[-1])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (rule, label) in enumerate(WRITE_RULES.items()):
        arms = {n: r for n, r in recall.items() if r.get("write_rule") == rule and r.get("state_numbers")
                and at in r["accuracy"]}
        if not arms:
            continue
        color = colors[i % len(colors)]
        for name, r in arms.items():
            x, y = r["state_numbers"], r["accuracy"][at]
            lo, hi = (r.get("interval") or {}).get(at, (y, y))
            ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color=color, fmt="*" if name == control else "o",
                        markersize=12 if name == control else 5, capsize=2)
            ax.annotate(f"{name} (control)" if name == control else name, (x, y), fontsize=6,
                        xytext=(4, 3), textcoords="offset points")
        sizes = sorted({r["state_numbers"] for r in arms.values()})
        means = [statistics.fmean(r["accuracy"][at] for r in arms.values() if r["state_numbers"] == x) for x in sizes]
        ax.plot(sizes, means, color=color, label=label, marker="")
    ax.axhline(1 / int(at), color="tab:gray", linestyle="--", linewidth=1, label=f"copying a context value (1/{at})")
    chance = (results.get("recall_settings") or {}).get("chance") or next(iter(recall.values()))["chance"]
    ax.axhline(chance, color="black", linestyle=":", linewidth=1, label=f"chance ({_pct(chance)})")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("decoding-state numbers per layer (log; attention's at the task's length)")
    ax.set_ylabel(f"recall accuracy at {at} pairs")
    ax.set_title("The recall map on two axes: write rule and state size")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    save(fig, path)
