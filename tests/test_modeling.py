"""SPEN model: recurrence equivalence, causality, parameter count, save/load, bad input."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

import modeling_spen
from modeling_spen import SPENConfig, SPENForCausalLM, SPENModel, SPENState

REPO = Path(__file__).resolve().parents[1]
VARIANTS = list(
    itertools.product(
        ["linear", "linear_attention", "softmax_attention"], ["sequence", "state"], ["ema", "learned", "selective"]
    )
) + [
    # The S6 state fills the same slots: each reader kind once.
    ("linear", "sequence", "selective_ssm"),
    ("linear_attention", "state", "selective_ssm"),
    ("softmax_attention", "sequence", "selective_ssm"),
]


def tiny_config(**overrides) -> SPENConfig:
    kwargs = dict(
        vocab_size=61, hidden_size=16, num_hidden_layers=2, intermediate_size=48, num_attention_heads=4,
        selective_rank=4, trace_state_size=4, bos_token_id=0, eos_token_id=None,
    )
    kwargs.update(overrides)
    return SPENConfig(**kwargs)


def tiny_model(seed: int = 0, **overrides) -> SPENForCausalLM:
    torch.manual_seed(seed)
    model = SPENForCausalLM(tiny_config(**overrides)).eval()
    # Random init leaves the selective/learned rates at their init; perturb every parameter so
    # the tests see a model whose rates and predictors are not at a special point.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    return model


@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_full_sequence_equals_token_by_token(predictor: str, scope: str, trace: str) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace)
    ids = torch.randint(0, 61, (2, 33), generator=torch.Generator().manual_seed(1))
    full = model(ids, use_cache=False).logits
    state, steps = None, []
    for t in range(ids.shape[1]):
        out = model(ids[:, t : t + 1], cache=state, use_cache=True)
        state = out.cache
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-4, atol=1e-4)
    # Prefill a prefix in one call, then continue one token at a time: same logits.
    out = model(ids[:, :20], use_cache=True)
    rest = [out.logits]
    state = out.cache
    for t in range(20, 33):
        out = model(ids[:, t : t + 1], cache=state)
        state = out.cache
        rest.append(out.logits)
    torch.testing.assert_close(torch.cat(rest, 1), full, rtol=1e-4, atol=1e-4)
    assert state.get_seq_length() == 33


@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_causality(predictor: str, scope: str, trace: str) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace)
    ids = torch.randint(0, 61, (1, 24), generator=torch.Generator().manual_seed(2))
    changed = ids.clone()
    changed[0, 12] = (ids[0, 12] + 1) % 61
    a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, :12], b[:, :12], rtol=0, atol=0)
    assert not torch.allclose(a[:, 12:], b[:, 12:])


def test_state_is_constant_size_for_linear_ema() -> None:
    model = tiny_model()
    state = model(torch.zeros(1, 5, dtype=torch.long), use_cache=True).cache
    size = state.num_bytes()
    for _ in range(50):
        state = model(torch.zeros(1, 1, dtype=torch.long), cache=state).cache
    assert state.num_bytes() == size == 2 * 3 * 16 * 4  # layers x traces x width x float32


def test_130m_config_parameter_count() -> None:
    config = AutoConfig.from_pretrained(REPO / "hub_configs" / "spen-130m")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    n = sum(p.numel() for p in model.parameters())
    print(f"spen-130m: {n / 1e6:.2f}M parameters")
    assert 125e6 <= n <= 140e6
    assert model.lm_head.weight is model.model.wte.weight


def test_ema_decays_are_fixed_and_not_parameters() -> None:
    model = tiny_model()
    names = [n for n, _ in model.named_parameters()]
    assert not any("alpha" in n for n in names)
    torch.testing.assert_close(model.model.h[0].traces.alpha, torch.tensor([0.5, 0.1, 0.02]))


@pytest.mark.parametrize("trace", ["ema", "learned", "selective"])
def test_every_trace_starts_at_the_configured_rates(trace: str, tmp_path: Path) -> None:
    # Fresh and loaded (from_pretrained builds on the meta device, then initialises what the file lacks).
    config = tiny_config(trace=trace, trace_rates=[0.6, 0.05])
    torch.manual_seed(0)
    fresh = SPENForCausalLM(config)
    fresh.save_pretrained(tmp_path)
    loaded = SPENForCausalLM.from_pretrained(tmp_path)
    u = torch.randn(2, 5, 16) * 0.0  # selective rates at init depend only on the bias
    for model in (fresh, loaded):
        rates = model.model.h[1].traces.write_rates(u)
        expected = torch.tensor([0.6, 0.05])
        rates = rates if rates.dim() == 1 else rates.reshape(-1, 2, rates.shape[-1]).transpose(0, 1)
        torch.testing.assert_close(rates.reshape(2, -1), expected[:, None].expand(2, rates.reshape(2, -1).shape[1]))


def test_residual_projections_get_gpt2_scaled_init() -> None:
    # GPT-2's init: the two maps per block that write into the residual stream have std 0.02 / sqrt(2 L).
    torch.manual_seed(0)
    config = SPENConfig(vocab_size=97, hidden_size=256, num_hidden_layers=8, intermediate_size=512,
                        num_attention_heads=4, bos_token_id=0, eos_token_id=0)
    block = SPENForCausalLM(config).model.h[0]
    scaled = 0.02 / (2 * 8) ** 0.5
    assert block.mix.weight.std().item() == pytest.approx(scaled, rel=0.05)
    assert block.ffn.down.weight.std().item() == pytest.approx(scaled, rel=0.05)
    assert block.ffn.up.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_auto_classes_registered() -> None:
    config = tiny_config()
    assert isinstance(AutoModelForCausalLM.from_config(config), SPENForCausalLM)
    assert isinstance(AutoModel.from_config(config), SPENModel)
    assert AutoConfig.for_model("spen").__class__ is SPENConfig


def test_loss_matches_manual_shifted_cross_entropy() -> None:
    model = tiny_model()
    ids = torch.randint(0, 61, (2, 10), generator=torch.Generator().manual_seed(3))
    out = model(ids, labels=ids)
    manual = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, 61), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(out.lm_loss, manual)
    # The loss adds the prediction loss (tests/test_prediction_loss.py).
    torch.testing.assert_close(out.loss, manual + model.config.prediction_loss_weight * out.prediction_loss)
    out.loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_logits_to_keep() -> None:
    model = tiny_model()
    ids = torch.randint(0, 61, (1, 9))
    torch.testing.assert_close(model(ids, logits_to_keep=1).logits, model(ids).logits[:, -1:])


@pytest.mark.slow
@pytest.mark.parametrize(
    "predictor, scope, trace, extra",
    [
        ("linear", "sequence", "ema", {}),
        ("softmax_attention", "sequence", "selective", {}),
        ("linear_attention", "state", "learned", {}),
        ("linear", "sequence", "selective_ssm", {}),
        ("linear", "sequence", "ema", {"residual": "attention"}),
        ("softmax_attention", "state", "selective_ssm",
         {"residual": "attention", "residual_block_size": 2, "trace_num_rates": 5}),
    ],
)
def test_save_and_load_in_fresh_process(tmp_path: Path, predictor: str, scope: str, trace: str, extra: dict) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace, **extra).train()
    # Train a few steps first: what is saved is a model that moved, not an initialisation.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch = torch.randint(0, 61, (4, 16), generator=torch.Generator().manual_seed(9))
    losses = []
    for _ in range(5):
        loss = model(batch, labels=batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    model.eval()
    model.save_pretrained(tmp_path / "saved")
    tmp_path = tmp_path / "saved"
    assert (tmp_path / "model.safetensors").exists()
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_spen.SPENForCausalLM"
    for name in ("modeling_spen.py", "traces.py", "traces_ssm.py", "residuals.py"):
        assert (tmp_path / name).exists(), name
    ids = torch.randint(0, 61, (2, 12), generator=torch.Generator().manual_seed(4))
    torch.save({"ids": ids, "logits": model(ids).logits}, tmp_path / "expected.pt")
    script = f"""
import sys, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
assert "modeling_spen" not in sys.modules  # the project itself was never imported
ref = torch.load({str(tmp_path / 'expected.pt')!r})
assert torch.equal(model(ref["ids"]).logits, ref["logits"]), "logits differ"
print("OK", type(model).__module__)
"""
    # Run outside the repository so that the project cannot be imported from the working dir.
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path.parent, capture_output=True, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": ""})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "OK transformers_modules" in result.stdout


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"trace_decays": [0.5, 1.0, 0.02]}, "trace_decays"),
        ({"trace_decays": [0.0, 0.1]}, "trace_decays"),
        ({"trace_decays": [0.5, 0.5]}, "trace_decays"),
        ({"trace_decays": []}, "trace_decays"),
        ({"trace_rates": [0.5, 1.0, 0.02]}, "trace_rates"),
        ({"trace_rates": [0.5, 0.5]}, "trace_rates"),
        ({"trace_rates": "fast"}, "trace_rates"),
        ({"ffn_topk_fraction": 0.0}, "ffn_topk_fraction"),
        ({"ffn_topk_fraction": 1.5}, "ffn_topk_fraction"),
        ({"predictor": "softmax_attention", "num_attention_heads": 5}, "num_attention_heads"),
        ({"predictor": "rnn"}, "predictor"),
        ({"predictor_scope": "global"}, "predictor_scope"),
        ({"trace": "gru"}, "trace"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_hidden_layers": -1}, "num_hidden_layers"),
        ({"vocab_size": 2.5}, "vocab_size"),
        ({"intermediate_size": 0}, "intermediate_size"),
    ],
)
def test_bad_config_rejected(overrides: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"SPENConfig\.{field}\b"):
        tiny_config(**overrides)


def test_old_field_name_trace_decays_still_loads(tmp_path) -> None:
    # Configs saved before the rename carry "trace_decays": they load with the same rates.
    config = tiny_config(trace_rates=[0.4, 0.05])
    saved = config.to_dict()
    assert "trace_rates" in saved and "trace_decays" not in saved
    saved["trace_decays"] = saved.pop("trace_rates")
    (tmp_path / "config.json").write_text(__import__("json").dumps(saved))
    loaded = modeling_spen.SPENConfig.from_pretrained(tmp_path)
    assert loaded.trace_rates == [0.4, 0.05] and loaded.num_traces == 2
    with pytest.raises(ValueError, match="trace_rates or its old name trace_decays, not both"):
        tiny_config(trace_rates=[0.5], trace_decays=[0.5])


def test_heads_need_not_divide_width_for_linear_predictor() -> None:
    tiny_config(predictor="linear", num_attention_heads=5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"input_ids": torch.tensor([[1, 61]])}, r"input_ids must lie in \[0, vocab_size=61\)"),
        ({"input_ids": torch.tensor([[-1, 3]])}, r"input_ids must lie in"),
        ({"input_ids": torch.zeros(1, 0, dtype=torch.long)}, "empty sequence"),
        ({"input_ids": torch.tensor([[1.0, 2.0]])}, "integer tensor"),
        ({"input_ids": torch.tensor([1, 2])}, r"shape \(batch, seq_len\)"),
        ({"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.ones(1, 3)}, "attention_mask must have shape"),
        ({"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.ones(2)}, "attention_mask must have shape"),
        ({"inputs_embeds": torch.zeros(1, 2, 7)}, "inputs_embeds must have shape"),
        ({}, "exactly one of input_ids and inputs_embeds"),
    ],
)
def test_bad_input_rejected(kwargs: dict, match: str) -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match=match):
        model(**kwargs)


def test_foreign_cache_object_is_treated_as_empty() -> None:
    from transformers import DynamicCache

    model = tiny_model()
    ids = torch.randint(0, 61, (1, 8))
    out = model(ids, cache=DynamicCache(), use_cache=True)
    torch.testing.assert_close(out.logits, model(ids).logits)
    assert isinstance(out.cache, SPENState)


def test_package_exports() -> None:
    assert modeling_spen.SPENConfig.model_type == "spen"


# ----------------------------------------------------------------- a bank of N fixed rates (state-size control)
def test_log_uniform_rates() -> None:
    from modeling_spen.configuration_spen import log_uniform_rates

    assert log_uniform_rates(3) == pytest.approx([0.5, 0.1, 0.02], rel=1e-12)  # the paper's rates
    assert log_uniform_rates(1) == [0.5]
    for n in (16, 64):
        rates = log_uniform_rates(n, fastest=0.5, slowest=0.001)
        ratios = [b / a for a, b in zip(rates, rates[1:], strict=False)]
        assert len(set(rates)) == n and rates[0] == pytest.approx(0.5) and rates[-1] == pytest.approx(0.001)
        assert max(ratios) == pytest.approx(min(ratios), rel=1e-9)  # evenly spaced in log
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="n must be a positive integer"):
            log_uniform_rates(bad)
    with pytest.raises(ValueError, match="slowest <= fastest"):
        log_uniform_rates(4, fastest=0.1, slowest=0.2)


@pytest.mark.parametrize("n", [3, 16, 64])
def test_rate_bank_of_n_rates_is_read_by_predictor_and_mix(n: int, tmp_path: Path) -> None:
    from modeling_spen.configuration_spen import log_uniform_rates

    config = tiny_config(trace_num_rates=n, predictor="softmax_attention", predictor_scope="state")
    assert config.trace_rates == pytest.approx(log_uniform_rates(n)) and config.num_traces == n
    config.save_pretrained(tmp_path)  # stored resolved: the list, not the count
    saved = json.loads((tmp_path / "config.json").read_text())
    assert "trace_num_rates" not in saved and SPENConfig.from_pretrained(tmp_path).trace_rates == config.trace_rates
    torch.manual_seed(0)
    model = SPENForCausalLM(config).eval()
    block = model.model.h[0]
    assert block.mix.in_features == (2 + n) * 16 and block.predictor.slot_embedding.shape == (n, 16)
    ids = torch.randint(0, 61, (2, 20), generator=torch.Generator().manual_seed(0))
    out = model(ids, use_cache=True)
    # State numbers per layer: N x D, as the selective_ssm's D x trace_state_size.
    assert out.cache.layers[0]["traces"].shape == (2, n, 16)
    state, steps = None, []
    for t in range(20):
        step = model(ids[:, t : t + 1], cache=state)
        state = step.cache
        steps.append(step.logits)
    torch.testing.assert_close(torch.cat(steps, 1), out.logits, rtol=1e-4, atol=1e-4)
    # Every slot reaches the output: each rate's trace has its own column block in the mix.
    grad = torch.autograd.grad(model(ids).logits.square().sum(), block.mix.weight)[0]
    per_slot = grad[:, 2 * 16 :].reshape(16, n, 16).abs().sum((0, 2))
    assert (per_slot > 0).all()


def test_trace_num_rates_with_trace_rates_rejected() -> None:
    with pytest.raises(ValueError, match=r"SPENConfig\.trace_num_rates: give it or trace_rates, not both"):
        tiny_config(trace_num_rates=4, trace_rates=[0.5, 0.1])
    with pytest.raises(ValueError, match=r"SPENConfig\.trace_num_rates must be a positive integer"):
        tiny_config(trace_num_rates=0)
