"""``report.md`` and the PNG plots, rendered from a ``results.json`` dictionary."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ema_boundary.figures import pyplot, save
from grammar_probe.names import MODELS

COLOURS = {"spcn_probe": "tab:blue", "bigru": "tab:orange", "control": "tab:grey", "causal_gru": "tab:green"}


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _markdown(results: dict) -> str:
    lines = [
        "# Grammar probe: SPCN trace probe vs BiGRU",
        "",
        f"seed {results['seed']}, quick={results['quick']}, {results['train_sentences']} training sentences, "
        f"{results['seconds']:.0f} s. Accuracy in % over all tokens of each split.",
        "",
        "| split | SPCN probe | BiGRU | control | causal GRU | SPCN/BiGRU |",
        "|---|---|---|---|---|---|",
    ]
    for split, scores in results["splits"].items():
        ratio = results["ratio_spcn_over_bigru"][split]
        lines.append(
            f"| {split} | " + " | ".join(_pct(scores[m]["accuracy"]) for m in MODELS)
            + f" | {'—' if ratio is None else f'{ratio:.3f}'} |"
        )
    lines += ["", "## Structural vs lexical roles", "",
              "| split | kind | tokens | SPCN probe | BiGRU | control | causal GRU |", "|---|---|---|---|---|---|---|"]
    for split, kinds in results["by_kind"].items():
        for kind, s in kinds.items():
            lines.append(f"| {split} | {kind} | {s['tokens']} | " + " | ".join(_pct(s[m]) for m in MODELS) + " |")
    lines += ["", "## Targets (the paper's rows)", "", "| target | paper | measured | met |", "|---|---|---|---|"]
    for name, t in results["targets"].items():
        lines.append(f"| {name} | {t['target']:.3f} | {t['measured']:.3f} | {'yes' if t['met'] else 'NO'} |")
    for split, roles in results["per_role"].items():
        lines += ["", f"## Per role: {split}", "",
                  "| role | kind | tokens | SPCN probe | BiGRU | control | causal GRU |",
                  "|---|---|---|---|---|---|---|"]
        for role, s in roles.items():
            lines.append(
                f"| {role} | {s['kind']} | {s['tokens']} | " + " | ".join(_pct(s[m]) for m in MODELS) + " |"
            )
    return "\n".join(lines) + "\n"


def _bars(ax, labels: list[str], values: dict[str, list[float]], title: str) -> None:
    x = np.arange(len(labels))
    width = 0.8 / len(MODELS)
    for i, m in enumerate(MODELS):
        ax.bar(x + (i - (len(MODELS) - 1) / 2) * width, values[m], width, label=m, color=COLOURS[m])
    ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("accuracy")
    ax.set_title(title)


def write_report(results: dict, out_dir: Path) -> list[Path]:
    """Write report.md, per_role_<split>.png and structural_vs_lexical.png into ``out_dir``."""
    plt = pyplot()
    out_dir = Path(out_dir)
    written = [out_dir / "report.md"]
    written[0].write_text(_markdown(results), encoding="utf-8")
    for split, roles in results["per_role"].items():
        names = list(roles)
        fig, ax = plt.subplots(figsize=(11, 4))
        _bars(ax, [f"{n} ({roles[n]['kind'][0]})" for n in names],
              {m: [roles[n][m] for n in names] for m in MODELS}, f"Per-role accuracy: {split}")
        ax.legend(fontsize=8, loc="lower left")
        fig.tight_layout()
        path = out_dir / f"per_role_{split}.png"
        save(fig, path, dpi=100)
        written.append(path)
    labels, values = [], {m: [] for m in MODELS}
    for split, kinds in results["by_kind"].items():
        for kind, s in kinds.items():
            labels.append(f"{split}\n{kind}")
            for m in MODELS:
                values[m].append(s[m])
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(labels)), 4.5))
    _bars(ax, labels, values, "Structural vs lexical roles")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    path = out_dir / "structural_vs_lexical.png"
    save(fig, path, dpi=100)
    written.append(path)
    return written
