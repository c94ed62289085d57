"""The figures of a sweep's analysis (PNG, written beside results.json by :func:`eval.sweep.runner.summarize`).

- recall map: accuracy at the pairs read against state numbers per layer, one line per write rule, 95% intervals,
  the no-lookup floor and the escape bar above it, ablation arms as hollow points; names in a legend and a table,
  not on the points (no overlapping labels);
- ladder: the loss gap against non-embedding parameters, filled where the size's gates hold, with the paper's
  point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ema_boundary.figures import log_ticks, pyplot, save

# One colour and marker per write rule (eval.recall.WRITE_RULES), from the least to the most input-dependent.
RULE_STYLE = {"fixed": ("tab:gray", "o"), "fixed_decay_weighted_write": ("tab:pink", "h"),
              "learned_lti": ("tab:brown", "v"), "input_gated_diagonal": ("tab:olive", "D"),
              "input_dependent_outer_product": ("tab:blue", "s"), "selective_scan": ("tab:green", "*"),
              "linear_attention": ("tab:purple", "P"), "attention": ("tab:red", "^")}


def recall_map_figure(analysis: dict[str, Any], path: Path) -> Path | None:
    longer = {c["longer"] for c in analysis.get("budget_check") or []}  # the budget check: a table row, not a point
    ablated = {a["without"] for a in analysis.get("ablation") or []}  # an ablation arm: a hollow point, not on a line
    arms = {k: v for k, v in analysis["arms"].items() if v["accuracy"]["mean"] is not None and k not in longer}
    if not arms:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    by_rule: dict[str, list[tuple[float, dict, str]]] = {}
    for name, a in arms.items():
        x = a["state_numbers"]
        if name in ablated:
            color, marker = RULE_STYLE.get(a["write_rule"], ("black", "x"))
            y = a["accuracy"]["mean"]
            ci = a["accuracy"]["ci95"] or [y, y]
            ax.errorbar([x], [y], yerr=[[y - ci[0]], [ci[1] - y]], color=color, marker=marker, mfc="white", capsize=3,
                        ls="none", label=f"ablation: {name}")
            continue
        by_rule.setdefault(a["write_rule"] or "other", []).append((x, a, name))
    for rule, points in by_rule.items():
        points.sort(key=lambda p: p[0])
        color, marker = RULE_STYLE.get(rule, ("black", "x"))
        xs = [p[0] for p in points]
        ys = [p[1]["accuracy"]["mean"] for p in points]
        err = [[y - (p[1]["accuracy"]["ci95"] or [y, y])[0] for y, p in zip(ys, points, strict=True)],
               [(p[1]["accuracy"]["ci95"] or [y, y])[1] - y for y, p in zip(ys, points, strict=True)]]
        label = points[0][1]["write_rule_label"] + ": " + ", ".join(p[2] for p in points)
        ax.errorbar(xs, ys, yerr=err, color=color, marker=marker, capsize=3, lw=1.5, label=label,
                    ls="-" if len(points) > 1 else "none")
    level = analysis["floor"]["name"] if analysis.get("floor") else f"copying level 1/{analysis['pairs']}"
    ax.axhline(analysis["copying"], color="black", ls=":", lw=1, label=level)
    if analysis.get("copy_bar"):  # what an arm must pass to count as escaping (declared before the run)
        ax.axhline(analysis["copy_bar"], color="black", ls="--", lw=0.8,
                   label=f"escape bar: + {100 * (analysis['copy_bar'] - analysis['copying']):.0f} points")
    ax.set(xscale="log", ylim=(-0.02, 1.02), xlabel="state numbers per layer (at T = 3 x pairs; attention's grows)",
           ylabel=f"accuracy at {analysis['pairs']} pairs", title="Associative recall by write rule and state size")
    xs = [a["state_numbers"] for a in arms.values()]
    log_ticks(ax, [t for t in (100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000) if min(xs) / 2 <= t <= max(xs) * 2])
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    save(fig, path)
    return path


def ladder_figure(analysis: dict[str, Any], path: Path) -> Path | None:
    from eval.scale import paper_point

    sizes = [s for s in analysis["sizes"] if s["gap"]["mean"] is not None and analysis["a"] in s["parameters"]]
    if not sizes:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    at_x: dict[int, int] = {}  # sizes drawn at one x (the same width at two budgets): labels stacked, not overlaid
    for s in sizes:
        x = s["parameters"][analysis["a"]]["non_embedding"]
        g = s["gap"]
        err = None if not g["ci95"] else [[g["mean"] - g["ci95"][0]], [g["ci95"][1] - g["mean"]]]
        ax.errorbar([x], [g["mean"]], yerr=err, fmt="o", color="tab:purple", capsize=3,
                    mfc="tab:purple" if s["gate"] else "white")
        k = at_x[x] = at_x.get(x, -1) + 1
        ax.annotate(s["name"], (x, g["mean"]), xytext=(5, -10 + 11 * k), textcoords="offset points", fontsize=8)
    paper = paper_point()
    ax.plot([paper["parameters"]], [paper["gap"]], "*", ms=14, color="tab:red",
            label=f"paper: 130M on C4, perplexity ratio {paper['perplexity_ratio']:.1f}x")
    ax.plot([], [], "o", color="tab:purple", label="gates hold (n-gram line, plain reference)")
    ax.plot([], [], "o", color="tab:purple", mfc="white", label="a gate fails: not testable")
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set(xscale="log", xlabel="non-embedding parameters (paper: total)",
           ylabel=f"{analysis['a']} − {analysis['b']} loss (nats)",
           title="The perplexity gap against size (> 0: SPEN worse)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="center right")
    save(fig, path)
    return path


FIGURES = {"recall_map": recall_map_figure, "ladder": ladder_figure}


def write_figures(analysis: dict[str, Any], folder: Path) -> list[str]:
    """The analysis' figures in ``folder`` (names relative to it)."""
    make = FIGURES.get(analysis.get("kind"))
    if make is None:
        return []
    out = make(analysis, folder / f"{analysis['kind']}.png")
    return [out.name] if out is not None else []


__all__ = ["FIGURES", "ladder_figure", "recall_map_figure", "write_figures"]
