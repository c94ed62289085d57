r"""SPCN: a Sparse Predictive Column Network with multi-timescale EMA traces and PGHU learning.

No labels, no gradient descent: every tensor is created with ``requires_grad=False`` and all work
runs under ``torch.no_grad()``. :meth:`SPCN.fit` takes token sequences only.

Notation (one sentence, time t = 1..T, traces start at zero at every sentence; batches of
sentences run in parallel, padded positions leave every state untouched):

- Word code: :math:`x_t \in \{0,1\}^{D}` with ``input_active`` ones at positions drawn from a
  hash of the word string. Vocabulary-free, so a never-seen word gets a code like any other.
- Level l (l = 1..L) has :math:`N_l` units and a frozen random projection
  :math:`P_l \sim \mathcal N(0, 1/\mathrm{fan\_in})`. Its input is :math:`u_{1,t} = x_t`, and
  :math:`u_{l,t} = z_{l-1,t}` (the traces of the level below) for l > 1.
- Feed-forward drive, standardised over units: :math:`f_{l,t} = \mathrm{std}(P_l u_{l,t})`.
- Bottom-up code: :math:`b_{l,t} = \mathrm{kWTA}_{k_l}(f_{l,t})` (1 for the k largest units, else 0).
- Top-down prediction of that code from the level above, one step back (strictly past, so the
  prediction cannot copy its target): :math:`p_{l,t} = W_l z_{l+1,t-1}` (:math:`p_{L,t} = 0`).
- Activity, bottom-up evidence biased by the expectation:
  :math:`a_{l,t} = \mathrm{kWTA}_{k_l}(f_{l,t} + \gamma\, p_{l,t})`.
- EMA traces for each rate :math:`\alpha \in \{0.5, 0.1, 0.02\}`:
  :math:`h^{\alpha}_{l,t} = (1-\alpha) h^{\alpha}_{l,t-1} + \alpha a_{l,t}`;
  :math:`z_{l,t} = [h^{0.5}_{l,t}; h^{0.1}_{l,t}; h^{0.02}_{l,t}]`.
- Prediction error: :math:`e_{l,t} = b_{l,t} - p_{l,t}`.

PGHU (precision-gated Hebbian update) for the feedback weights :math:`W_l`, per unit i:

.. math::
    v_{l,i} \leftarrow (1-\rho)\, v_{l,i} + \rho\, \overline{e_{l,i}^2}, \qquad
    \pi_{l,i} = \frac{1}{v_{l,i} + \epsilon}, \qquad
    \tilde\pi_{l,i} = \frac{\pi_{l,i}}{\operatorname{mean}_j \pi_{l,j}}

.. math::
    \Delta W_l = \eta\, \frac{\overline{(\tilde\pi_l \odot e_{l,t})\, z_{l+1,t-1}^{\top}}}
                           {\overline{\lVert z_{l+1,t-1}\rVert^2} + \epsilon}

(bars: means over the sentences of a batch at step t). The update is local: presynaptic activity
:math:`z_{l+1,t-1}` times postsynaptic prediction error :math:`e_{l,t}`, scaled by the error's
precision, so units whose error is reliably small (predictable units) learn faster than noisy
ones. Dividing by the presynaptic energy makes it a normalised delta rule, stable for
:math:`\eta < 2`. The frozen projections :math:`P_l` never change.

The probe reads :meth:`SPCN.traces`: :math:`[z_{1,t}; \dots; z_{L,t}]` per token.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

__all__ = ["SPCN", "SPCNConfig", "word_code"]


@dataclass(frozen=True)
class SPCNConfig:
    input_dim: int = 512
    input_active: int = 16
    level_sizes: tuple[int, ...] = (512, 512)
    level_active: tuple[int, ...] = (26, 26)  # about 5% of units win
    trace_rates: tuple[float, ...] = (0.5, 0.1, 0.02)  # write rate a of h_t = (1-a) h_{t-1} + a u_t
    feedback_gain: float = 2.0  # gamma: weight of the top-down expectation in the competition
    learning_rate: float = 0.5  # eta of the normalised PGHU delta rule
    precision_rate: float = 0.01  # rho: running-variance rate
    epochs: int = 2
    batch_size: int = 128
    seed: int = 0
    eps: float = field(default=1e-4, repr=False)

    def __post_init__(self) -> None:
        if len(self.level_sizes) < 2 or len(self.level_sizes) != len(self.level_active):
            raise ValueError("SPCNConfig: need >= 2 levels and one k per level")
        if any(not 0 < k < n for k, n in zip(self.level_active, self.level_sizes, strict=True)):
            raise ValueError("SPCNConfig: every level_active k must be in (0, level size)")
        if not 0 < self.input_active < self.input_dim:
            raise ValueError("SPCNConfig: input_active must be in (0, input_dim)")
        if not self.trace_rates or any(not 0 < a <= 1 for a in self.trace_rates):
            raise ValueError("SPCNConfig: every trace rate must be in (0, 1]")


def word_code(word: str, dim: int, active: int, seed: int) -> np.ndarray:
    """Indices of the ``active`` ones of a word's sparse binary code (stable across runs)."""
    digest = hashlib.sha256(f"{seed}\x00{word}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return np.sort(rng.choice(dim, size=active, replace=False))


def _kwta(drive: torch.Tensor, k: int) -> torch.Tensor:
    out = torch.zeros_like(drive)
    return out.scatter_(-1, drive.topk(k, dim=-1).indices, 1.0)


def _standardise(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)


class SPCN:
    """Hierarchy of sparse columns with EMA traces; feedback weights learned by PGHU."""

    def __init__(self, config: SPCNConfig | None = None) -> None:
        self.config = cfg = config or SPCNConfig()
        gen = torch.Generator().manual_seed(cfg.seed)
        self.n_rates = len(cfg.trace_rates)
        fan_in = [cfg.input_dim] + [self.n_rates * n for n in cfg.level_sizes[:-1]]
        self.projections = [
            torch.randn(n, f, generator=gen) / f**0.5 for n, f in zip(cfg.level_sizes, fan_in, strict=True)
        ]
        # W_l predicts level l's code from level l+1's traces; zero-initialised: no expectation yet.
        self.feedback = [
            torch.zeros(cfg.level_sizes[i], self.n_rates * cfg.level_sizes[i + 1])
            for i in range(len(cfg.level_sizes) - 1)
        ]
        self.error_var = [torch.ones(n) for n in cfg.level_sizes[:-1]]
        self._rates = torch.tensor(cfg.trace_rates).view(-1, 1, 1)  # (rates, 1, 1) broadcast over batch, units
        self._codes: dict[str, np.ndarray] = {}

    # -- state ------------------------------------------------------------------------------------

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the network holds (for the no-gradient check and for hashing)."""
        return [*self.projections, *self.feedback, *self.error_var]

    def state_dict(self) -> dict:
        return {
            "config": asdict(self.config),
            "projections": [p.clone() for p in self.projections],
            "feedback": [w.clone() for w in self.feedback],
            "error_var": [v.clone() for v in self.error_var],
        }

    @property
    def feature_dim(self) -> int:
        return self.n_rates * sum(self.config.level_sizes)

    def _encode(self, batch: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Word codes (T, B, D) and a validity mask (T, B) for a padded batch of sentences."""
        cfg = self.config
        T = max(len(s) for s in batch)
        x = torch.zeros(T, len(batch), cfg.input_dim)
        mask = torch.zeros(T, len(batch), dtype=torch.bool)
        for b, sent in enumerate(batch):
            for t, w in enumerate(sent):
                if w not in self._codes:
                    self._codes[w] = word_code(w, cfg.input_dim, cfg.input_active, cfg.seed)
                x[t, b, self._codes[w]] = 1.0
            mask[: len(sent), b] = True
        return x, mask

    # -- dynamics ---------------------------------------------------------------------------------

    @torch.no_grad()
    def _run(self, batch: Sequence[Sequence[str]], learn: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Run a padded batch through time; returns traces (T, B, feature_dim) and the mask."""
        cfg = self.config
        x, mask = self._encode(batch)
        T, B = mask.shape
        L = len(cfg.level_sizes)
        traces = [torch.zeros(self.n_rates, B, n) for n in cfg.level_sizes]
        out = torch.zeros(T, B, self.feature_dim)
        for t in range(T):
            m = mask[t].view(1, B, 1)
            # Top-down context from the previous step, before any level is updated at t.
            context = [h.permute(1, 0, 2).reshape(B, -1) for h in traces]
            below = x[t]
            for lvl in range(L):
                drive = _standardise(below @ self.projections[lvl].T)
                k = cfg.level_active[lvl]
                if lvl < L - 1:
                    pred = context[lvl + 1] @ self.feedback[lvl].T
                    active = _kwta(drive + cfg.feedback_gain * pred, k)
                    if learn:
                        self._pghu(lvl, _kwta(drive, k) - pred, context[lvl + 1], mask[t])
                else:
                    active = _kwta(drive, k)
                new = (1 - self._rates) * traces[lvl] + self._rates * active
                traces[lvl] = torch.where(m, new, traces[lvl])
                below = traces[lvl].permute(1, 0, 2).reshape(B, -1)
            out[t] = torch.cat([h.permute(1, 0, 2).reshape(B, -1) for h in traces], dim=-1)
        return out, mask

    def _pghu(self, lvl: int, error: torch.Tensor, pre: torch.Tensor, valid: torch.Tensor) -> None:
        cfg = self.config
        if not valid.any():
            return
        error, pre = error[valid], pre[valid]
        var = self.error_var[lvl]
        var.mul_(1 - cfg.precision_rate).add_(cfg.precision_rate * error.pow(2).mean(0))
        precision = 1.0 / (var + cfg.eps)
        gated = error * (precision / precision.mean())
        energy = pre.pow(2).sum(-1).mean() + cfg.eps
        self.feedback[lvl].add_(cfg.learning_rate * (gated.T @ pre) / (len(pre) * energy))

    # -- public API -------------------------------------------------------------------------------

    def _batches(self, sentences: Sequence[Sequence[str]]) -> Iterable[Sequence[Sequence[str]]]:
        bs = self.config.batch_size
        return (sentences[i : i + bs] for i in range(0, len(sentences), bs))

    @torch.no_grad()
    def fit(self, sentences: Sequence[Sequence[str]], progress: bool = False) -> SPCN:
        """Learn the feedback weights from token sequences alone (no labels exist in this API)."""
        rng = np.random.default_rng(self.config.seed)
        n_batches = -(-len(sentences) // self.config.batch_size)
        bar = tqdm(total=self.config.epochs * n_batches, desc="SPCN PGHU", disable=not progress)
        for _ in range(self.config.epochs):
            shuffled = [sentences[i] for i in rng.permutation(len(sentences))]
            for batch in self._batches(shuffled):
                self._run(batch, learn=True)
                bar.update()
        bar.close()
        return self

    @torch.no_grad()
    def traces(self, sentences: Sequence[Sequence[str]], progress: bool = False) -> torch.Tensor:
        """Frozen network: per-token traces, concatenated over sentences, shape (tokens, feature_dim)."""
        parts = []
        for batch in tqdm(list(self._batches(sentences)), desc="SPCN traces", disable=not progress):
            out, mask = self._run(batch, learn=False)
            parts.append(out.transpose(0, 1)[mask.T])  # (B, T, F)[valid] keeps sentence-major order
        return torch.cat(parts) if parts else torch.zeros(0, self.feature_dim)

    def input_codes(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """The current word's input code per token (the no-trace control), shape (tokens, input_dim)."""
        parts = []
        for batch in self._batches(sentences):
            x, mask = self._encode(batch)
            parts.append(x.transpose(0, 1)[mask.T])
        return torch.cat(parts) if parts else torch.zeros(0, self.config.input_dim)
