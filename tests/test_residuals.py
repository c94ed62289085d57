"""Attention Residuals (residual="attention"): the model against a plain loop written from the paper's equations."""

import math

import pytest
import torch

from modeling_spen import SPENForCausalLM
from modeling_spen.residuals import DepthAttention
from tests.test_generation import _argmax_loop
from tests.test_modeling import tiny_config, tiny_model

ARMS = [
    dict(predictor="linear", trace="ema"),
    dict(predictor="softmax_attention", predictor_scope="sequence", trace="selective"),
    dict(predictor="linear_attention", predictor_scope="state", trace="selective_ssm"),
]


def attention_residual_model(seed: int = 0, **overrides) -> SPENForCausalLM:
    """A tiny model whose pseudo-queries are far from their zero init, so that the depth weights are not uniform."""
    model = tiny_model(seed=seed, residual="attention", **overrides)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, DepthAttention):
                module.query.copy_(torch.randn(module.query.shape) * 0.5)
    return model


def naive_forward(model: SPENForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    """Logits from the equations, one source at a time:

    x_l = sum_i alpha_i v_i,  alpha_i = exp(w_l . k_i) / sum_j exp(w_l . k_j),  k_i = v_i / sqrt(mean_d v_i[d]^2 + eps)
    """
    eps = model.config.layer_norm_epsilon

    def aggregate(query: torch.Tensor, sources: list[torch.Tensor]) -> torch.Tensor:
        scores = []
        for v in sources:
            rms = torch.sqrt((v * v).mean(-1, keepdim=True) + eps)
            scores.append(((v / rms) * query).sum(-1))
        top = torch.stack(scores).max(0).values
        weights = [torch.exp(s - top) for s in scores]
        total = sum(weights)
        return sum((w / total)[..., None] * v for w, v in zip(weights, sources, strict=True))

    sources = [model.model.wte(ids)]
    for block in model.model.h:
        c, _ = block.context(aggregate(block.mix_input.query, sources), None, None)
        sources.append(c)
        sources.append(block.feed_forward(aggregate(block.ffn_input.query, sources)))
    out = aggregate(model.model.final_input.query, sources)
    return model.lm_head(model.model.ln_f(out))


@pytest.mark.parametrize("arm", ARMS)
def test_model_matches_the_naive_reference(arm: dict) -> None:
    model = attention_residual_model(**arm)
    ids = torch.randint(0, 61, (2, 17), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, naive_forward(model, ids), rtol=1e-5, atol=1e-5)
        # The residual sum is a different function: the option is really in use.
        model.config.residual = "add"
        assert not torch.allclose(model(ids).logits, naive_forward(model, ids), atol=1e-3)


def test_starts_as_the_uniform_average_of_the_sources() -> None:
    torch.manual_seed(0)
    model = SPENForCausalLM(tiny_config(residual="attention", num_hidden_layers=3))
    queries = [m for m in model.modules() if isinstance(m, DepthAttention)]
    assert len(queries) == 2 * 3 + 1  # two sublayers per block and the final output
    assert all(torch.equal(q.query, torch.zeros(16)) for q in queries)
    values = torch.randn(2, 5, 4, 16)
    torch.testing.assert_close(queries[0].weights(values), torch.full((2, 5, 4), 0.25))
    torch.testing.assert_close(queries[0](values), values.mean(-2))


def test_weights_follow_the_rms_normalised_keys() -> None:
    # Scaling a source does not change its weight (the key is RMS-normalised); pointing the query at it raises it.
    attend = DepthAttention(4, eps=1e-12)
    with torch.no_grad():
        attend.query.copy_(torch.tensor([3.0, 0.0, 0.0, 0.0]))
    values = torch.tensor([[[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]])
    w = attend.weights(values)
    expected = torch.softmax(torch.tensor([3.0 * 2.0, 0.0]), 0)  # RMS of a unit vector in 4 dims is 1/2
    torch.testing.assert_close(w[0, 0], expected)
    torch.testing.assert_close(attend.weights(values * torch.tensor([100.0, 0.01])[:, None]), w)


@pytest.mark.parametrize("arm", ARMS)
def test_full_sequence_equals_token_by_token(arm: dict) -> None:
    model = attention_residual_model(**arm)
    ids = torch.randint(0, 61, (2, 21), generator=torch.Generator().manual_seed(1))
    full = model(ids, use_cache=False).logits
    state, steps = None, []
    for t in range(ids.shape[1]):
        out = model(ids[:, t : t + 1], cache=state, use_cache=True)
        state = out.cache
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-4, atol=1e-4)
    out = model(ids[:, :9], use_cache=True)
    rest, state = [out.logits], out.cache
    for t in range(9, 21):
        out = model(ids[:, t : t + 1], cache=state)
        state = out.cache
        rest.append(out.logits)
    torch.testing.assert_close(torch.cat(rest, 1), full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arm", ARMS[:2])
def test_generate_equals_argmax_loop_and_left_padding(arm: dict) -> None:
    model = attention_residual_model(**arm)
    prompt = torch.randint(1, 61, (2, 6), generator=torch.Generator().manual_seed(2))
    out = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert torch.equal(out, _argmax_loop(model, prompt, 8))
    short = prompt[:1, :3]
    batch = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1), prompt[1:]])
    mask = torch.ones_like(batch)
    mask[0, :3] = 0
    padded = model.generate(batch, attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0)
    alone = model.generate(short, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert torch.equal(padded[0, 6:], alone[0, 3:])


def test_causality() -> None:
    model = attention_residual_model()
    ids = torch.randint(0, 61, (1, 20), generator=torch.Generator().manual_seed(3))
    changed = ids.clone()
    changed[0, 10] = (ids[0, 10] + 1) % 61
    a, b = model(ids).logits, model(changed).logits
    assert torch.equal(a[:, :10], b[:, :10]) and not torch.allclose(a[:, 10:], b[:, 10:])


def test_hidden_states_are_each_blocks_input_then_the_output() -> None:
    model = attention_residual_model(num_hidden_layers=3)
    ids = torch.randint(0, 61, (1, 7))
    out = model(ids, output_hidden_states=True)
    hidden = out.hidden_states
    assert len(hidden) == 3 + 1
    torch.testing.assert_close(hidden[0], model.model.wte(ids))
    torch.testing.assert_close(model.lm_head(hidden[-1]), out.logits)


def test_float64_bf16_autocast_and_training() -> None:
    model = attention_residual_model(trace="selective_ssm").train()
    ids = torch.randint(0, 61, (2, 300), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = model(ids).logits
        double = model.double()(ids).logits
        model.float()
    assert double.dtype == torch.float64
    assert ((double - ref.double()).abs().max() / double.abs().max()).item() < 1e-5
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(ids, labels=ids)
    # Relative RMS error: the depth softmax makes single logits of this random tiny model sensitive to
    # rounding (max error up to ~0.2 of the max), the bulk is at bf16's ~1e-2.
    assert ((out.logits.float() - ref).norm() / ref.norm()).item() < 0.05
    out.loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    # A few optimiser steps on one batch lower the loss, pseudo-queries included.
    model.zero_grad()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = ids[:, :32]
    first = model(batch, labels=batch).loss.item()
    query = model.model.h[0].ffn_input.query.detach().clone()
    for _ in range(20):
        loss = model(batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first - 0.1 and not math.isnan(loss.item())
    assert not torch.equal(model.model.h[0].ffn_input.query, query)


def test_bad_residual_rejected() -> None:
    with pytest.raises(ValueError, match=r"SPENConfig\.residual\b"):
        tiny_config(residual="sum")
