"""A sweep declared as data: a base, arms (name -> patch), a rate rule, seeds, budgets and what to score.

::

    name: ablation-trace
    trainer: train               # what trains one run: `train` (train.py), `recall` (eval.recall's MQAR) or
                                 # `arms` (grammar_probe's experiment)
    analysis: ablation           # how the results are read (eval/sweep/analyses.py): ladder, ablation, depth,
                                 # recall_map, arms, or none
    seeds: [0, 1, 2, 3, 4]       # every arm's, unless the arm names its own
    budgets: [200, 700, 2000]    # max_steps of each run; the longest budget chooses the rates
    score: test                  # the split every seed is scored on (rates are chosen on validation)
    workers: 2                   # runs at a time on the local launcher (one torch thread each)
    rate:                        # the rate rule (eval/rates.py), one for every arm (an arm may name its own lr_grid)
      lr_grid: [3.0e-3, 1.0e-2, 3.0e-2]
      choose: first_seed         # first_seed: the first seed chooses for every seed; each_seed: each its own
      extend: true               # a choice at an edge of the rates tried is not yet a choice: the next rate
      max_extensions: 1          # beyond that edge trains, until the choice is interior or this many were added
      factor: null               # the next rate is the edge times / divided by this (null: the grid's ratio)
    base: hub_configs/spen-f64/train.yaml   # the trainer's settings every arm starts from (a file or a mapping)
    arms:
      linear: {}                 # an arm: a patch merged into base (`config`), optionally its own
      linear-selective:          # lr_grid, seeds or budgets
        config: {model: {set: {trace: selective}}}
    settings: {reference: linear, equivalence_margin: 0.02}   # the analysis' own settings

Every field is checked when the plan is read, before any work (:mod:`eval.plans`). A sweep's runs are the
arms x rates x seeds x budgets the rule asks for; :mod:`eval.sweep.runner` runs them.
"""

from __future__ import annotations

import copy
import re
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ema_boundary.yamlio import YAMLFileError, read_yaml_file, read_yaml_text
from eval.plans import Checker, PlanError, find_plan, one_of, positive, rate, rule
from eval.rates import RateRule, read_rate

TRAINERS = ("train", "recall", "arms")
ANALYSES = ("none", "ladder", "ablation", "depth", "recall_map", "arms", "data_axis")
SCORES = ("test", "validation")
SEED_LIMIT = 2**32  # numpy's seeds (train.py seeds numpy, torch and random alike) are below it
# An arm names folders under DIR/runs/: parts of these characters, separated by "/" (the ladder's `w128/spen`),
# none empty and none starting with "." (no `..`: an arm's runs stay in the sweep folder).
ARM_NAME = re.compile(r"[A-Za-z0-9_+=@-][A-Za-z0-9_.+=@-]*(/[A-Za-z0-9_+=@-][A-Za-z0-9_.+=@-]*)*")


def seed(v: Any) -> str | None:
    return None if 0 <= v < SEED_LIMIT else f"must be a seed in [0, 2**32), got {v}"


@dataclass(frozen=True)
class Arm:
    """One arm: its patch of the base settings, and what it overrides of the plan's grid, seeds and budgets."""

    name: str
    config: dict = field(default_factory=dict)
    lr_grid: tuple[float, ...] | None = rule(rate)
    seeds: tuple[int, ...] | None = rule(seed)
    budgets: tuple[int, ...] | None = rule(positive)


@dataclass(frozen=True)
class SweepPlan:
    """Typed settings of one sweep (:func:`load_plan` reads them from a YAML)."""

    name: str
    path: str
    trainer: str
    analysis: str
    seeds: tuple[int, ...]
    budgets: tuple[int, ...]
    score: str
    workers: int
    rate: RateRule
    base: dict
    arms: tuple[Arm, ...]
    settings: dict
    declared: dict  # the YAML as read

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def seeds_of(self, arm: Arm) -> tuple[int, ...]:
        return arm.seeds or self.seeds

    def budgets_of(self, arm: Arm) -> tuple[int, ...]:
        return tuple(sorted(arm.budgets or self.budgets))

    def grid_of(self, arm: Arm) -> tuple[float, ...]:
        return tuple(sorted(arm.lr_grid or self.rate.lr_grid))

    def config_of(self, arm: Arm) -> dict:
        """The base settings with the arm's patch merged in (mappings merged key by key, the rest replaced)."""
        return merge(self.base, arm.config)

    def choosers(self, arm: Arm) -> tuple[int, ...]:
        """The seeds that choose a rate: the first, or each."""
        seeds = self.seeds_of(arm)
        return seeds[:1] if self.rate.choose == "first_seed" else seeds

    def identity(self) -> dict:
        """What the sweep's runs depend on (a resumed sweep must match it): everything but ``workers``."""
        return {"trainer": self.trainer, "analysis": self.analysis, "seeds": list(self.seeds),
                "budgets": list(self.budgets), "score": self.score, "rate": self.rate.as_plan(),
                "base": self.base, "settings": self.settings,
                "arms": {a.name: {"config": a.config, "lr_grid": a.lr_grid and list(a.lr_grid),
                                  "seeds": a.seeds and list(a.seeds), "budgets": a.budgets and list(a.budgets)}
                         for a in self.arms}}


def cap_steps(plan: SweepPlan, steps: int) -> SweepPlan:
    """``plan`` with every budget at most ``steps`` (a smoke test). The cap is written into the plan's settings
    (``max_steps_cap``), so the folder's copy of the plan reads back capped and a capped sweep is never resumed
    as the real one."""
    declared = {**plan.declared, "settings": {**plan.declared.get("settings", {}), "max_steps_cap": steps}}
    return _capped(replace(plan, settings={**plan.settings, "max_steps_cap": steps}, declared=declared), steps)


def _capped(plan: SweepPlan, steps: int) -> SweepPlan:
    def cap(budgets: tuple[int, ...] | None) -> tuple[int, ...] | None:
        return None if budgets is None else tuple(sorted({min(b, steps) for b in budgets}))

    return replace(plan, budgets=cap(plan.budgets), arms=tuple(replace(a, budgets=cap(a.budgets)) for a in plan.arms))


def merge(base: Any, patch: Any) -> Any:
    """``patch`` merged into a copy of ``base``: mappings key by key (recursively), anything else replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = copy.deepcopy(base)
        for k, v in patch.items():
            out[k] = merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(patch)


TOP = ("name", "trainer", "analysis", "seeds", "budgets", "score", "workers", "rate", "base", "arms", "settings")


class _SweepChecker(Checker):
    def plan(self, raw: Any) -> SweepPlan:
        raw = self.mapping((), raw, TOP)
        for key in ("trainer", "arms"):
            if key not in raw:
                raise self.error((), f"needs `{key}`")
        trainer = self.value(("trainer",), str, raw["trainer"], one_of(TRAINERS, "trainer"))
        analysis = self.value(("analysis",), str, raw.get("analysis", "none"), one_of(ANALYSES, "analysis"))
        seeds = self.value(("seeds",), tuple[int, ...], raw.get("seeds", [0]), seed)
        budgets = self.value(("budgets",), tuple[int, ...], raw.get("budgets"), positive) \
            if "budgets" in raw else None
        score = self.value(("score",), str, raw.get("score", "test"), one_of(SCORES, "split"))
        workers = self.value(("workers",), int, raw.get("workers", 2), positive)
        rate_rule = read_rate(self, ("rate",), raw.get("rate"))
        base = self.base(raw.get("base"))
        settings = self.value(("settings",), dict, raw.get("settings", {}))
        arms_raw = raw["arms"]
        if not isinstance(arms_raw, dict) or not arms_raw:
            raise self.error(("arms",), "must be a non-empty mapping name -> arm")
        arms = tuple(self.arm(str(name), spec) for name, spec in arms_raw.items())
        if budgets is None and any(a.budgets is None for a in arms):
            raise self.error(("budgets",), "must be set (or every arm must name its own budgets)")
        name = self.value(("name",), str, raw.get("name", self.path.stem))
        plan = SweepPlan(name=name, path=str(self.path), trainer=trainer, analysis=analysis, seeds=seeds,
                         budgets=tuple(sorted(budgets or ())), score=score, workers=workers, rate=rate_rule,
                         base=base, arms=arms, settings=settings, declared=raw)
        cap = settings.get("max_steps_cap")
        if cap is not None:
            if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
                raise self.error(("settings", "max_steps_cap"), f"must be a positive integer, got {cap!r}")
            plan = _capped(plan, cap)
        return plan

    def base(self, raw: Any) -> dict:
        if raw is None:
            return {}
        if isinstance(raw, str):  # a train.yaml (repository-relative), read as data
            path = find_plan(raw)
            data, _ = read_yaml_file(path, "base")
            if not isinstance(data, dict):
                raise self.error(("base",), f"{raw}: not a mapping of settings")
            return data
        return self.value(("base",), dict, raw)

    def arm(self, name: str, raw: Any) -> Arm:
        where = ("arms", name)
        if not ARM_NAME.fullmatch(name):
            raise self.error(where, "is not a usable arm name (it names folders under runs/: letters, digits and "
                                    "_ . + = @ -, in parts separated by '/', none empty or starting with '.')")
        hints = typing.get_type_hints(Arm)
        raw = self.mapping(where, raw if raw is not None else {}, ("config", "lr_grid", "seeds", "budgets"))
        values = {k: self.value((*where, k), hints[k], v, Arm.__dataclass_fields__[k].metadata.get("check"))
                  for k, v in raw.items()}
        return Arm(name=name, **values)


def sweep_hint(path: str | Path | None) -> str | None:
    """For ``ema-boundary report --plan PATH``: if PATH is a sweep plan (a mapping with ``trainer`` and ``arms``),
    the line that says which command runs it; None otherwise (the report's own message stands)."""
    try:
        raw = read_yaml_file(find_plan(path))[0] if path is not None else None
    except YAMLFileError:
        return None
    if not isinstance(raw, dict) or "trainer" not in raw or "arms" not in raw:
        return None
    return f"--plan {path}: a sweep plan, not a report plan; run it with: ema-boundary sweep {path} --output_dir DIR"


def load_plan(path: str | Path) -> SweepPlan:
    """Read and check a sweep YAML (repository-relative paths found from any folder); a :class:`PlanError`
    names the file, the line and the field."""
    path = find_plan(path)
    raw, lines = read_yaml_file(path, "--plan")
    return _SweepChecker(path, lines).plan(raw)


def plan_from_text(text: str, name: str = "sweep.yaml") -> SweepPlan:
    """A plan from YAML text (the copy a sweep folder keeps of its plan)."""
    raw, lines = read_yaml_text(text, name)
    return _SweepChecker(Path(name), lines).plan(raw)


def plan_from_dict(raw: dict, name: str) -> SweepPlan:
    """A plan declared in memory (a mapping as a sweep YAML holds it), checked like a file: what code that
    declares its experiment as a sweep (the report's stages) runs. ``name`` stands for the file in messages and
    ``plan.path`` (the sweep folder's copy of the plan, say). Its ``declared`` reads back as the same plan."""
    return plan_from_text(yaml.safe_dump(raw, sort_keys=False), name)


def dump(plan: SweepPlan) -> str:
    """The plan as YAML (what a sweep folder keeps: its runs are read against it on resume)."""
    return yaml.safe_dump(plan.declared, sort_keys=False)


__all__ = ["ANALYSES", "Arm", "PlanError", "SCORES", "SweepPlan", "TRAINERS", "cap_steps", "dump", "load_plan", "merge",
           "plan_from_dict", "plan_from_text", "sweep_hint"]
