"""One picture of the boundary (``figures/boundary.png``), drawn from report.json alone: a panel per axis, each
claim's verdict written on the panel that holds its numbers.

- structure kept: SPCN on each of the paper's grammar rows, against the shortcuts and the causal ceiling, all as
  points from the paper's value (right of 0: the paper's value is reached);
- content lost: associative recall by write rule and decoding-state size;
- the perplexity gap against scale: SPEN − GPT-2 along the committed ladder, this run's pair and the paper's; with a
  committed data-axis sweep, an inset of the gap against distinct training tokens (its trend per setting);
- readers and traces: each arm minus the reference at every budget of the committed ablation;
- depth: token identity at the last layer, the residual sum against Attention Residuals.

A panel whose data the report lacks says "not run" instead of vanishing.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ema_boundary.figures import log_ticks, pyplot, save
from ema_boundary.verdicts import (
    MET,
    NEITHER_ESCAPES,
    NOT_REPRODUCED,
    NOT_RESOLVED,
    NOT_RUN,
    NOT_TESTABLE,
    OPPOSITE,
    PARTLY_MET,
    PARTLY_REFUTED,
    REFUTED,
    Verdict,
)
from eval.report.claim_rows import one_screen, short_name, short_verdict
from eval.scale.data_axis import draw_settings

__all__ = ["VERDICT_COLORS", "boundary_figure", "draw"]

# Keyed by the verdicts' short words (what the one-screen table prints).
VERDICT_COLORS = {Verdict(v).short: c for v, c in (
    (MET, "#1a7f37"), (PARTLY_MET, "#4d9221"), (REFUTED, "#c0392b"), (PARTLY_REFUTED, "#d35400"),
    (OPPOSITE, "#c0392b"), (NOT_REPRODUCED, "#c0392b"), (NOT_RESOLVED, "#b7950b"), (NEITHER_ESCAPES, "#c0392b"),
    (NOT_TESTABLE, "#7f8c8d"), (NOT_RUN, "#7f8c8d"))}
SHORTCUTS = {"majority_word": ("majority word", "x", "#7f8c8d"), "window": ("k-token window", "^", "#2e86c1"),
             "plain_ema": ("plain EMA", "s", "#27ae60"), "spcn_frozen": ("frozen SPCN", "D", "#e67e22")}
ROW_LABELS = {"ratio_within_a": "within A: SPCN/BiGRU (x100)", "transfer_b_accuracy": "transfer to grammar B",
              "deep_accuracy": "deeper embedding", "novel_structural_spcn_minus_bigru": "unseen words: SPCN − BiGRU",
              "counterfactual_spcn_minus_bigru": "counterfactual: SPCN − BiGRU",
              "hebbian_learning": "Hebbian learning: SPCN − frozen"}


def _rows(report: dict) -> dict[str, dict]:
    """claim id -> the row the one-screen table shows (for a pair, under both ids)."""
    out = {}
    for row, also in one_screen(report.get("claims") or []):
        out[row["id"]] = row
        if also is not None:
            out[also["id"]] = row
    return out


def _title(ax: Any, title: str, rows: dict[str, dict], ids: tuple[str, ...]) -> None:
    """The panel's title and, under it, each of its claims with its verdict (one line each, in the verdict's
    colour), between the title and the plot."""
    seen: list[dict] = []
    for claim_id in ids:
        row = rows.get(claim_id)
        if row is not None and row not in seen:
            seen.append(row)
    for i, row in enumerate(reversed(seen)):
        verdict = short_verdict(row)
        ax.text(0, 1.02 + 0.075 * i, f"{short_name(row)}: {verdict}", transform=ax.transAxes, fontsize=7.2,
                color=VERDICT_COLORS.get(verdict.split(":")[0], "black"), fontweight="bold", va="bottom", ha="left")
    ax.text(0, 1.04 + 0.075 * len(seen), title, transform=ax.transAxes, fontsize=10.5, va="bottom", ha="left")


def _not_run(ax: Any, what: str) -> None:
    ax.text(0.5, 0.55, "not run", transform=ax.transAxes, ha="center", va="center", fontsize=16, color="#7f8c8d")
    ax.text(0.5, 0.42, what, transform=ax.transAxes, ha="center", va="center", fontsize=8, color="#7f8c8d")
    ax.set_xticks([])
    ax.set_yticks([])


def _mean(v: Any) -> float | None:
    return v.get("mean") if isinstance(v, dict) else v if isinstance(v, (int, float)) else None


def _structure(ax: Any, report: dict, rows: dict[str, dict]) -> None:
    paper = (report.get("structure") or {}).get("paper") or {}
    ids = [r for r in ROW_LABELS if r in paper or r == "hebbian_learning"]
    items = []
    for row_id in ids:
        if row_id == "hebbian_learning":
            c = ((report.get("structure") or {}).get("hebbian_learning") or {}).get("spcn_minus_spcn_frozen") or {}
            if "mean" in c:
                items.append((row_id, 0.0, c, {}, None))
            continue
        r = paper[row_id]
        target = r.get("target", r.get("paper"))
        target = target if isinstance(target, (int, float)) else 0.0
        items.append((row_id, target, r.get("ours") or {}, r.get("shortcuts") or {}, _mean(r.get("causal_cap"))))
    if not items:
        _not_run(ax, "no grammar_probe results in this report")
        return
    for y, (_, target, ours, shortcuts, cap) in enumerate(reversed(items)):
        scale = 100.0
        if "mean" in ours:
            lo, hi = ours.get("ci95") or (ours["mean"], ours["mean"])
            ax.errorbar(scale * (ours["mean"] - target), y, xerr=[[scale * (ours["mean"] - lo)],
                                                                   [scale * (hi - ours["mean"])]],
                        fmt="o", color="black", ms=7, capsize=3, zorder=5, label="SPCN probe" if y == 0 else None)
        for name, (label, marker, color) in SHORTCUTS.items():
            value = _mean((shortcuts.get(name) or {}).get("value"))
            if value is not None:
                ax.plot(scale * (value - target), y + 0.18, marker, color=color, ms=6, alpha=0.85, label=label)
        if cap is not None:
            ax.plot(scale * (cap - target), y - 0.18, "|", color="#8e44ad", ms=14, mew=2, label="causal ceiling")
    ax.axvline(0, color="#c0392b", lw=1.2, ls="--")
    ax.text(0, len(items) - 0.35, "the paper's value", color="#c0392b", fontsize=7.5, ha="center")
    labels = []
    for row_id, *_ in reversed(items):
        row = rows.get(row_id)
        labels.append(f"{ROW_LABELS[row_id]}: {short_verdict(row)}" if row is not None else ROW_LABELS[row_id])
    ax.set_yticks(range(len(items)), labels, fontsize=8)
    for tick, (row_id, *_) in zip(ax.get_yticklabels(), reversed(items), strict=True):
        if row_id in rows:
            tick.set_color(VERDICT_COLORS.get(short_verdict(rows[row_id]), "black"))
            tick.set_fontweight("bold")
    ax.set_ylim(-0.6, len(items) - 0.1)
    ax.set_xlabel("points from the paper's value (right of the dashed line: reached)", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", ncol=2, framealpha=0.9)
    ax.text(0, 1.02, "Structure kept? SPCN on the paper's grammar rows (verdicts on the left)",
            transform=ax.transAxes, fontsize=10.5, va="bottom", ha="left")


RULE_STYLE = {"fixed": ("fixed EMA rates", "o", "#c0392b"), "learned_lti": ("learned rates", "s", "#e67e22"),
              "fixed_decay_weighted_write": ("fixed decay, weighted write (RWKV)", "h", "#d35400"),
              "input_gated_diagonal": ("input-gated rates", "D", "#b7950b"),
              "input_dependent_outer_product": ("S6 read one step late", "^", "#2e86c1"),
              "selective_scan": ("S6 in Mamba's block", "P", "#117a65"),
              "linear_attention": ("linear attention sums", "v", "#8e44ad"),
              "attention": ("attention over tokens", "*", "#1a7f37")}


def _drawn_arms(a: dict) -> dict[str, dict]:
    """A recall analysis' arms that are points on a write-rule line: those with a state size, less the budget
    check's longer runs and the ablation's arms (each is a table row, not a point)."""
    longer = {c["longer"] for c in a.get("budget_check") or []}
    ablated = {r["without"] for r in a.get("ablation") or []}
    return {n: r for n, r in (a.get("arms") or {}).items()
            if (r.get("state_numbers") or 0) > 0 and n not in longer and n not in ablated}


def _recall_sweep(ax: Any, sweep: dict, rows: dict[str, dict], larger: dict | None = None) -> None:
    """The committed recall-map sweep: accuracy at its pairs against state numbers per layer, one line per write
    rule, with intervals over seeds and the floor (the measured no-lookup floor; 1 / pairs in older summaries).
    ``larger``, the same protocol at a larger state (``recall_map_n64``), adds its arms to the same lines; an arm
    both sweeps name (the control) is drawn from the headline sweep."""
    a = sweep["analysis"]
    arms = {**(_drawn_arms(larger["analysis"]) if larger else {}), **_drawn_arms(a)}
    for rule in dict.fromkeys(r["write_rule"] for r in arms.values()):
        label, marker, color = RULE_STYLE.get(rule, (rule, "o", "#7f8c8d"))
        pts = sorted(((r["state_numbers"], r["accuracy"]) for r in arms.values() if r["write_rule"] == rule
                      and r["accuracy"].get("mean") is not None), key=lambda p: p[0])
        if not pts:
            continue
        xs, ys = [x for x, _ in pts], [100 * acc["mean"] for _, acc in pts]
        err = [[100 * (acc["mean"] - (acc.get("ci95") or [acc["mean"]] * 2)[0]) for _, acc in pts],
               [100 * ((acc.get("ci95") or [acc["mean"]] * 2)[1] - acc["mean"]) for _, acc in pts]]
        ax.errorbar(xs, ys, yerr=err, fmt=marker + "-", color=color, label=label, ms=6, capsize=2, lw=1)
    copying = a.get("copying")
    if copying:
        ax.axhline(100 * copying, color="gray", ls=":", lw=1)
        ax.text(0.98, 100 * copying + 1, "no-lookup floor" if a.get("floor") else "copying level",
                transform=ax.get_yaxis_transform(), ha="right", va="bottom", fontsize=7, color="gray")
    ax.set_xscale("log")
    log_ticks(ax)
    ax.set_ylim(0, 112)
    sources = f"sweeps `{sweep['source']}` and `{larger['source']}`" if larger else f"sweep `{sweep['source']}`"
    ax.set_xlabel(f"decoding-state numbers per layer (log)\ncommitted {sources}", fontsize=8)  # 2 lines: fits
    ax.set_ylabel(f"recall accuracy at {a.get('pairs')} pairs (%)", fontsize=8)
    ax.legend(fontsize=6.5, loc="center right", framealpha=0.9)
    _title(ax, "Content lost? Recall by write rule and state", rows, ("recall_lost", "selection_escapes_recall"))


def _recall(ax: Any, report: dict, rows: dict[str, dict]) -> None:
    if sweep := (report.get("sweeps") or {}).get("recall_map"):
        return _recall_sweep(ax, sweep, rows, (report.get("sweeps") or {}).get("recall_map_n64"))
    recall = ((report.get("probes") or {}).get("recall")) or {}
    described = {n: r for n, r in recall.items() if r.get("write_rule") and r.get("state_numbers")}
    if not described:
        _not_run(ax, "no recall map with write rules and state sizes")
        _title(ax, "Content lost? Recall by write rule and state", rows, ("recall_lost", "selection_escapes_recall"))
        return
    pairs = max(int(n) for r in described.values() for n in r["accuracy"])
    for rule, (label, marker, color) in RULE_STYLE.items():
        arms = [r for r in described.values() if r["write_rule"] == rule]
        if arms:
            ax.scatter([r["state_numbers"] for r in arms], [100 * r["accuracy"][str(pairs)] for r in arms],
                       marker=marker, s=70 if marker == "*" else 40, color=color, label=label, alpha=0.85,
                       edgecolors="white", linewidths=0.5, zorder=3)
    ax.axhline(95, color="#1a7f37", ls="--", lw=1)
    ax.text(0.02, 96, "recovers (95%)", transform=ax.get_yaxis_transform(), ha="left", va="bottom", fontsize=7,
            color="#1a7f37")
    low = [r for r in described.values() if r["accuracy"][str(pairs)] < 0.5]
    if low:  # the readers of fixed, learned and gated rates sit on one spot: say how many, not a cloud of markers
        top = max(r["accuracy"][str(pairs)] for r in low)
        spot = min(low, key=lambda r: r["state_numbers"])
        ax.annotate(f"{len(low)} models, all ≤ {100 * top:.0f}%", (spot["state_numbers"], 100 * top),
                    textcoords="offset points", xytext=(12, 14), fontsize=7, arrowprops={"arrowstyle": "-",
                                                                                          "color": "gray"})
    chance = next(iter(described.values())).get("chance")
    if chance:
        ax.axhline(100 * chance, color="gray", ls=":", lw=1)
    ax.set_xscale("log")
    log_ticks(ax)
    ax.set_ylim(0, 112)
    ax.set_xlabel("decoding-state numbers per layer (log)", fontsize=8)
    ax.set_ylabel(f"recall accuracy at {pairs} pairs (%)", fontsize=8)
    ax.legend(fontsize=6.5, loc="center right", framealpha=0.9)
    _title(ax, "Content lost? Recall by write rule and state", rows, ("recall_lost", "selection_escapes_recall"))


def _ladder_points(report: dict) -> list[dict]:
    """Each size's name, SPEN's total parameters, the gap and its gate, from the committed ladder sweep the plan
    names (none without one)."""
    sweep = (report.get("sweeps") or {}).get("ladder")
    if not sweep:
        return []
    a = sweep["analysis"]
    return [{"name": e["name"], "params": ((e.get("parameters") or {}).get(a["a"]) or {}).get("total"),
             "gap": e["gap"], "gate": e.get("gate")} for e in a.get("sizes") or []
            if ((e.get("parameters") or {}).get(a["a"]) or {}).get("total") and e["gap"].get("mean") is not None]


def _scale(ax: Any, report: dict, rows: dict[str, dict]) -> None:
    content = report.get("content") or {}
    drawn = False
    points = sorted(_ladder_points(report), key=lambda s: s["params"])
    # Neighbouring sizes sit close on a log axis and one width at two budgets shares its x: the names go in two
    # staggered rows below the points, evenly spaced in size order, each with a leader line to its point.
    span = [math.log10(points[0]["params"]) - 0.25, math.log10(points[-1]["params"]) + 0.25] if points else [0, 0]
    for i, s in enumerate(points):
        gap, params = s["gap"], s["params"]
        lo, hi = gap.get("ci95") or (gap["mean"], gap["mean"])
        face = "#2e86c1" if s["gate"] else "white"
        ax.errorbar(params, gap["mean"], yerr=[[gap["mean"] - lo], [hi - gap["mean"]]], fmt="o", color="#2e86c1",
                    mfc=face, ms=7, capsize=3, label="committed ladder" if not drawn else None)
        x = 10 ** (span[0] + (span[1] - span[0]) * i / max(1, len(points) - 1))
        ax.annotate(s["name"], (params, gap["mean"]), xytext=(x, -0.72 if i % 2 == 0 else -0.98), fontsize=6.5,
                    ha="center", va="center", arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5"})
        drawn = True
    cmp_ = content.get("comparison") or {}
    if "difference" in cmp_ and "regime" in content:
        lo, hi = cmp_.get("ci95") or (cmp_["difference"],) * 2
        ax.errorbar(content["regime"]["parameters"], cmp_["difference"], yerr=[[cmp_["difference"] - lo],
                                                                                [hi - cmp_["difference"]]],
                    fmt="s", color="#7f8c8d", mfc="white", ms=7, capsize=3, label="this run's pair")
        drawn = True
    drawn = _data_axis_inset(ax, report) or drawn
    if not drawn:
        _not_run(ax, "no language-model pair in this report")
        _title(ax, "The perplexity gap against scale", rows, ("perplexity_gap_ladder", "gap_on_recall"))
        return
    paper = math.log(report.get("paper", {}).get("perplexity_ratio", 260 / 33))
    ax.plot(130e6, paper, "*", color="#c0392b", ms=14, label="the paper (130M, C4)")
    ax.axhline(0, color="black", lw=0.8)
    ax.text(1.0, 0.05, "SPEN worse ↑", transform=ax.get_yaxis_transform(), ha="right", fontsize=7)
    ax.text(1.0, -0.12, "SPEN better ↓", transform=ax.get_yaxis_transform(), ha="right", va="top", fontsize=7)
    ax.set_xscale("log")
    log_ticks(ax)
    ax.set_xlim(3e4, 6e8)
    ax.set_ylim(-1.2, 2.6)
    ax.set_xlabel("SPEN parameters (total, log); hollow: a ladder size whose gates fail", fontsize=8)
    ax.set_ylabel("SPEN − GPT-2 loss (nats)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.9)
    _title(ax, "The perplexity gap against scale", rows, ("perplexity_gap_ladder", "gap_on_recall"))


def _data_axis_inset(ax: Any, report: dict) -> bool:
    """The committed data-axis sweep in the perplexity panel (an inset between 0 and the paper's point): each
    setting's gap against distinct training tokens with its fitted trend and zero crossing, a point whose gate fails
    hollow (eval.scale.data_axis.draw_settings); False where the plan names no such sweep or nothing has run."""
    a = ((report.get("sweeps") or {}).get("data_axis") or {}).get("analysis") or {}
    trends = list(dict.fromkeys(p["setting"] for p in a.get("points") or []
                                if p.get("distinct_tokens") and p["gap"].get("mean") is not None
                                and p["setting"] in (a.get("fits") or {})))
    if not trends:
        return False
    inset = ax.inset_axes([0.54, 0.5, 0.38, 0.27])  # between the ladder's points, the legend and the paper's star
    draw_settings(inset, a, trends, size=3.5)
    inset.set_title("the data axis (committed sweep)", fontsize=6.5)
    inset.set_xlabel("distinct training tokens (log)", fontsize=6)
    inset.set_ylabel(f"{a['a']} − {a['b']} (nats)", fontsize=6)
    inset.tick_params(labelsize=5.5)
    lo, hi = inset.get_ylim()  # room below the points for the legend: "best" hid the lowest ones
    inset.set_ylim(lo - 0.45 * (hi - lo), hi)
    inset.legend(fontsize=5, loc="lower center", ncol=2, framealpha=0.8)
    return True


def _budget_axis(report: dict, axis: str) -> dict | None:
    """One ablation axis as points: per arm (steps, comparison with the reference, the reference's gate holding),
    from the committed ablation sweep the plan names (None: it names none)."""
    sweep = (report.get("sweeps") or {}).get(f"ablation_{axis}")
    if not sweep:
        return None
    a = sweep["analysis"]
    budgets = sorted((a.get("budgets") or {}).items(), key=lambda kv: int(kv[0]))
    arms = dict.fromkeys(arm for _, e in budgets for arm in e.get("comparisons") or {})
    return {"reference": a["reference"], "equivalence_margin": a.get("equivalence_margin"),
            "arms": {arm: [(int(k), e["comparisons"][arm], (e.get("gate") or {}).get("holds") is True)
                           for k, e in budgets if arm in (e.get("comparisons") or {})] for arm in arms}}


def _budgets(ax: Any, report: dict, rows: dict[str, dict]) -> None:
    colors = iter(["#2e86c1", "#8e44ad", "#e67e22", "#1a7f37", "#c0392b", "#7f8c8d"])
    drawn = False
    margin = None
    steps_seen: set[int] = set()
    for axis in ("predictor", "trace"):
        a = _budget_axis(report, axis)
        if not a:
            continue
        margin = a.get("equivalence_margin", margin)
        for arm, pts in a["arms"].items():
            color = next(colors)
            ax.plot([p[0] for p in pts], [p[1]["difference"] for p in pts], "-", color=color, lw=1, alpha=0.6)
            steps_seen.update(p[0] for p in pts)
            for steps, c, below in pts:
                lo, hi = c["ci95"]
                ax.errorbar(steps, c["difference"], yerr=[[c["difference"] - lo], [hi - c["difference"]]], fmt="o",
                            color=color, mfc=color if below else "white", ms=6, capsize=2)
            ax.plot([], [], "o-", color=color, label=f"{arm} − {a['reference']}")
            drawn = True
    if not drawn:
        _not_run(ax, "no committed ablation at several budgets")
        _title(ax, "Readers and traces at several budgets", rows, ("readers_identical_budgets",
                                                                   "selection_escapes_budgets"))
        return
    if margin:
        ax.axhspan(-margin, margin, color="#1a7f37", alpha=0.12, label=f"equivalence margin ±{margin:g}")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    log_ticks(ax, sorted(steps_seen))
    ax.set_xlabel("training steps (log); hollow: reference above the bigram", fontsize=8)
    ax.set_ylabel("arm − reference loss (nats)", fontsize=8)
    ax.legend(fontsize=6.5, loc="lower left", framealpha=0.9)
    _title(ax, "Readers and traces at several budgets", rows,
           ("readers_identical_budgets", "selection_escapes_budgets"))


def _depth(ax: Any, report: dict, rows: dict[str, dict]) -> None:
    sweep = (report.get("sweeps") or {}).get("depth")
    depth = sweep["analysis"] if sweep else report.get("depth")  # the committed depth sweep, when the plan names one
    acc = ((depth or {}).get("table") or {}).get("token_accuracy")
    if not acc:
        _not_run(ax, "the plan has no depth section")
        _title(ax, "Depth: residual sum vs selection", rows, ("depth_selection_recovers", "depth_selection_loss"))
        return
    bars = [("residual sum", acc["add"], "#c0392b"), ("Attention Residuals", acc["attention"], "#1a7f37")]
    ax.bar([b[0] for b in bars], [100 * b[1] for b in bars], color=[b[2] for b in bars], width=0.55)
    for i, (_, value, _) in enumerate(bars):
        ax.text(i, 100 * value + 2, f"{100 * value:.1f}%", ha="center", fontsize=8)
    ax.set_ylim(0, 125)
    ax.set_ylabel("token identity at the last layer (%)", fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    _title(ax, "Depth: residual sum vs selection", rows, ("depth_selection_recovers", "depth_selection_loss"))


def boundary_figure(report: dict, path: Path) -> Path:
    """Draw ``figures/boundary.png`` from ``report`` (report.json's content); returns ``path``."""
    fig = draw(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    save(fig, path, dpi=110)
    return path


def draw(report: dict) -> Any:
    """The figure itself (matplotlib), five panels."""
    plt = pyplot()
    rows = _rows(report)
    fig = plt.figure(figsize=(14, 9.4))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1], hspace=0.5, wspace=0.3)
    _structure(fig.add_subplot(grid[0, :2]), report, rows)
    _recall(fig.add_subplot(grid[0, 2]), report, rows)
    _scale(fig.add_subplot(grid[1, 0]), report, rows)
    _budgets(fig.add_subplot(grid[1, 1]), report, rows)
    _depth(fig.add_subplot(grid[1, 2]), report, rows)
    fig.suptitle("Where fixed-decay EMA context holds and where it fails: each claim's verdict on its axis",
                 fontsize=12, x=0.01, ha="left")
    return fig
