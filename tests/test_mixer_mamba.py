"""SPEN's Mamba mixer (``mixer="mamba"``) against its float64 twin and against transformers' own ``MambaMixer``
on shared weights: outputs, gradients, a cached state, and generate()."""

import pytest
import torch
from transformers import DynamicCache, MambaConfig
from transformers.models.mamba.modeling_mamba import MambaMixer as HFMambaMixer

from modeling_spen import SPENConfig
from modeling_spen.mixer_mamba import MambaMixer, mamba_state_numbers
from modeling_spen.traces_naive import mamba_mixer_naive
from tests.test_generation import _argmax_loop
from tests.test_modeling import tiny_model

D, N, R = 16, 4, 2
# transformers' torch scan casts A, B and the scan input to float32 inside (``.float()``) even in a float64 model,
# so the two agree to float32 rounding; the float64 naive twin agrees with SPEN's mixer to 1e-12.
HF = dict(rtol=1e-5, atol=1e-6)


def _config(**overrides) -> SPENConfig:
    fields = dict(hidden_size=D, num_hidden_layers=2, intermediate_size=4 * D, vocab_size=61, trace_state_size=N,
                  selective_rank=R, mixer="mamba", num_attention_heads=4)
    return SPENConfig(**{**fields, **overrides})


def _mixer(seed: int = 0, **overrides) -> MambaMixer:
    torch.manual_seed(seed)
    mixer = MambaMixer(_config(**overrides))
    mixer.reset_mamba_parameters()
    with torch.no_grad():  # off the init's special points (D = 1, zero conv bias), as tiny_model does
        for p in mixer.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return mixer.double()


def _hf_pair(seed: int = 0, expand: int = 1, kernel: int = 4) -> tuple[HFMambaMixer, MambaMixer]:
    """transformers' MambaMixer and SPEN's, float64, with the same weights (SPEN's loads transformers' state_dict)."""
    torch.manual_seed(seed)
    hf_config = MambaConfig(hidden_size=D, state_size=N, expand=expand, conv_kernel=kernel, time_step_rank=R,
                            num_hidden_layers=1, vocab_size=61)
    hf = HFMambaMixer(hf_config, layer_idx=0).double()
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
        hf.A_log.copy_(torch.log(torch.rand_like(hf.A_log) * 2 + 0.5))
    ours = MambaMixer(_config(mamba_expand=expand, mamba_conv_kernel=kernel)).double()
    ours.load_state_dict(hf.state_dict())
    return hf, ours


@pytest.mark.parametrize("read, gate, kernel", [("current", True, 4), ("lagged", True, 4), ("current", False, 4),
                                                ("current", True, 1), ("lagged", False, 1)])
def test_mixer_equals_its_naive_twin(read, gate, kernel) -> None:
    mixer = _mixer(mamba_read=read, mamba_gate=gate, mamba_conv_kernel=kernel)
    u = torch.randn(3, 11, D, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    want = mamba_mixer_naive(u, mixer.state_dict(), rank=R, read=read)
    torch.testing.assert_close(mixer(u), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("expand, kernel", [(1, 4), (2, 4), (1, 1)])
def test_mixer_equals_transformers_mamba_mixer_values_and_gradients(expand, kernel) -> None:
    hf, ours = _hf_pair(expand=expand, kernel=kernel)
    u = torch.randn(2, 13, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    u_hf, u_ours = u.clone().requires_grad_(), u.clone().requires_grad_()
    out_hf, out_ours = hf(u_hf), ours(u_ours)
    torch.testing.assert_close(out_ours, out_hf, **HF)
    weight = torch.randn_like(out_hf)
    (out_hf * weight).sum().backward()
    (out_ours * weight).sum().backward()
    torch.testing.assert_close(u_ours.grad, u_hf.grad, **HF)
    hf_params = dict(hf.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, hf_params[name].grad, **HF, msg=name)


def test_mixer_with_a_cached_state_equals_transformers_token_by_token() -> None:
    """A prefix, then one token at a time: transformers' mixer through its DynamicCache, SPEN's through its state;
    both equal each other and the whole sequence read at once."""
    hf, ours = _hf_pair(seed=3)
    u = torch.randn(2, 9, D, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    whole = ours(u)
    cache = DynamicCache(config=hf.config)
    state: dict = {}
    steps_hf, steps_ours = [hf(u[:, :5], cache=cache)], [ours(u[:, :5], state=state)]
    for t in range(5, 9):
        steps_hf.append(hf(u[:, t : t + 1], cache=cache))
        steps_ours.append(ours(u[:, t : t + 1], state=state))
    torch.testing.assert_close(torch.cat(steps_ours, 1), torch.cat(steps_hf, 1), **HF)
    torch.testing.assert_close(torch.cat(steps_ours, 1), whole, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(state["ssm"], cache.get_recurrent_state(0, state_idx=0).to(state["ssm"]), **HF)


@pytest.mark.parametrize("read", ["current", "lagged"])
def test_mamba_spen_generates_through_its_state(read) -> None:
    """generate() feeds one token after the prefill and gives the greedy tokens of the stateless loop."""
    model = tiny_model(mixer="mamba", mamba_read=read, trace_state_size=N, selective_rank=R)
    seen = []
    hook = model.model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["input_ids"].shape[1]),
                                                 with_kwargs=True)
    prompt = torch.randint(1, 61, (2, 6), generator=torch.Generator().manual_seed(5))
    out = model.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    hook.remove()
    assert torch.equal(out, _argmax_loop(model, prompt, 8))
    assert seen[0] == 6 and seen[1:] == [1] * 7


def test_left_padding_writes_nothing_into_the_state() -> None:
    model = tiny_model(mixer="mamba", trace_state_size=N, selective_rank=R)
    g = torch.Generator().manual_seed(6)
    short = torch.randint(1, 61, (1, 4), generator=g)
    batch = torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1)
    mask = torch.ones_like(batch)
    mask[0, :3] = 0
    torch.testing.assert_close(model(batch, attention_mask=mask).logits[0, 3:], model(short).logits[0],
                               rtol=1e-4, atol=1e-5)


def test_the_lagged_read_lets_no_current_token_into_the_ssm_read() -> None:
    """With the lagged read, a token changes the scan's readout only from the next position on; with the current
    read it changes its own position's (the query chooses what is read)."""
    for read, changes_own in (("lagged", False), ("current", True)):
        mixer = _mixer(mamba_read=read, mamba_gate=False, mamba_conv_kernel=1)
        with torch.no_grad():
            mixer.D.zero_()  # the skip connection reads the current token by design; the scan's read is tested
        u = torch.randn(1, 6, D, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
        v = u.clone()
        v[0, 3] += 1.0
        diff = (mixer(u) - mixer(v)).abs().amax(-1)[0]
        assert diff[:3].max() == 0
        assert (diff[3] > 1e-6) == changes_own, read
        assert diff[4] > 1e-6


def test_state_numbers_count_what_decoding_keeps() -> None:
    model = tiny_model(mixer="mamba", mamba_read="lagged", trace_state_size=N, selective_rank=R)
    out = model(torch.randint(1, 61, (1, 5)), use_cache=True)
    kept = sum(t[0].numel() for t in out.cache.layers[0].values())
    assert kept == sum(mamba_state_numbers(model.config).values())


def test_bad_mixer_fields_are_refused_naming_the_field() -> None:
    for field, value in (("mixer", "rwkv"), ("mamba_read", "future"), ("mamba_conv_kernel", 0),
                         ("mamba_gate", "yes"), ("mamba_expand", 0)):
        with pytest.raises(ValueError, match=f"SPENConfig.{field}"):
            _config(**{field: value})
