"""The prediction loss and the `none` predictor: what the loss is, what it trains, and why it is needed."""

import pytest
import torch

from modeling_spen import SPENConfig, SPENForCausalLM


def tiny_config(**overrides) -> SPENConfig:
    kwargs = dict(
        vocab_size=61, hidden_size=16, num_hidden_layers=2, intermediate_size=48, num_attention_heads=4,
        selective_rank=4, bos_token_id=0, eos_token_id=None,
    )
    kwargs.update(overrides)
    return SPENConfig(**kwargs)


def perturbed(config: SPENConfig, seed: int = 0) -> SPENForCausalLM:
    torch.manual_seed(seed)
    model = SPENForCausalLM(config).eval()
    with torch.no_grad():  # away from the init, where biases are zero and rates special
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


IDS = torch.randint(0, 61, (3, 20), generator=torch.Generator().manual_seed(1))


def fold_predictor_into_mix(linear: SPENForCausalLM) -> SPENForCausalLM:
    """The `none` model that computes exactly what ``linear`` computes.

    The mix reads ``[u; e; h]`` with ``e = u - (W_p h + b_p)``; writing its weight as
    ``[A_u, A_e, A_h]``, ``A_e e = A_e u - A_e W_p h - A_e b_p``, so ``A_h' = A_h - A_e W_p`` and
    ``b' = b - A_e b_p`` give the same ``c_t`` with ``x̂ = 0``.
    """
    config = SPENConfig.from_dict({**linear.config.to_dict(), "predictor": "none"})
    none = SPENForCausalLM(config).eval()
    state = {k: v for k, v in linear.state_dict().items() if ".predictor." not in k}
    D = config.hidden_size
    for i, block in enumerate(linear.model.h):
        W, b = block.mix.weight, block.mix.bias
        A_e = W[:, D : 2 * D]
        proj = block.predictor.proj
        state[f"model.h.{i}.mix.weight"] = torch.cat([W[:, :D], A_e, W[:, 2 * D :] - A_e @ proj.weight], 1)
        state[f"model.h.{i}.mix.bias"] = b - A_e @ proj.bias
    none.load_state_dict(state)
    return none


def unfold_into_linear(none: SPENForCausalLM, seed: int = 5) -> SPENForCausalLM:
    """The converse: any ``(W_p, b_p)`` can be given to a linear predictor, the mix absorbing it."""
    config = SPENConfig.from_dict({**none.config.to_dict(), "predictor": "linear"})
    linear = perturbed(config, seed)  # arbitrary predictor weights
    state = {k: v for k, v in none.state_dict().items()}
    D = config.hidden_size
    for i, block in enumerate(linear.model.h):
        W, b = none.model.h[i].mix.weight, none.model.h[i].mix.bias
        A_e, proj = W[:, D : 2 * D], block.predictor.proj
        state[f"model.h.{i}.mix.weight"] = torch.cat([W[:, :D], A_e, W[:, 2 * D :] + A_e @ proj.weight], 1)
        state[f"model.h.{i}.mix.bias"] = b + A_e @ proj.bias
        state[f"model.h.{i}.predictor.proj.weight"] = proj.weight
        state[f"model.h.{i}.predictor.proj.bias"] = proj.bias
    linear.load_state_dict(state)
    return linear


@pytest.mark.parametrize("trace", ["ema", "learned", "selective"])
def test_linear_predictor_without_loss_is_a_reparametrisation_of_none(trace: str) -> None:
    linear = perturbed(tiny_config(predictor="linear", trace=trace, prediction_loss_weight=0.0))
    none = fold_predictor_into_mix(linear)
    with torch.no_grad():
        expected = linear(IDS, labels=IDS)
        got = none(IDS, labels=IDS)
        torch.testing.assert_close(got.logits, expected.logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(got.loss, expected.loss, rtol=0, atol=1e-5)
        # ... and back: a `none` model becomes a linear-predictor model with any predictor weights.
        back = unfold_into_linear(none)
        torch.testing.assert_close(back(IDS).logits, expected.logits, rtol=0, atol=1e-5)
        # The folding is not vacuous: the predictor's weights do change the function if left in place.
        assert (linear.model.h[0].predictor.proj.weight.abs() > 0).all()
        # With a prediction loss the two are no longer the same objective: x̂ differs (0 vs W h + b).
        assert not torch.allclose(got.prediction_loss, expected.prediction_loss)


def captured_inputs_and_predictions(model: SPENForCausalLM, ids: torch.Tensor, **kwargs):
    u, x_hat = [], []
    hooks = [h for block in model.model.h for h in (
        block.ln_1.register_forward_hook(lambda m, a, out: u.append(out)),
        block.predictor.register_forward_hook(lambda m, a, out: x_hat.append(out)),
    )]
    try:
        out = model(ids, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    return out, u, x_hat


@pytest.mark.parametrize("predictor", ["none", "linear", "softmax_attention"])
def test_prediction_loss_is_the_mean_squared_error_of_each_block(predictor: str) -> None:
    weight = 0.7
    model = perturbed(tiny_config(predictor=predictor, prediction_loss_weight=weight))
    out, u, x_hat = captured_inputs_and_predictions(model, IDS, labels=IDS)
    per_block = torch.stack([((a - b) ** 2).sum(-1).mean() / a.shape[-1] for a, b in zip(u, x_hat, strict=True)])
    # prediction_losses: each row's own value (batch, blocks); prediction_loss: over the whole batch.
    per_row = torch.stack([((a - b) ** 2).mean((1, 2)) for a, b in zip(u, x_hat, strict=True)], 1)
    torch.testing.assert_close(out.prediction_losses, per_row)
    torch.testing.assert_close(out.prediction_loss, per_block.mean())
    manual_ce = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, 61), IDS[:, 1:].reshape(-1))
    torch.testing.assert_close(out.lm_loss, manual_ce)
    torch.testing.assert_close(out.loss, manual_ce + weight * per_block.mean())
    if predictor == "none":  # x̂ = 0: the loss is the input's own power, ~1 after LayerNorm
        torch.testing.assert_close(out.prediction_losses, torch.stack([(a**2).mean((1, 2)) for a in u], 1))


def test_target_is_detached() -> None:
    # With x̂ = 0 the only route from the prediction loss to any weight is through the target u_t,
    # so if the target is detached the weight of the loss changes no gradient at all.
    grads = []
    for weight in (0.0, 5.0):
        model = perturbed(tiny_config(predictor="none", prediction_loss_weight=weight))
        model(IDS, labels=IDS).loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for g0, g1 in zip(*grads, strict=True):
        torch.testing.assert_close(g0, g1, rtol=0, atol=0)
    # With a linear predictor the loss does train the predictor.
    model = perturbed(tiny_config(predictor="linear", prediction_loss_weight=1.0))
    out = model(IDS)
    out.prediction_loss.backward()
    assert model.model.h[0].predictor.proj.weight.grad.abs().sum() > 0


def test_padded_positions_are_left_out() -> None:
    model = perturbed(tiny_config(predictor="linear"))
    ids = IDS[:1, :12]
    padded = torch.cat([torch.zeros(1, 5, dtype=torch.long), ids], 1)
    mask = torch.cat([torch.zeros(1, 5), torch.ones(1, 12)], 1).long()
    with torch.no_grad():
        torch.testing.assert_close(
            model(padded, attention_mask=mask).prediction_losses, model(ids).prediction_losses, rtol=1e-5, atol=1e-6
        )


def test_training_with_the_loss_makes_the_predictor_predict() -> None:
    # A few steps on text with structure (a repeated pattern): the prediction loss falls well below
    # that of x̂ = 0 only when the loss is on.
    torch.manual_seed(0)
    pattern = torch.randint(1, 61, (8,))
    ids = pattern.repeat(4, 4)  # (4, 32)
    final = {}
    for weight in (0.0, 1.0):
        model = perturbed(tiny_config(predictor="linear", prediction_loss_weight=weight, num_hidden_layers=1)).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(60):
            loss = model(ids, labels=ids).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            final[weight] = float(model(ids).prediction_loss)
    assert final[1.0] < 0.5 * final[0.0], final


@pytest.mark.parametrize("weight", [-0.1, float("nan"), float("inf"), "1", True])
def test_bad_weight_rejected(weight) -> None:
    with pytest.raises(ValueError, match=r"SPENConfig\.prediction_loss_weight\b"):
        tiny_config(prediction_loss_weight=weight)
