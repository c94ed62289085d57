"""Every dtype: float64 runs in float64, bf16/fp16 accumulate the traces in float32.

The trace operator against the float64 sequential reference (``traces_naive``) in each input dtype,
then the model for every predictor x scope x trace: ``model.double()`` against float32 at T = 4096,
``from_pretrained(dtype=...)`` (and the older ``torch_dtype=``), bf16 autocast, and greedy
``generate()`` through the recurrent state in float64 and bf16.

Relative error throughout: ``max |a - b| / max |b|`` with ``b`` the more precise side.
"""

import pytest
import torch

from modeling_spen import SPENForCausalLM
from modeling_spen.modeling_spen import _CACHE_KEY
from modeling_spen.traces import accumulation_dtype, ema_step, ema_traces
from modeling_spen.traces_naive import ema_traces_naive
from tests.test_generation import _argmax_loop
from tests.test_modeling import VARIANTS, tiny_model

DECAYS = torch.tensor([0.5, 0.1, 0.02])
KINDS = ["fixed", "per_channel", "selective"]


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def _alpha(kind: str, B: int, T: int, D: int, dtype: torch.dtype) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    if kind == "fixed":
        return DECAYS.to(dtype)
    shape = (3, D) if kind == "per_channel" else (B, T, 3, D)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * 0.9 + 0.05).to(dtype)


def _traces_dtypes(state) -> set[torch.dtype]:
    return {layer["traces"].dtype for layer in state.layers}


# ------------------------------------------------------------------------------- the trace operator
@pytest.mark.parametrize("kind", KINDS)
def test_float64_inputs_run_in_float64(kind: str) -> None:
    # float32 arithmetic anywhere on the way would leave errors near 1e-7, not 1e-12.
    torch.manual_seed(0)
    B, T, D = 2, 300, 8
    x = torch.randn(B, T, D, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(B, 3, D, dtype=torch.float64, requires_grad=True)
    alpha = _alpha(kind, B, T, D, torch.float64).requires_grad_(kind != "fixed")
    w = torch.randn(B, T, 3, D, dtype=torch.float64)
    inputs = [x, h0, alpha] if alpha.requires_grad else [x, h0]
    fast, last = ema_traces(x, alpha, h0)
    assert fast.dtype == last.dtype == torch.float64
    grads = torch.autograd.grad((fast * w).sum() + last.sum(), inputs)
    ref, ref_last = ema_traces_naive(x, alpha, h0)
    ref_grads = torch.autograd.grad((ref * w).sum() + ref_last.sum(), inputs)
    assert _rel_err(fast, ref) < 1e-12 and _rel_err(last, ref_last) < 1e-12
    for g, r in zip(grads, ref_grads, strict=True):
        assert g.dtype == torch.float64 and _rel_err(g, r) < 1e-12


def test_float64_step_runs_in_float64() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 50, 5, dtype=torch.float64)
    ref, _ = ema_traces_naive(x, DECAYS.double())
    h = torch.zeros(2, 3, 5, dtype=torch.float64)
    for t in range(50):
        h = ema_step(x[:, t], DECAYS.double(), h)
        assert h.dtype == torch.float64
        assert _rel_err(h, ref[:, t]) < 1e-12


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", KINDS)
def test_16_bit_inputs_accumulate_in_float32(kind: str, dtype: torch.dtype) -> None:
    # Against the exact traces of the same (rounded) inputs: only the accumulation is measured.
    torch.manual_seed(0)
    x = torch.randn(2, 500, 8).to(dtype)
    alpha = _alpha(kind, 2, 500, 8, dtype)
    ref, _ = ema_traces_naive(x.double(), alpha.double())
    fast, last = ema_traces(x, alpha)
    assert fast.dtype == last.dtype == torch.float32 == accumulation_dtype(dtype)
    assert _rel_err(fast, ref) < 1e-5
    h = torch.zeros(2, 3, 8)
    for t in range(20):
        h = ema_step(x[:, t], alpha[:, t] if kind == "selective" else alpha, h)
    assert h.dtype == torch.float32 and _rel_err(h, ref[:, 19]) < 1e-5


# ------------------------------------------------------------------------------------- the model
@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_double_matches_float32_at_4096_tokens(predictor: str, scope: str, trace: str) -> None:
    # One layer and one head keep the T x T sequence-scope attention of this test within seconds.
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace, num_hidden_layers=1,
                       num_attention_heads=1)
    ids = torch.randint(0, 61, (1, 4096), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        logits32 = model(ids, use_cache=False).logits
        out = model.double()(ids, use_cache=True)
    assert out.logits.dtype == torch.float64
    assert _traces_dtypes(out.cache) == {torch.float64}
    err = _rel_err(logits32, out.logits)
    print(f"{predictor}/{scope}/{trace}: float32 vs float64 logits at T=4096, max relative error {err:.1e}")
    assert err < 1e-4


@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_from_pretrained_in_float64_and_bfloat16(tmp_path, predictor: str, scope: str, trace: str) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace)
    model.save_pretrained(tmp_path)
    ids = torch.randint(0, 61, (2, 48), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        ref = model(ids).logits
    # `dtype` is the argument since transformers 4.56; `torch_dtype` still loads (with a warning).
    for argument in ("dtype", "torch_dtype"):
        for dtype, tolerance in ((torch.float64, 1e-5), (torch.bfloat16, 0.15)):
            loaded = SPENForCausalLM.from_pretrained(tmp_path, **{argument: dtype}).eval()
            assert loaded.dtype == dtype, argument
            if trace == "ema":  # the fixed rates stay float32, so exactly the float32 model's rates
                alpha = loaded.model.h[0].traces.alpha
                assert alpha.dtype == torch.float32 and torch.equal(alpha, model.model.h[0].traces.alpha)
            with torch.no_grad():
                out = loaded(ids, use_cache=True)
            assert out.logits.dtype == dtype
            assert _traces_dtypes(out.cache) == {accumulation_dtype(dtype)}
            assert _rel_err(out.logits, ref) < tolerance, (argument, dtype)


@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_bf16_autocast_forward_and_backward(predictor: str, scope: str, trace: str) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace).train()
    ids = torch.randint(0, 61, (2, 48), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = model(ids).logits
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, labels=ids, use_cache=True)
    assert _traces_dtypes(out.cache) == {torch.float32}
    assert _rel_err(out.logits, ref) < 0.15
    out.loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_greedy_generate_equals_argmax_loop(predictor: str, scope: str, trace: str, dtype: torch.dtype) -> None:
    # generate() decodes one token at a time through the recurrent state (ema_step); the loop recomputes
    # the whole prefix with the parallel trace operator. Both in `dtype`.
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace).to(dtype)
    prompt = torch.randint(1, 61, (2, 7), generator=torch.Generator().manual_seed(8))
    out = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0, return_dict_in_generate=True)
    assert torch.equal(out.sequences, _argmax_loop(model, prompt, 8))
    assert _traces_dtypes(getattr(out, _CACHE_KEY)) == {accumulation_dtype(dtype)}
