#!/usr/bin/env bash
# Every GPU measurement of issue 8 in one run, a few minutes on one H100/H200-class GPU:
#   1. correctness of the Triton trace kernel on the GPU against the float64 reference;
#   2. the GPU suite of `python -m benchmarks.run --device cuda`: trace operator (Triton kernel,
#      PyTorch fallback, previous Toeplitz path, copy yardstick; fp32 and bf16, B*T*D 1e5..1e8;
#      chunk sweep of the fallback),
#      full-size training steps (SPEN 130M vs GPT-2 small with SDPA, bf16 autocast,
#      T = 256 / 1024 / 4096, 16384 tokens per step) and decoding (130M, batch 1 and 16, 128..8192).
# Usage: bash benchmarks/gpu.sh [OUT_DIR]   (default: $OUT if set, else ./gpu-results)
# Needs: a CUDA build of torch, triton, this repository as the working directory.
set -euo pipefail
out_dir="${1:-${OUT:-gpu-results}}"
mkdir -p "$out_dir"
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv | tee "$out_dir/gpu.txt"

python - <<'PY' 2>&1 | tee "$out_dir/triton_check.txt"
import torch
from modeling_spen.traces import ema_traces
from modeling_spen.traces_naive import ema_traces_naive

torch.manual_seed(0)
alpha = torch.tensor([0.5, 0.1, 0.02], device="cuda")
for B, T, D, dtype in [(2, 1000, 768, torch.float32), (3, 4097, 130, torch.bfloat16)]:
    x = torch.randn(B, T, D, device="cuda").to(dtype).requires_grad_()
    h0 = torch.randn(B, 3, D, device="cuda", requires_grad=True)
    w = torch.randn(B, T, 3, D, device="cuda")
    fast, _ = ema_traces(x, alpha, h0)  # auto: the Triton kernel on CUDA
    assert fast.grad_fn is not None and "Triton" in type(fast.grad_fn).__name__, type(fast.grad_fn)
    (fast * w).sum().backward()
    xr = x.detach().double().requires_grad_()
    hr = h0.detach().double().requires_grad_()
    ref, _ = ema_traces_naive(xr, alpha.double(), hr)
    (ref * w.double()).sum().backward()
    rel = lambda a, b: ((a.double() - b).abs().max() / b.abs().max()).item()
    tol_dx = 1e-5 if dtype == torch.float32 else 1e-2
    errs = (rel(fast, ref.detach()), rel(x.grad, xr.grad), rel(h0.grad, hr.grad))
    print(f"B={B} T={T} D={D} {dtype}: rel err traces {errs[0]:.2e} dx {errs[1]:.2e} dh0 {errs[2]:.2e}")
    assert errs[0] < 1e-5 and errs[1] < tol_dx and errs[2] < 1e-5
print("triton kernel: OK")
PY

python -m benchmarks.run --device cuda --only traces,chunks,train,decode --out "$out_dir/gpu.json" \
    | tee "$out_dir/gpu_tables.md"
