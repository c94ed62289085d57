"""Issue 49: did escape-routes' `mixer_mamba-conv1` at lr 1e-1 (seed 0) diverge? Its committed run scored 0.0% at every
pair count with no diverged flag (the recall trainer recorded NaN weights only from 1bf3dbc on). This re-trains the
run from its committed run.json and stops at the first non-finite training loss.

    PYTHONPATH=. python docs/notes/issue49_nan_check.py [--run RUN_FOLDER]

Run twice in the eleventh session: "first non-finite loss at step 946" both times (80 and 69 CPU-s, one torch thread).
"""

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import eval.recall as recall
from eval.recall_map import build_arm

RUN = Path(__file__).resolve().parents[1] / "sweeps/escape-routes/runs/mixer_mamba-conv1/lr_0.1/seed_0/steps_2000"


class NonFinite(Exception):
    """The training loss at the step carried in args[0] was NaN or infinite."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN,
                        help="a recall run's folder (its run.json) (default: %(default)s)")
    args = parser.parse_args()
    spec = json.loads((args.run / "run.json").read_text())
    config, task, recipe = build_arm(spec)
    cross_entropy, calls = F.cross_entropy, [0]

    def checked(*args, **kwargs):  # train_recall's loss, one call per step
        loss = cross_entropy(*args, **kwargs)
        calls[0] += 1
        if not torch.isfinite(loss):
            raise NonFinite(calls[0] - 1)
        return loss

    recall.F.cross_entropy = checked
    torch.set_num_threads(1)
    start = time.process_time()
    try:
        model, steps = recall.train_recall(config, task, recipe, spec["lr"], spec["seed"], progress=False)
        print(f"finished {steps} steps; finite weights: {recall.weights_finite(model)}")
    except NonFinite as e:
        print(f"first non-finite loss at step {e.args[0]}")
    finally:
        recall.F.cross_entropy = cross_entropy
    print(f"{time.process_time() - start:.0f} CPU-s")


if __name__ == "__main__":
    main()
