"""Trace operator: production path vs the naive reference vs a plain copy of the same bytes.

Bytes are the operator's floor, what any implementation that returns float32 traces must move:
forward reads ``x`` and writes the S traces; backward reads the S trace gradients and writes
``dx``. Achieved GB/s = those bytes / time. The bandwidth yardstick is ``clone()`` of a float32
tensor the size of the traces, counted as read + write: like the operator it allocates its
output, which on CPU means first-touch page faults that a copy into a warm buffer never pays;
the warm ``copy_`` rate is reported too.
"""

from __future__ import annotations

from typing import Any

import torch

from modeling_spen.traces import ema_traces
from modeling_spen.traces_chunk import chunked_lti
from modeling_spen.traces_naive import ema_traces_naive

from .common import measure, table

DECAYS = (0.5, 0.1, 0.02)
# B*T*D = 1e5 .. 1e8 with D = 1000 channels and T = 1000 steps (T = 100 at the smallest).
SHAPES = {1e5: (1, 100, 1000), 1e6: (1, 1000, 1000), 1e7: (10, 1000, 1000), 1e8: (100, 1000, 1000)}
# The float64 reference and the previous Toeplitz path are capped: at 1e8 they would need tens of
# GB for saved activations and minutes per call. Their rows stop at this size.
SLOW_CAP = 1e7


def _methods(alpha: torch.Tensor) -> dict[str, Any]:
    def toeplitz(x: torch.Tensor) -> torch.Tensor:
        # The previous production path (kept for learned rates): autograd through the Toeplitz form.
        a = alpha.float()[:, None]
        return chunked_lti(a * x.float()[:, :, None, :], torch.log1p(-a), None, 64)

    return {
        "fast": lambda x: ema_traces(x, alpha)[0],
        "toeplitz (previous)": toeplitz,
        "naive fp64": lambda x: ema_traces_naive(x, alpha)[0],
    }


def run(sizes: list[float], dtypes: list[str], repeats: int, device: str = "cpu", slow_cap: float = SLOW_CAP) -> dict:
    alpha = torch.tensor(DECAYS, device=device)
    S = len(DECAYS)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        B, T, D = SHAPES[n]
        numel = B * T * D
        src = torch.randn(B, T, S, D, device=device)
        dst = torch.empty_like(src)
        copy_bytes = 2 * src.numel() * src.element_size()
        # Calls at <= 1e6 take milliseconds, where a shared machine's noise hits hardest: repeat more.
        fast_reps = max(repeats, 10) if n <= 1e6 else repeats
        clone_t = measure(lambda src=src: src.clone(), fast_reps, device=device)
        warm_t = measure(lambda src=src, dst=dst: dst.copy_(src), fast_reps, device=device)
        copy_gbs = copy_bytes / clone_t.min / 1e9
        base = {"size": n, "B": B, "T": T, "D": D}
        rows.append({**base, "method": "copy (clone)", "dtype": "fp32", "pass": "-",
                     **clone_t.as_dict(), "GB/s": copy_gbs, "ratio_to_copy": 1.0})  # fmt: skip
        rows.append({**base, "method": "copy_ (warm buffer)", "dtype": "fp32", "pass": "-",
                     **warm_t.as_dict(), "GB/s": copy_bytes / warm_t.min / 1e9,
                     "ratio_to_copy": clone_t.min / warm_t.min})  # fmt: skip
        grad = torch.randn(B, T, S, D, device=device)
        grad64 = grad.double() if n <= slow_cap and device == "cpu" else None
        methods = _methods(alpha)
        if device != "cpu":
            # On a GPU "fast" is the Triton kernel when importable; time the PyTorch fallback too.
            methods["fast (torch fallback)"] = lambda x: ema_traces(x, alpha, backend="torch")[0]
        for dtype_name in dtypes:
            dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
            x = torch.randn(B, T, D, device=device).to(dtype)
            xb = x.element_size()
            fwd_bytes = numel * (xb + 4 * S)
            bwd_bytes = numel * (4 * S + xb)
            for name, fn in methods.items():
                slow = not name.startswith("fast")
                if slow and n > slow_cap:
                    continue
                if name == "naive fp64" and device != "cpu":
                    continue  # a Python loop of T tiny kernels: it measures launch latency
                # A reference call at 1e7 takes seconds: one timed call, no warm-up, is enough there.
                reps, warm = (1, 0) if slow and n >= 1e7 else (repeats if slow else fast_reps, 1)
                fwd_t = measure(lambda fn=fn, x=x: fn(x), reps, warmup=warm, device=device)
                xg = x.detach().clone().requires_grad_()

                g = grad64 if name == "naive fp64" else grad

                def fwd_bwd(fn=fn, xg=xg, g=g) -> None:
                    xg.grad = None
                    fn(xg).backward(g)

                fb_t = measure(fwd_bwd, reps, warmup=warm, device=device)
                for label, t, nbytes in (("fwd", fwd_t, fwd_bytes), ("fwd+bwd", fb_t, fwd_bytes + bwd_bytes)):
                    gbs = nbytes / t.min / 1e9
                    rows.append({**base, "method": name, "dtype": dtype_name, "pass": label, **t.as_dict(),
                                 "GB/s": gbs, "ratio_to_copy": gbs / copy_gbs})  # fmt: skip
                del xg
        del src, dst, grad, grad64
    # Speed-up of the production path over the reference, measured in this same run.
    for r in rows:
        if r["method"] == "fast":
            ref = next((q for q in rows if q["method"] == "naive fp64" and q["size"] == r["size"]
                        and q["dtype"] == r["dtype"] and q["pass"] == r["pass"]), None)  # fmt: skip
            r["speedup_vs_naive"] = ref["min_s"] / r["min_s"] if ref else None
    return {"rows": rows, "decays": list(DECAYS), "slow_cap": slow_cap}


def render(result: dict) -> str:
    cols = ["size", "dtype", "method", "pass", "min_s", "median_s", "GB/s", "ratio_to_copy", "speedup_vs_naive"]
    rows = [{**r, "size": f"{r['size']:.0e}"} for r in result["rows"]]
    return table(rows, cols, "Trace operator, S = 3 fixed decays (times in s; GB/s of the byte floor)")


def run_chunks(sizes: list[float], chunks: list[int], repeats: int, device: str = "cpu") -> dict:
    """The fixed-rate path's chunk length: fp32 forward and forward+backward at each size."""
    alpha = torch.tensor(DECAYS, device=device)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        B, T, D = SHAPES[n]
        x = torch.randn(B, T, D, device=device)
        grad = torch.randn(B, T, len(DECAYS), D, device=device)
        xg = x.clone().requires_grad_()
        for chunk in chunks:

            def fwd(chunk=chunk, x=x) -> None:
                ema_traces(x, alpha, chunk_size=chunk, backend="torch")

            def fwd_bwd(chunk=chunk, xg=xg, grad=grad) -> None:
                xg.grad = None
                ema_traces(xg, alpha, chunk_size=chunk, backend="torch")[0].backward(grad)

            fwd_t = measure(fwd, repeats, device=device)
            fb_t = measure(fwd_bwd, repeats, device=device)
            rows.append({"size": n, "chunk": chunk, "fwd_min_s": fwd_t.min, "fwd_median_s": fwd_t.median,
                         "fwd_bwd_min_s": fb_t.min, "fwd_bwd_median_s": fb_t.median, "repeats": repeats})  # fmt: skip
    return {"rows": rows}


def render_chunks(result: dict) -> str:
    rows = [{**r, "size": f"{r['size']:.0e}"} for r in result["rows"]]
    cols = ["size", "chunk", "fwd_min_s", "fwd_median_s", "fwd_bwd_min_s", "fwd_bwd_median_s"]
    return table(rows, cols, "Fixed-rate path, chunk length sweep (fp32, times in s)")
