"""SparseFFN's top-k mask: exactly the gather/scatter of the top-k indices it replaced (no ties)."""

import pytest
import torch
import torch.nn.functional as F

from benchmarks.bench_ffn import MASKS, mask_scatter
from modeling_spen import SPENConfig
from modeling_spen.modeling_spen import SparseFFN


def reference_ffn(ffn: SparseFFN, x: torch.Tensor) -> torch.Tensor:
    """The SparseFFN before the threshold mask: topk indices, gather, scatter into zeros."""
    h = F.gelu(ffn.up(x), approximate="tanh")
    return ffn.down(mask_scatter(h, ffn.k))


@pytest.mark.parametrize("width, inter, fraction", [(16, 48, 0.06), (64, 256, 0.06), (32, 100, 0.5), (8, 10, 1.0)])
def test_forward_and_backward_equal_the_scatter_mask(width: int, inter: int, fraction: float) -> None:
    torch.manual_seed(0)
    ffn = SparseFFN(SPENConfig(hidden_size=width, intermediate_size=inter, ffn_topk_fraction=fraction))
    x = torch.randn(3, 17, width, requires_grad=True)
    grad = torch.randn(3, 17, width)
    out = ffn(x)
    (gx, *gp) = torch.autograd.grad(out, [x, *ffn.parameters()], grad)
    ref = reference_ffn(ffn, x)
    (rx, *rp) = torch.autograd.grad(ref, [x, *ffn.parameters()], grad)
    assert torch.equal(out, ref)
    assert torch.equal(gx, rx)
    for a, b in zip(gp, rp, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)  # the same products, summed in another order
    # Exactly k units are active per token (no ties in random fp32 activations).
    h = F.gelu(ffn.up(x), approximate="tanh")
    kept = (h * (h >= h.topk(ffn.k, -1).values[..., -1:])) != 0
    assert (kept.sum(-1) == ffn.k).all()


def test_every_benchmarked_mask_is_exact() -> None:
    h = torch.randn(64, 200)
    for name, mask in MASKS.items():
        assert torch.equal(mask(h, 12), mask_scatter(h, 12)), name


def test_ties_at_the_threshold_keep_every_tied_unit() -> None:
    # The one documented difference: units tied with the k-th largest value are all kept.
    h = torch.tensor([[3.0, 1.0, 1.0, 0.5]])
    ffn = SparseFFN(SPENConfig(hidden_size=4, intermediate_size=4, ffn_topk_fraction=0.5))
    assert ffn.k == 2
    from benchmarks.bench_ffn import mask_topk_threshold

    assert mask_topk_threshold(h, 2).tolist() == [[3.0, 1.0, 1.0, 0.0]]
