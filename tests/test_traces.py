"""The EMA trace operator: the fast paths against the float64 sequential reference."""

import pytest
import torch

from modeling_spen.traces import ema_step, ema_traces
from modeling_spen.traces_naive import ema_traces_naive

DECAYS = torch.tensor([0.5, 0.1, 0.02])


def _rel_err(fast: torch.Tensor, ref: torch.Tensor) -> float:
    return ((fast.double() - ref).abs().max() / ref.abs().max()).item()


def _alphas(B: int, T: int, D: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return {
        "fixed": DECAYS,
        "per_channel": torch.rand(3, D, generator=g) * 0.9 + 0.05,
        "selective": torch.rand(B, T, 3, D, generator=g) * 0.9 + 0.05,
    }


@pytest.mark.parametrize("T", [1, 7, 64, 65, 1000])
@pytest.mark.parametrize("kind", ["fixed", "per_channel", "selective"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_matches_reference(T: int, kind: str, with_h0: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, T, 8)
    alpha = _alphas(2, T, 8)[kind]
    h0 = torch.randn(2, 3, 8) if with_h0 else None
    ref, ref_last = ema_traces_naive(x, alpha, h0)
    fast, last = ema_traces(x, alpha, h0)
    assert fast.shape == (2, T, 3, 8) and fast.dtype == torch.float32
    assert _rel_err(fast, ref) < 1e-5
    assert _rel_err(last, ref_last) < 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fixed", "per_channel"])
def test_long_sequence_65536(kind: str) -> None:
    # Long enough that lam**(-t) would overflow float32 many times over.
    torch.manual_seed(0)
    T = 65536
    x = torch.randn(1, T, 4)
    alpha = _alphas(1, T, 4)[kind]
    ref, _ = ema_traces_naive(x, alpha)
    fast, _ = ema_traces(x, alpha)
    assert torch.isfinite(fast).all()
    assert _rel_err(fast, ref) < 1e-5


@pytest.mark.slow
def test_long_sequence_selective_65536() -> None:
    torch.manual_seed(0)
    T = 65536
    x = torch.randn(1, T, 2)
    alpha = torch.rand(1, T, 3, 2) * 0.9 + 0.05
    ref, _ = ema_traces_naive(x, alpha)
    fast, _ = ema_traces(x, alpha)
    assert _rel_err(fast, ref) < 1e-5


@pytest.mark.parametrize("kind", ["fixed", "per_channel", "selective"])
@pytest.mark.parametrize("T", [5, 130, 1500])
def test_gradients_match_autograd_of_reference(kind: str, T: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, T, 6, dtype=torch.float64)
    alpha = _alphas(1, T, 6)[kind].double()
    w = torch.randn(1, T, 3, 6, dtype=torch.float64)

    xr, ar = x.clone().requires_grad_(), alpha.clone().requires_grad_()
    (ema_traces_naive(xr, ar)[0] * w).sum().backward()
    xf, af = x.float().requires_grad_(), alpha.float().requires_grad_()
    (ema_traces(xf, af)[0] * w.float()).sum().backward()
    assert _rel_err(xf.grad, xr.grad) < 1e-5
    assert _rel_err(af.grad, ar.grad) < 1e-5


def _reference_input_grad(w: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """dL/dx for L = sum(w * h), by the sequential float64 backward recursion.

    The adjoint of h_t = lam_t h_{t-1} + a_t x_t runs backwards in time:
    g_t = w_t + lam_{t+1} g_{t+1}, and dL/dx_t = sum_s a_t^(s) g_t^(s).
    """
    B, T, S, D = w.shape
    a = alpha.double() if alpha.dim() == 4 else alpha.double().reshape(1, 1, S, -1)
    a = a.expand(B, T, S, D)
    lam = 1 - a
    g = torch.zeros(B, S, D, dtype=torch.float64)
    out = torch.empty(B, T, D, dtype=torch.float64)
    for t in reversed(range(T)):
        g = w[:, t] + (lam[:, t + 1] * g if t + 1 < T else 0)
        out[:, t] = (a[:, t] * g).sum(1)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fixed", "per_channel", "selective"])
def test_input_gradients_65536(kind: str) -> None:
    torch.manual_seed(0)
    T = 65536
    x = torch.randn(1, T, 2).requires_grad_()
    alpha = _alphas(1, T, 2)[kind]
    w = torch.randn(1, T, 3, 2, dtype=torch.float64)
    (ema_traces(x, alpha)[0] * w.float()).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert _rel_err(x.grad, _reference_input_grad(w, alpha)) < 1e-5


@pytest.mark.parametrize("chunk", [2, 3, 16, 64, 256])
def test_chunk_size_does_not_change_the_result(chunk: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 300, 5)
    ref, _ = ema_traces_naive(x, DECAYS)
    fast, _ = ema_traces(x, DECAYS, chunk_size=chunk)
    assert _rel_err(fast, ref) < 1e-5


def test_split_sequence_continues_from_state() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 100, 5)
    whole, _ = ema_traces(x, DECAYS)
    first, h = ema_traces(x[:, :37], DECAYS)
    second, _ = ema_traces(x[:, 37:], DECAYS, h0=h)
    torch.testing.assert_close(torch.cat([first, second], 1), whole, rtol=1e-5, atol=1e-6)


def test_step_matches_parallel_form() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 20, 5)
    full, _ = ema_traces(x, DECAYS)
    h = torch.zeros(2, 3, 5)
    for t in range(20):
        h = ema_step(x[:, t], DECAYS, h)
        torch.testing.assert_close(h, full[:, t], rtol=1e-5, atol=1e-6)


def test_bf16_input_accumulates_in_fp32() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 500, 8).bfloat16()
    ref, _ = ema_traces_naive(x.float(), DECAYS)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast, _ = ema_traces(x, DECAYS)
    assert fast.dtype == torch.float32
    assert _rel_err(fast, ref) < 1e-5


def test_first_trace_is_exactly_the_ema() -> None:
    x = torch.tensor([[[1.0], [0.0], [0.0]]])
    traces, _ = ema_traces(x, torch.tensor([0.5]))
    assert traces[0, :, 0, 0].tolist() == [0.5, 0.25, 0.125]


@pytest.mark.parametrize(
    "x, alpha, h0, match",
    [
        (torch.zeros(2, 3), DECAYS, None, "x must have shape"),
        (torch.zeros(1, 3, 4), torch.zeros(3, 5), None, "alpha of shape"),
        (torch.zeros(1, 3, 4), torch.zeros(1, 2, 3, 4), None, "input-dependent alpha"),
        (torch.zeros(1, 3, 4), DECAYS, torch.zeros(1, 2, 4), "h0 must have shape"),
        (torch.zeros(1, 3, 4), DECAYS, "chunk", "chunk_size must be >= 2"),
    ],
)
def test_bad_inputs_rejected(x, alpha, h0, match) -> None:
    with pytest.raises(ValueError, match=match):
        if h0 == "chunk":
            ema_traces(x, alpha, chunk_size=1)
        else:
            ema_traces(x, alpha, h0)
