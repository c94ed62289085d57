"""The selective scan (``trace="selective_ssm"``): the fused per-step path against the chunked scan, side by side.

    python -m benchmarks.bench_ssm --threads 1 --output_dir DIR        # ~5 min on a loaded 2-core machine
    python -m benchmarks.bench_ssm --quick --output_dir DIR            # smoke run, seconds

Two tables. **Operator**: :func:`modeling_spen.traces_ssm.selective_ssm` forward and forward + backward, with
``fused=False`` (the chunked scan) and ``fused=True`` (the per-step path), over batch, length and state size
at width 64 (S = 3 readouts); the last column is what the default choice (``use_fused_scan``) takes. **Training
step**: one AdamW step of the recall map's selective-SSM arms (``eval.recall.default_map_configs``: width 64,
2 layers) at batch 128 x 48 tokens, the whole model, with the choice forced either way. Calls of the two paths
alternate, and each cell is the minimum over its repeats of the process's CPU time (one torch thread: on a
loaded machine wall time also counts the time the scheduler gave to other jobs).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from ema_boundary.io import write_text
from ema_boundary.usage import UsageParser, positive_int
from eval.recall import default_map_configs
from modeling_spen import SPENForCausalLM, traces_ssm

from .common import machine, table

WIDTH, READOUTS = 64, 3
# (batch, T, N): the recall map's shape (128 x 48) at N = 1..64, smaller batches around the crossover, and long
# sequences of a few rows (a prompt, a long-context batch).
OP_GRID: list[tuple[int, int, int]] = [
    *[(b, 48, n) for b in (8, 32, 128) for n in (1, 3, 16, 64)],
    (128, 48, 2), (64, 48, 3), (64, 48, 4), (16, 48, 16),
    *[(b, 512, n) for b in (2, 8, 32) for n in (3, 16, 64)],
    (1, 1024, 16),
]  # fmt: skip
QUICK_GRID: list[tuple[int, int, int]] = [(8, 16, 3), (32, 16, 16)]
STEP_ARMS = {3: "linear-selective_ssm3", 16: "linear-selective_ssm", 64: "linear-selective_ssm64"}


def _inputs(batch: int, T: int, N: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    u = torch.randn(batch, T, WIDTH, generator=g)
    dt = torch.nn.functional.softplus(torch.randn(batch, T, WIDTH, generator=g) - 2)
    A = -torch.arange(1.0, N + 1).expand(WIDTH, N).clone()
    B = torch.randn(batch, T, N, generator=g)
    C = torch.randn(batch, T, READOUTS, N, generator=g)
    return [t.requires_grad_() for t in (u, dt, A, B, C)]


def _cpu_seconds(fn: Callable[[], object]) -> float:
    """CPU seconds of one call of ``fn`` in this process (one thread), the cyclic collector kept out of it."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0
    finally:
        gc.enable()


def _time_operator(batch: int, T: int, N: int, repeats: int) -> dict[tuple[str, bool], float]:
    """CPU seconds (min over repeats) of ``(pass, fused)``, pass ``"fwd"`` or ``"fwd+bwd"``."""
    inputs = _inputs(batch, T, N)
    w = torch.randn(batch, T, READOUTS, WIDTH)

    def forward(fused: bool) -> None:
        with torch.no_grad():
            traces_ssm.selective_ssm(*inputs, fused=fused)

    def train(fused: bool) -> None:
        y, last = traces_ssm.selective_ssm(*inputs, fused=fused)
        ((y * w).sum() + last.sum()).backward()

    best: dict[tuple[str, bool], float] = {}
    for fn in (forward, train):  # warm-up: allocator, first-touch pages
        for fused in (False, True):
            fn(fused)
    for _ in range(repeats):  # alternate the paths: load on the machine hits both alike
        for name, fn in (("fwd", forward), ("fwd+bwd", train)):
            for fused in (False, True):
                t = _cpu_seconds(lambda fn=fn, fused=fused: fn(fused))
                best[name, fused] = min(best.get((name, fused), t), t)
    return best


def run_operator(grid: list[tuple[int, int, int]], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for batch, T, N in grid:
        best = _time_operator(batch, T, N, repeats)
        chosen = traces_ssm.use_fused_scan(batch, WIDTH, N, T, torch.device("cpu"))
        rows.append({"B": batch, "T": T, "D": WIDTH, "N": N, "slice B*D*N": batch * WIDTH * N,
                     "fwd chunked ms": 1e3 * best["fwd", False], "fwd fused ms": 1e3 * best["fwd", True],
                     "fwd+bwd chunked ms": 1e3 * best["fwd+bwd", False],
                     "fwd+bwd fused ms": 1e3 * best["fwd+bwd", True],
                     "fwd+bwd speedup": best["fwd+bwd", False] / best["fwd+bwd", True],
                     "default": "fused" if chosen else "chunked"})  # fmt: skip
        print(table(rows[-1:], list(rows[-1]), "operator"), flush=True)
    return rows


def _time_step(model: torch.nn.Module, ids: torch.Tensor, repeats: int) -> dict[bool, float]:
    """CPU seconds (min over repeats) of one AdamW step on ``ids``, by whether the fused path is forced."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    best: dict[bool, float] = {}
    for rep in range(repeats + 1):  # the first round warms up, untimed
        for fused in (False, True):
            with mock.patch.object(traces_ssm, "FUSED_MIN_SLICE", 1 if fused else sys.maxsize):
                t = _cpu_seconds(step)
            if rep > 0:
                best[fused] = min(best.get(fused, t), t)
    return best


def run_step(state_sizes: list[int], batch: int, T: int, repeats: int) -> list[dict[str, Any]]:
    configs = default_map_configs()
    rows = []
    for N in state_sizes:
        torch.manual_seed(0)
        model = SPENForCausalLM(configs[STEP_ARMS[N]])
        best = _time_step(model, torch.randint(1, model.config.vocab_size, (batch, T)), repeats)
        rows.append({"arm": STEP_ARMS[N], "N": N, "batch x T": f"{batch} x {T}",
                     "chunked ms/step": 1e3 * best[False], "fused ms/step": 1e3 * best[True],
                     "speedup": best[False] / best[True]})  # fmt: skip
        print(table(rows[-1:], list(rows[-1]), "training step"), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = UsageParser(prog="python -m benchmarks.bench_ssm", description=__doc__.split("\n\n")[0])
    p.add_argument("--output_dir", type=Path, required=True, metavar="DIR",
                   help="folder for ssm.json and ssm.md (created; files of the same names replaced)")
    p.add_argument("--quick", action="store_true", help="two small operator shapes and one N = 3 step: a smoke run")
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads")
    p.add_argument("--repeats", type=positive_int, default=None, help="timed calls per cell (default 5, quick 1)")
    args = p.parse_args(argv)
    if args.output_dir.exists() and not args.output_dir.is_dir():
        p.error(f"argument --output_dir: {str(args.output_dir)!r} exists and is not a folder")
    torch.set_num_threads(args.threads)
    repeats = args.repeats or (1 if args.quick else 5)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.perf_counter()
    op = run_operator(QUICK_GRID if args.quick else OP_GRID, repeats)
    step = run_step([3] if args.quick else [3, 16, 64], 8 if args.quick else 128, 16 if args.quick else 48, repeats)
    command = "python -m benchmarks.bench_ssm " + " ".join(sys.argv[1:] if argv is None else argv)
    report = {"command": command, "started_utc": started, "seconds": time.perf_counter() - t0, "machine": machine(),
              "fused_min_slice": traces_ssm.FUSED_MIN_SLICE,
              "fused_min_state": traces_ssm.FUSED_MIN_STATE, "operator": op, "step": step}
    how = f"{args.threads} thread(s), CPU time, min of {repeats}"
    rendered = (table(op, list(op[0]), f"Selective scan operator, width {WIDTH}, S = {READOUTS}, fp32, {how}") + "\n"
                + table(step, list(step[0]), f"Training step of the recall map's selective-SSM arms, {how}"))
    print(rendered)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    write_text(args.output_dir / "ssm.json", json.dumps(report, indent=1) + "\n")
    write_text(args.output_dir / "ssm.md", f"`{command}` ({started})\n\n{rendered}")
    print(f"wrote {args.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
