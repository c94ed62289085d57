"""The figures of a sweep's analysis (PNG, written beside results.json by :func:`eval.sweep.runner.summarize`).

- recall map: accuracy at the pairs read against state numbers per layer, one line per write rule, 95% intervals,
  the no-lookup floor and the escape bar above it, ablation arms as hollow points; names in a legend and a table,
  not on the points (no overlapping labels);
- ladder: the loss gap against non-embedding parameters, filled where the size's gates hold, with the paper's
  point;
- ablation: each arm minus the reference against the budget, 95% intervals and the equivalence margin (each arm's
  score where no comparison was made);
- depth: each measure's attention-minus-sum difference, 95% interval and margin, one panel per measure;
- none: each arm's score against the budget, 95% intervals;
- arms: grammar_probe's own figures, one per paper row (``arms_<row>.png``, written with arms.json); data_axis: its
  own (``data_axis.png``, eval/scale/data_axis.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ema_boundary.figures import log_ticks, pyplot, save
from eval.scale import paper_point

# One colour and marker per write rule (eval.recall_arms.WRITE_RULES), from the least to the most input-dependent.
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


def _by_budget(ax: Any, lines: dict[str, dict[int, dict[str, Any]]], key: str = "mean") -> None:
    """One line per arm across budgets (x, log), each point with its 95% interval where it has one."""
    for k, (arm, points) in enumerate(sorted(lines.items())):
        xs = sorted(points)
        ys = [points[x][key] for x in xs]
        err = [[y - (points[x].get("ci95") or [y, y])[0] for x, y in zip(xs, ys, strict=True)],
               [(points[x].get("ci95") or [y, y])[1] - y for x, y in zip(xs, ys, strict=True)]]
        ax.errorbar([x * (1 + 0.03 * (k - len(lines) / 2)) for x in xs], ys, yerr=err, marker="o", capsize=3,
                    label=arm)  # nudged apart at each budget: intervals never hide one another
    ax.set_xscale("log")
    log_ticks(ax, sorted({x for points in lines.values() for x in points}))
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def ablation_figure(analysis: dict[str, Any], path: Path) -> Path | None:
    budgets = {int(b): e for b, e in analysis["budgets"].items()}
    compared = {b: e["comparisons"] for b, e in budgets.items() if e.get("comparisons")}
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    if compared:
        lines: dict[str, dict[int, dict[str, Any]]] = {}
        for b, comps in compared.items():
            for arm, c in comps.items():
                lines.setdefault(arm, {})[b] = {"mean": c["difference"], "ci95": c.get("ci95")}
        _by_budget(ax, lines)
        ax.axhline(0.0, color="black", lw=0.8)
        margin = analysis.get("equivalence_margin")
        if margin:
            ax.axhspan(-margin, margin, color="tab:green", alpha=0.12, label=f"equivalence margin ±{margin:g}")
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        ax.set(ylabel=f"arm − {analysis['reference']} (score)", title="Each arm against the reference")
    else:
        lines = {}
        for b, e in budgets.items():
            for arm, m in e["arms"].items():
                if m.get("mean") is not None:
                    lines.setdefault(arm, {})[b] = m
        if not lines:
            plt.close(fig)
            return None
        _by_budget(ax, lines)
        ax.set(ylabel="score", title="Each arm's score (too few seeds to compare)")
    ax.set_xlabel("budget (steps)")
    save(fig, path)
    return path


def none_figure(analysis: dict[str, Any], path: Path) -> Path | None:
    lines = {arm: {int(b): m for b, m in budgets.items() if m.get("mean") is not None}
             for arm, budgets in analysis["scores"].items()}
    lines = {arm: points for arm, points in lines.items() if points}
    if not lines:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    _by_budget(ax, lines)
    ax.set(xlabel="budget (steps)", ylabel="score", title="Each arm's score by budget")
    save(fig, path)
    return path


def depth_figure(analysis: dict[str, Any], path: Path) -> Path | None:
    rows: dict[str, dict[str, Any]] = {}
    for name, r in (analysis.get("table") or {}).items():  # block_share: one row per block
        for i, row in enumerate(r) if isinstance(r, list) else [(None, r)]:
            if row.get("difference") is not None:
                rows[name if i is None else f"{name} [block {i}]"] = row
    if not rows:
        return None
    # Rows that share a scale share a panel: the fractions (accuracy, shares), then each other measure alone.
    panels: dict[str, list[str]] = {}
    for name in rows:
        panels.setdefault("fraction" if "accuracy" in name or "share" in name else name, []).append(name)
    plt = pyplot()
    heights = [len(names) + 1 for names in panels.values()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 0.32 * sum(heights) + 1.2), squeeze=False,
                             gridspec_kw={"height_ratios": heights}, layout="constrained")
    for ax, (panel, names) in zip(axes[:, 0], panels.items(), strict=True):
        for y, name in enumerate(names):
            r = rows[name]
            ci = r.get("ci95") or [r["difference"]] * 2
            ax.errorbar([r["difference"]], [y], xerr=[[r["difference"] - ci[0]], [ci[1] - r["difference"]]],
                        fmt="o", color="tab:purple", capsize=3)
            if r.get("margin"):
                ax.plot([-r["margin"], r["margin"]], [y, y], color="tab:green", lw=6, alpha=0.25,
                        solid_capstyle="butt")
        ax.set_yticks(range(len(names)), [f"{n}: {rows[n].get('verdict', '')}" for n in names], fontsize=7)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.axvline(0.0, color="black", lw=0.8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(alpha=0.3, axis="x")
        ax.set_xlabel(f"attention − sum ({'fraction' if panel == 'fraction' else panel})", fontsize=8)
    axes[0, 0].set_title("Attention over depth against the residual sum (95% intervals; margins green)", fontsize=9)
    save(fig, path)
    return path


def arms_figures(analysis: dict[str, Any], folder: Path) -> list[str]:
    """grammar_probe writes the arms' figures with arms.json (:func:`grammar_probe.arms.write_summary`)."""
    return sorted(p.name for p in folder.glob("arms_*.png")) if analysis.get("complete") else []


FIGURES = {"recall_map": recall_map_figure, "ladder": ladder_figure, "ablation": ablation_figure,
           "depth": depth_figure, "none": none_figure}


def write_figures(analysis: dict[str, Any], folder: Path) -> list[str]:
    """The analysis' figures in ``folder`` (names relative to it): one for every analysis that has numbers."""
    if analysis.get("kind") == "arms":
        return arms_figures(analysis, folder)
    if analysis.get("figure"):  # drawn by the analysis itself (data_axis: eval.scale.data_axis.figure)
        return [analysis["figure"]]
    make = FIGURES.get(analysis.get("kind"))
    if make is None:
        return []
    out = make(analysis, folder / f"{analysis['kind']}.png")
    return [out.name] if out is not None else []


__all__ = ["FIGURES", "ablation_figure", "arms_figures", "depth_figure", "ladder_figure", "none_figure",
           "recall_map_figure", "write_figures"]
