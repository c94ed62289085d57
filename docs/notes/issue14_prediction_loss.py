"""The experiment that chose the default of SPENConfig.prediction_loss_weight (issue 14, phase 1).

Declared before the runs:
- grid: prediction_loss_weight in {0, 0.1, 1}; reference arm 0 (no prediction loss);
- model and recipe: hub_configs/spen-tiny (linear predictor, EMA traces) with
  hub_configs/spen-tiny/train.yaml (embedded corpus, 200 steps x 16 x 128 tokens, lr 3e-3), except
  that validation uses every block of the validation split (eval_blocks 1000 asks for more than exist);
- seeds 0..4 (initialisation; the data order is fixed by the data), so arms are paired by seed;
- criterion: final validation next-token loss (nats; the prediction loss is not part of it);
- comparison: ema_boundary.stats.compare_arms (paired, Holm across the two arms), equivalence margin 0.02 nats.
- default: the largest weight whose validation loss is not worse than weight 0 (verdict "equivalent"
  or "different: lower"), since then the predictor predicts at no cost to the language model; if
  every non-zero weight is worse, 0.

train.py computes its own next-token loss from the logits, so here its `lm_loss` is replaced by one
that adds ``weight * prediction_loss`` while training (validation stays the plain next-token loss).

    PYTHONPATH=. OMP_NUM_THREADS=1 python docs/notes/issue14_prediction_loss.py --out outputs/issue14-pl
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

import train
from ema_boundary import packing
from ema_boundary.stats import compare_arms, describe, mean_ci

REPO = Path(__file__).resolve().parents[2]
GRID = (0.0, 0.1, 1.0)
SEEDS = (0, 1, 2, 3, 4)
MARGIN = 0.02


def lm_loss_with_prediction(model: torch.nn.Module, blocks: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    out = model(input_ids=blocks[:, :-1])
    ce = F.cross_entropy(out.logits.float().flatten(0, 1), blocks[:, 1:].flatten(), reduction=reduction)
    weight = getattr(model, "module", model).config.prediction_loss_weight
    if model.training and weight and reduction == "mean":
        return ce + weight * out.prediction_loss
    return ce


def run_one(out: Path, weight: float, seed: int) -> dict:
    run_dir = out / f"w{weight:g}-s{seed}"
    config_dir = out / "configs" / f"w{weight:g}"
    if not (config_dir / "config.json").is_file():
        config_dir.mkdir(parents=True, exist_ok=True)
        config = json.loads((REPO / "hub_configs/spen-tiny/config.json").read_text())
        (config_dir / "config.json").write_text(json.dumps({**config, "prediction_loss_weight": weight}, indent=1))
    settings = yaml.safe_load((REPO / "hub_configs/spen-tiny/train.yaml").read_text())
    settings.update(model_config=str(config_dir), output_dir=str(run_dir), eval_blocks=1000, save_every=10_000)
    yaml_path = out / "configs" / f"w{weight:g}-s{seed}.yaml"
    yaml_path.write_text(yaml.safe_dump(settings))
    started = time.perf_counter()
    train.main(["--config", str(yaml_path), "--seed", str(seed)])
    seconds = time.perf_counter() - started
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    final = [m for m in metrics if "val_loss" in m][-1]
    return {"weight": weight, "seed": seed, "val_loss": final["val_loss"], "seconds": seconds,
            "prediction_loss": prediction_loss(run_dir, settings)}


@torch.no_grad()
def prediction_loss(run_dir: Path, settings: dict) -> list[float]:
    """Per block, mean_t ||u_t - x̂_t||^2 / D of the final model on the first 32 validation blocks."""
    model = AutoModelForCausalLM.from_pretrained(run_dir / "final").eval()
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "final")
    val = packing.validation_blocks(["embedded"], settings["val_every"], tokenizer, settings["block_size"], 32)
    return model(input_ids=val[:, :-1]).prediction_losses.mean(0).tolist()  # per block, over the rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    torch.set_num_threads(1)
    train.lm_loss = lm_loss_with_prediction
    args.out.mkdir(parents=True, exist_ok=True)
    results_path = args.out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.is_file() else []
    done = {(r["weight"], r["seed"]) for r in results}
    for seed in SEEDS:  # seed-major, so that a partial run still has complete blocks
        for weight in GRID:
            if (weight, seed) in done:
                continue
            results.append(run_one(args.out, weight, seed))
            results_path.write_text(json.dumps(results, indent=1))
            print(json.dumps(results[-1]), flush=True)
    arms = {f"{w:g}": {r["seed"]: r["val_loss"] for r in results if r["weight"] == w} for w in GRID}
    comparisons = compare_arms(arms, "0", margin=MARGIN)
    summary = {
        "grid": GRID, "seeds": SEEDS, "margin": MARGIN,
        "val_loss": {w: mean_ci(list(v.values())) for w, v in arms.items()},
        "prediction_loss": {f"{w:g}": mean_ci([sum(r["prediction_loss"]) / len(r["prediction_loss"])
                                                for r in results if r["weight"] == w]) for w in GRID},
        "comparisons": {w: c.as_dict() for w, c in comparisons.items()},
        "sentences": {w: describe(c, f"weight {w}", "weight 0", "nats") for w, c in comparisons.items()},
        "seconds_per_run": mean_ci([r["seconds"] for r in results]),
    }  # fmt: skip
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(json.dumps(summary, indent=1, default=str))
    for w, text in summary["sentences"].items():
        print(f"{w}: {text}")
    print("ppl of the means:", {w: math.exp(v["mean"]) for w, v in summary["val_loss"].items()})


if __name__ == "__main__":
    main()
