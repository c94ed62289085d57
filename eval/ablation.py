"""The paper's central control as one command: swap the predictor (or the trace), keep everything else.

    python -m eval.ablation --config hub_configs/spen-tiny/train.yaml --seeds 2 --out outputs/ablation
    python -m eval.ablation --config hub_configs/spen-tiny/train.yaml --seeds 2 --out outputs/ablation-trace \\
        --trace ema learned selective

Every variant is trained by train.py (``train.main``) from the same YAML, on the same data in the same
order, with the same tokenizer (trained once, by the first run, then passed to every other run) and the
same seeds; only the SPEN config fields of the variant differ. The output folder gets

- ``ablation.json``: final validation loss per variant and seed, the spread across variants and the
  spread across seeds, and the measured answer: is the first within the second?
- ``loss_curves.png``: training loss per run and final validation loss per variant;
- ``runs/<variant>/seed_<n>/``: each train.py output folder (``final/``, ``metrics.jsonl``; the
  resumable checkpoints are deleted once the run is done);
- ``configs/<variant>/``: the model config and train YAML each variant was trained with.

The folder is built under a temporary name and renamed at the end: an interrupted ablation leaves
nothing that looks like a result.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from tqdm.auto import tqdm

import train_config
from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser
from ema_boundary.figures import pyplot
from ema_boundary.io import atomic_dir, write_json
from modeling_spen.configuration_spen import TRACES

# The paper's ablation: the static linear reader against causal attention readers over the same traces.
# Scope "sequence" attends over the trace states of every past position (the paper's causal attention);
# "state" attends only over the current state's traces (see modeling_spen.configuration_spen).
PREDICTOR_VARIANTS: dict[str, dict[str, str]] = {
    "linear": {"predictor": "linear", "predictor_scope": "sequence"},
    "linear_attention-state": {"predictor": "linear_attention", "predictor_scope": "state"},
    "linear_attention-sequence": {"predictor": "linear_attention", "predictor_scope": "sequence"},
    "softmax_attention-state": {"predictor": "softmax_attention", "predictor_scope": "state"},
    "softmax_attention-sequence": {"predictor": "softmax_attention", "predictor_scope": "sequence"},
}
TRACE_VARIANTS: tuple[str, ...] = TRACES
CURVE_POINTS = 8  # validation evaluations per run (eval_every = max_steps // CURVE_POINTS)


def _read_train_yaml(config: Path) -> dict[str, Any]:
    """Every setting of a train.py YAML (train_config.read_yaml), which must train a SPEN model."""
    try:
        cfg = train_config.read_yaml(config)
    except train_config.ConfigError as e:
        raise UsageError(f"--config {e}") from None
    model_json = Path(cfg["model_config"]) / "config.json"
    if json.loads(model_json.read_text()).get("model_type") != "spen":
        raise UsageError(f"--config {config}: model_config {model_json} is not a SPEN config "
                         "(the ablation swaps SPEN's predictor or trace)")
    return cfg


def _variants(variants: Sequence[str] | None, traces: Sequence[str] | None) -> tuple[str, dict[str, dict]]:
    if traces is not None and variants is not None:
        raise UsageError("--variants and --trace are two different ablations: give one of them")
    if traces is not None:
        bad = [t for t in traces if t not in TRACE_VARIANTS]
        if bad or not traces:
            raise UsageError(f"--trace: {bad or 'nothing'} not in {list(TRACE_VARIANTS)}")
        return "trace", {t: {"trace": t} for t in dict.fromkeys(traces)}
    names = list(PREDICTOR_VARIANTS) if variants is None else list(dict.fromkeys(variants))
    bad = [v for v in names if v not in PREDICTOR_VARIANTS]
    if bad or not names:
        raise UsageError(f"--variants: {bad or 'nothing'} not in {list(PREDICTOR_VARIANTS)}")
    return "predictor", {v: PREDICTOR_VARIANTS[v] for v in names}


def read_metrics(path: Path) -> dict[str, list]:
    """Training and validation curves from a train.py metrics.jsonl."""
    curve: dict[str, list] = {"step": [], "loss": [], "val_step": [], "val_loss": []}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "loss" in row:
            curve["step"].append(row["step"])
            curve["loss"].append(row["loss"])
        if "val_loss" in row:
            curve["val_step"].append(row["step"])
            curve["val_loss"].append(row["val_loss"])
    return curve


def _spread(final: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Spread across variants (of the seed-mean losses) vs spread across seeds (within each variant).

    Ranges are reported for reading; the verdict is a one-way ANOVA over variants with seeds as
    replicates, because a range grows with the number of items it spans (5 variant means vs 2 seeds):
    F = seeds * var(variant means) / pooled within-variant variance, which is about 1 when the variants
    differ only by seed noise. `within_seed_spread` is F <= 1 (None with one seed: no noise estimate).
    """
    means = {v: statistics.fmean(by_seed.values()) for v, by_seed in final.items()}
    seed_ranges = {v: max(s.values()) - min(s.values()) for v, s in final.items()}
    seeds = list(next(iter(final.values())))
    # Same seed, different variant: the paired view, free of the seed-to-seed noise of the initialisation.
    per_seed_ranges = {s: max(final[v][s] for v in final) - min(final[v][s] for v in final) for s in seeds}
    out: dict[str, Any] = {
        "variant_mean": means,
        "across_variants_range": max(means.values()) - min(means.values()),
        "across_variants_range_per_seed": per_seed_ranges,
        "across_seeds_range_per_variant": seed_ranges,
        "across_seeds_range": statistics.fmean(seed_ranges.values()),
        "across_variants_std": statistics.stdev(means.values()) if len(means) > 1 else 0.0,
        "across_seeds_std": None, "anova_f": None, "anova_p": None, "within_seed_spread": None,
    }
    if len(seeds) > 1 and len(means) > 1:
        from scipy.stats import f_oneway

        pooled = statistics.fmean(statistics.variance(s.values()) for s in final.values())
        out["across_seeds_std"] = math.sqrt(pooled)
        if pooled > 0:
            test = f_oneway(*[list(s.values()) for s in final.values()])
            out["anova_f"], out["anova_p"] = float(test.statistic), float(test.pvalue)
            out["within_seed_spread"] = out["anova_f"] <= 1.0
        else:  # identical losses across seeds (deterministic variants): any difference is a real one
            out["within_seed_spread"] = out["across_variants_range"] == 0.0
    return out


def _statement(axis: str, s: dict[str, Any]) -> str:
    head = (f"final validation loss: spread across {axis}s {s['across_variants_std']:.4f} (std of seed means; "
            f"range {s['across_variants_range']:.4f}), across seeds {s['across_seeds_std'] or 0.0:.4f} (pooled std; "
            f"mean range {s['across_seeds_range']:.4f})")
    if s["within_seed_spread"] is None:
        return head + f"; one seed: no seed noise to compare the {axis}s with"
    if s["anova_f"] is None:
        return head + f"; every seed gives the same loss: the {axis}s " + (
            "are identical" if s["within_seed_spread"] else "differ")
    if s["within_seed_spread"]:
        verdict = f"within the seed noise: the {axis}s are indistinguishable at this scale"
    elif s["anova_p"] >= 0.05:  # F > 1 alone is common under pure noise with this few seeds
        verdict = "larger than the seed noise but not significantly (p >= 0.05): more seeds or steps needed"
    else:
        verdict = f"beyond the seed noise (p < 0.05): the {axis}s differ at this scale"
    return head + f"; ANOVA F = {s['anova_f']:.2f} (p = {s['anova_p']:.3f}), {verdict}"


def _plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, var) in enumerate(result["variants"].items()):
        c = colors[i % len(colors)]
        for j, (seed, run) in enumerate(var["runs"].items()):
            left.plot(run["curve"]["step"], run["curve"]["loss"], color=c, ls=["-", "--", ":", "-."][j % 4],
                      lw=1, label=f"{name} (seed {seed})")
            right.scatter([i] * 1, [run["final_val_loss"]], color=c, marker="o", zorder=3)
        right.hlines(var["mean_val_loss"], i - 0.3, i + 0.3, color=c, lw=2)
    left.set(xlabel="step", ylabel="training loss", title="training loss (every run)")
    left.legend(fontsize=7, ncol=2)
    names = list(result["variants"])
    right.set_xticks(range(len(names)), names, rotation=20, ha="right", fontsize=8)
    s = result["spread"]
    f = f"ANOVA F {s['anova_f']:.2f}, p {s['anova_p']:.3f}" if s["anova_f"] is not None else "no ANOVA"
    right.set(ylabel="final validation loss", title=f"{result['axis']}s: std of means {s['across_variants_std']:.4f}"
              f" vs seeds {s['across_seeds_std'] or 0.0:.4f}\n{f} (dots: seeds, bars: seed means)")
    right.title.set_fontsize(9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_ablation(config: str | Path, seeds: int, out_dir: str | Path, *, variants: Sequence[str] | None = None,
                 traces: Sequence[str] | None = None, max_steps: int | None = None,
                 data: Sequence[str] | None = None) -> dict[str, Any]:
    """Train every variant x seed through train.main and write `out_dir` (see the module docstring).

    `variants` picks predictor variants (default: all of PREDICTOR_VARIANTS); `traces` runs the trace
    ablation instead (the predictor stays the config's). Seeds are the YAML's seed + 0..seeds-1.
    Returns the content of ablation.json. Bad input raises UsageError before anything is written.
    """
    import train
    from train_data import DataError

    config, out_dir = Path(config), Path(out_dir)
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise UsageError(f"--seeds must be a positive integer, got {seeds!r}")
    if max_steps is not None and max_steps < 1:
        raise UsageError(f"--max_steps must be a positive integer, got {max_steps!r}")
    cfg = _read_train_yaml(config)
    axis, chosen = _variants(variants, traces)
    base_model = json.loads((Path(cfg["model_config"]) / "config.json").read_text())
    steps = max_steps or cfg["max_steps"]
    seed_list = [cfg["seed"] + i for i in range(seeds)]

    result: dict[str, Any] = {
        "axis": axis, "config": str(config), "model_config": cfg["model_config"], "max_steps": steps,
        "seeds": seed_list, "data": list(data) if data else cfg["data"],
        "variants": {},
    }
    with atomic_dir(out_dir) as tmp:
        tokenizer: Path | None = None
        bar = tqdm(total=len(chosen) * seeds, desc=f"{axis} ablation", unit="run", position=0)
        for name, fields in chosen.items():
            # The variant: the base SPEN config with only the ablated fields changed.
            vdir = tmp / "configs" / name
            vdir.mkdir(parents=True)
            write_json(vdir / "config.json", {**base_model, **fields})
            vcfg = {**cfg, "model_config": str(vdir.resolve()), "max_steps": steps,
                    # More validation and logging points for the curves; neither draws random numbers, so the
                    # training trajectory is the one the YAML alone would give.
                    "eval_every": max(1, steps // CURVE_POINTS), "log_every": max(1, steps // 50),
                    "save_every": steps, "keep_checkpoints": 1}
            vcfg.pop("output_dir", None)
            (vdir / "train.yaml").write_text(yaml.safe_dump(vcfg, sort_keys=False))
            runs = {}
            for seed in seed_list:
                run_dir = tmp / "runs" / name / f"seed_{seed}"
                argv = ["--config", str(vdir / "train.yaml"), "--output_dir", str(run_dir), "--seed", str(seed)]
                if tokenizer is not None:
                    argv += ["--tokenizer", str(tokenizer)]
                if data:
                    argv += ["--data", *data]
                bar.set_postfix_str(f"{name} seed {seed}")
                try:
                    train.main(argv)
                except (train_config.ConfigError, DataError) as e:
                    raise UsageError(f"train.py: {e}") from None
                # One tokenizer for every run: the first run's (trained on the data when the YAML names none).
                tokenizer = tokenizer or (run_dir / "tokenizer").resolve()
                shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # resumable state: not needed
                curve = read_metrics(run_dir / "metrics.jsonl")
                runs[str(seed)] = {"final_val_loss": curve["val_loss"][-1],
                                   "final_val_ppl": math.exp(curve["val_loss"][-1]),
                                   "run_dir": str(Path("runs") / name / f"seed_{seed}"), "curve": curve}
                bar.update()
            losses = [r["final_val_loss"] for r in runs.values()]
            result["variants"][name] = {"fields": fields, "mean_val_loss": statistics.fmean(losses),
                                        "runs": runs}
        bar.close()
        final = {v: {s: r["final_val_loss"] for s, r in var["runs"].items()} for v, var in result["variants"].items()}
        result["final_val_loss"] = final
        result["spread"] = s = _spread(final)
        result["statement"] = _statement(axis, s)
        write_json(tmp / "ablation.json", result)
        _plot(result, tmp / "loss_curves.png")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = UsageParser(prog="python -m eval.ablation", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True,
                   help="train.py YAML of a SPEN model, e.g. hub_configs/spen-tiny/train.yaml")
    p.add_argument("--seeds", type=int, default=2, help="seeds per variant: the YAML's seed + 0..N-1 (default 2)")
    p.add_argument("--out", required=True, help="output folder (replaced, atomically, when the ablation ends)")
    p.add_argument("--variants", nargs="+", metavar="NAME",
                   help=f"predictor variants (default: all of {', '.join(PREDICTOR_VARIANTS)})")
    p.add_argument("--trace", nargs="+", metavar="TRACE",
                   help=f"run the trace ablation instead, over these of {', '.join(TRACE_VARIANTS)}")
    p.add_argument("--max_steps", type=int, help="optimizer steps per run (overrides the YAML)")
    p.add_argument("--data", nargs="+", metavar="PATH", help="training data (overrides the YAML, as in train.py)")
    args = p.parse_args(argv)
    try:
        result = run_ablation(args.config, args.seeds, args.out, variants=args.variants, traces=args.trace,
                              max_steps=args.max_steps, data=args.data)
    except UsageError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(result["statement"])
    print(f"wrote {Path(args.out) / 'ablation.json'} and {Path(args.out) / 'loss_curves.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
