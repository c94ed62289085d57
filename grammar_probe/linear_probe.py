"""Multinomial logistic regression on frozen features (the probe), the same for every trace model.

The probe is supervised (it is the read-out, not the SPCN learner), so it uses autograd; the
features it reads are detached tensors computed under ``torch.no_grad()``. Features are
standardised with the training mean and deviation; minibatch Adam; with ``validation`` given, the
epoch with the best validation accuracy is kept (:class:`~grammar_probe.protocol.EarlyStopping`, the
same rule and patience as the GRU and window taggers).
"""

from __future__ import annotations

import torch
from torch import nn

from grammar_probe.protocol import PATIENCE, EarlyStopping


class LinearProbe:
    """Standardise features, then softmax regression with an L2 penalty."""

    def __init__(self, n_classes: int, l2: float = 1e-5, max_iter: int = 12, seed: int = 0,
                 batch_size: int = 1024, lr: float = 1e-2, patience: int = PATIENCE) -> None:
        self.n_classes = n_classes
        self.l2 = l2
        self.max_iter = max_iter  # epochs at most
        self.seed = seed
        self.batch_size = batch_size
        self.lr = lr
        self.patience = patience
        self.linear: nn.Linear | None = None
        self.log: dict = {}

    def fit(self, features: torch.Tensor, labels: torch.Tensor,
            validation: tuple[torch.Tensor, torch.Tensor] | None = None) -> LinearProbe:
        torch.manual_seed(self.seed)
        self.mean = features.mean(0)
        self.scale = features.std(0).clamp_min(1e-6)  # constant features (never-active units) stay 0
        x = (features - self.mean) / self.scale
        self.linear = nn.Linear(x.shape[1], self.n_classes)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)
        opt = torch.optim.Adam(self.linear.parameters(), lr=self.lr, weight_decay=self.l2)
        gen = torch.Generator().manual_seed(self.seed)
        stop = EarlyStopping(self.patience)
        for epoch in range(self.max_iter):
            for idx in torch.randperm(len(x), generator=gen).split(self.batch_size):
                loss = nn.functional.cross_entropy(self.linear(x[idx]), labels[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if validation is not None and stop.update(
                    epoch, (self.predict(validation[0]) == validation[1]).float().mean().item(), self.linear):
                break
        if validation is not None:
            stop.restore(self.linear)
            self.log = stop.summary(self.max_iter)
        return self

    @torch.no_grad()
    def predict(self, features: torch.Tensor) -> torch.Tensor:
        if self.linear is None:
            raise RuntimeError("LinearProbe.predict called before fit")
        return self.linear((features - self.mean) / self.scale).argmax(-1)
