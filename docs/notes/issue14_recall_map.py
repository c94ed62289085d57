"""The recall map of issue 14: the positive control and every SPEN reader and trace, one recipe.

    PYTHONPATH=. python docs/notes/issue14_recall_map.py --out outputs/recall_map.json [--models gpt2 spen-none ...]
        [--quick] [--seed 0]

Each model: eval.recall.recall_model with RecallTask() (vocabulary 128, 2/4/8/16 pairs) and
RecallRecipe() (or RecallRecipe.quick()); one thread per process, so two processes can share two cores.
Results are written after every model.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from eval.recall import RecallRecipe, RecallTask, default_map_configs, recall_map


def main() -> None:
    configs = default_map_configs()
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--models", nargs="+", default=list(configs), choices=list(configs))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    torch.set_num_threads(1)
    recipe = RecallRecipe.quick() if args.quick else RecallRecipe()
    started = time.time()
    partial: dict = {}

    def save(name: str, result: dict) -> None:
        partial[name] = result
        load = open("/proc/loadavg").read().split()[:3]
        args.out.write_text(json.dumps({"models": partial, "load_after": load, "wall_s": time.time() - started},
                                       indent=1))
        accuracy = " ".join(f"{n}:{a:.3f}" for n, a in result["accuracy"].items())
        print(f"{name}: {accuracy} lr {result['best_lr']:g} steps {result['steps']} "
              f"{result['seconds']:.0f}s load {load}", flush=True)

    result = recall_map({m: configs[m] for m in args.models}, RecallTask(), recipe, args.seed, progress=False,
                        on_model=save)
    result["wall_s"] = time.time() - started
    args.out.write_text(json.dumps(result, indent=1, default=list))


if __name__ == "__main__":
    main()
