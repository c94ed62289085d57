"""The float64 reference itself, against values computed by hand: every fast path is tested against it."""

import math

import torch

from modeling_spen.traces_naive import ema_traces_naive, selective_ssm_naive


def test_fixed_rates_by_hand() -> None:
    # h_t = (1 - a) h_{t-1} + a x_t from h_{-1} = 0, x = (2, 0, 4), rates 0.5 and 0.25.
    x = torch.tensor([[[2.0], [0.0], [4.0]]])
    traces, last = ema_traces_naive(x, torch.tensor([0.5, 0.25]))
    assert traces.dtype == torch.float64 and traces.shape == (1, 3, 2, 1)
    assert traces[0, :, 0, 0].tolist() == [1.0, 0.5, 2.25]
    assert traces[0, :, 1, 0].tolist() == [0.5, 0.375, 1.28125]
    assert torch.equal(last, traces[:, -1])


def test_per_channel_and_input_dependent_rates_by_hand() -> None:
    x = torch.tensor([[[1.0, 1.0], [1.0, 1.0]]])
    per_channel, _ = ema_traces_naive(x, torch.tensor([[0.5, 0.25]]))
    assert per_channel[0, :, 0].tolist() == [[0.5, 0.25], [0.75, 0.4375]]
    # Rates that change with time: a_0 = 0.5, a_1 = 1.0 (the second step forgets everything).
    rates = torch.tensor([0.5, 1.0]).view(1, 2, 1, 1).expand(1, 2, 1, 2)
    selective, _ = ema_traces_naive(x * torch.tensor([[[1.0], [3.0]]]), rates)
    assert selective[0, :, 0].tolist() == [[0.5, 0.5], [3.0, 3.0]]


def test_initial_state_and_empty_sequence() -> None:
    h0 = torch.full((1, 1, 1), 8.0)
    traces, last = ema_traces_naive(torch.zeros(1, 2, 1), torch.tensor([0.5]), h0)
    assert traces[0, :, 0, 0].tolist() == [4.0, 2.0]
    empty, last = ema_traces_naive(torch.zeros(1, 0, 1), torch.tensor([0.5]), h0)
    assert empty.shape == (1, 0, 1, 1) and last.item() == 8.0


def test_selective_ssm_reference_with_one_mode_is_the_ema() -> None:
    # One mode (N = 1), A = -1, dt = -log(1 - a), B = a / dt, C = 1: exp(dt A) = 1 - a and dt B u = a u,
    # so the S6 recurrence is the EMA of rate a, checked against the EMA reference and by hand.
    u = torch.tensor([[[2.0], [0.0], [4.0]]])
    a = 0.5
    dt = torch.full((1, 3, 1), -math.log(1 - a))
    y, last = selective_ssm_naive(u, dt, -torch.ones(1, 1), torch.full((1, 3, 1), a) / dt[..., :1],
                                  torch.ones(1, 3, 1, 1))
    assert y.dtype == torch.float64 and y.shape == (1, 3, 1, 1)
    torch.testing.assert_close(y[0, :, 0, 0], torch.tensor([1.0, 0.5, 2.25], dtype=torch.float64))
    torch.testing.assert_close(y, ema_traces_naive(u, torch.tensor([a]))[0])
    torch.testing.assert_close(last[0, 0, 0], torch.tensor(2.25, dtype=torch.float64))


def test_selective_ssm_reference_binds_key_and_value() -> None:
    # Two modes that never decay (A -> 0): writing value 3 under key e_0 and value 5 under key e_1 stores
    # both; reading with e_1 returns 5, with e_0 returns 3: the outer-product binding.
    u = torch.tensor([[[3.0], [5.0]]])
    dt = torch.ones(1, 2, 1)
    B = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    C = torch.tensor([[[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]])  # (1, 2, S=2, N=2)
    y, last = selective_ssm_naive(u, dt, torch.full((1, 2), -1e-30), B, C)
    assert y[0, 1, :, 0].tolist() == [3.0, 5.0]
    assert last[0, 0].tolist() == [3.0, 5.0]
