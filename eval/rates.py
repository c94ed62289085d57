"""The rate rule: how a learning rate is chosen (on validation, from a declared grid, extended beyond an edge until
the choice is interior, with a cap), and the one reading of a plan's ``rate:`` section. Its own module, below the
runner: the sweep runner (:meth:`eval.sweep.runner.Sweep.choice`), the recall trainer (:func:`eval.recall.recall_model`)
and the report plan (``language_model.rate``) read it, and an experiment imports it without importing the runner."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eval.plans import Checker, factor, non_negative, one_of, positive, rate, rule

CHOOSERS = ("first_seed", "each_seed")
# Significant digits of a rate added beyond an edge (it names a run folder): the sweeps' six (docs/sweeps/depth:
# lr_0.0333333); a plan may declare fewer (`rate.digits`): the report's headline pair has added its rates at three
# since issue 20 (docs/report: 0.0333 above 1e-2), which its reruns reproduce.
RATE_DIGITS = 6


@dataclass(frozen=True)
class RateRule:
    """How a learning rate is chosen: on validation, from a declared grid, extended until interior. The one rule of
    the project: the sweep runner's (:meth:`eval.sweep.runner.Sweep.choice`), the recall trainer's
    (:func:`eval.recall.recall_model`) and the report's headline pair (``language_model.rate``) read it.

    ``extend: false`` (or ``max_extensions: 0``) keeps the grid as declared: the best rate of the grid."""

    lr_grid: tuple[float, ...] = rule(rate, (1e-3, 3e-3, 1e-2))
    choose: str = rule(one_of(CHOOSERS, "chooser"), "first_seed")
    extend: bool = False
    max_extensions: int = rule(non_negative, 1)
    factor: float | None = rule(factor)
    digits: int = rule(positive, RATE_DIGITS)

    def as_plan(self) -> dict[str, Any]:
        """The rule as a plan's ``rate:`` section declares it (JSON-ready); ``digits`` only when not the default,
        so that the sweeps committed before the field keep their identity."""
        return {"lr_grid": list(self.lr_grid), "choose": self.choose, "extend": self.extend,
                "max_extensions": self.max_extensions, "factor": self.factor,
                **({"digits": self.digits} if self.digits != RATE_DIGITS else {})}

    def search(self, objective: Callable[[float], float | None], lower_is_better: bool = True,
               grid: Sequence[float] | None = None) -> RateSearch:
        """The rule applied: every rate of ``grid`` (default: ``lr_grid``) in ascending order, then while the best
        lies at an edge, the next rate beyond it (:meth:`next_rate`). ``objective(rate)`` is the rate's validation
        number, or None while it is not known (a run not yet finished): the search then stops there and names
        the rates it needs."""
        tried: dict[float, float] = {}
        need: list[float] = []
        for lr in sorted(grid or self.lr_grid):
            value = objective(lr)
            if value is None:
                need.append(lr)
            else:
                tried[lr] = value
        extensions: list[float] = []
        while not need:
            nxt = self.next_rate(tried, len(extensions), lower_is_better)
            if nxt is None or nxt in tried:
                break
            extensions.append(nxt)
            value = objective(nxt)
            if value is None:
                need.append(nxt)
            else:
                tried[nxt] = value
        chosen = choose(tried, lower_is_better) if tried and not need else None
        return RateSearch(tried=tried, need=need, extensions=extensions, chosen=chosen)

    def next_rate(self, values: dict[float, float], added: int, lower_is_better: bool = True) -> float | None:
        """The rate to try beyond the edge where the best of ``values`` (rate -> validation objective) lies;
        None when the best is interior, the rule extends no grid, ``max_extensions`` were added already, or the
        next rate is not below 1."""
        rates = sorted(values)
        best = choose(values, lower_is_better)
        if not self.extend or added >= self.max_extensions or rates[0] < best < rates[-1]:
            return None
        if len(rates) < 2:  # a lone rate has no ratio and no side: with a declared factor, try above it first
            if self.factor is None:
                return None
            nxt = float(f"{best * self.factor:.{self.digits}g}")
            return nxt if nxt < 1 else None
        up = best == rates[-1]
        f = self.factor or (rates[-1] / rates[-2] if up else rates[1] / rates[0])
        nxt = float(f"{best * f if up else best / f:.{self.digits}g}")
        return nxt if nxt < 1 else None


@dataclass(frozen=True)
class RateSearch:
    """Where :meth:`RateRule.search` stands: the rates tried with their objective, the rates it still needs, the
    rates it added beyond the grid, and the rate chosen (None until every rate it needs is known)."""

    tried: dict[float, float]
    need: list[float]
    extensions: list[float]
    chosen: float | None


def choose(values: dict[float, float], lower_is_better: bool = True) -> float:
    """The rate with the best objective; a tie keeps the smaller rate, and a diverged run (NaN) is the worst."""
    worst = math.inf if lower_is_better else -math.inf
    rates = sorted(values)
    return (min if lower_is_better else max)(rates, key=lambda r: values[r] if math.isfinite(values[r]) else worst)


def read_rate(checker: Checker, where: tuple[str, ...], raw: Any) -> RateRule:
    """A plan's ``rate:`` section (a sweep's, or a report plan's ``language_model.rate``): the one reading of the
    rule, each failure one line naming the YAML line of the field."""
    rule = checker.section(where, RateRule, raw)
    if rule.extend and len(rule.lr_grid) < 2 and rule.factor is None:
        raise checker.error((*where, "factor"), "must be set to extend a grid of one rate (it has no ratio)")
    return rule


__all__ = ["CHOOSERS", "RATE_DIGITS", "RateRule", "RateSearch", "choose", "read_rate"]
