"""What one report run trains and probes, declared before the run in a plan YAML (hub_configs/report/).

``--quick`` and ``--scale`` only choose which plan file is read (:data:`PLANS`); ``--plan PATH`` reads
another. Every number the report's verdicts rest on is set here: the learning-rate grid, the seeds, the
equivalence margin, the steps of each stage. The plan's YAML is copied into report.json, so a reader sees
what was declared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SCALES = ("tiny", "130m")
CORPORA = ("embedded", "c4")  # or a path to a text file
PLANS = {("tiny", False): "hub_configs/report/default.yaml", ("tiny", True): "hub_configs/report/quick.yaml",
         ("130m", False): "hub_configs/report/130m.yaml", ("130m", True): "hub_configs/report/130m.yaml"}


class PlanError(ValueError):
    """A plan YAML that cannot be used: one line naming the file and the field."""


@dataclass(frozen=True)
class GrammarPlan:
    """``python -m grammar_probe build`` / ``run`` (None: the command's own default)."""

    train_size: int = 10_000  # sentences in the corpus' train split (every seed gets a disjoint subset)
    validation_size: int | None = None
    test_size: int | None = None
    ceiling_sentences: int | None = None
    window_sentences: int | None = None
    quick: bool = False
    seeds: int | None = None
    train_sentences: int | None = None
    eval_sentences: int | None = None
    workers: int = 2


@dataclass(frozen=True)
class LanguageModelPlan:
    """The headline pair: SPEN (EMA traces) against the GPT-2 architecture of equal size."""

    spen: str = "hub_configs/spen-w32/train.yaml"
    gpt2: str = "hub_configs/gpt2-w32/train.yaml"
    lr_grid: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # each architecture's rate chosen on validation
    seeds: int = 5  # per architecture at its chosen rate; the first is the grid's seed
    max_steps: int | None = None  # None: the YAMLs' own
    equivalence_margin: float = 0.02  # nats


@dataclass(frozen=True)
class AblationPlan:
    """The reader and trace ablations (eval.ablation) at the SPEN rate the grid chose."""

    seeds: int = 5
    max_steps: int | None = None  # None: the language model's
    equivalence_margin: float = 0.02  # nats
    predictors: tuple[str, ...] | None = None  # None: every arm of eval.ablation.PREDICTOR_VARIANTS
    traces: tuple[str, ...] | None = None  # None: every trace


@dataclass(frozen=True)
class RecallPlan:
    """The recall map (eval.content_probes --default-map): one recipe for every model."""

    models: tuple[str, ...] | None = None  # None: every model of the map
    steps: int | None = None  # None: eval.recall.RecallRecipe's (or its quick preset's)
    lrs: tuple[float, ...] | None = None
    pairs: tuple[int, ...] | None = None
    quick: bool = False  # content_probes --quick (identity-at-lag sizes and the recall preset)


@dataclass(frozen=True)
class Plan:
    """Typed settings of one ``ema-boundary report`` run (:meth:`load` reads them from a plan YAML)."""

    name: str
    path: str  # the plan YAML, as given
    scale: str
    corpus: str  # "embedded", "c4" or a text file
    seed: int  # of the grammar corpus, SPCN, the probes and the recall models
    workers: int  # train.py runs (and recall models) at a time, one torch thread each
    grammar: GrammarPlan = field(default_factory=GrammarPlan)
    language_model: LanguageModelPlan = field(default_factory=LanguageModelPlan)
    ablation: AblationPlan = field(default_factory=AblationPlan)
    recall: RecallPlan = field(default_factory=RecallPlan)
    declared: dict[str, Any] = field(default_factory=dict)  # the YAML as read

    @staticmethod
    def make(scale: str = "tiny", quick: bool = False, corpus: str = "embedded", seed: int = 0,
             max_steps: int | None = None, plan: str | Path | None = None) -> Plan:
        """The plan for ``--scale`` and ``--quick`` (or ``--plan``), with ``--corpus``, ``--seed`` and
        ``--max-steps`` (a cap on every training run, the recall models' included) applied."""
        if scale not in SCALES:
            raise PlanError(f"--scale must be one of {SCALES}, got {scale!r}")
        path = Path(plan) if plan is not None else REPO / PLANS[scale, quick]
        p = Plan.load(path, scale=scale, corpus=corpus, seed=seed)
        if max_steps is None:
            return p
        cap = lambda v: max_steps if v is None else min(v, max_steps)  # noqa: E731
        lm = LanguageModelPlan(**{**_asdict(p.language_model), "max_steps": cap(p.language_model.max_steps)})
        ab = AblationPlan(**{**_asdict(p.ablation), "max_steps": cap(p.ablation.max_steps)})
        rc = RecallPlan(**{**_asdict(p.recall), "steps": cap(p.recall.steps)})
        return Plan(**{**_asdict(p), "language_model": lm, "ablation": ab, "recall": rc})

    @staticmethod
    def load(path: str | Path, scale: str = "tiny", corpus: str = "embedded", seed: int = 0) -> Plan:
        """Read and check a plan YAML; a :class:`PlanError` names the file and the field."""
        path = Path(path)
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PlanError(f"--plan {path}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise PlanError(f"--plan {path}: cannot read ({e})") from None
        except yaml.YAMLError as e:
            raise PlanError(f"--plan {path}: not valid YAML ({str(e).splitlines()[0]})") from None
        raw = raw or {}
        if not isinstance(raw, dict):
            raise PlanError(f"--plan {path}: a mapping of sections expected")
        sections = {"grammar": GrammarPlan, "language_model": LanguageModelPlan, "ablation": AblationPlan,
                    "recall": RecallPlan}
        top = {"name": str, "workers": int}
        for key in raw:
            if key not in sections and key not in top:
                raise PlanError(f"{path}: unknown field {key!r} (fields: {', '.join([*top, *sections])})")
        parts = {name: _section(path, name, cls, raw.get(name)) for name, cls in sections.items()}
        workers = _check(path, "workers", raw.get("workers", 2), int, positive=True)
        lm = parts["language_model"]
        if not lm.lr_grid:
            raise PlanError(f"{path}: language_model.lr_grid must list at least one rate")
        for yaml_field in ("spen", "gpt2"):
            if not (REPO / getattr(lm, yaml_field)).is_file() and not Path(getattr(lm, yaml_field)).is_file():
                raise PlanError(f"{path}: language_model.{yaml_field}: no such train.py YAML "
                                f"{getattr(lm, yaml_field)!r}")
        from eval.ablation import PREDICTOR_VARIANTS, REFERENCE, TRACE_VARIANTS

        for key, allowed in (("predictors", PREDICTOR_VARIANTS), ("traces", TRACE_VARIANTS)):
            chosen = getattr(parts["ablation"], key)
            bad = [x for x in chosen or () if x not in allowed]
            if bad:
                raise PlanError(f"{path}: ablation.{key}: unknown arm {bad[0]!r} (arms: {', '.join(allowed)})")
            reference = REFERENCE["predictor" if key == "predictors" else "trace"]
            if chosen is not None and reference not in chosen:
                raise PlanError(f"{path}: ablation.{key} must include the reference arm {reference!r}")
        return Plan(name=str(raw.get("name", path.stem)), path=str(path), scale=scale, corpus=corpus, seed=seed,
                    workers=workers, declared=raw, **parts)

    @property
    def data(self) -> list[str]:
        """train.py's ``--data`` for this corpus."""
        return [self.corpus] if self.corpus in CORPORA else [str(Path(self.corpus).resolve())]

    def yaml_path(self, which: str) -> Path:
        """The train.py YAML of ``which`` ("spen" or "gpt2"), relative paths from the repository root."""
        p = Path(getattr(self.language_model, which))
        return p if p.is_absolute() else REPO / p


def _asdict(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}


def _section(path: Path, name: str, cls: type, raw: Any) -> Any:
    if raw is None:
        return cls()
    if not isinstance(raw, dict):
        raise PlanError(f"{path}: {name} must be a mapping of fields")
    known = {f.name: f for f in fields(cls)}
    values = {}
    for key, value in raw.items():
        if key not in known:
            raise PlanError(f"{path}: unknown field {name}.{key} (fields: {', '.join(known)})")
        values[key] = _field_value(path, f"{name}.{key}", known[key].type, value)
    return cls(**values)


def _field_value(path: Path, where: str, kind: str, value: Any) -> Any:
    """``value`` checked against the annotation ``kind`` (a string under ``from __future__ import annotations``)."""
    optional = kind.endswith("| None")
    kind = kind.removesuffix(" | None")
    if value is None:
        if optional:
            return None
        raise PlanError(f"{path}: {where} must be set")
    if kind.startswith("tuple["):
        item = float if "float" in kind else int if "int" in kind else str
        if not isinstance(value, list) or not value:
            raise PlanError(f"{path}: {where} must be a non-empty list, got {value!r}")
        return tuple(_check(path, where, v, item, positive=item is not str) for v in value)
    item = {"int": int, "float": float, "bool": bool, "str": str}[kind]
    return _check(path, where, value, item, positive=item in (int, float))


def _check(path: Path, where: str, value: Any, kind: type, positive: bool = False) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise PlanError(f"{path}: {where} must be {kind.__name__}, got {value!r}")
    if positive and not (0 < value < math.inf):
        raise PlanError(f"{path}: {where} must be positive, got {value!r}")
    return value


__all__ = ["Plan", "PlanError", "GrammarPlan", "LanguageModelPlan", "AblationPlan", "RecallPlan", "SCALES",
           "CORPORA", "PLANS", "REPO"]
