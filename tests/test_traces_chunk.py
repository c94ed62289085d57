"""The autograd-differentiated solvers (learned and input-dependent rates), called directly."""

import pytest
import torch

from modeling_spen.traces_chunk import chunked_lti, scan_selective
from modeling_spen.traces_naive import ema_traces_naive


def _rel_err(fast: torch.Tensor, ref: torch.Tensor) -> float:
    return ((fast.double() - ref).abs().max() / ref.abs().max()).item()


@pytest.mark.parametrize("T, chunk", [(1, 4), (7, 4), (64, 8), (300, 16), (1000, 64)])
def test_chunked_lti_matches_reference(T: int, chunk: int) -> None:
    torch.manual_seed(T)
    x = torch.randn(2, T, 5)
    a = torch.rand(3, 5) * 0.9 + 0.05
    h0 = torch.randn(2, 3, 5)
    ref, _ = ema_traces_naive(x, a, h0)
    out = chunked_lti(a * x[:, :, None, :], torch.log1p(-a), h0, chunk)
    assert out.shape == (2, T, 3, 5)
    assert _rel_err(out, ref) < 1e-5


def test_chunked_lti_shared_rate_column() -> None:
    # A (S, 1) rate broadcasts over channels, the layout of learned rates shared by all channels.
    x = torch.randn(1, 50, 4)
    a = torch.tensor([[0.5], [0.1], [0.02]])
    ref, _ = ema_traces_naive(x, a.squeeze(1))
    out = chunked_lti(a * x[:, :, None, :], torch.log1p(-a), None, 16)
    assert _rel_err(out, ref) < 1e-5


@pytest.mark.parametrize("T", [1, 2, 3, 17, 256, 1000])
def test_scan_selective_matches_reference(T: int) -> None:
    torch.manual_seed(T)
    x = torch.randn(2, T, 4)
    a = torch.rand(2, T, 3, 4) * 0.9 + 0.05
    h0 = torch.randn(2, 3, 4)
    ref, _ = ema_traces_naive(x, a, h0)
    out = scan_selective(a * x[:, :, None, :], 1.0 - a, h0)
    assert _rel_err(out, ref) < 1e-5
