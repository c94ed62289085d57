"""The fused Triton trace kernel against the float64 reference, on CPU via Triton's interpreter.

``TRITON_INTERPRET=1`` only takes effect if it is set before triton is first imported, and
another test in the same pytest session may already have imported it (transformers does, when
it is installed). So the checks run in one fresh subprocess with the variable set, and each
test below asserts on its share of that subprocess's report. Sizes are tiny: the interpreter
runs every program instance in Python. Speed is measured on a GPU (``benchmarks/gpu.sh``).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]

_CHILD = textwrap.dedent(
    """
    import json
    import torch
    from modeling_spen.traces import ema_traces
    from modeling_spen.traces_naive import ema_traces_naive
    from modeling_spen.traces_triton import ema_traces_triton

    def rel(fast, ref):
        return ((fast.double() - ref).abs().max() / ref.abs().max()).item()

    report = {}
    torch.manual_seed(0)
    cases = {
        "fixed": (2, 37, 40, torch.tensor([0.5, 0.1, 0.02])),
        "per_channel": (2, 19, 130, torch.rand(3, 130) * 0.9 + 0.05),  # D over one 128 block
        "one_rate": (1, 9, 7, torch.tensor([0.25])),
        "five_rates": (1, 9, 7, torch.tensor([0.9, 0.5, 0.1, 0.02, 0.001])),
        "single_step": (3, 1, 5, torch.tensor([0.5, 0.1, 0.02])),
    }
    for name, (B, T, D, alpha) in cases.items():
        S = alpha.shape[0]
        x = torch.randn(B, T, D, dtype=torch.float64)
        h0 = torch.randn(B, S, D, dtype=torch.float64)
        w = torch.randn(B, T, S, D, dtype=torch.float64)
        xr, hr = x.clone().requires_grad_(), h0.clone().requires_grad_()
        ref, _ = ema_traces_naive(xr, alpha.double(), hr)
        (ref * w).sum().backward()
        xf, hf = x.float().requires_grad_(), h0.float().requires_grad_()
        out = ema_traces_triton(xf, alpha, hf)
        (out * w.float()).sum().backward()
        report[name] = {
            "dtype": str(out.dtype),
            "traces": rel(out, ref.detach()),
            "dx": rel(xf.grad, xr.grad),
            "dh0": rel(hf.grad, hr.grad),
        }

    # No h0, bf16 input: fp32 traces, bf16 gradient; ema_traces routes to the kernel on request.
    x = torch.randn(2, 23, 16).bfloat16().requires_grad_()
    traces, last = ema_traces(x, torch.tensor([0.5, 0.1, 0.02]), backend="triton")
    traces.sum().backward()
    xr = x.detach().double().requires_grad_()
    ref, _ = ema_traces_naive(xr, torch.tensor([0.5, 0.1, 0.02]))
    ref.sum().backward()
    report["bf16_dispatch"] = {
        "dtype": str(traces.dtype),
        "grad_dtype": str(x.grad.dtype),
        "traces": rel(traces, ref.detach()),
        "dx": rel(x.grad.float(), xr.grad),
        "last_is_final_trace": bool(torch.equal(last, traces[:, -1])),
    }
    print("REPORT" + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def report() -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("REPORT"))
    return json.loads(line[len("REPORT") :])


@pytest.mark.slow
@pytest.mark.parametrize("case", ["fixed", "per_channel", "one_rate", "five_rates", "single_step"])
def test_kernel_matches_reference(report: dict, case: str) -> None:
    r = report[case]
    assert r["dtype"] == "torch.float32"
    assert r["traces"] < 1e-5
    assert r["dx"] < 1e-5
    assert r["dh0"] < 1e-5


@pytest.mark.slow
def test_bf16_input_through_ema_traces(report: dict) -> None:
    r = report["bf16_dispatch"]
    assert r["dtype"] == "torch.float32" and r["grad_dtype"] == "torch.bfloat16"
    assert r["traces"] < 1e-5  # the input is exactly representable; accumulation is fp32
    assert r["dx"] < 1e-2  # the gradient is rounded to bf16 on the way out
    assert r["last_is_final_trace"]


def test_kernel_module_imports_without_interpreter() -> None:
    # The fallback contract: importing never fails; the CPU path is used for CPU tensors.
    import torch

    from modeling_spen.traces import ema_traces

    traces, _ = ema_traces(torch.randn(1, 5, 3), torch.tensor([0.5]))
    assert traces.device.type == "cpu"
