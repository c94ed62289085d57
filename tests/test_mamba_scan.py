"""transformers' MambaForCausalLM on SPEN's scan (eval.mamba_scan) equals transformers' own scan on the same weights."""

import torch
from transformers import MambaConfig, MambaForCausalLM
from transformers.models.mamba import modeling_mamba

from eval.mamba_scan import fast_mamba_scan


def _logits_and_grads(model: MambaForCausalLM, ids: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    logits = model(ids, use_cache=False).logits
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_transformers_mamba_is_the_same_model_on_the_fast_scan() -> None:
    torch.manual_seed(0)
    config = MambaConfig(vocab_size=50, hidden_size=16, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4)
    model = MambaForCausalLM(config).train()
    ids = torch.randint(0, 50, (3, 17), generator=torch.Generator().manual_seed(1))
    want, want_grads = _logits_and_grads(model, ids)
    original = modeling_mamba.mamba_selective_scan
    with fast_mamba_scan():
        assert modeling_mamba.mamba_selective_scan is not original
        got, got_grads = _logits_and_grads(model, ids)
    assert modeling_mamba.mamba_selective_scan is original  # restored
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert got_grads.keys() == want_grads.keys()
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_fast_scan_returns_the_last_state_as_transformers_does() -> None:
    g = torch.Generator().manual_seed(2)
    B, E, N, T = 2, 6, 4, 9
    args = (torch.randn(B, E, T, generator=g), torch.randn(B, E, T, generator=g), -torch.rand(E, N, generator=g) - 0.5,
            torch.randn(B, N, T, generator=g), torch.randn(B, N, T, generator=g))
    kw = dict(D=torch.randn(E, generator=g), z=torch.randn(B, E, T, generator=g),
              delta_bias=torch.randn(E, generator=g), delta_softplus=True, return_last_state=True)
    want_out, want_state = modeling_mamba.mamba_selective_scan(*args, **kw)
    from eval.mamba_scan import selective_scan

    got_out, got_state = selective_scan(*args, **kw)
    torch.testing.assert_close(got_out, want_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got_state, want_state, rtol=1e-5, atol=1e-6)
