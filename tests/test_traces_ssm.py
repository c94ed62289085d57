"""The selective state space trace (S6): the chunked scan and the fused per-step path against the float64 loop,
the choice between them, the module, decoding."""

import pytest
import torch

from modeling_spen import SPENConfig, traces_ssm
from modeling_spen.traces_naive import selective_ssm_naive
from modeling_spen.traces_ssm import (
    SelectiveSSMTraces,
    dt_init_range,
    selective_scan,
    selective_ssm,
    selective_ssm_step,
    use_fused_scan,
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
# Every test of the recurrence runs both paths: ``fused=False`` the chunked scan, ``fused=True`` the per-step one.
PATHS = pytest.mark.parametrize("fused", [False, True], ids=["chunked", "fused"])


@PATHS
@pytest.mark.parametrize("T", [1, 7, 64, 4096])
def test_selective_ssm_values_match_reference(T: int, fused: bool) -> None:
    u, dt, A, B, C, h0 = _inputs(2, T, 5, 4, 3)
    for start in (h0, None):
        y, last = selective_ssm(u, dt, A, B, C, start, fused=fused)
        ref, ref_last = selective_ssm_naive(u, dt, A, B, C, start)
        assert y.shape == (2, T, 3, 5) and y.dtype == last.dtype == torch.float64
        assert _rel_err(y, ref) < 1e-12 and _rel_err(last, ref_last) < 1e-12


@PATHS
def test_selective_ssm_float32_at_4096_tokens(fused: bool) -> None:
    u, dt, A, B, C, h0 = _inputs(1, 4096, 8, 16, 3, dtype=torch.float32)
    y, last = selective_ssm(u, dt, A, B, C, h0, fused=fused)
    ref, ref_last = selective_ssm_naive(u, dt, A, B, C, h0)
    assert y.dtype == torch.float32
    assert _rel_err(y, ref) < 1e-5 and _rel_err(last, ref_last) < 1e-5


@PATHS
@pytest.mark.parametrize("with_h0", [True, False], ids=["h0", "zeros"])
@pytest.mark.parametrize("T", [1, 13, 300])
def test_selective_ssm_gradients_match_reference(T: int, with_h0: bool, fused: bool) -> None:
    inputs = [t.requires_grad_() for t in _inputs(2, T, 4, 3, 2, seed=T)]
    if not with_h0:
        inputs = inputs[:5]
    w = torch.randn(2, T, 2, 4, dtype=torch.float64)
    w_last = torch.randn(2, 4, 3, dtype=torch.float64)
    y, last = selective_ssm(*inputs, fused=fused)
    fast = torch.autograd.grad((y * w).sum() + (last * w_last).sum(), inputs)
    y, last = selective_ssm_naive(*inputs)
    ref = torch.autograd.grad((y * w).sum() + (last * w_last).sum(), inputs)
    for name, f, r in zip("u dt A B C h0".split(), fast, ref, strict=False):
        # dA is exactly 0 at T = 1 from a zero state (nothing to decay): compare absolutely there.
        assert _rel_err(f, r) < 1e-10 if r.abs().max() > 0 else f.abs().max() == 0, name


@PATHS
def test_selective_ssm_gradients_of_one_output_alone(fused: bool) -> None:
    # Autograd hands None for an output that the loss does not use: only y, or only the final state.
    inputs = [t.requires_grad_() for t in _inputs(2, 9, 4, 3, 2)]
    for pick in (0, 1):
        out = selective_ssm(*inputs, fused=fused)[pick]
        # The final state does not depend on C: its gradient is zero (None from the reference's graph).
        fast = torch.autograd.grad(out.square().sum(), inputs, materialize_grads=True)
        ref = torch.autograd.grad(selective_ssm_naive(*inputs)[pick].square().sum(), inputs, materialize_grads=True)
        for f, r in zip(fast, ref, strict=True):
            assert _rel_err(f, r) < 1e-10 if r.abs().max() > 0 else f.abs().max() == 0


def test_fused_gradcheck() -> None:
    inputs = [t.requires_grad_() for t in _inputs(2, 6, 3, 2, 2, seed=1)]
    assert torch.autograd.gradcheck(lambda *x: selective_ssm(*x, fused=True), inputs)


def test_fused_stays_finite_when_decays_underflow() -> None:
    u, dt, A, B, C, _ = _inputs(1, 2000, 2, 3, 1)
    dt = torch.full_like(dt, 50.0)  # exp(dt A) underflows to 0 for every mode
    y, last = selective_ssm(u, dt, A, B, C, fused=True)
    ref, _ = selective_ssm_naive(u, dt, A, B, C)
    assert torch.isfinite(y).all() and _rel_err(y, ref) < 1e-12


def _saved_bytes(fn) -> int:
    """Bytes of the tensors autograd keeps for backward while ``fn()`` runs."""
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total


def test_fused_keeps_only_the_states_for_backward() -> None:
    # The chunked path keeps the decays and the states (and the readout's inputs): the fused one the states
    # and its (B, T, D)-or-smaller inputs, nothing else of size (B, T, D, N).
    inputs = [t.requires_grad_() for t in _inputs(4, 32, 8, 16, 3, dtype=torch.float32)[:5]]
    fused = _saved_bytes(lambda: selective_ssm(*inputs, fused=True))
    chunked = _saved_bytes(lambda: selective_ssm(*inputs, fused=False))
    states = 4 * 32 * 8 * 16 * 4
    assert fused == states + sum(t.numel() * 4 for t in inputs) and chunked >= 2 * states


@PATHS
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_inputs_accumulate_in_float32(dtype: torch.dtype, fused: bool) -> None:
    inputs = _inputs(2, 300, 4, 8, 2, dtype=dtype)
    y, last = selective_ssm(*inputs, fused=fused)
    ref, _ = selective_ssm_naive(*inputs)  # the same rounded inputs, exactly
    assert y.dtype == last.dtype == torch.float32
    assert _rel_err(y, ref) < 1e-5
    inputs32 = [t.requires_grad_() for t in _inputs(2, 300, 4, 8, 2, dtype=torch.float32)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, last = selective_ssm(*inputs32, fused=fused)
    grads = torch.autograd.grad(y.sum(), inputs32)
    assert y.dtype == torch.float32 and all(g.dtype == torch.float32 for g in grads)
    ref = torch.autograd.grad(selective_ssm_naive(*inputs32)[0].sum(), inputs32)
    assert all(_rel_err(g, r) < 1e-4 for g, r in zip(grads, ref, strict=True))


@PATHS
def test_step_continues_the_scan(fused: bool) -> None:
    u, dt, A, B, C, h0 = _inputs(2, 30, 5, 4, 3)
    ref, _ = selective_ssm_naive(u, dt, A, B, C, h0)
    y, h = selective_ssm(u[:, :10], dt[:, :10], A, B[:, :10], C[:, :10], h0, fused=fused)
    assert _rel_err(y, ref[:, :10]) < 1e-12
    for t in range(10, 30):
        y_t, h = selective_ssm_step(u[:, t], dt[:, t], A, B[:, t], C[:, t], h)
        assert h.dtype == torch.float64 and _rel_err(y_t, ref[:, t]) < 1e-12


def test_fused_path_chosen_for_large_slices_on_cpu() -> None:
    cpu = torch.device("cpu")
    # The recall map's shapes (batch 128, width 64, T = 48): fused at N = 16 and 64, and at N = 3.
    for N in (3, 16, 64):
        assert use_fused_scan(128, 64, N, 48, cpu)
    # Small slices (a prompt of one sequence, the tests' tiny models) and N = 1: the chunked scan.
    assert not use_fused_scan(1, 64, 16, 1024, cpu) and not use_fused_scan(2, 8, 4, 40, cpu)
    assert not use_fused_scan(1024, 64, 1, 48, cpu)
    assert not use_fused_scan(128, 64, 16, 0, cpu)
    assert not use_fused_scan(128, 64, 16, 48, torch.device("cuda"))


def test_default_path_follows_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = _inputs(2, 9, 4, 3, 2)
    calls = []
    real = traces_ssm._FusedSelectiveSSM.apply
    monkeypatch.setattr(traces_ssm._FusedSelectiveSSM, "apply", lambda *a: calls.append(1) or real(*a))
    selective_ssm(*inputs)
    assert calls == []
    monkeypatch.setattr(traces_ssm, "FUSED_MIN_SLICE", 1)
    selective_ssm(*inputs)
    assert calls == [1]


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


@pytest.mark.parametrize("min_slice", [1, 10**9], ids=["fused", "chunked"])
def test_module_gradients_for_every_parameter_match_reference(min_slice: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(traces_ssm, "FUSED_MIN_SLICE", min_slice)
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


@pytest.mark.parametrize("min_slice", [1, 10**9], ids=["fused", "chunked"])
def test_decoding_one_token_at_a_time_equals_the_parallel_path(min_slice: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A prompt through the parallel path, then one token at a time through the step: the same slots.
    monkeypatch.setattr(traces_ssm, "FUSED_MIN_SLICE", min_slice)
    traces = tiny_model(trace="selective_ssm", trace_state_size=4).double().model.h[0].traces
    u = torch.randn(2, 20, 16, dtype=torch.float64)
    full = traces(u, None)
    state: dict[str, torch.Tensor] = {}
    parts = [traces(u[:, :7], state)] + [traces(u[:, t : t + 1], state) for t in range(7, 20)]
    assert _rel_err(torch.cat(parts, 1), full) < 1e-12
    # A second chunk through the parallel path from the carried state (a prompt continued) agrees too.
    state = {}
    parts = [traces(u[:, :11], state), traces(u[:, 11:], state)]
    assert _rel_err(torch.cat(parts, 1), full) < 1e-12


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
