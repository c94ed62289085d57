"""The perplexity gap along the data axis (issue 47): is "SPEN better" a property of a small corpus seen many times?

The sweep (``hub_configs/sweeps/data-axis.yaml``, analysis ``data_axis``) trains the ladder's pair on nested
fractions of the training documents (train.py's ``train_fraction``) at several sizes and numbers of epochs. Its
arms are named ``<setting>/<fraction>/<arch>``: a *setting* (``w128-e6``: a size at a number of epochs) holds one
*point* per fraction (``w128-e6/f1_8``), and each point the two architectures (settings ``a``, ``b``) and the plain
reference of the baseline (``<point>/reference``). This module reads them:

- every point behind the ladder's two gates (:mod:`eval.verdicts`): both models below the Kneser-Ney line of
  ``gate_ngram`` counted on the same fraction of the documents, scored on the same test tokens, and the baseline
  within ``reference_margin`` of its plain reference;
- per setting, the gap a − b of every seed at the points where both gates hold, fitted against log2 of the distinct
  training tokens each run recorded (ordinary least squares, :func:`scipy.stats.linregress`; the slope's 95% t
  interval): whether the gap narrows with more data, by how much per doubling, and where the fitted line crosses
  zero, with a percentile interval from resampling each point's seeds (:func:`fit_trend`);
- the over-fitting check: each run's training loss (the mean of its last logging window) against its validation
  loss at the end and the validation loss's rise from its lowest point, and for the pair of settings named in
  ``overfit`` (the same point at fewer and more epochs) the change of each model's test loss, paired by seed;
- ``data_axis.png``: the gap against distinct tokens, one panel per number of epochs, points where a gate fails
  hollow and left out of the fit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ema_boundary import stats
from ema_boundary.format import count
from ema_boundary.verdicts import FLAT, NARROWS, WIDENS, WORSE_THAN_REFERENCE
from eval import verdicts
from eval.results import Plan, Reads
from eval.runs import read_metrics

# A failed gate in a trend's words (the gates' names in eval.verdicts).
GATE_WORDS = {"ngram": "not all below the Kneser-Ney {order}", "reference": WORSE_THAN_REFERENCE}
BOOTSTRAP = 2000  # resamples of the seeds for the crossing's interval (settings.bootstrap)


def _interval(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "ci95": None, "n": 0, "per_seed": []}
    m = stats.mean_ci(values)
    return {"mean": m["mean"], "ci95": None if m["n"] < 2 else [float(x) for x in m["ci95"]], "n": m["n"],
            "per_seed": values}


def _seeds(results: dict[str, Any], arm: str) -> dict[str, dict[str, Any]]:
    """``{seed: result}`` of an arm at its (one) budget."""
    budgets = results["arms"][arm]["budgets"]
    return budgets.get(max(budgets, key=int), {}) if budgets else {}


def _curves(folder: Path, seeds: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per seed, its run's training loss at the end (the last logging window's mean), its validation loss at the end
    and at its lowest (from the run's metrics.jsonl; seeds whose file is not in the folder are left out)."""
    out = {}
    for seed, r in seeds.items():
        path = folder / str(r.get("run", "")) / "train" / "metrics.jsonl"
        if not r.get("run") or not path.is_file():
            continue
        m = read_metrics(path)
        if not m["loss"] or not m["val_loss"]:
            continue
        low = int(np.argmin(m["val_loss"]))
        out[seed] = {"train": m["loss"][-1], "val": m["val_loss"][-1], "val_min": m["val_loss"][low],
                     "val_min_step": m["val_step"][low]}
    return out


def _overfitting(folder: Path, seeds: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """One arm's over-fitting numbers over its seeds: validation − training loss at the end (``generalization``) and
    the validation loss's rise from its lowest point (``val_rise``: > 0 when it went up again), each with its
    interval; None where no run's metrics.jsonl is in the folder."""
    curves = _curves(folder, seeds)
    if not curves:
        return None
    c = list(curves.values())
    return {"seeds": list(curves), "train": _interval([x["train"] for x in c]), "val": _interval([x["val"] for x in c]),
            "generalization": _interval([x["val"] - x["train"] for x in c]),
            "val_rise": _interval([x["val"] - x["val_min"] for x in c]),
            "val_min_step": [x["val_min_step"] for x in c]}


def _point(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads, name: str) -> dict[str, Any] | None:
    """One point (a setting at one fraction): both models' test losses, the gap per seed, the distinct tokens the runs
    recorded, both gates with their numbers and each arm's over-fitting numbers."""
    s = plan.settings
    a_name, b_name = s.get("a", "spen"), s.get("b", "gpt2")
    order, margin = s.get("gate_ngram", "trigram"), s.get("reference_margin", 0.03)
    a_arm, b_arm, ref_arm = f"{name}/{a_name}", f"{name}/{b_name}", f"{name}/reference"
    if a_arm not in results["arms"] or b_arm not in results["arms"]:
        return None
    a, b = _seeds(results, a_arm), _seeds(results, b_arm)
    config = plan.config_of(plan.arm(a_arm))
    runs = [r for r in (*a.values(), *b.values())]
    distinct = next((r["distinct_train_tokens"] for r in runs if r.get("distinct_train_tokens")), None)
    read = next((r["tokens"] for r in runs if r.get("tokens")), None)
    split = next((r["train_split_tokens"] for r in runs if r.get("train_split_tokens")), None)
    common = [k for k in a if k in b]
    entry: dict[str, Any] = {
        "name": name, "setting": name.split("/")[0], "fraction": float(config.get("train_fraction", 1.0)),
        "steps": int(max(results["arms"][a_arm]["budgets"], key=int)) if results["arms"][a_arm]["budgets"] else None,
        "distinct_tokens": distinct, "tokens": read, "epochs": read / split if read and split else None,
        a_name: _interval([a[k]["score"] for k in a]), b_name: _interval([b[k]["score"] for k in b]),
        "scores": {a_name: {k: r["score"] for k, r in a.items()}, b_name: {k: r["score"] for k, r in b.items()}},
        "seeds": common, "gap": _interval([a[k]["score"] - b[k]["score"] for k in common]),
        "rates": {arch: {k: {"chosen": c["chosen"], "interior": c["interior"]}
                         for k, c in results["arms"][arm]["choices"].items()}
                  for arch, arm in ((a_name, a_arm), (b_name, b_arm))}}
    gates = []
    lines = reads.ngram_lines(read, a_arm) if read and a and b else None
    if lines is not None:
        entry["ngram"] = {k: lines["loss"][k] for k in ("unigram", "bigram", "trigram")}
    if a and b:  # no line: not measured, never a pass (a point is read only behind both gates)
        gates.append(verdicts.sweep_ngram_gate({a_name: entry[a_name]["mean"], b_name: entry[b_name]["mean"]},
                                               lines, order, f"Kneser-Ney {order} on the same documents"))
    ref = _seeds(results, ref_arm) if ref_arm in results["arms"] else {}
    if ref:
        entry["reference"] = _interval([r["score"] for r in ref.values()])
    if ref and b:
        gates.append(verdicts.reference_gate(b_name, entry[b_name]["mean"], entry["reference"]["mean"], margin))
    elif b and ref_arm in results["arms"]:
        gates.append(verdicts.Gate("reference", None, f"{b_name}'s plain reference has not run yet"))
    elif b:
        gates.append(verdicts.reference_gate(b_name, entry[b_name]["mean"], None, margin))
    entry["gates"] = [g.as_dict() for g in gates]
    entry["gate"] = bool(a and b) and bool(gates) and all(g.holds for g in gates)
    entry["overfitting"] = {arch: _overfitting(folder, seeds) for arch, seeds in ((a_name, a), (b_name, b))}
    return entry


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line."""
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def fit_trend(points: list[dict[str, Any]], bootstrap: int = BOOTSTRAP, seed: int = 0) -> dict[str, Any]:
    """The gap against log2 distinct tokens at ``points`` (each ``{"name", "tokens", "gaps": [per seed]}``, only
    points whose gates hold): the least-squares line through every seed's gap, its slope (nats per doubling of the
    data) with a 95% t interval on n − 2 degrees of freedom (:func:`scipy.stats.linregress`), and the reading:

    - ``narrows``: the slope's interval lies on the side that brings the fitted gap at the smallest point (the least
      data) towards 0, whether or not the line crosses 0 within the data;
    - ``widens``: on the other side; ``does not narrow``: the interval reaches 0;
    - where the line crosses 0 (``crossing``: tokens, and whether beyond, within or before the data) when the
      reading is not flat or the crossing lies within the data, with a 95% percentile interval from ``bootstrap``
      resamples of each point's seeds (a resample whose line turns the other way never crosses on that side: its
      crossing counts as infinitely far, so the bound reads "none" when more than 2.5% of them do).
    """
    pts = [p for p in points if p["gaps"] and p["tokens"]]
    x = np.concatenate([np.full(len(p["gaps"]), math.log2(p["tokens"])) for p in pts]) if pts else np.array([])
    y = np.concatenate([np.asarray(p["gaps"], dtype=float) for p in pts]) if pts else np.array([])
    out: dict[str, Any] = {"points": [p["name"] for p in pts], "n": int(len(y)),
                           "tokens": [int(p["tokens"]) for p in pts]}
    if len(pts) < 3 or len(y) < 4:
        have = (f"{count(len(pts), 'point')} with both gates holding, {count(len(y), 'seed gap')}" if pts
                else "no point with both gates holding")
        return {**out, "fit": False, "reading": None, "why": f"{have}: a trend needs at least 3 points and 4 gaps"}
    slope, intercept, (lo, hi), df = stats.slope_interval(x, y)
    at_smallest = intercept + slope * float(x.min())
    toward_zero = -1.0 if at_smallest > 0 else 1.0  # the slope's sign that brings the gap at the least data to 0
    if lo > 0 or hi < 0:
        reading = NARROWS if (lo > 0) == (toward_zero > 0) else WIDENS
    else:
        reading = FLAT
    out |= {"fit": True, "slope": slope, "slope_ci95": [lo, hi], "intercept": intercept, "df": df,
            "gap_at_smallest": at_smallest, "reading": reading, "crossing": None}
    x_cross = -intercept / slope if slope else math.inf
    within = float(x.min()) <= x_cross <= float(x.max())
    if reading == FLAT and not within:
        return out
    side = 1.0 if x_cross > float(np.median(x)) else -1.0  # the crossing lies ahead of the data (more tokens) or behind
    rng = np.random.default_rng(seed)
    xs = [np.full(len(p["gaps"]), math.log2(p["tokens"])) for p in pts]
    crossings = np.empty(bootstrap)
    for i in range(bootstrap):
        yb = np.concatenate([rng.choice(np.asarray(p["gaps"], dtype=float), len(p["gaps"])) for p in pts])
        b0, b1 = _ols(np.concatenate(xs), yb)
        crossings[i] = -b0 / b1 if b1 != 0 and np.sign(b1) == np.sign(slope) else side * math.inf
    q_lo, q_hi = np.quantile(crossings, [0.025, 0.975], method="inverted_cdf")
    where = "within the data" if within else ("beyond the data" if x_cross > float(x.max()) else "before the data")
    out["crossing"] = {
        "tokens": 2.0 ** x_cross, "where": where,
        "ci95": [None if not math.isfinite(q_lo) else 2.0 ** float(q_lo),
                 None if not math.isfinite(q_hi) else 2.0 ** float(q_hi)],
        "no_crossing_share": float(np.mean(~np.isfinite(crossings))), "bootstrap": bootstrap,
        "times_largest": 2.0 ** (x_cross - float(x.max()))}
    return out


def data_axis(plan: Plan, results: dict[str, Any], folder: Path, reads: Reads) -> dict[str, Any]:
    """The analysis ``data_axis`` (module docstring): every point behind its gates, the trend per setting, the
    over-fitting check, and ``data_axis.png``."""
    s = plan.settings
    a_name, b_name = s.get("a", "spen"), s.get("b", "gpt2")
    names = dict.fromkeys(arm.name.rsplit("/", 1)[0] for arm in plan.arms)
    points = [p for p in (_point(plan, results, folder, reads, n) for n in names) if p is not None]
    fits = {}
    order = s.get("gate_ngram", "trigram")
    for setting in dict.fromkeys(p["setting"] for p in points):
        mine = [p for p in points if p["setting"] == setting]
        if len({p["fraction"] for p in mine}) < 2:  # one fraction: a point of the over-fitting check, not a trend
            continue
        used = [{"name": p["name"], "tokens": p["distinct_tokens"], "gaps": p["gap"]["per_seed"]}
                for p in mine if p["gate"]]
        fit = fit_trend(used, int(s.get("bootstrap", BOOTSTRAP)))
        epochs = [p["epochs"] for p in mine if p["epochs"]]
        fit["setting"], fit["epochs"] = setting, sum(epochs) / len(epochs) if epochs else None
        # Points that ran and failed a gate (a point still to run is neither in the fit nor left out of it).
        fit["excluded"] = [{"name": p["name"], "why": "; ".join(g["why"] for g in p["gates"] if g["holds"] is not True),
                            "failed": [GATE_WORDS.get(g["name"], g["name"]).format(order=order)
                                       if g["holds"] is False else f"{g['name']} gate not measured"
                                       for g in p["gates"] if g["holds"] is not True]}
                           for p in mine if not p["gate"] and p[a_name]["n"] and p[b_name]["n"]]
        fit["better"] = _better(mine, a_name, b_name)
        fits[setting] = fit
    out: dict[str, Any] = {"a": a_name, "b": b_name, "gate_ngram": order,
                           "reference_margin": s.get("reference_margin", 0.03), "points": points, "fits": fits,
                           "overfit": _overfit_check(s.get("overfit") or {}, points, a_name, b_name)}
    if any(p["distinct_tokens"] and p["gap"]["mean"] is not None for p in points):
        out["figure"] = figure(out, folder / "data_axis.png").name
    return out


def _better(points: list[dict[str, Any]], a: str, b: str) -> dict[str, Any] | None:
    """Which model is better at every gated point of a setting (the gap's interval on one side of 0), and up to how
    many distinct tokens; None where the points disagree or an interval reaches 0."""
    gated = [p for p in points if p["gate"] and p["gap"]["ci95"] and p["distinct_tokens"]]
    if not gated:
        return None
    sides = {("a" if p["gap"]["ci95"][1] < 0 else "b" if p["gap"]["ci95"][0] > 0 else None) for p in gated}
    if len(sides) != 1 or None in sides:
        return None
    side = sides.pop()
    return {"arch": a if side == "a" else b, "up_to": max(p["distinct_tokens"] for p in gated),
            "from": min(p["distinct_tokens"] for p in gated), "points": len(gated)}


def _overfit_check(declared: dict[str, Any], points: list[dict[str, Any]], a: str, b: str) -> dict[str, Any] | None:
    """The declared over-fitting comparison (settings ``overfit: {shorter: POINT, longer: POINT, regularised:
    POINT}``): each model's test loss from the shorter to the longer run paired by seed, with both runs' validation
    − training loss and the longer run's validation rise; the regularised point's gap beside the longer one's."""
    by_name = {p["name"]: p for p in points}
    shorter, longer = by_name.get(declared.get("shorter")), by_name.get(declared.get("longer"))
    if not declared or shorter is None or longer is None:
        return None
    out: dict[str, Any] = {"shorter": shorter["name"], "longer": longer["name"], "models": {}}
    for arch in (a, b):
        before, after = shorter["scores"][arch], longer["scores"][arch]
        change = _interval([after[k] - before[k] for k in after if k in before])  # paired by seed
        of = longer["overfitting"].get(arch) or {}
        rise = of.get("val_rise") or {}
        # Over-fitting: the test loss went up with more epochs while the validation loss rose from its lowest point
        # (each interval above 0; one seed: the means).
        up = change["ci95"][0] > 0 if change["ci95"] else (change["mean"] or 0) > 0
        rose = rise["ci95"][0] > 0 if rise.get("ci95") else (rise.get("mean") or 0) > 0
        out["models"][arch] = {"test_change": change, "shorter": shorter["overfitting"].get(arch),
                               "longer": of or None, "over_fits": bool(change["n"] and up and rose)}
    reg = by_name.get(declared.get("regularised"))
    if reg is not None:
        out["regularised"] = {"name": reg["name"], "gap": reg["gap"], "gate": reg["gate"], "longer_gap": longer["gap"],
                              a: reg[a], b: reg[b]}
    return out


# ---------------------------------------------------------------------------------------------
# Words (results.md and the report's perplexity row read the same sentences)
# ---------------------------------------------------------------------------------------------

_NAMES = {"spen": "SPEN", "gpt2": "GPT-2"}


def tokens_text(n: float, digits: int = 3) -> str:
    """``676k`` / ``5.7M`` (``digits`` significant digits)."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            short = f"{n / size:.{digits}g}"
            return f"{n / size:.0f}{unit}" if "e" in short else f"{short}{unit}"  # 506k, not 5.1e+02k
    return f"{n:.0f}"


def trend_text(fit: dict[str, Any], a: str = "spen", b: str = "gpt2") -> str:
    """One setting's trend in words: the regime (who is better, up to how many distinct tokens), the slope per
    doubling with its interval, and where the line crosses zero (or that it does not narrow)."""
    epochs = f"{fit['epochs']:.3g}" if fit.get("epochs") else None
    setting = fit.get("setting", "") + (f" ({epochs} epoch{'s' * (epochs != '1')})" if epochs else "")
    left_out = "; ".join(f"{e['name']}: {', '.join(e.get('failed') or ['a gate fails'])}"
                         for e in fit.get("excluded") or [])
    left_out = f" (left out: {left_out})" if left_out else ""
    if not fit.get("fit"):
        return f"{setting}: no trend ({fit.get('why', 'not fitted')}){left_out}"
    better = fit.get("better")
    regime = (f"{_NAMES.get(better['arch'], better['arch'])} better at <= {tokens_text(better['up_to'])} distinct "
              f"tokens (every gated point from {tokens_text(better['from'])})" if better
              else "neither model better at every point")
    lo, hi = fit["slope_ci95"]
    if fit["reading"] in (NARROWS, WIDENS):  # the interval is on one side of 0: said as a size, with its interval
        small, large = sorted((abs(lo), abs(hi)))
        trend = (f"the gap {fit['reading']} by {abs(fit['slope']):.3f} [{small:.3f}, {large:.3f}] nats per doubling "
                 "of the data")
    else:
        trend = (f"the gap does not narrow (slope {fit['slope']:+.3f} [{lo:+.3f}, {hi:+.3f}] nats per doubling of "
                 "the data)")
    c = fit.get("crossing")
    if c:
        lo_c, hi_c = c["ci95"]
        # An extrapolation: two significant digits.
        bounds = f"[{tokens_text(lo_c, 2) if lo_c else 'none'}, {tokens_text(hi_c, 2) if hi_c else 'none'}]"
        trend += (f"; the fitted line crosses 0 at ~{tokens_text(c['tokens'], 2)} tokens {bounds} ({c['where']}"
                  + (f", {c['times_largest']:.2g}x the largest point" if c["where"] == "beyond the data" else "")
                  + ")")
    return f"{setting}: {regime}; {trend}; {len(fit['points'])} points, {fit['n']} seed gaps{left_out}"


def overfit_text(check: dict[str, Any] | None) -> str | None:
    """The over-fitting check in words: each model's test loss change with more epochs and its validation rise."""
    if not check:
        return None
    parts = []
    for arch, m in check["models"].items():
        c, of = m["test_change"], m.get("longer") or {}
        if c["mean"] is None:
            continue
        ci = f" [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]" if c["ci95"] else ""
        rise = of.get("val_rise") or {}
        gen = of.get("generalization") or {}
        extra = (f", validation {rise['mean']:+.3f} above its lowest, validation − training {gen['mean']:.3f}"
                 if rise.get("mean") is not None and gen.get("mean") is not None else "")
        parts.append(f"{_NAMES.get(arch, arch)} test loss {c['mean']:+.3f}{ci}{extra}: "
                     + ("over-fits" if m["over_fits"] else "no over-fitting shown"))
    reg = check.get("regularised")
    if reg and reg["gap"]["mean"] is not None and check.get("longer"):
        parts.append(f"regularised `{reg['name']}` gap {reg['gap']['mean']:+.3f} against "
                     f"{reg['longer_gap']['mean']:+.3f}" + ("" if reg["gate"] else " (a gate fails)"))
    return f"over-fitting, `{check['shorter']}` → `{check['longer']}`: " + "; ".join(parts) if parts else None


def markdown(analysis: dict[str, Any]) -> list[str]:
    """results.md's section of the analysis."""
    a, b = analysis["a"], analysis["b"]
    lines = ["", "## The gap along the data axis", "",
             f"| point | distinct tokens | epochs | {a} | {b} | gap a − b | gates |", "|---|---|---|---|---|---|---|"]
    for p in analysis["points"]:
        gates = "; ".join(g["why"] for g in p["gates"]) or "not run yet"
        gap = p["gap"]
        shown = "–" if gap["mean"] is None else f"{gap['mean']:+.4f}" + (
            f" [{gap['ci95'][0]:+.4f}, {gap['ci95'][1]:+.4f}]" if gap["ci95"] else "")
        lines.append(f"| {p['name']} | {p['distinct_tokens'] or '–'} | "
                     f"{'–' if p['epochs'] is None else format(p['epochs'], '.2f')} | "
                     f"{'–' if p[a]['mean'] is None else format(p[a]['mean'], '.4f')} | "
                     f"{'–' if p[b]['mean'] is None else format(p[b]['mean'], '.4f')} | {shown} | "
                     f"{'' if p['gate'] else '**not read**: '}{gates} |")
    lines += ["", "Trend per setting (least squares on every seed's gap against log2 distinct tokens):", ""]
    lines += [f"- {trend_text(f, a, b)}" for f in analysis["fits"].values()] or ["- no setting has two fractions"]
    over = overfit_text(analysis.get("overfit"))
    if over:
        lines += ["", f"- {over}"]
    if analysis.get("figure"):
        lines += ["", f"![the gap against distinct training tokens]({analysis['figure']})"]
    return lines


# ---------------------------------------------------------------------------------------------
# The figure
# ---------------------------------------------------------------------------------------------

SIZE_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")
EPOCH_MARKERS = ("o", "^", "D", "v")  # one per number of epochs among a trend's settings drawn on one axis


def draw_settings(ax: Any, analysis: dict[str, Any], settings: list[str], size: float = 6) -> None:
    """``settings`` of the analysis on ``ax``: each point's gap with its interval against its distinct training tokens
    (hollow where a gate fails), a colour per model size; a setting with a trend (``fits``) as circles (triangles,
    diamonds for a second and third number of epochs on the same axis) with its fitted line, solid over the data and
    dashed beyond it to its zero crossing, the crossing's interval along 0; a setting at one fraction as squares. The
    data-axis figure and the report's perplexity panel draw with it."""
    points = [p for p in analysis["points"] if p["distinct_tokens"] and p["gap"]["mean"] is not None]
    sizes = list(dict.fromkeys(p["setting"].split("-")[0] for p in analysis["points"]))
    epochs = list(dict.fromkeys(_epochs_label(s) for s in settings if s in analysis["fits"]))
    for setting in settings:
        color = SIZE_COLORS[sizes.index(setting.split("-")[0]) % len(SIZE_COLORS)]
        fit = analysis["fits"].get(setting)
        marker = (EPOCH_MARKERS[epochs.index(_epochs_label(setting)) % len(EPOCH_MARKERS)] if fit is not None
                  else "s")
        mine = sorted((p for p in points if p["setting"] == setting), key=lambda p: p["distinct_tokens"])
        for p in mine:
            g = p["gap"]
            err = None if not g["ci95"] else [[g["mean"] - g["ci95"][0]], [g["ci95"][1] - g["mean"]]]
            ax.errorbar([p["distinct_tokens"]], [g["mean"]], yerr=err, fmt=marker, color=color, capsize=size / 2,
                        ms=size, mfc=color if p["gate"] else "white", lw=size / 6)
        ax.plot([], [], marker + ("-" if fit is not None else ""), color=color, ms=size, label=setting)
        if fit and fit.get("fit"):
            x = np.log2([min(fit["tokens"]), max(fit["tokens"])])
            ax.plot(2.0 ** x, fit["intercept"] + fit["slope"] * x, "-", color=color, lw=size / 5)
            c = fit.get("crossing")
            if c and c["where"] == "beyond the data" and c["times_largest"] <= 1024:
                ahead = np.log2([max(fit["tokens"]), c["tokens"]])
                ax.plot(2.0 ** ahead, fit["intercept"] + fit["slope"] * ahead, "--", color=color, lw=size / 6)
                ax.plot([c["tokens"]], [0.0], "x", color=color, ms=size + 2)
                lo, hi = c["ci95"]  # the crossing's interval along the zero line (an open end: to the edge)
                ax.plot([lo or c["tokens"], hi or c["tokens"] * 4], [0.0, 0.0], "-", color=color, lw=size / 2,
                        alpha=0.35)
    ax.axhline(0.0, color="black", lw=0.8)
    ax.set_xscale("log")
    # Ticks at the fractions' distinct tokens (thousands): a log axis's own labels overlap between 1e5 and 1e6.
    ticks = sorted({p["distinct_tokens"] for p in points})
    if ticks:
        ax.set_xticks(ticks, [f"{t / 1000:,.0f}k" for t in ticks])
        ax.tick_params(axis="x", which="minor", labelbottom=False)


def figure(analysis: dict[str, Any], path: Path) -> Path:
    """``data_axis.png``: the gap a − b against distinct training tokens (log), one panel per number of epochs (the
    setting's name after its size: ``w128-e6`` -> ``e6``), :func:`draw_settings`; a setting at one fraction (the
    over-fitting check's longer run, its regularised twin) in the first panel, beside the trend of its size."""
    from ema_boundary.figures import pyplot, save  # delayed: matplotlib loads only when a figure is drawn

    ran = list(dict.fromkeys(p["setting"] for p in analysis["points"]
                             if p["distinct_tokens"] and p["gap"]["mean"] is not None))
    trends = [t for t in ran if t in analysis["fits"]]
    singles = [t for t in ran if t not in analysis["fits"]]
    labels = list(dict.fromkeys(_epochs_label(t) for t in trends)) or ["–"]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(labels), figsize=(4.8 * len(labels), 4), squeeze=False, sharey=True)
    for ax, label in zip(axes[0], labels, strict=True):
        draw_settings(ax, analysis, [t for t in trends if _epochs_label(t) == label]
                      + (singles if label == labels[0] else []))
        ax.set(xlabel="distinct training tokens (log)", title=f"{label}: hollow = a gate fails")
        ax.grid(alpha=0.3, which="both")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower right")
    axes[0][0].set_ylabel(f"{analysis['a']} − {analysis['b']} test loss (nats; < 0: {analysis['a']} better)")
    save(fig, path)
    return path


def _epochs_label(setting: str) -> str:
    """``w128-e6`` -> ``e6``; a setting without a dash is its own label."""
    return setting.split("-", 1)[1] if "-" in setting else setting


__all__ = ["BOOTSTRAP", "data_axis", "draw_settings", "figure", "fit_trend", "markdown",
           "overfit_text", "tokens_text", "trend_text"]
