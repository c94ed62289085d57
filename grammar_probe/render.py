"""The structure section of the report, as markdown and PNG figures, from a ``results.json`` dictionary.

Public (called by the project report after ``python -m grammar_probe run``):

- :func:`render_structure_markdown` (results) -> markdown text;
- :func:`render_structure_figures` (results, out_dir) -> {figure name: PNG path};
- :func:`write_report` (results, out_dir): ``report.md`` plus the figures, as a run folder holds them.

Nothing here computes a result: every number and verdict is read from ``results``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ema_boundary.figures import pyplot, save
from grammar_probe.ceilings import KINDS
from grammar_probe.names import MODEL_LABELS, MODELS

__all__ = ["paper_row_value", "render_structure_figures", "render_structure_markdown", "write_report"]

COLOURS = {
    "majority_word": "tab:brown", "window": "tab:grey", "plain_ema": "tab:olive", "spcn_frozen": "tab:cyan",
    "spcn": "tab:blue", "causal_gru": "tab:green", "bigru": "tab:orange",
}
KIND_ORDER = ("structural", "local", "lexical", "ambiguous")


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def _ci(s: dict | None, points: bool = False) -> str:
    """``mean [lo, hi]`` in % (or in points for differences)."""
    if not s:
        return "—"
    lo, hi = s["ci95"]
    sign = "+" if points else ""
    def fmt(v: float) -> str:
        return f"{100 * v:{sign}.1f}"

    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{fmt(s['mean'])}"
    return f"{fmt(s['mean'])} [{fmt(lo)}, {fmt(hi)}]"


def _ratio(s: dict) -> str:
    lo, hi = s["ci95"]
    return f"{s['mean']:.3f} [{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else f"{s['mean']:.3f}"


def paper_row_value(name: str, row: dict, value: dict) -> str:
    """One value of a paper row of results.json, formatted as the row reads (ratio, %, or points)."""
    if name == "ratio_within_a":
        return _ratio(value)
    if isinstance(row["paper"], str):
        return _ci(value, points=True) + " points"
    return _ci(value) + " %"


def _paper_table(results: dict) -> list[str]:
    lines = ["| row | paper | SPCN: mean [95% CI] | verdict | the same measure for the shortcuts |",
             "|---|---|---|---|---|"]
    for name, row in results["paper"].items():
        paper = row["paper"]
        if isinstance(paper, str):
            paper_s = paper
        else:
            paper_s = f"{paper:.2f}" if name == "ratio_within_a" else f"{100 * paper:.1f} %"
        shortcuts = "; ".join(f"{m} {paper_row_value(name, row, c['value'])} ({c['verdict']})"
                              for m, c in row.get("shortcuts", {}).items())
        ours = paper_row_value(name, row, row["ours"])
        lines.append(f"| {row['description']} | {paper_s} | {ours} | **{row['verdict']}** | {shortcuts} |")
    return lines


def _kinds(results: dict) -> list[str]:
    return [k for k in KIND_ORDER if k in results.get("kinds", KIND_ORDER)]


def _split_table(results: dict, split: str) -> list[str]:
    """Models x (all, each kind): mean [CI], with the split's ceilings in the header of each column."""
    ceil = results.get("split_ceilings", {}).get(split, {})
    cols = [("all", ceil.get("overall", {}))] + [(k, ceil.get("by_kind", {}).get(k, {})) for k in _kinds(results)]
    header = ["model"]
    for name, c in cols:
        extra = f"; best window {_pct(c['window_best'])}" if "window_best" in c else ""
        header.append(f"{name} (ceiling causal {_pct(c.get('causal'))} / bidir. {_pct(c.get('bidirectional'))}{extra})")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for m in MODELS:
        r = results["splits"][split][m]
        cells = [_ci(r["accuracy"])] + [_ci(r["by_kind"].get(k)) for k, _ in cols[1:]]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def _per_role_table(results: dict, split: str) -> list[str]:
    head = ["role", "kind", "tokens", "causal", "bidir."] + list(MODELS)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for role, r in results["per_role"][split].items():
        c = r.get("ceiling", {})
        cells = [role, r["kind"], str(r["tokens"]), _pct(c.get("causal")), _pct(c.get("bidirectional"))]
        lines.append("| " + " | ".join(cells + [_pct(r[m]["mean"]) for m in MODELS]) + " |")
    return lines


def _ceilings_table(results: dict) -> list[str]:
    """Per role: its kind at each window cap, the exact ceilings and the window tagger at every k."""
    k_best = results.get("best_k")
    ce = results["ceilings"]
    ks = sorted(int(k) for k in next(iter(ce.values()))["window_k"])
    caps = (results.get("ceiling_thresholds") or {}).get("kind_caps", [])
    head = (["role", "kind"] + [f"kind, cap {c}" for c in caps] + ["causal", "bidir.", "causal, nouns/verbs <unk>"]
            + [f"k={k}" for k in ks] + [f"best (k={k_best})", "± at k=12"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for role, c in ce.items():
        w = {int(k): v for k, v in c["window_k"].items()}
        by_cap = {int(k): v for k, v in c.get("kind_by_cap", {}).items()}
        se = {int(k): v for k, v in c.get("window_k_se", {}).items()}
        cells = ([role, c["kind"]] + [by_cap.get(int(cap), "") for cap in caps]
                 + [_pct(c["causal"]), _pct(c["bidirectional"]), _pct(c["causal_unseen"])]
                 + [_pct(w.get(k)) for k in ks] + [_pct(c["window_best"]), _pct(se.get(12))])
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _kind_sensitivity(results: dict) -> list[str]:
    """How many roles get each kind at each window cap."""
    ce = results["ceilings"]
    caps = (results.get("ceiling_thresholds") or {}).get("kind_caps", [])
    if not caps or not all("kind_by_cap" in c for c in ce.values()):
        return []
    lines = ["| window cap | " + " | ".join(KINDS) + " | structural roles |", "|" + "---|" * (len(KINDS) + 2)]
    for cap in caps:
        kinds = {r: {int(k): v for k, v in c["kind_by_cap"].items()}.get(int(cap)) for r, c in ce.items()}
        counts = [str(sum(v == k for v in kinds.values())) for k in KINDS]
        lines.append(f"| {cap} | " + " | ".join(counts) + " | "
                     + ", ".join(r for r, v in kinds.items() if v == "structural") + " |")
    return lines


def _window_gap_table(gap: dict) -> list[str]:
    ks = sorted(int(k) for k in gap["by_k"])
    by_k = {int(k): v for k, v in gap["by_k"].items()}
    fresh = {int(k): v for k, v in gap.get("fresh_sample_by_k", {}).items()}
    lines = ["| k | " + " | ".join(map(str, ks)) + " |", "|" + "---|" * (len(ks) + 1),
             "| window tagger, test_within_a | " + " | ".join(_pct(by_k[k]["window"]) for k in ks) + " |",
             "| gap to the causal ceiling (points) | " + " | ".join(f"{100 * by_k[k]['gap']:.1f}" for k in ks) + " |"]
    if fresh:
        lines += ["| gap on the fresh sample, held out (± s.e.) | "
                  + " | ".join(f"{100 * fresh[k]['gap']:.1f} ± {100 * fresh[k]['se']:.2f}" for k in ks) + " |",
                  "| gap on the fresh sample, in sample (an over-fitted window: lower bound on the gap) | "
                  + " | ".join(f"{100 * (gap['causal_ceiling'] - fresh[k]['window_in_sample']):.1f}" for k in ks)
                  + " |"]
    return lines


LEARNING_COLUMNS = {"spcn_minus_spcn_frozen": "SPCN − frozen twin", "spcn_frozen_minus_plain_ema":
                    "frozen twin − plain EMA", "spcn_minus_plain_ema": "SPCN − plain EMA"}


def _learning_table(results: dict) -> list[str]:
    head = ["split", "kind"] + [f"{label} (points): conclusion" for label in LEARNING_COLUMNS.values()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split, kinds in results["learning"].items():
        for kind, c in kinds.items():
            cells = [f"{_ci(c[k], points=True)}: {c[k]['conclusion']}" for k in LEARNING_COLUMNS if k in c]
            lines.append(f"| {split} | {kind} | " + " | ".join(cells) + " |")
    return lines


def _counterfactual_table(results: dict) -> list[str]:
    cf = results.get("counterfactual")
    if not cf:
        return []
    ceiling = cf.get("ceiling") or {}
    lines = [f"Subject/object roles ({', '.join(cf['roles'])}); causal ceiling on the counterfactual split "
             f"{_pct(ceiling.get('causal'))} %, bidirectional {_pct(ceiling.get('bidirectional'))} %.", "",
             "| model | within A | counterfactual | drop (points, paired) | conclusion |", "|---|---|---|---|---|"]
    for m, r in cf["models"].items():
        lines.append(f"| {m} | {_ci(r['within_a'])} | {_ci(r['counterfactual'])} | {_ci(r['drop'], points=True)} | "
                     f"{r['drop']['conclusion']} |")
    if cf.get("spcn_drop_minus"):
        lines += ["", "SPCN's drop minus each other model's drop (points, paired; negative: SPCN loses less; Holm "
                  "across the models):", "", "| model | SPCN's drop − model's drop | conclusion |", "|---|---|---|"]
        lines += [f"| {m} | {_ci(c, points=True)} | {c['conclusion']} |" for m, c in cf["spcn_drop_minus"].items()]
    return lines


def _ratios_table(results: dict) -> list[str]:
    r = results.get("ratios")
    if not r:
        return []
    rows = [("SPCN / BiGRU (the paper's row)", "spcn_over_bigru"), ("SPCN / causal GRU", "spcn_over_causal_gru"),
            ("causal GRU / BiGRU", "causal_gru_over_bigru"), ("SPCN / causal ceiling", "spcn_over_causal_ceiling"),
            ("causal cap: causal ceiling / BiGRU (no causal reader's ratio can exceed it)", "causal_cap_over_bigru")]
    lines = [f"On `{r['split']}`, all tokens; the exact causal ceiling is {_pct(r.get('causal_ceiling'))} %.", "",
             "| ratio | mean [95% CI] |", "|---|---|"]
    lines += [f"| {label} | {_ratio(r[key])} |" for label, key in rows if key in r]
    return lines


def _hebbian_lines(results: dict) -> list[str]:
    h = results.get("hebbian_learning")
    if not h:
        return []
    return [f"On `{h['split']}`, {h['kind']} roles, declared margin ±{100 * h['margin']:.0f} point: SPCN − frozen twin "
            f"{_ci(h['spcn_minus_spcn_frozen'], points=True)} ({h['spcn_minus_spcn_frozen']['conclusion']}); "
            f"SPCN − plain EMA {_ci(h['spcn_minus_plain_ema'], points=True)} "
            f"({h['spcn_minus_plain_ema']['conclusion']}). **Verdict: {h['verdict']}.**"]


def _training_table(results: dict) -> list[str]:
    t = results.get("training")
    if not t:
        return []
    lines = ["| model | budget (epochs) | patience | epochs run per seed | best epoch per seed | budget reached |",
             "|---|---|---|---|---|---|"]
    for m, r in t.items():
        if m == "rule":
            continue
        lines.append(f"| {m} | {r['max_epochs']} | {r['patience']} | {', '.join(map(str, r['epochs_run']))} | "
                     f"{', '.join(map(str, r['best_epoch']))} | {sum(bool(b) for b in r['budget_reached'])} of "
                     f"{len(r['budget_reached'])} |")
    return [t["rule"] + ".", "", *lines]


def render_structure_markdown(results: dict) -> str:
    """The report's structure section (markdown, headings from level 2) rendered from ``results.json``."""
    size, proto = results["size"], results["protocol"]
    lines = [
        "## Structure: SPCN traces vs shortcuts, GRU taggers and decidability ceilings",
        "",
        f"{size['seeds']} seeds ({', '.join(map(str, results['seeds']))}); per seed {size['train_sentences']} training "
        f"sentences ({'a disjoint' if results.get('train_subsets_disjoint', True) else 'an overlapping'} subset of "
        "`train`), "
        f"SPCN {size['spcn_epochs']} epoch(s); every training token dropped to `{proto['unk']}` at rate "
        f"{proto['word_dropout']} (whatever its word or role) while fitting, the same copy for every model; "
        + ("never-seen words are `<unk>` for every model. " if proto.get("unseen", "unk") == "unk" else
           "never-seen words get fresh random codes in every model. ")
        + "Accuracy in %, mean over seeds with a 95% bootstrap interval over seeds and test sentences; "
        "differences are paired by seed and sentence, Holm-adjusted within each table. "
        f"Run time {results['seconds']:.0f} s.",
        "",
        *(["**Quick run (`--quick`): fewer training and evaluation sentences, a smoke test; every model still "
           "trains to its early-stopping point. Its verdicts are not the experiment's (they depend on the "
           "labelled data size: see the arms); cite the default run.**", ""]
          if results.get("quick") else []),
        "### The paper's rows",
        "",
        *_paper_table(results),
        "",
        "Verdicts follow from the intervals: *met* if the interval lies at or above the paper's value "
        "(strictly above 0 for the \"SPCN above BiGRU\" rows), *refuted* if it lies below, otherwise "
        "*not resolved at this budget*; *not reachable on this grammar* when the paper's value lies beyond the "
        "row's causal cap (the measure with a perfect causal reader in SPCN's place).",
    ]
    gap = results.get("window_gap")
    if gap:
        lines += ["", "### Do the structural roles need structure?", "",
                  f"On `{gap['split']}`, structural roles ({gap['tokens']} tokens; kinds with windows up to "
                  f"k = {gap.get('max_k', 6)}): causal ceiling {_pct(gap['causal_ceiling'])} %; the window tagger "
                  f"(tables from a fresh sample) at every k below; its smallest gap is "
                  f"{100 * gap.get('min_gap', gap['gap_ceiling']):.1f} points "
                  f"(k = {gap.get('min_gap_k', gap['best_k'])}); the trained `window` baseline "
                  f"{_ci(gap['trained_window'])} %, gap "
                  f"{100 * gap['gap_trained_window']:.1f} points. Required at every k: ≥ "
                  f"{100 * gap['required_gap']:.0f} points: {'passes' if gap['passes'] else 'FAILS'}."]
        if "by_k" in gap:
            lines += ["", *_window_gap_table(gap)]
    lines += ["", "### Every model on every split", "",
              "Each column's header holds the split's exact ceilings for those tokens (causal: best possible reader of "
              "the prefix; bidirectional: of the whole sentence)."]
    for split in results["splits"]:
        lines += ["", f"**{split}**", "", *_split_table(results, split)]
    margin = next(iter(results["learning"].values()))["all"]["spcn_minus_spcn_frozen"]["margin"]
    lines += ["", "### Does SPCN's learning matter?", "",
              "SPCN minus its frozen twin (same network, same initial weights, no Hebbian learning), the frozen "
              "twin minus a plain EMA of the word codes, and SPCN minus that plain EMA, paired by seed. "
              "*higher*/*lower*: the 95% interval excludes 0; *equivalent*: the 90% interval lies inside "
              f"±{100 * margin:.0f} "
              "point (two one-sided tests).", "", *_learning_table(results)]
    if results.get("hebbian_learning"):
        lines += ["", "**Does SPCN's Hebbian learning matter? (claim row)**", "", *_hebbian_lines(results)]
    if results.get("ratios"):
        lines += ["", "### The ratios a causal reader can reach", "", *_ratios_table(results)]
    if results.get("counterfactual"):
        lines += ["", "### Counterfactual: word->role shortcuts reversed", "", *_counterfactual_table(results)]
    if results.get("training"):
        lines += ["", "### Training: every supervised model early-stopped alike", "", *_training_table(results)]
    for split in results["per_role"]:
        lines += ["", f"### Per role: {split}", "", *_per_role_table(results, split)]
    lines += ["", "### Ceilings and kinds (fresh grammar-A sample)", "", *_ceilings_table(results),
              "", "Kinds at each window cap (the kind rule with windows up to the cap):", "",
              *_kind_sensitivity(results)]
    return "\n".join(lines) + "\n"


def _bars(ax, labels: list[str], means: dict, errs: dict, ceilings: list[float | None] | None = None) -> None:
    x = np.arange(len(labels))
    width = 0.8 / len(MODELS)
    for i, m in enumerate(MODELS):
        ax.bar(x + (i - (len(MODELS) - 1) / 2) * width, means[m], width, yerr=errs[m], label=m, color=COLOURS[m],
               capsize=1.5, error_kw={"elinewidth": 0.7})
    if ceilings:
        for xi, c in zip(x, ceilings, strict=True):
            if c is not None:
                ax.hlines(c, xi - 0.45, xi + 0.45, colors="black", linestyles="--", linewidth=1)
    ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("accuracy")


def _err(s: dict) -> tuple[float, float]:
    lo, hi = s["ci95"]
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return 0.0, 0.0
    return s["mean"] - lo, hi - s["mean"]


def render_structure_figures(results: dict, out_dir: str | Path) -> dict[str, Path]:
    """Draw the structure section's figures as PNG files in ``out_dir``; returns {name: path}.

    - ``structure_by_kind``: every model per split and role kind, 95% intervals, causal ceiling dashed;
    - ``structure_per_role``: within A, per role, with causal (dashed) and bidirectional (dotted) ceilings;
    - ``ceilings``: per role, the causal and bidirectional ceilings and the window tagger for k = 1..6;
    - ``learning``: SPCN minus its frozen twin per split and kind, 95% intervals.
    """
    plt = pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}

    labels, ceil, means, errs = [], [], {m: [] for m in MODELS}, {m: [[], []] for m in MODELS}
    for split, models in results["splits"].items():
        for kind in _kinds(results):
            if kind not in models["spcn"]["by_kind"]:
                continue
            labels.append(f"{split.removeprefix('test_')}\n{kind}")
            ceil.append(results.get("split_ceilings", {}).get(split, {}).get("by_kind", {}).get(kind, {}).get("causal"))
            for m in MODELS:
                s = models[m]["by_kind"][kind]
                means[m].append(s["mean"])
                lo, hi = _err(s)
                errs[m][0].append(lo)
                errs[m][1].append(hi)
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(labels)), 4.8))
    _bars(ax, labels, means, errs, ceil)
    ax.set_title("Accuracy by split and role kind (dashed: causal ceiling)")
    ax.legend(fontsize=7, ncol=4, loc="lower left")
    fig.tight_layout()
    paths["structure_by_kind"] = out_dir / "structure_by_kind.png"
    save(fig, paths["structure_by_kind"])

    split = "test_within_a" if "test_within_a" in results["per_role"] else next(iter(results["per_role"]))
    roles = results["per_role"][split]
    names = list(roles)
    fig, ax = plt.subplots(figsize=(12, 4.8))
    _bars(ax, [f"{n}\n({roles[n]['kind']})" for n in names], {m: [roles[n][m]["mean"] for n in names] for m in MODELS},
          {m: np.array([_err(roles[n][m]) for n in names]).T for m in MODELS},
          [roles[n].get("ceiling", {}).get("causal") for n in names])
    x = np.arange(len(names))
    bid = [roles[n].get("ceiling", {}).get("bidirectional") for n in names]
    ax.scatter([xi for xi, b in zip(x, bid, strict=True) if b is not None], [b for b in bid if b is not None],
               marker="_", s=300, color="black", label="bidirectional ceiling")
    ax.set_title(f"Per-role accuracy, {split} (dashed: causal ceiling; bar marker: bidirectional ceiling)")
    ax.legend(fontsize=7, ncol=4, loc="lower left")
    fig.tight_layout()
    paths["structure_per_role"] = out_dir / "structure_per_role.png"
    save(fig, paths["structure_per_role"])

    ce = results["ceilings"]
    names = list(ce)
    fig, ax = plt.subplots(figsize=(12, 4.5))
    x = np.arange(len(names))
    ks = sorted(int(k) for k in ce[names[0]]["window_k"])
    for k in [k for k in ks if k in (1, 2, 4, 6, 8, 10, 12)]:
        ax.plot(x, [ce[n]["window_k"].get(str(k), ce[n]["window_k"].get(k)) for n in names], marker=".", linewidth=0.8,
                color=plt.cm.Greys(0.25 + 0.055 * k), label=f"window k={k}")
    ax.plot(x, [ce[n]["causal"] for n in names], marker="o", color="tab:red", label="causal")
    ax.plot(x, [ce[n]["bidirectional"] for n in names], marker="x", color="tab:purple", label="bidirectional")
    ax.set_xticks(x, [f"{n}\n({ce[n]['kind']})" for n in names], rotation=45, ha="right", fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("best achievable accuracy")
    ax.set_title("Decidability ceilings per role (fresh grammar-A sample)")
    ax.legend(fontsize=7, ncol=3, loc="lower left")
    fig.tight_layout()
    paths["ceilings"] = out_dir / "ceilings.png"
    save(fig, paths["ceilings"])

    rows = [(split, kind, c["spcn_minus_spcn_frozen"]) for split, kinds in results["learning"].items()
            for kind, c in kinds.items()]
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(rows)), 4))
    x = np.arange(len(rows))
    ax.errorbar(x, [100 * r[2]["mean"] for r in rows], yerr=100 * np.array([_err(r[2]) for r in rows]).T, fmt="o",
                color="tab:blue", capsize=2)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [f"{s.removeprefix('test_')}\n{k}" for s, k, _ in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("SPCN − frozen twin (points)")
    ax.set_title("What SPCN's Hebbian learning adds (95% intervals, paired by seed)")
    fig.tight_layout()
    paths["learning"] = out_dir / "learning.png"
    save(fig, paths["learning"])
    return paths


def write_report(results: dict, out_dir: Path) -> list[Path]:
    """Write ``report.md`` and the figures of :func:`render_structure_figures` into ``out_dir``."""
    out_dir = Path(out_dir)
    figures = render_structure_figures(results, out_dir)
    legend = "\n".join(f"- `{m}`: {MODEL_LABELS[m]}" for m in MODELS)
    text = ("# Grammar probe: the structure experiment\n\n" + legend + "\n\n"
            + render_structure_markdown(results).replace("## ", "# ", 1) + "\n"
            + "\n".join(f"![{name}]({path.name})" for name, path in figures.items()) + "\n")
    (out_dir / "report.md").write_text(text, encoding="utf-8")
    return [out_dir / "report.md", *figures.values()]
