"""Timing, memory and table helpers shared by the benchmarks."""

from __future__ import annotations

import gc
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile


@dataclass
class Timing:
    """Wall-clock seconds of ``repeats`` calls after ``warmup`` untimed ones."""

    samples: list[float]

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def as_dict(self) -> dict[str, Any]:
        return {"min_s": self.min, "median_s": self.median, "repeats": len(self.samples)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(fn: Callable[[], Any], repeats: int, warmup: int = 1, device: torch.device | str = "cpu") -> Timing:
    """Time ``fn``: warm-up calls first (allocator, caches, lazy init), then ``repeats`` timed calls.

    On a shared machine the minimum is the most reproducible statistic (noise only adds time);
    the median is reported beside it.
    """
    device = torch.device(device)
    for _ in range(warmup):
        fn()
    _sync(device)
    # As timeit does: collect once, then keep the cyclic collector out of the timed calls (with
    # transformers loaded one collection costs tens of ms). Tensors are freed by refcount anyway.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    samples = []
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            _sync(device)
            samples.append(time.perf_counter() - t0)
    finally:
        if was_enabled:
            gc.enable()
    return Timing(samples)


def peak_memory(fn: Callable[[], Any], device: torch.device | str = "cpu") -> int:
    """Peak bytes of tensors allocated by one call of ``fn`` beyond those alive before it.

    CUDA: the caching allocator's peak. CPU: the same quantity rebuilt from the profiler's
    allocation records (per operator, in time order), since the process's resident set keeps
    freed heap pages and would hide the step's own peak. Parameters, gradients kept from an
    earlier step and optimiser state alive before the call are not counted.
    """
    device = torch.device(device)
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        live += event.self_cpu_memory_usage
        peak = max(peak, live)
    return peak


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        import triton  # optional: the triton extra (Linux GPUs); absent, the record says so

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def table(rows: list[dict[str, Any]], columns: list[str], title: str) -> str:
    """A GitHub-markdown table of ``rows`` (missing cells blank), floats in 3 significant digits."""

    def fmt(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1e3 else f"{v:,.0f}"
        return str(v)

    lines = [f"### {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"
