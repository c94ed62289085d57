"""The fixed-rate fast path (GEMM per chunk, hand-written reverse-time backward) in detail.

``tests/test_traces.py`` checks values and input gradients against the float64 reference; these
add what a custom autograd Function can get wrong on its own: the gradient of the initial
state, chunk remainders in the backward pass, strided or broadcast incoming gradients, and
gradient dtypes.
"""

import pytest
import torch

from modeling_spen.traces import ema_traces
from modeling_spen.traces_fixed import _FixedRateEMA
from modeling_spen.traces_naive import ema_traces_naive

DECAYS = torch.tensor([0.5, 0.1, 0.02])


def _rel_err(fast: torch.Tensor, ref: torch.Tensor) -> float:
    return ((fast.double() - ref).abs().max() / ref.abs().max()).item()


def _grads(T: int, chunk: int | None, S_rates: torch.Tensor = DECAYS) -> None:
    torch.manual_seed(T)
    S = S_rates.shape[0]
    x = torch.randn(3, T, 5, dtype=torch.float64)
    h0 = torch.randn(3, S, 5, dtype=torch.float64)
    w = torch.randn(3, T, S, 5, dtype=torch.float64)
    xr, hr = x.clone().requires_grad_(), h0.clone().requires_grad_()
    ref, ref_last = ema_traces_naive(xr, S_rates.double(), hr)
    ((ref * w).sum() + ref_last.sum()).backward()
    xf, hf = x.float().requires_grad_(), h0.float().requires_grad_()
    fast, last = ema_traces(xf, S_rates, hf, chunk_size=chunk)
    ((fast * w.float()).sum() + last.sum()).backward()
    assert _rel_err(fast, ref.detach()) < 1e-5
    assert _rel_err(xf.grad, xr.grad) < 1e-5
    assert _rel_err(hf.grad, hr.grad) < 1e-5


@pytest.mark.parametrize("T", [1, 2, 15, 16, 17, 100])
@pytest.mark.parametrize("chunk", [None, 2, 5, 16, 64])
def test_input_and_state_gradients(T: int, chunk: int | None) -> None:
    _grads(T, chunk)


@pytest.mark.parametrize("rates", [[0.3], [0.9, 0.05], [0.5, 0.1, 0.02, 0.001]])
def test_any_number_of_rates(rates: list[float]) -> None:
    _grads(37, None, torch.tensor(rates))


def test_broadcast_and_strided_incoming_gradients() -> None:
    # .sum() hands backward an expanded (stride-0) gradient; a transpose hands a strided one.
    x = torch.randn(2, 40, 6, requires_grad=True)
    ema_traces(x, DECAYS)[0].sum().backward()
    expected = _reference_grad_of_sum(x.detach())
    assert _rel_err(x.grad, expected) < 1e-5
    x.grad = None
    w = torch.randn(2, 6, 3, 40).permute(0, 3, 2, 1)  # (B, T, S, D), non-contiguous
    (ema_traces(x, DECAYS)[0] * w).sum().backward()
    xr = x.detach().double().requires_grad_()
    (ema_traces_naive(xr, DECAYS)[0] * w.double()).sum().backward()
    assert _rel_err(x.grad, xr.grad) < 1e-5


def _reference_grad_of_sum(x: torch.Tensor) -> torch.Tensor:
    xr = x.double().requires_grad_()
    ema_traces_naive(xr, DECAYS)[0].sum().backward()
    return xr.grad


def test_bf16_input_gets_bf16_gradient_and_fp32_traces() -> None:
    x = torch.randn(2, 50, 8).bfloat16().requires_grad_()
    traces, _ = ema_traces(x, DECAYS)
    assert traces.dtype == torch.float32
    traces.sum().backward()
    assert x.grad.dtype == torch.bfloat16
    assert _rel_err(x.grad.float(), _reference_grad_of_sum(x.detach().float())) < 1e-2  # bf16 rounding


def test_rates_with_gradient_take_the_autograd_path() -> None:
    alpha = DECAYS.clone().requires_grad_()
    x = torch.randn(1, 30, 4)
    traces, _ = ema_traces(x, alpha)
    assert not isinstance(traces.grad_fn, _FixedRateEMA._backward_cls)
    traces.sum().backward()
    assert alpha.grad is not None and torch.isfinite(alpha.grad).all()


def test_fixed_rates_without_gradient_take_the_fast_path() -> None:
    traces, _ = ema_traces(torch.randn(1, 30, 4, requires_grad=True), DECAYS)
    assert isinstance(traces.grad_fn, _FixedRateEMA._backward_cls)


def test_backend_argument_is_checked() -> None:
    with pytest.raises(ValueError, match="backend must be"):
        ema_traces(torch.zeros(1, 3, 4), DECAYS, backend="cuda")


def test_empty_sequence() -> None:
    traces, last = ema_traces(torch.zeros(2, 0, 4), DECAYS)
    assert traces.shape == (2, 0, 3, 4) and last.shape == (2, 3, 4)
