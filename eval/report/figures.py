"""The report's figures (``figures/``): drawn from report.json (the learning curves, the picture of the boundary, the
structure and probe figures) or copied from the stages' folders (the ablations', the depth experiment's, eval.gap's);
index.md (:mod:`eval.report.render`) links them by the names returned here."""

from __future__ import annotations

import math
import shutil
import statistics
from pathlib import Path

from ema_boundary.figures import pyplot, save
from eval.probes.render import render_content_probes_figures
from eval.report.boundary import boundary_figure
from eval.report.render import LABELS
from grammar_probe.render import render_structure_figures


def figures(report: dict, work: Path, fig_dir: Path) -> dict[str, str]:
    """Draw the report's figures (and copy the ablations'); returns name -> path relative to the report."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: f"figures/{p.name}" for name, p in render_structure_figures(report["structure"], fig_dir).items()}
    for name in ("ablation_predictor", "ablation_trace"):
        # One budget: the ablation's loss curves; several: every arm's difference at each budget.
        src = work / name / "budgets.png"
        paths |= _copy_figure(src if src.is_file() else work / name / "loss_curves.png", fig_dir, name)
    for name, p in render_content_probes_figures(report["probes"], fig_dir).items():
        paths[name] = f"figures/{p.name}"
    _learning_curves(report["content"], fig_dir / "learning_curves.png")
    paths["learning_curves"] = "figures/learning_curves.png"
    for name in ("depth", "gap"):  # the depth experiment's and eval.gap's own figures
        paths |= _copy_figure(work / name / f"{name}.png", fig_dir, name)
    return paths | boundary_figures(report, fig_dir)


def boundary_figures(report: dict, fig_dir: Path) -> dict[str, str]:
    """The picture of the boundary (:mod:`eval.report.boundary`), drawn from report.json's numbers and claims."""
    boundary_figure(report, fig_dir / "boundary.png")
    return {"boundary": "figures/boundary.png"}


def _copy_figure(src: Path, fig_dir: Path, name: str) -> dict[str, str]:
    """``{name: its path relative to the report}`` once ``src`` is copied to ``fig_dir/name.png``; {} without one."""
    if not src.is_file():
        return {}
    fig_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, fig_dir / f"{name}.png")
    return {name: f"figures/{name}.png"}


def _learning_curves(content: dict, path: Path) -> None:
    """Validation (solid) and training (dashed) loss against tokens, mean over seeds, with the n-gram lines."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = {"spen": "tab:orange", "gpt2_arch": "tab:blue"}
    for name, by_seed in content["curves"].items():
        runs = list(by_seed.values())
        n_val = min(len(r["val_loss"]) for r in runs)
        n_train = min(len(r["loss"]) for r in runs)
        val = [statistics.fmean(r["val_loss"][j] for r in runs) for j in range(n_val)]
        train = [statistics.fmean(r["loss"][j] for r in runs) for j in range(n_train)]
        ax.plot(runs[0]["val_tokens"][:n_val], val, color=colors.get(name), marker=".",
                label=f"{LABELS.get(name, name)}: validation")
        ax.plot(runs[0]["tokens"][:n_train], train, color=colors.get(name), ls="--", lw=1,
                label=f"{LABELS.get(name, name)}: training")
    for (order, ppl), ls in zip(((k, content["ngram"][k]) for k in ("unigram", "bigram", "trigram")),
                                (":", "-.", (0, (5, 1))), strict=True):
        ax.axhline(math.log(ppl), color="gray", ls=ls, lw=1, label=f"{order} (Kneser-Ney), ppl {ppl:.1f}")
    reg = content["regime"]
    ax.set(xlabel="training tokens", ylabel="loss (nats per token)",
           title=f"Headline pair: {reg['parameters']:,} parameters, {reg['tokens_per_parameter']:.0f} tokens/parameter,"
                 f" {reg['val_tokens']:,} validation tokens")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)
