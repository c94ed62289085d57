"""Intervals over seeds *and* test sentences, inside [0, 100] by construction, with Holm across a table.

Every seed is scored on the same test sentences, so two things vary between a run and its repetition:
the seeds (training subset, initialisations, word dropout) and the test sentences (one sample of the
grammar). A t interval over seeds sees only the first and can leave [0, 1]. Here every number comes
with a two-level bootstrap: each replicate draws the seeds with replacement and, independently, the
test sentences of each split with replacement (one draw of the seeds per replicate is shared by all
splits, one draw of each split's sentences by all models), then recomputes the quantity. The interval
is the replicates' 2.5-97.5 percentile: an accuracy stays inside [0, 1] because every replicate is one,
and a paired difference is paired at both levels (the same seeds and sentences for both models).

Tests of a paired difference use the replicates' standard deviation as its standard error (normal
theory): "no difference" has the two-sided p-value ``2 Phi(-|d| / se)``; equivalence within a declared
margin is the two one-sided tests, ``max(Phi((d - margin) / se), Phi((-margin - d) / se))``. (Counting
replicates instead would floor every p-value at 2 / (B + 1), too coarse for Holm over a table of 60.)
A difference with no variance at all (every replicate equal) is 0 with
p = 1 when it is exactly 0, and otherwise decided by its sign. :func:`holm_family` adjusts the p-values
of one table (its family of comparisons) and re-derives the verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import special

from ema_boundary import stats

__all__ = ["METHOD", "REPLICATES", "Bootstrap", "difference", "holm_family", "interval"]

REPLICATES = 2000
METHOD = (f"bootstrap over seeds and test sentences ({REPLICATES} replicates, percentile 95%; "
          "seeds and each split's sentences drawn with replacement)")


class Bootstrap:
    """Shared replicate draws for one run: seed draws for all splits, sentence weights per split."""

    def __init__(self, n_seeds: int, sentences_per_split: Mapping[str, int], seed: int = 0,
                 replicates: int = REPLICATES) -> None:
        rng = np.random.default_rng(seed)
        self.n_seeds = n_seeds
        self.replicates = replicates
        self.seed_draws = rng.integers(0, n_seeds, size=(replicates, n_seeds))
        # Multinomial counts == how often each sentence is drawn in a resample of the same size.
        self.weights = {split: rng.multinomial(n, np.full(n, 1.0 / n), size=replicates).astype(np.float64)
                        for split, n in sorted(sentences_per_split.items())}

    def replicates_of(self, split: str, correct: np.ndarray, sentence: np.ndarray, mask: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Per-seed accuracies (seeds,) and bootstrap replicates (replicates,) of the accuracy over the
        tokens in ``mask``; ``correct`` is (seeds, tokens), ``sentence`` the sentence index of each token."""
        w = self.weights[split]
        n_sent = w.shape[1]
        if mask is not None:
            correct, sentence = correct[:, mask], sentence[mask]
        den = np.bincount(sentence, minlength=n_sent).astype(np.float64)
        num = np.stack([np.bincount(sentence, weights=c.astype(np.float64), minlength=n_sent) for c in correct])
        per_seed = num.sum(1) / max(den.sum(), 1.0)
        tokens = w @ den  # (replicates,)
        by_seed = (w @ num.T) / np.maximum(tokens, 1.0)[:, None]  # (replicates, seeds)
        rep = np.take_along_axis(by_seed, self.seed_draws, axis=1).mean(1)
        return per_seed, rep


def interval(per_seed: np.ndarray, rep: np.ndarray) -> dict:
    """A :func:`ema_boundary.stats.summary`-shaped dict whose ``ci95`` is the bootstrap percentile interval."""
    lo, hi = np.percentile(rep, [2.5, 97.5])
    sd = float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else float("nan")
    return {"mean": float(np.mean(per_seed)), "ci95": (float(lo), float(hi)), "sd": sd, "n": len(per_seed),
            "per_seed": [float(v) for v in per_seed], "method": METHOD}


def difference(a_seed: np.ndarray, a_rep: np.ndarray, b_seed: np.ndarray, b_rep: np.ndarray,
               margin: float | None, alpha: float = stats.ALPHA) -> dict:
    """The paired difference a - b: :func:`interval` plus ``ci90``, the bootstrap p-values and a verdict."""
    d_seed, d_rep = a_seed - b_seed, a_rep - b_rep
    out = interval(d_seed, d_rep)
    lo90, hi90 = np.percentile(d_rep, [5, 95])
    out["ci90"] = (float(lo90), float(hi90))
    out["margin"] = margin
    b = len(d_rep)
    if np.all(d_rep == d_rep[0]):  # no variance at all: decided by the value itself
        p_diff = 1.0 if d_rep[0] == 0 else 1.0 / (b + 1)
        p_eq = None if margin is None else (1.0 / (b + 1) if abs(d_rep[0]) < margin else 1.0)
    else:
        # Normal theory with the bootstrap standard error: unlike counting replicates (whose smallest
        # p-value is 2 / (B + 1)), these p-values can be small enough to survive Holm in a large family.
        mean, se = float(np.mean(d_seed)), float(np.std(d_rep, ddof=1))
        p_diff = float(2 * special.ndtr(-abs(mean) / se))
        p_eq = None if margin is None else float(max(special.ndtr((mean - margin) / se),
                                                      special.ndtr((-margin - mean) / se)))
    out["p_difference"], out["p_equivalence"] = float(p_diff), None if p_eq is None else float(p_eq)
    out["p_difference_raw"], out["p_equivalence_raw"] = out["p_difference"], out["p_equivalence"]
    _set_verdict(out, alpha)
    return out


def _set_verdict(out: dict, alpha: float) -> None:
    out["verdict"] = stats.verdict(out["p_difference"], out["p_equivalence"], alpha)
    if out["verdict"] == "different":
        out["conclusion"] = "higher" if out["mean"] > 0 else "lower"
    else:
        out["conclusion"] = "equivalent" if out["verdict"] == "equivalent" else stats.NOT_RESOLVED


def holm_family(comparisons: Sequence[dict], family: str, alpha: float = stats.ALPHA) -> None:
    """Holm-adjust, in place, the p-values of one table's comparisons (its family) and re-derive the
    verdicts; each comparison records the family's name and size."""
    p_diff = stats.holm([c["p_difference_raw"] for c in comparisons])
    p_eq = stats.holm([c["p_equivalence_raw"] for c in comparisons])
    for c, pd, pe in zip(comparisons, p_diff, p_eq, strict=True):
        c["p_difference"] = pd
        c["p_equivalence"] = None if c["p_equivalence_raw"] is None else pe
        c["correction"] = {"method": "holm", "family": family, "size": len(comparisons)}
        _set_verdict(c, alpha)
