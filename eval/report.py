"""``ema-boundary report``: the project's main job, one command from nothing to the boundary map.

It runs, in order, each stage through the project's own entry points (so each number can be
reproduced by the command recorded beside it in ``report.json``):

1. structure: build the grammar corpus, fit SPCN (label- and gradient-free), probe its traces,
   train the supervised BiGRU (``grammar_probe``);
2. the predictor ablation: SPEN with each predictor (both scopes) x seeds (``eval.ablation``);
3. the trace ablation: fixed, learned and input-dependent traces x seeds (``eval.ablation --trace``);
4. the GPT-2-architecture baseline of equal size, same data, tokenizer, steps and seeds (``train.py``);
5. content probes on the trained checkpoints: token identity at lag and associative recall
   (``eval.content_probes``);

then writes ``OUT/index.md`` (a short paper), ``OUT/report.json`` and ``OUT/figures/*.png``.
Intermediate outputs (datasets, checkpoints) stay under ``OUT/work/``. The whole folder is built
under a temporary name and renamed at the end.
"""

from __future__ import annotations

import json
import math
import platform
import shlex
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from eval._io import EXIT_USAGE, UsageError, UsageParser, atomic_dir, write_json

REPO = Path(__file__).resolve().parents[1]

# The paper's numbers (arXiv 2604.08556), shown beside ours.
PAPER = {
    "ratio_within_a": 0.96,
    "transfer_b_accuracy": 0.618,
    "deep_accuracy": 0.84,
    "perplexity_spen_c4": 260.0,
    "perplexity_gpt2_c4": 33.0,
    "perplexity_ratio": 260.0 / 33.0,
    "predictor_ablation": "identical loss across linear, linear-attention and softmax-attention predictors",
}


@dataclass(frozen=True)
class Plan:
    """What one report run trains: chosen by --scale and --quick."""

    spen_yaml: str
    gpt2_yaml: str
    max_steps: int
    seeds: int
    grammar_quick: bool
    grammar_train_size: int
    probe_preset: str  # "quick" | "full"

    @staticmethod
    def make(scale: str, quick: bool, max_steps: int | None) -> Plan:
        if scale == "130m":
            # 18 runs (5 predictors, 3 traces, GPT-2; 2 seeds each) of 1000 steps x 524k tokens: the
            # full 5000-step recipe of train.yaml is for the headline pair alone (docs/training.md).
            return Plan("hub_configs/spen-130m/train.yaml", "hub_configs/gpt2-small/train.yaml",
                        max_steps or 1000, 2, False, 4000, "full")
        if quick:
            return Plan("hub_configs/spen-tiny/train.yaml", "hub_configs/gpt2-tiny/train.yaml",
                        max_steps or 60, 2, True, 2000, "quick")
        return Plan("hub_configs/spen-tiny/train.yaml", "hub_configs/gpt2-tiny/train.yaml",
                    max_steps or 200, 2, False, 4000, "full")


def _cmd(*parts: str | Path) -> str:
    return shlex.join(str(p) for p in parts)


def _data_args(corpus: str) -> list[str]:
    return ["c4"] if corpus == "c4" else ["embedded"] if corpus == "embedded" else [str(Path(corpus).resolve())]


def _probe_text(corpus: str, train_yaml: Path) -> str:
    """Held-out text for the identity probe: the validation documents of the training runs."""
    import yaml

    import train
    import train_data

    if corpus not in ("embedded", "c4"):
        return Path(corpus).read_text(encoding="utf-8")
    val_every = (yaml.safe_load(train_yaml.read_text()) or {}).get("val_every", train.SETTINGS["val_every"][0])
    docs = train_data.documents(_data_args(corpus), "validation", val_every)
    text, n = [], 0
    for doc in docs:
        text.append(doc["text"])
        n += len(doc["text"])
        if n > 400_000:
            break
    return "\n\n".join(text)


# ---------------------------------------------------------------------------------------------
# Stages
# ---------------------------------------------------------------------------------------------


def run_structure(work: Path, plan: Plan, seed: int) -> dict[str, Any]:
    from grammar_probe.dataset import build_dataset, write_dataset
    from grammar_probe.probe import run_probe

    ds_dir, out_dir = work / "grammar_dataset", work / "grammar_probe"
    build = dict(seed=seed, train_size=plan.grammar_train_size)
    write_dataset(build_dataset(**build), ds_dir, build)
    results = run_probe(ds_dir, out_dir, quick=plan.grammar_quick, seed=seed, progress=False)
    results["commands"] = [
        _cmd("python", "-m", "grammar_probe", "build", "--out", ds_dir, "--seed", seed,
             "--train-size", plan.grammar_train_size),
        _cmd("python", "-m", "grammar_probe", "run", "--dataset", ds_dir, "--out", out_dir, "--seed", seed,
             *(["--quick"] if plan.grammar_quick else [])),
    ]
    return results


def run_ablations(work: Path, plan: Plan, data: list[str]) -> tuple[dict, dict]:
    from eval.ablation import run_ablation

    common = dict(max_steps=plan.max_steps, data=data)
    pred = run_ablation(REPO / plan.spen_yaml, plan.seeds, work / "ablation_predictor", **common)
    pred["command"] = _cmd("python", "-m", "eval.ablation", "--config", plan.spen_yaml, "--seeds", plan.seeds,
                           "--out", work / "ablation_predictor", "--max_steps", pred["max_steps"], "--data", *data)
    traces = run_ablation(REPO / plan.spen_yaml, plan.seeds, work / "ablation_trace",
                          traces=["ema", "learned", "selective"], **common)
    traces["command"] = _cmd("python", "-m", "eval.ablation", "--config", plan.spen_yaml, "--seeds", plan.seeds,
                             "--out", work / "ablation_trace", "--trace", "ema", "learned", "selective",
                             "--max_steps", traces["max_steps"], "--data", *data)
    return pred, traces


def run_baseline(work: Path, plan: Plan, data: list[str], seeds: list[int], tokenizer: Path, steps: int) -> dict:
    """GPT-2 architecture of equal size: same data, tokenizer, steps and seeds as the SPEN runs."""
    import train
    from eval.ablation import read_metrics

    runs, commands = {}, []
    for seed in seeds:
        out = work / "baseline_gpt2" / f"seed_{seed}"
        argv = ["--config", str(REPO / plan.gpt2_yaml), "--output_dir", str(out), "--seed", str(seed),
                "--max_steps", str(steps), "--tokenizer", str(tokenizer), "--data", *data]
        train.main(argv)
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        val_loss = read_metrics(out / "metrics.jsonl")["val_loss"][-1]
        runs[str(seed)] = {"final_val_loss": val_loss, "final_val_ppl": math.exp(val_loss), "run_dir": str(out)}
        commands.append(_cmd("python", "train.py", *argv))
    return {"runs": runs, "commands": commands}


def _param_count(checkpoint: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(checkpoint / "model.safetensors"), "pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


# ---------------------------------------------------------------------------------------------
# Assembling report.json
# ---------------------------------------------------------------------------------------------


def _ablation_summary(result: dict, axis: str) -> dict[str, Any]:
    """The report's view of one ablation.json: final losses, spreads and the verdict."""
    spread = result["spread"]
    return {
        "final_loss": {v: var["mean_val_loss"] for v, var in result["variants"].items()},
        "final_loss_per_seed": result["final_val_loss"],
        "spread": {f"across_{axis}": spread["across_variants_std"], "across_seeds": spread["across_seeds_std"],
                   "anova_f": spread["anova_f"], "anova_p": spread["anova_p"],
                   f"{axis}_within_seed_spread": spread["within_seed_spread"], "detail": spread},
        "statement": result["statement"],
        "command": result["command"],
    }


def _mean_loss(runs: dict) -> float:
    return statistics.fmean(r["final_val_loss"] for r in runs.values())


def assemble(structure: dict, pred: dict, traces: dict, baseline: dict, probes: dict, probe_cmd: str,
             top_command: str, seconds: float) -> dict[str, Any]:
    import torch
    import transformers

    spen_runs = pred["variants"]["linear"]["runs"]
    spen_loss, gpt2_loss = _mean_loss(spen_runs), _mean_loss(baseline["runs"])
    spen_ckpt = Path(pred["_root"]) / next(iter(spen_runs.values()))["run_dir"] / "final"
    gpt2_ckpt = Path(next(iter(baseline["runs"].values()))["run_dir"]) / "final"
    grammar_splits = [s for s in structure["ratio_spcn_over_bigru"] if s.startswith("test_")]
    report = {
        "question": "What can fixed-decay EMA context represent (structure) and what can it not (content)?",
        "structure": {
            "ratio_spcn_over_bigru": {s: structure["ratio_spcn_over_bigru"][s] for s in grammar_splits},
            "accuracy": {s: {m: v["accuracy"] for m, v in structure["splits"][s].items()} for s in grammar_splits},
            "per_role": {s: structure["per_role"][s] for s in grammar_splits},
            "by_kind": {s: structure["by_kind"][s] for s in grammar_splits},
            "targets": structure["targets"],
            "command": structure["commands"],
        },
        "content": {
            "perplexity": {"spen": math.exp(spen_loss), "gpt2_arch": math.exp(gpt2_loss)},
            "perplexity_ratio": math.exp(spen_loss - gpt2_loss),
            "val_loss": {"spen": spen_loss, "gpt2_arch": gpt2_loss},
            "parameters": {"spen": _param_count(spen_ckpt), "gpt2_arch": _param_count(gpt2_ckpt)},
            "command": [pred["command"], *baseline["commands"]],
        },
        "ablation": _ablation_summary(pred, "predictors"),
        "traces": _ablation_summary(traces, "traces"),
        "identity_at_lag": {name: {"lags": r["lags"], "accuracy": r["best"], "chance": r["chance"]}
                            for name, r in probes["identity_at_lag"].items()},
        "recall": {name: {k: r[k] for k in ("pairs", "accuracy", "best_lr", "chance", "sweep")}
                   for name, r in probes["recall"].items()},
        "probe_command": probe_cmd,
        "paper": PAPER,
        "environment": {
            "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "platform": platform.platform(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"cpu ({_cpu_count()} cores)",
            "seconds": seconds,
        },
        "command": top_command,
    }
    return report


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# ---------------------------------------------------------------------------------------------
# index.md and figures
# ---------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _figures(report: dict, work: Path, fig_dir: Path) -> dict[str, str]:
    """Copy the stages' figures and draw the summary ones; returns name -> relative path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, src in [("structure_per_role", work / "grammar_probe" / "per_role_test_novel_words.png"),
                      ("structure_by_kind", work / "grammar_probe" / "structural_vs_lexical.png"),
                      ("ablation_predictor", work / "ablation_predictor" / "loss_curves.png"),
                      ("ablation_trace", work / "ablation_trace" / "loss_curves.png"),
                      ("identity_at_lag", work / "content_probes" / "identity_at_lag.png"),
                      ("recall", work / "content_probes" / "recall.png")]:
        if src.is_file():
            shutil.copyfile(src, fig_dir / f"{name}.png")
            figures[name] = f"figures/{name}.png"

    ppl = report["content"]["perplexity"]
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.bar(["SPEN (EMA)", "GPT-2 arch"], [ppl["spen"], ppl["gpt2_arch"]], color=["tab:orange", "tab:blue"])
    ax.set_ylabel("validation perplexity")
    ax.set_title(f"equal size and data: ratio {report['content']['perplexity_ratio']:.2f}x\n"
                 f"(paper, 130M on C4: {PAPER['perplexity_ratio']:.1f}x)", fontsize=9)
    fig.tight_layout()
    fig.savefig(fig_dir / "content_perplexity.png", dpi=120)
    plt.close(fig)
    figures["content_perplexity"] = "figures/content_perplexity.png"
    return figures


def write_index(report: dict, figures: dict[str, str], path: Path) -> None:
    s, c, a, t = report["structure"], report["content"], report["ablation"], report["traces"]
    acc = s["accuracy"]
    lines = [
        "# Where fixed-decay EMA context holds, and where it fails",
        "",
        f"Generated by `{report['command']}` in {report['environment']['seconds'] / 60:.1f} min on "
        f"{report['environment']['device']} (torch {report['environment']['torch']}, transformers "
        f"{report['environment']['transformers']}). Every number below is in `report.json` with the command that "
        "reproduces it. Paper: *EMA Is Not All You Need* (arXiv 2604.08556).",
        "",
        "## The question",
        "",
        "An exponential moving average with fixed decays is the simplest recurrent context: no gates, no "
        "content-based retrieval. The paper claims it keeps temporal **structure** but destroys token "
        "**identity**, and that no reader of the traces can recover what they dropped. We measure both "
        "sides, the reader ablation, and whether input-dependent decays move the line.",
        "",
        "## Structure: grammatical roles from Hebbian EMA traces",
        "",
        "SPCN learns without labels and without gradients; a linear probe reads its traces. The BiGRU is "
        "trained on the labels.",
        "",
        "| split | SPCN probe | BiGRU | control (no traces) | ratio SPCN/BiGRU | paper |",
        "|---|---|---|---|---|---|",
    ]
    paper_cells = {"test_within_a": f"ratio {PAPER['ratio_within_a']:.2f}",
                   "test_transfer_b": f"SPCN {_pct(PAPER['transfer_b_accuracy'])}",
                   "test_deep": f"SPCN {_pct(PAPER['deep_accuracy'])}"}
    for split, ratio in s["ratio_spcn_over_bigru"].items():
        row = acc[split]
        lines.append(f"| {split} | {_pct(row['spcn_probe'])} | {_pct(row['bigru'])} | {_pct(row['control'])} | "
                     f"{ratio:.3f} | {paper_cells.get(split, '')} |")
    lines += [
        "",
        "Structural roles (decided by position) against lexical roles (decided by word identity); the causal GRU "
        "is a supervised left-to-right tagger that sees what the traces see (past and current word):",
        "",
        "| split | kind | SPCN probe | BiGRU | causal GRU | control |",
        "|---|---|---|---|---|---|",
    ]
    for split, kinds in s["by_kind"].items():
        for kind, row in kinds.items():
            lines.append(f"| {split} | {kind} | {_pct(row['spcn_probe'])} | {_pct(row['bigru'])} | "
                         f"{_pct(row.get('causal_gru', float('nan')))} | {_pct(row['control'])} |")
    lines += ["", "Against the paper's targets:", ""]
    for name, tgt in s["targets"].items():
        lines.append(f"- {name}: measured {tgt['measured']:.3f}, target {tgt['target']:.3f}: "
                     f"{'met' if tgt['met'] else '**not met**'}")
    for key in ("structure_per_role", "structure_by_kind"):
        if key in figures:
            lines += ["", f"![{key}]({figures[key]})"]
    lines += [
        "",
        "## Content: language modelling at equal size and data",
        "",
        "| model | parameters | validation loss | perplexity |",
        "|---|---|---|---|",
        f"| SPEN (linear predictor, EMA traces) | {c['parameters']['spen']:,} | {c['val_loss']['spen']:.3f} | "
        f"{c['perplexity']['spen']:.1f} |",
        f"| GPT-2 architecture | {c['parameters']['gpt2_arch']:,} | {c['val_loss']['gpt2_arch']:.3f} | "
        f"{c['perplexity']['gpt2_arch']:.1f} |",
        "",
        f"Perplexity ratio SPEN / GPT-2: **{c['perplexity_ratio']:.2f}x** (paper, 130M on C4: 260 vs 33, "
        f"{PAPER['perplexity_ratio']:.1f}x). Means over seeds.",
        "",
        f"![content]({figures['content_perplexity']})",
        "",
        "### What the hidden state still knows about past tokens",
        "",
        "A linear probe on each layer's hidden state predicts the token k positions back (best layer shown). "
        "For SPEN the hidden state is all the memory there is; a transformer keeps its memory in the "
        "key/value cache and need not copy past tokens into the residual stream, so for GPT-2 the fair test "
        "of what it can retrieve is the recall task below.",
        "",
        "| model | " + " | ".join(f"k={k}" for k in _lag_marks(report)) + " |",
        "|---|" + "---|" * len(_lag_marks(report)),
    ]
    for name, r in report["identity_at_lag"].items():
        cells = [_pct(r["accuracy"][k - 1]) for k in _lag_marks(report)]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    chance = next(iter(report["identity_at_lag"].values()))["chance"]
    lines += ["", f"Chance (majority class): about {_pct(statistics.fmean(chance))}."]
    if "identity_at_lag" in figures:
        lines += ["", f"![identity]({figures['identity_at_lag']})"]
    lines += ["", "### Associative recall (MQAR)", "",
              "| model | " + " | ".join(f"{n} pairs" for n in next(iter(report["recall"].values()))["pairs"])
              + " | best lr |", "|---|" + "---|" * (len(next(iter(report["recall"].values()))["pairs"]) + 1)]
    for name, r in report["recall"].items():
        lines.append(f"| {name} | " + " | ".join(_pct(x) for x in r["accuracy"]) + f" | {r['best_lr']:g} |")
    if "recall" in figures:
        lines += ["", f"![recall]({figures['recall']})"]
    lines += [
        "",
        "## The reader ablation: swap the predictor, keep the traces",
        "",
        "| predictor | final validation loss (mean over seeds) |",
        "|---|---|",
        *[f"| {v} | {loss:.4f} |" for v, loss in a["final_loss"].items()],
        "",
        f"{a['statement']}. Paper: {PAPER['predictor_ablation']}.",
    ]
    if "ablation_predictor" in figures:
        lines += ["", f"![ablation]({figures['ablation_predictor']})"]
    lines += [
        "",
        "## Does input-dependent selection move the line?",
        "",
        "| trace | final validation loss (mean over seeds) |",
        "|---|---|",
        *[f"| {v} | {loss:.4f} |" for v, loss in t["final_loss"].items()],
        "",
        f"{t['statement']}.",
    ]
    if "ablation_trace" in figures:
        lines += ["", f"![traces]({figures['ablation_trace']})"]
    lines += ["", "## Reproduce", "", "```", report["command"], "```", "",
              "Each stage alone: see `command` entries in `report.json`.", ""]
    path.write_text("\n".join(lines))


def _lag_marks(report: dict) -> list[int]:
    lags = next(iter(report["identity_at_lag"].values()))["lags"]
    return [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= len(lags)]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def build_report(out: Path, quick: bool = False, corpus: str = "embedded", scale: str = "tiny",
                 seed: int = 0, max_steps: int | None = None, command: str | None = None) -> dict:
    """Run every stage and write ``out`` (replaced atomically). Returns the report.json content."""
    import torch

    from eval.content_probes import ProbeSettings, run_content_probes

    started = time.time()
    plan = Plan.make(scale, quick, max_steps)
    if scale == "tiny":
        # Tiny models: one thread beats two (synchronisation costs more than the matmuls save).
        torch.set_num_threads(1)
    data = _data_args(corpus)
    top = command or _cmd("ema-boundary", "report", *(["--quick"] if quick else []), "--out", out,
                          "--corpus", corpus, "--scale", scale)
    stages = tqdm(total=5, desc="boundary report", unit="stage", disable=None)
    stage_seconds: dict[str, float] = {}
    clock = time.time()

    def lap(name: str) -> None:
        nonlocal clock
        stage_seconds[name] = time.time() - clock
        clock = time.time()
        stages.update()

    with atomic_dir(out) as tmp:
        work = tmp / "work"
        work.mkdir()
        stages.set_postfix_str("structure: grammar, SPCN, BiGRU")
        structure = run_structure(work, plan, seed)
        lap("structure")
        stages.set_postfix_str("predictor and trace ablations")
        pred, traces = run_ablations(work, plan, data)
        pred["_root"], traces["_root"] = str(work / "ablation_predictor"), str(work / "ablation_trace")
        lap("ablations")
        stages.set_postfix_str("GPT-2-architecture baseline")
        first = next(iter(pred["variants"]["linear"]["runs"].values()))
        tokenizer = work / "ablation_predictor" / first["run_dir"] / "tokenizer"
        baseline = run_baseline(work, plan, data, pred["seeds"], tokenizer, pred["max_steps"])
        lap("baseline")
        stages.set_postfix_str("content probes")
        first_seed = str(pred["seeds"][0])
        ckpts = {f"SPEN-{t}": work / "ablation_trace" / traces["variants"][t]["runs"][first_seed]["run_dir"] / "final"
                 for t in traces["variants"]}
        ckpts["GPT-2 arch"] = Path(baseline["runs"][first_seed]["run_dir"]) / "final"
        settings = ProbeSettings.quick() if plan.probe_preset == "quick" else ProbeSettings()
        settings.seed = seed
        if max_steps is not None:  # --max-steps caps every training run, the recall runs included
            settings.recall_steps = min(settings.recall_steps, max_steps)
        probe_text = _probe_text(corpus, REPO / plan.spen_yaml)
        probes = run_content_probes(ckpts, probe_text, work / "content_probes", settings)
        probe_cmd = _cmd("python", "-m", "eval.content_probes", "--models",
                         *[f"{k}={v}" for k, v in ckpts.items()], "--out", work / "content_probes",
                         *(["--quick"] if plan.probe_preset == "quick" else []),
                         *([] if corpus in ("embedded", "c4") else ["--text", corpus]))
        lap("content_probes")
        stages.set_postfix_str("writing report")
        report = assemble(structure, pred, traces, baseline, probes, probe_cmd, top, time.time() - started)
        report["environment"]["stage_seconds"] = stage_seconds
        # Paths inside the report name the final folder, not the temporary one.
        text = json.dumps(report).replace(str(tmp), str(out))
        report = json.loads(text)
        figures = _figures(report, work, tmp / "figures")
        report["figures"] = figures
        write_json(tmp / "report.json", report)
        write_index(report, figures, tmp / "index.md")
        lap("writing")
    stages.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = UsageParser(prog="ema-boundary", description="Map what fixed-decay EMA context can and cannot represent.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=UsageParser)
    rep = sub.add_parser("report", help="run every experiment and write the boundary report",
                         description=__doc__.split("\n\n")[0])
    rep.add_argument("--quick", action="store_true", help="fewer steps, smaller probes (~4 min on 2 cores)")
    rep.add_argument("--out", default="outputs/report", help="output folder (default: outputs/report)")
    rep.add_argument("--corpus", default="embedded",
                     help="'embedded' (Python's help topics, offline), 'c4' (streamed from the hub) or a text file")
    rep.add_argument("--scale", choices=["tiny", "130m"], default="tiny",
                     help="tiny CPU models, or the paper's 130M SPEN vs GPT-2 small (GPU)")
    rep.add_argument("--seed", type=int, default=0, help="seed of the grammar corpus, SPCN and probes")
    rep.add_argument("--max-steps", type=int, help="optimizer steps per training run (overrides the plan)")
    args = parser.parse_args(argv)
    if args.corpus not in ("embedded", "c4") and not Path(args.corpus).is_file():
        parser.error(f"--corpus {args.corpus}: not 'embedded', 'c4' or an existing text file")
    if args.max_steps is not None and args.max_steps < 1:
        parser.error(f"--max-steps must be a positive integer, got {args.max_steps}")
    command = shlex.join(["ema-boundary", *(argv if argv is not None else sys.argv[1:])])
    try:
        report = build_report(Path(args.out), quick=args.quick, corpus=args.corpus, scale=args.scale,
                              seed=args.seed, max_steps=args.max_steps, command=command)
    except UsageError as err:
        print(f"ema-boundary: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.out) / 'index.md'} and report.json "
          f"({report['environment']['seconds'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
