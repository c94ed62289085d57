"""eval.probes.identity: the identity-at-lag probe on inputs where the answer is known."""

import pytest
import torch

from eval.probes.identity import IdentityError, fit_lag_probes, hidden_states, identity_at_lag
from tests.test_modeling import tiny_model


def F_one_hot(x: torch.Tensor, n: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(x, n).float()


# ---------------------------------------------------------------------------------------------
# Identity at lag on known answers
# ---------------------------------------------------------------------------------------------


def test_identity_recoverable_exactly_at_the_lag_the_model_copies() -> None:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 8, (40, 50), generator=g)
    feats = F_one_hot(torch.roll(tokens, 1, dims=1), 8)  # holds exactly the token at t - 1
    res = fit_lag_probes(feats, tokens, lags=[1, 2, 5], num_classes=8)
    assert res["accuracy"][0] > 0.99  # the copied token
    assert res["accuracy"][1] < 0.3 and res["accuracy"][2] < 0.3  # i.i.d. tokens: nothing to read
    assert all(0.1 < c < 0.2 for c in res["chance"])  # 8 equiprobable classes


def test_blurred_state_loses_identity_with_lag() -> None:
    # An EMA of one-hot tokens: recent tokens are recoverable, distant ones fade toward chance.
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 8, (60, 80), generator=g)
    onehot = F_one_hot(tokens, 8)
    h, out = torch.zeros(60, 8), []
    for t in range(80):
        h = 0.5 * h + 0.5 * onehot[:, t]
        out.append(h.clone())
    res = fit_lag_probes(torch.stack(out, 1), tokens, lags=[0, 1, 8], num_classes=8)
    assert res["accuracy"][0] > 0.95
    assert res["accuracy"][0] > res["accuracy"][1] > res["accuracy"][2]
    assert res["accuracy"][2] < 0.3


def test_fit_lag_probes_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="disagree"):
        fit_lag_probes(torch.zeros(2, 5, 3), torch.zeros(2, 4, dtype=torch.long), [1])
    with pytest.raises(ValueError, match="largest lag"):
        fit_lag_probes(torch.zeros(2, 5, 3), torch.zeros(2, 5, dtype=torch.long), [5])


def test_identity_at_lag_on_a_model_covers_every_layer() -> None:
    ids = torch.randint(0, 61, (10, 24), generator=torch.Generator().manual_seed(2))
    res = identity_at_lag(tiny_model(), ids, max_lag=4, num_classes=8)
    assert res["lags"] == [1, 2, 3, 4]
    assert sorted(res["layers"]) == ["0", "1", "2"]  # embeddings + 2 blocks
    assert len(res["best"]) == 4 and all(0.0 <= a <= 1.0 for a in res["best"])


def test_hidden_states_stacked_in_one_tensor_are_split_per_layer() -> None:
    class Stacked(torch.nn.Module):  # an architecture that returns (layers, B, T, D)
        def forward(self, input_ids, **kwargs):
            x = F_one_hot(input_ids, 5)
            return type("Out", (), {"hidden_states": torch.stack([x, 2 * x, 3 * x])})()

    states = hidden_states(Stacked(), torch.zeros(3, 4, dtype=torch.long), batch_size=2)
    assert len(states) == 3 and states[2].shape == (3, 4, 5) and torch.equal(states[2], 3 * states[0])

    class Nothing(torch.nn.Module):
        def forward(self, input_ids, **kwargs):
            return type("Out", (), {"hidden_states": None})()

    with pytest.raises(IdentityError, match="Nothing returns no hidden_states"):
        hidden_states(Nothing(), torch.zeros(1, 4, dtype=torch.long))
