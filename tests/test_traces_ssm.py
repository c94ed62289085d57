"""The selective state space trace (S6): the chunked scan against the float64 loop, the module, decoding."""

import pytest
import torch

from modeling_spen import SPENConfig
from modeling_spen.traces_naive import selective_ssm_naive
from modeling_spen.traces_ssm import (
    SelectiveSSMTraces,
    dt_init_range,
    selective_scan,
    selective_ssm,
    selective_ssm_step,
)
from tests.test_modeling import tiny_model


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def _inputs(Bsz: int, T: int, D: int, N: int, S: int, dtype=torch.float64, seed: int = 0) -> list[torch.Tensor]:
    """Random S6 inputs ``u, dt, A, B, C, h0`` in the regimes the model produces (dt from a softplus)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(Bsz, T, D, generator=g, dtype=torch.float64)
    dt = torch.nn.functional.softplus(torch.randn(Bsz, T, D, generator=g, dtype=torch.float64) - 2)
    A = -torch.arange(1, N + 1, dtype=torch.float64).expand(D, N) * (0.5 + torch.rand(D, N, generator=g,
                                                                                     dtype=torch.float64))
    B = torch.randn(Bsz, T, N, generator=g, dtype=torch.float64)
    C = torch.randn(Bsz, T, S, N, generator=g, dtype=torch.float64)
    h0 = torch.randn(Bsz, D, N, generator=g, dtype=torch.float64)
    return [t.to(dtype) for t in (u, dt, A, B, C, h0)]


def _scan_loop(lam: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None) -> torch.Tensor:
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0
    out = []
    for t in range(b.shape[1]):
        h = lam[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, 1)


# ----------------------------------------------------------------------------------------- the scan
@pytest.mark.parametrize("T", [1, 2, 3, 5, 16, 17, 48, 100, 4096])
def test_scan_values_match_the_loop(T: int) -> None:
    g = torch.Generator().manual_seed(T)
    lam = torch.rand(2, T, 3, 4, generator=g, dtype=torch.float64)
    b = torch.randn(2, T, 3, 4, generator=g, dtype=torch.float64)
    h0 = torch.randn(2, 3, 4, generator=g, dtype=torch.float64)
    for start in (h0, None):
        out = selective_scan(lam, b, start)
        assert out.shape == b.shape and out.dtype == torch.float64
        assert _rel_err(out, _scan_loop(lam, b, start)) < 1e-12


@pytest.mark.parametrize("T", [1, 2, 9, 50, 301])
def test_scan_gradients_match_the_loop(T: int) -> None:
    g = torch.Generator().manual_seed(T)
    lam = torch.rand(2, T, 3, generator=g, dtype=torch.float64).requires_grad_()
    b = torch.randn(2, T, 3, generator=g, dtype=torch.float64).requires_grad_()
    h0 = torch.randn(2, 3, generator=g, dtype=torch.float64).requires_grad_()
    w = torch.randn(2, T, 3, generator=g, dtype=torch.float64)
    fast = torch.autograd.grad((selective_scan(lam, b, h0) * w).sum(), [lam, b, h0])
    ref = torch.autograd.grad((_scan_loop(lam, b, h0) * w).sum(), [lam, b, h0])
    for f, r in zip(fast, ref, strict=True):
        assert _rel_err(f, r) < 1e-12


def test_scan_gradcheck() -> None:
    g = torch.Generator().manual_seed(0)
    lam = torch.rand(1, 11, 2, generator=g, dtype=torch.float64).requires_grad_()
    b = torch.randn(1, 11, 2, generator=g, dtype=torch.float64).requires_grad_()
    h0 = torch.randn(1, 2, generator=g, dtype=torch.float64).requires_grad_()
    assert torch.autograd.gradcheck(selective_scan, (lam, b, h0))


def test_scan_stays_finite_when_decays_underflow() -> None:
    # Products of many small factors underflow to 0; nothing divides by them, so nothing becomes inf or NaN.
    lam = torch.full((1, 2000, 2), 1e-3)
    b = torch.ones(1, 2000, 2)
    out = selective_scan(lam, b)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[0, -1], torch.full((2,), 1 / (1 - 1e-3)))


# ------------------------------------------------------------------------------- the S6 recurrence
@pytest.mark.parametrize("T", [1, 7, 64, 4096])
def test_selective_ssm_values_match_reference(T: int) -> None:
    u, dt, A, B, C, h0 = _inputs(2, T, 5, 4, 3)
    y, last = selective_ssm(u, dt, A, B, C, h0)
    ref, ref_last = selective_ssm_naive(u, dt, A, B, C, h0)
    assert y.shape == (2, T, 3, 5) and y.dtype == last.dtype == torch.float64
    assert _rel_err(y, ref) < 1e-12 and _rel_err(last, ref_last) < 1e-12


def test_selective_ssm_float32_at_4096_tokens() -> None:
    u, dt, A, B, C, h0 = _inputs(1, 4096, 8, 16, 3, dtype=torch.float32)
    y, last = selective_ssm(u, dt, A, B, C, h0)
    ref, ref_last = selective_ssm_naive(u, dt, A, B, C, h0)
    assert y.dtype == torch.float32
    assert _rel_err(y, ref) < 1e-5 and _rel_err(last, ref_last) < 1e-5


@pytest.mark.parametrize("T", [1, 13, 200])
def test_selective_ssm_gradients_match_reference(T: int) -> None:
    inputs = [t.requires_grad_() for t in _inputs(2, T, 4, 3, 2, seed=T)]
    w = torch.randn(2, T, 2, 4, dtype=torch.float64)
    y, last = selective_ssm(*inputs)
    fast = torch.autograd.grad((y * w).sum() + last.sum(), inputs)
    y, last = selective_ssm_naive(*inputs)
    ref = torch.autograd.grad((y * w).sum() + last.sum(), inputs)
    for name, f, r in zip("u dt A B C h0".split(), fast, ref, strict=True):
        assert _rel_err(f, r) < 1e-10, name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_inputs_accumulate_in_float32(dtype: torch.dtype) -> None:
    inputs = _inputs(2, 300, 4, 8, 2, dtype=dtype)
    y, last = selective_ssm(*inputs)
    ref, _ = selective_ssm_naive(*inputs)  # the same rounded inputs, exactly
    assert y.dtype == last.dtype == torch.float32
    assert _rel_err(y, ref) < 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, last = selective_ssm(*_inputs(2, 300, 4, 8, 2, dtype=torch.float32))
    assert y.dtype == torch.float32


def test_step_continues_the_scan() -> None:
    u, dt, A, B, C, h0 = _inputs(2, 30, 5, 4, 3)
    ref, _ = selective_ssm_naive(u, dt, A, B, C, h0)
    y, h = selective_ssm(u[:, :10], dt[:, :10], A, B[:, :10], C[:, :10], h0)
    for t in range(10, 30):
        y_t, h = selective_ssm_step(u[:, t], dt[:, t], A, B[:, t], C[:, t], h)
        assert h.dtype == torch.float64 and _rel_err(y_t, ref[:, t]) < 1e-12


@pytest.mark.parametrize(
    "which, shape, match",
    [(0, (2, 5), "u must have shape"), (1, (2, 9, 4), "dt must have shape"), (2, (4, 4), "A must have shape"),
     (3, (2, 9, 3), "B must have shape"), (4, (2, 9, 4), "C must have shape"), (5, (2, 4, 5), "h0 must have shape")],
)
def test_bad_shapes_rejected(which: int, shape: tuple, match: str) -> None:
    inputs = list(_inputs(2, 9, 5, 4, 3))
    inputs[which] = torch.zeros(shape, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        selective_ssm(*inputs)


# ------------------------------------------------------------------------------------- the module
def _config(**overrides) -> SPENConfig:
    kwargs = dict(vocab_size=61, hidden_size=8, num_hidden_layers=1, intermediate_size=16, selective_rank=2,
                  trace="selective_ssm", trace_state_size=4, bos_token_id=0, eos_token_id=None)
    return SPENConfig(**{**kwargs, **overrides})


def test_module_gradients_for_every_parameter_match_reference() -> None:
    model = tiny_model(trace="selective_ssm", trace_state_size=4, hidden_size=8, num_attention_heads=2).double()
    traces = model.model.h[0].traces
    u = torch.randn(2, 40, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 40, 3, 8, dtype=torch.float64)
    names = [name for name, _ in traces.named_parameters()]
    assert sorted(names) == ["A_log", "dt_down.weight", "dt_up.bias", "dt_up.weight", "x_proj.weight"]
    params = [u, *traces.parameters()]
    fast = torch.autograd.grad((traces(u, None) * w).sum(), params)
    dt, A, B, C = traces.parameters_for(u)
    y, _ = selective_ssm_naive(u, dt, A, B, C)
    slots = torch.cat([torch.zeros_like(y[:, :1]), y[:, :-1]], 1)  # slot at t is the readout at t - 1
    ref = torch.autograd.grad((slots * w).sum(), params)
    for f, r in zip(fast, ref, strict=True):
        assert r.abs().max() > 0 and _rel_err(f, r) < 1e-10


def test_slots_read_only_the_past() -> None:
    model = tiny_model(trace="selective_ssm", trace_state_size=4)
    traces = model.model.h[0].traces
    u = torch.randn(1, 12, 16)
    changed = u.clone()
    changed[0, 6] += 1.0
    a, b = traces(u, None), traces(changed, None)
    assert torch.equal(a[:, :7], b[:, :7])  # position 6's slots are the readout of step 5
    assert not torch.allclose(a[:, 7:], b[:, 7:])


def test_init_is_s4d_real_with_dt_spanning_the_rates() -> None:
    from modeling_spen import SPENForCausalLM

    config = _config(trace_rates=[0.5, 0.1, 0.02])
    torch.manual_seed(0)
    traces = SPENForCausalLM(config).model.h[0].traces
    assert isinstance(traces, SelectiveSSMTraces)
    torch.testing.assert_close(-torch.exp(traces.A_log), -torch.arange(1.0, 5.0).expand(8, 4))
    dt = torch.nn.functional.softplus(traces.dt_up.bias.detach())
    lo, hi = dt_init_range([0.5, 0.1, 0.02])
    assert lo < dt.min() and dt.max() < hi and dt.max() / dt.min() > 0.5 * hi / lo
    # The slowest mode of the slowest channel writes at ~the slowest rate, the fastest at ~the fastest.
    assert 1 - torch.exp(-dt.min()).item() == pytest.approx(0.02, rel=0.3)
    assert 1 - torch.exp(-dt.max()).item() == pytest.approx(0.5, rel=0.3)


def test_decoding_state_has_constant_size() -> None:
    model = tiny_model(trace="selective_ssm", trace_state_size=4)
    state = model(torch.zeros(1, 5, dtype=torch.long), use_cache=True).cache
    size = state.num_bytes()
    for _ in range(20):
        state = model(torch.zeros(1, 1, dtype=torch.long), cache=state).cache
    # layers x (D x N state + S x D slots) x float32
    assert state.num_bytes() == size == 2 * (16 * 4 + 3 * 16) * 4
    assert state.layers[0]["ssm"].shape == (1, 16, 4)


def test_state_size_is_validated() -> None:
    with pytest.raises(ValueError, match=r"SPENConfig\.trace_state_size\b"):
        _config(trace_state_size=0)
