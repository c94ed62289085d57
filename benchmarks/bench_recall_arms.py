"""One training step of every recall arm (eval.recall's MQAR recipe), side by side: what a recall run costs.

    python -m benchmarks.bench_recall_arms --output_dir DIR               # ~3 min on one thread
    python -m benchmarks.bench_recall_arms --quick --output_dir DIR       # smoke run, seconds

Each arm of ``eval.recall.default_map_configs`` (width 64, 2 layers; the task's vocabulary 128) takes the recipe's
step at batch 128 x 48 tokens (16 pairs, the curriculum's top): forward, the query loss, backward, clipping, AdamW,
inside :func:`eval.mamba_scan.fast_mamba_scan` as train_recall runs it. The arms alternate within each repeat so that
machine-wide noise hits them alike; each cell is the minimum over repeats of this process's CPU time (one thread).
One more row times transformers' Mamba on transformers' own CPU scan (outside the swap): what the swap saves.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

import modeling_spen  # noqa: F401  registers SPEN with the Auto classes
from ema_boundary.io import write_text
from ema_boundary.params import parameter_counts
from ema_boundary.usage import UsageParser, positive_int
from eval.mamba_scan import fast_mamba_scan
from eval.recall import IGNORE, RecallTask, default_map_configs, task_config
from eval.recall_arms import describe_arm

from .common import machine, table

ARMS = ("gpt2", "linear", "linear-ema16", "linear-ema64", "linear-s6lagged3", "linear-s6lagged", "linear-s6lagged64",
        "mixer_mamba3", "mixer_mamba", "mixer_mamba64", "mixer_mamba-conv1", "mixer_mamba-lagged",
        "mixer_mamba-nogate", "hf-mamba3", "hf-mamba", "hf-mamba64", "hf-rwkv", "linear_attention-sequence")
QUICK_ARMS = ("gpt2", "linear", "mixer_mamba", "hf-mamba", "hf-rwkv")


def _step(model: torch.nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor, targets: torch.Tensor) -> None:
    logits = model(input_ids=ids, use_cache=False).logits
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def run(arms: tuple[str, ...], batch: int, pairs: int, repeats: int) -> list[dict[str, Any]]:
    """ms per training step of each arm, the minimum over ``repeats`` rounds in which every arm steps once."""
    task = RecallTask(pairs=(pairs,))
    configs = default_map_configs()
    ids, targets = task.sample(batch, pairs, torch.Generator().manual_seed(0))
    models, opts = {}, {}
    for name in arms:
        torch.manual_seed(0)
        models[name] = AutoModelForCausalLM.from_config(task_config(configs[name], task, True)).train()
        opts[name] = torch.optim.AdamW(models[name].parameters(), lr=1e-3)
    best = {name: float("inf") for name in arms}

    def timed(name: str) -> float:
        gc.collect()
        gc.disable()
        t0 = time.process_time()
        _step(models[name], opts[name], ids, targets)
        gc.enable()
        return time.process_time() - t0

    with fast_mamba_scan():
        for name in arms:  # warm-up
            _step(models[name], opts[name], ids, targets)
        for _ in range(repeats):
            for name in arms:
                best[name] = min(best[name], timed(name))
    own = {}
    if "hf-mamba" in arms:  # transformers' own scan: a Python loop over time that autograd unrolls
        _step(models["hf-mamba"], opts["hf-mamba"], ids, targets)
        own["hf-mamba"] = min(timed("hf-mamba") for _ in range(repeats))
    rows = []
    for name in [*arms, *(f"{n} (transformers' own scan)" for n in own)]:
        if name not in models:
            base = name.split(" ")[0]
            rows.append({**rows[list(arms).index(base)], "arm": name, "ms/step": round(1000 * own[base], 1),
                         "CPU-s per 2,000 steps": round(2000 * own[base])})
            continue
        arm = describe_arm(models[name].config, task.seq_len)
        rows.append({"arm": name, "write rule": arm["write_rule_label"], "state numbers": arm["state_numbers"],
                     "non-embedding parameters": parameter_counts(models[name]).non_embedding,
                     "ms/step": round(1000 * best[name], 1),
                     "CPU-s per 2,000 steps": round(2000 * best[name])})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = UsageParser(prog="python -m benchmarks.bench_recall_arms", description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", type=Path, required=True, metavar="DIR",
                   help="folder for recall_arms.json and recall_arms.md (created; files of the same names replaced)")
    p.add_argument("--quick", action="store_true", help="five arms at batch 8: a smoke run")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    p.add_argument("--repeats", type=positive_int, default=None, help="timed steps per arm (default 5, quick 1)")
    args = p.parse_args(argv)
    if args.output_dir.exists() and not args.output_dir.is_dir():
        p.error(f"argument --output_dir: {str(args.output_dir)!r} exists and is not a folder")
    torch.set_num_threads(args.threads)
    repeats = args.repeats or (1 if args.quick else 5)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    rows = run(QUICK_ARMS if args.quick else ARMS, 8 if args.quick else 128, 16, repeats)
    command = "python -m benchmarks.bench_recall_arms " + " ".join(sys.argv[1:] if argv is None else argv)
    rendered = table(rows, list(rows[0]), f"Recall arms, one training step at batch {8 if args.quick else 128} x 48 "
                                          f"tokens, {args.threads} thread(s), CPU time, min of {repeats}")
    print(rendered)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    report = {"command": command, "started_utc": started, "seconds": time.perf_counter() - t0, "machine": machine(),
              "rows": rows}
    write_text(args.output_dir / "recall_arms.json", json.dumps(report, indent=1) + "\n")
    write_text(args.output_dir / "recall_arms.md", f"`{command}` ({started})\n\n{rendered}")
    print(f"wrote {args.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
