"""Multinomial logistic regression on frozen features (the probe), fitted by full-batch L-BFGS.

The probe is supervised (it is the read-out, not the SPCN learner), so it uses autograd; the
features it reads are detached tensors computed under ``torch.no_grad()``.
"""

from __future__ import annotations

import torch
from torch import nn


class LinearProbe:
    """Standardise features, then softmax regression with an L2 penalty."""

    def __init__(self, n_classes: int, l2: float = 1e-4, max_iter: int = 200, seed: int = 0) -> None:
        self.n_classes = n_classes
        self.l2 = l2
        self.max_iter = max_iter
        self.seed = seed
        self.linear: nn.Linear | None = None

    def fit(self, features: torch.Tensor, labels: torch.Tensor) -> LinearProbe:
        torch.manual_seed(self.seed)
        self.mean = features.mean(0)
        self.scale = features.std(0).clamp_min(1e-6)  # constant features (never-active units) stay 0
        x = (features - self.mean) / self.scale
        self.linear = nn.Linear(x.shape[1], self.n_classes)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        opt = torch.optim.LBFGS(
            self.linear.parameters(), lr=1.0, max_iter=self.max_iter, history_size=20,
            line_search_fn="strong_wolfe", tolerance_grad=1e-6, tolerance_change=1e-9,
        )

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(self.linear(x), labels)
            loss = loss + self.l2 * self.linear.weight.pow(2).sum()
            loss.backward()
            return loss

        opt.step(closure)
        return self

    @torch.no_grad()
    def predict(self, features: torch.Tensor) -> torch.Tensor:
        if self.linear is None:
            raise RuntimeError("LinearProbe.predict called before fit")
        return self.linear((features - self.mean) / self.scale).argmax(-1)
