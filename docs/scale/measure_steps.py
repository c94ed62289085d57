"""Measure train.py's CPU cost per step at each size of the fair pair (the numbers behind the ladder's budget).

For each ``WIDTHxLAYERS`` and architecture it writes the pair's config.json and a train.yaml (vocabulary 1,024,
blocks of 128, 16 sequences per step, no validation but 2 blocks at the end, a given tokenizer so that no BPE is
trained) and runs ``python train.py`` for ``STEPS`` steps with one thread, recording the child's CPU seconds
(user time) and wall seconds as one JSON line. Run it at two step counts; the difference of the CPU seconds over
the difference of the steps is the cost of a step without the start-up:

    OMP_NUM_THREADS=1 nice -n 10 python docs/scale/measure_steps.py 48x2,64x2,96x2,128x2,192x2 30 \\
        --tokenizer outputs/gap-runs/tokenizer --out outputs/scale-measure
    OMP_NUM_THREADS=1 nice -n 10 python docs/scale/measure_steps.py 48x2,64x2,96x2,128x2,192x2 120 \\
        --tokenizer outputs/gap-runs/tokenizer --out outputs/scale-measure

Raw records of docs/scale/README.md's table: step_costs.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from eval.scale import fair_pair, parameter_counts  # noqa: E402  (the repository on the path first)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sizes", help="WIDTHxLAYERS,... e.g. 48x2,64x2")
    p.add_argument("steps", type=int)
    p.add_argument("--tokenizer", required=True, help="a tokenizer folder (e.g. a run's final/)")
    p.add_argument("--out", type=Path, default=Path("outputs/scale-measure"))
    args = p.parse_args()
    for width, layers in (tuple(map(int, s.split("x"))) for s in args.sizes.split(",")):
        for arch, config in fair_pair(width, layers, 1024, 128).items():
            name = f"{arch}-w{width}l{layers}"
            folder, run = args.out / "configs" / name, args.out / "runs" / f"{name}-{args.steps}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "config.json").write_text(json.dumps(config))
            train = {"model_config": str(folder), "data": "embedded", "tokenizer": args.tokenizer,
                     "block_size": 128, "batch_size": 16, "micro_batch_size": 16, "max_steps": args.steps,
                     "lr": 1e-2, "warmup_steps": 5, "log_every": 5, "eval_every": 100_000, "eval_blocks": 2,
                     "save_every": 100_000, "val_every": 10, "seed": 0, "output_dir": str(run)}
            (folder / "train.yaml").write_text(yaml.safe_dump(train))
            before, start = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime, time.time()
            subprocess.run([sys.executable, str(REPO / "train.py"), "--config", str(folder / "train.yaml"),
                            "--overwrite_output_dir"], check=True, capture_output=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
            wall, cpu = time.time() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
            rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
            speeds = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r][1:]
            print(json.dumps({"name": name, "width": width, "layers": layers,
                              **parameter_counts(arch, width, layers, 1024, 128),
                              "tok_s_median": statistics.median(speeds), "tok_s_max": max(speeds),
                              "wall": round(wall, 1), "cpu": round(cpu, 1), "steps": args.steps,
                              "load": Path("/proc/loadavg").read_text().split()[0]}), flush=True)


if __name__ == "__main__":
    main()
