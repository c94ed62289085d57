# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from a scratch folder, as rc/rr2.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
import sys, time, json, torch
from eval.recall import *
torch.set_num_threads(1)
name, lr, seed, steps, batch = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
extra = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
task = RecallTask(); recipe = RecallRecipe(steps=steps, lrs=(lr,), batch_size=batch, **{"floor": (0.3, 0.8), **extra})  # floor as when these runs were made
t0 = time.perf_counter()
model, n = train_recall(default_map_configs()[name], task, recipe, lr, seed, progress=False)
t = time.perf_counter() - t0
print(json.dumps({"name": name, "lr": lr, "seed": seed, "batch": batch, "extra": extra, "steps": n, "train_s": round(t, 1), "acc": {k: round(v, 3) for k, v in evaluate_recall(model, task, 512, 99).items()}, "load": open("/proc/loadavg").read().split()[:3]}), flush=True)
