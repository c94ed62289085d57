"""Run the benchmarks, print their tables, write them with the raw results into one folder.

    python -m benchmarks.run --output_dir bench/                       # the CPU suite (~15 min on 2 cores)
    python -m benchmarks.run --quick --output_dir bench-quick/          # smoke run, about a minute
    python -m benchmarks.run --only throughput --threads 1 --output_dir bench/   # training throughput, ~3 min
    python -m benchmarks.run --device cuda --output_dir gpu/            # the GPU suite (benchmarks/gpu.sh)

The folder gets results.json (every number, the command and the machine) and tables.md (the tables printed).
``--out FILE.json`` (the older form) writes the JSON alone to that file.

Every ratio in a table (SPEN over GPT-2, fast path over the reference, operator over copy) is
measured within the same run, side by side, so machine-wide noise hits both sides alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from ema_boundary.io import write_text
from ema_boundary.usage import UsageParser, positive_int

from . import bench_decode, bench_ffn, bench_spcn, bench_throughput, bench_traces, bench_train, tables
from .common import machine

BENCHMARKS = ("traces", "chunks", "train", "decode", "spcn", "ffn", "throughput")
SPEN_130M = {"width": 768, "depth": 12, "heads": 12, "vocab": 50257}

# Suites. "cpu": full-size decoding (cheap per token), but training at a reduced size: a
# 130M-parameter step at T = 4096 takes minutes on two cores. Width 256 / depth 4 / vocab 8192
# keeps the LM head's share of the parameters close to the full model's.
SUITES: dict[str, dict[str, Any]] = {
    "quick": {
        "traces": {"sizes": [1e5, 1e6], "dtypes": ["fp32", "bf16"], "repeats": 2, "slow_cap": 1e5},
        "chunks": {"sizes": [1e5], "chunks": [16, 64], "repeats": 2},
        "train": {"seq_lens": [64, 256], "tokens_per_step": 512, "repeats": 1,
                  "size": {"width": 64, "depth": 2, "heads": 4, "vocab": 1024}},
        "decode": {"contexts": [128, 1024], "batches": [1, 16], "steps": 3,
                   "size": {"width": 64, "depth": 2, "heads": 4, "vocab": 1024}},
        "spcn": {"n_sentences": 64, "repeats": 1, "probe_epochs": 5},
        "ffn": {"size": {"width": 32, "depth": 1, "heads": 2, "ffn": 128, "vocab": 256}, "batch": 2, "seq_len": 32,
                "mask_shapes": [[64, 128, 8]], "repeats": 1},
        "throughput": {"seeds": 2, "repeats": 1, "short": 2, "long": 4, "data_steps": 5,
                       "engines": ["sequential", "stacked"]},
    },
    "cpu": {
        "traces": {"sizes": [1e5, 1e6, 1e7, 1e8], "dtypes": ["fp32", "bf16"], "repeats": 3},
        "chunks": {"sizes": [1e6, 1e7], "chunks": [8, 16, 32, 64], "repeats": 3},
        "train": {"seq_lens": [256, 1024, 4096], "tokens_per_step": 4096, "repeats": 3,
                  "size": {"width": 256, "depth": 4, "heads": 4, "vocab": 8192}},
        "decode": {"contexts": [128, 512, 1024, 2048, 4096, 8192], "batches": [1, 16], "steps": 8,
                   "size": SPEN_130M, "max_cache_bytes": 5.5e9},
        "spcn": {"n_sentences": 1024, "repeats": 3, "probe_epochs": 8},
        # The tiny SPEN of hub_configs/spen-tiny at its training micro-batch (8 x 128), and the mask at the
        # tiny and the 130M FFN shapes (k = 6% of the width).
        "ffn": {"size": {"width": 64, "depth": 2, "heads": 4, "ffn": 256, "vocab": 1024}, "batch": 8, "seq_len": 128,
                "mask_shapes": [[1024, 256, 15], [4096, 256, 15], [2048, 2048, 123]], "repeats": 10},
        # The report's headline pair at its shape; train.py runs of 3 and 68 steps: the 65 steps between them
        # hold one evaluation, as the YAMLs' eval_steps (65) do.
        "throughput": {"seeds": 5, "repeats": 5, "short": 3, "long": 68, "data_steps": 100,
                       "engines": ["sequential", "stacked"]},
    },
    "gpu": {
        "traces": {"sizes": [1e5, 1e6, 1e7, 1e8], "dtypes": ["fp32", "bf16"], "repeats": 10},
        "chunks": {"sizes": [1e7], "chunks": [16, 64], "repeats": 5},
        "train": {"seq_lens": [256, 1024, 4096], "tokens_per_step": 16384, "repeats": 5, "dtype": "bf16",
                  "size": SPEN_130M},
        "decode": {"contexts": [128, 512, 1024, 2048, 4096, 8192], "batches": [1, 16], "steps": 20,
                   "size": SPEN_130M, "max_cache_bytes": 40e9},
        "spcn": {"n_sentences": 1024, "repeats": 3, "probe_epochs": 8},
    },
}  # fmt: skip


def _only(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in BENCHMARKS]
    if not names or bad:
        raise argparse.ArgumentTypeError(f"unknown benchmark {bad or value!r}; choose from {', '.join(BENCHMARKS)}")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = UsageParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", type=Path, metavar="DIR",
                   help="folder for results.json and tables.md (created; files of the same names replaced)")
    p.add_argument("--out", type=Path, metavar="FILE.json",
                   help="the older form: write the JSON results alone to this file (one of the two is required)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, one or two repeats: a smoke run")
    p.add_argument("--only", type=_only, default=list(BENCHMARKS), help=f"comma-separated subset of {BENCHMARKS}")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cuda runs the GPU suite")
    p.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (unset: torch's default)")
    p.add_argument("--repeats", type=positive_int, default=None,
                   help="override every benchmark's repeats (unset: the suite's)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("argument --device: cuda requested but torch.cuda.is_available() is False")
    if (args.output_dir is None) == (args.out is None):
        p.error("argument --output_dir: give --output_dir DIR (or the older --out FILE.json), one of the two")
    if args.out is not None and (args.out.is_dir() or not args.out.parent.exists()):
        p.error(f"argument --out: {str(args.out)!r} is not a writable file path")
    if args.output_dir is not None:
        if args.output_dir.exists() and not args.output_dir.is_dir():
            p.error(f"argument --output_dir: {str(args.output_dir)!r} exists and is not a folder")
        if not args.output_dir.parent.exists():
            p.error(f"argument --output_dir: the parent of {str(args.output_dir)!r} does not exist")
    return args


def _write(args: argparse.Namespace, report: dict[str, Any], rendered: list[str]) -> None:
    text = json.dumps(report, indent=1, allow_nan=False) + "\n"
    if args.out is not None:
        write_text(args.out, text)
        return
    args.output_dir.mkdir(exist_ok=True)
    write_text(args.output_dir / "results.json", text)
    write_text(args.output_dir / "tables.md", f"`{report['command']}` ({report['suite']} suite, "
                                              f"{report['started_utc']})\n\n" + "\n".join(rendered))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    suite_name = "quick" if args.quick else ("gpu" if args.device == "cuda" else "cpu")
    suite = SUITES[suite_name]
    runners = {
        "traces": lambda c: bench_traces.run(
            c["sizes"], c["dtypes"], c["repeats"], device=args.device, slow_cap=c.get("slow_cap", bench_traces.SLOW_CAP)
        ),
        "chunks": lambda c: bench_traces.run_chunks(c["sizes"], c["chunks"], c["repeats"], device=args.device),
        "train": lambda c: bench_train.run(c["seq_lens"], c["tokens_per_step"], c["size"], c["repeats"],
                                           device=args.device, dtype=c.get("dtype", "fp32")),
        "decode": lambda c: bench_decode.run(c["contexts"], c["batches"], c["size"], c["steps"], device=args.device,
                                             max_cache_bytes=c.get("max_cache_bytes", 4e9)),
        "spcn": lambda c: bench_spcn.run(c["n_sentences"], c["repeats"], c["probe_epochs"]),
        "ffn": lambda c: bench_ffn.run(c["size"], c["batch"], c["seq_len"], c["mask_shapes"], c["repeats"]),
        "throughput": lambda c: bench_throughput.run(c["seeds"], c["repeats"], c["short"], c["long"], c["data_steps"],
                                                     c["engines"], c.get("end_to_end", True)),
    }  # fmt: skip
    renderers = tables.RENDER
    report: dict[str, Any] = {
        "command": "python -m benchmarks.run " + " ".join(sys.argv[1:] if argv is None else argv),
        "suite": suite_name,
        "machine": machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "results": {},
    }
    rendered: list[str] = []
    for name in args.only:
        if name not in suite:  # the ffn and throughput benchmarks are CPU-only
            print(f"{name}: not in the {suite_name} suite, skipped", flush=True)
            continue
        cfg = dict(suite[name])
        if args.repeats and "repeats" in cfg:
            cfg["repeats"] = args.repeats
        if args.repeats and "steps" in cfg:
            cfg["steps"] = args.repeats
        t0 = time.perf_counter()
        result = runners[name](cfg)
        result["seconds"] = time.perf_counter() - t0
        result["settings"] = cfg
        report["results"][name] = result
        rendered.append(renderers[name](result))
        print(rendered[-1], flush=True)
        # Written after every benchmark: a long run that dies still leaves what it measured.
        _write(args, report, rendered)
    print(f"wrote {args.out or args.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
