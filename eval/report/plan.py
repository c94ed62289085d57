"""What one report run trains and probes, declared before the run in a plan YAML (hub_configs/report/).

``--quick`` and ``--scale`` only choose which plan file is read (:data:`PLANS`); ``--plan PATH`` reads
another. Every number the report's verdicts rest on is set here: the learning-rate grid, the seeds, the
equivalence margin, the steps of each stage. The plan's YAML is copied into report.json, so a reader sees
what was declared.

A plan is checked once, when it is read, before any work: every field's type and range (a rate lies in
(0, 1), a margin is positive and below one nat, a count is positive), the train.py YAMLs exist, the ablation
arms and recall models are names of the SPEN variant table, and the recall task accepts the pair counts. Each
message is one line naming the file, the YAML line and the field (``plan.yaml:12: recall.models: ...``). The
check imports no torch, so a bad plan is refused in about a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ema_boundary.usage import UsageError
from ema_boundary.yamlio import read_yaml_file
from eval.plans import Checker, PlanError, Rule, in_repo
from eval.plans import non_negative as _non_negative
from eval.plans import one_of as _one_of
from eval.plans import positive as _positive
from eval.plans import rate as _rate
from eval.plans import rule as _rule
from eval.rates import RateRule, read_rate

REPO = Path(__file__).resolve().parents[2]
SCALES = ("tiny", "130m")
CORPORA = ("embedded", "c4")  # or a path to a text file
PLANS = {("tiny", False): "hub_configs/report/default.yaml", ("tiny", True): "hub_configs/report/quick.yaml",
         ("130m", False): "hub_configs/report/130m.yaml", ("130m", True): "hub_configs/report/130m.yaml"}

# The names a plan may use, as modeling_spen.variants and eval.recall define them. Importing those modules
# imports torch (tens of seconds on a loaded machine), so the plan check reads these copies; tests/test_plan.py
# fails if they ever differ from the tables.
PREDICTOR_ARMS = ("none", "linear", "linear_attention-state", "linear_attention-sequence", "softmax_attention-state",
                  "softmax_attention-sequence")
TRACE_ARMS = ("linear", "linear-learned", "linear-selective", "linear-selective_ssm")
STATE_SIZE_ARMS = ("linear-ema16", "linear-ema64", "linear-selective_ssm3", "linear-selective_ssm64")
# issue 49: Mamba's mixer in SPEN and its ablation, the lagged S6 trace's names, transformers' own recurrent families
ESCAPE_ARMS = ("mixer_mamba", "mixer_mamba3", "mixer_mamba64", "mixer_mamba-conv1", "mixer_mamba-lagged",
               "mixer_mamba-nogate", "linear-s6lagged", "linear-s6lagged3", "linear-s6lagged64", "hf-mamba3",
               "hf-mamba", "hf-mamba64", "hf-rwkv")
REFERENCE_ARM = "linear"  # the reference of both ablations: the paper's static reader over fixed-rate traces
# the recall map: the control, then every variant, then the state-size arms (fixed banks and selective states of N)
RECALL_MODELS = ("gpt2", *PREDICTOR_ARMS, *TRACE_ARMS[1:], *STATE_SIZE_ARMS, *ESCAPE_ARMS)
RECALL_KEYS = 63  # eval.recall.RecallTask().num_keys: the most pairs the task can hold


# ---------------------------------------------------------------------------------------------
# Field rules: a field's ``metadata["check"]`` says what else its value must satisfy than its type (the plan
# dialect's, eval/plans.py; the margin here is in nats)
# ---------------------------------------------------------------------------------------------


def _margin(v: Any) -> str | None:
    return None if 0 < v < 1 else "must be a margin in nats, in (0, 1)"


def _pairs(v: Any) -> str | None:
    if not 0 < v <= RECALL_KEYS:
        return f"must be a pair count from 1 to {RECALL_KEYS} (the recall task's keys)"
    return None


@dataclass(frozen=True)
class GrammarPlan:
    """``python -m grammar_probe build`` / ``run`` (None: the command's own default)."""

    train_size: int = _rule(_positive, 10_000)  # sentences in the corpus' train split (disjoint per seed)
    validation_size: int | None = _rule(_positive)
    test_size: int | None = _rule(_positive)
    ceiling_sentences: int | None = _rule(_positive)
    window_sentences: int | None = _rule(_positive)
    quick: bool = False
    seeds: int | None = _rule(_positive)
    train_sentences: int | None = _rule(_positive)
    eval_sentences: int | None = _rule(_positive)
    workers: int = _rule(_positive, 2)


# The seeds a section trains when the plan names none: five, the suite's minimum for a verdict on a difference.
FIVE_SEEDS = (0, 1, 2, 3, 4)
# Sections whose ``seeds`` once was a count (seeds from the YAML's seed on): a count is refused with the list it
# meant, so an old plan is never read with other seeds than it declared.
SEED_LISTS = ("language_model", "ablation", "depth")


@dataclass(frozen=True)
class LanguageModelPlan:
    """The headline pair: SPEN (EMA traces) against the GPT-2 architecture, matched on non-embedding parameters.

    The pair is a sweep of two arms on the experiment runner (:mod:`eval.sweep`), its rates chosen by the runner's
    one rule: ``rate`` is a sweep plan's ``rate:`` section as it is (:class:`eval.rates.RateRule`, read by
    :func:`eval.rates.read_rate`): the first seed chooses each architecture's rate on validation blocks from
    ``lr_grid``; with ``extend``, a rate chosen at an edge of the rates tried is not yet a choice: the next rate
    beyond that edge is trained (same seed) and the choice made again, until it is interior or ``max_extensions``
    rates were added (the report then says "edge"). Every seed is then scored on the test blocks of the YAMLs' test
    split (``test_every``), when they declare one."""

    spen: str = "hub_configs/spen-f48/train.yaml"
    gpt2: str = "hub_configs/gpt2-f48/train.yaml"
    rate: RateRule = field(default_factory=RateRule, metadata={"section": read_rate})  # chosen on validation
    seeds: tuple[int, ...] = _rule(_non_negative, FIVE_SEEDS)  # per architecture at its chosen rate; the first
    # chooses the rate (the grid's seed)
    max_steps: int | None = _rule(_positive)  # None: the YAMLs' own
    equivalence_margin: float = _rule(_margin, 0.02)  # nats
    gap_max_tokens: int | None = _rule(_positive)  # where the gap lives (eval.gap): tokens scored; None: all


@dataclass(frozen=True)
class AblationPlan:
    """The reader and trace ablations (eval.ablation) at the SPEN rate the grid chose."""

    seeds: tuple[int, ...] = _rule(_non_negative, FIVE_SEEDS)  # every arm, paired by seed
    max_steps: int | None = _rule(_positive)  # None: the language model's
    equivalence_margin: float = _rule(_margin, 0.02)  # nats
    predictors: tuple[str, ...] | None = _rule(_one_of(PREDICTOR_ARMS, "arm"))  # None: every predictor arm
    traces: tuple[str, ...] | None = _rule(_one_of(TRACE_ARMS, "arm"))  # None: every trace arm
    # Budgets in steps (instead of max_steps): every arm x seed trains at each; the verdict is read at the longest.
    budgets: tuple[int, ...] | None = _rule(_positive)
    # Each arm's own rate, chosen from this grid at the longest budget (first seed); None: SPEN's chosen rate.
    lr_grid: tuple[float, ...] | None = _rule(_rate)


@dataclass(frozen=True)
class RecallPlan:
    """The recall map (eval.probes with the map's models): one recipe for every model."""

    models: tuple[str, ...] | None = _rule(_one_of(RECALL_MODELS, "model"))  # None: every model of the map
    max_steps: int | None = _rule(_positive)  # None: the recipe's (or its quick preset's)
    lr_grid: tuple[float, ...] | None = _rule(_rate)  # each model's rate chosen on its held-out sequences
    pairs: tuple[int, ...] | None = _rule(_pairs)
    seeds: tuple[int, ...] | None = _rule(_non_negative)  # each arm trains once per seed (None: the report's seed)
    quick: bool = False  # the probes' quick settings (identity-at-lag sizes and the recall preset)


@dataclass(frozen=True)
class DepthPlan:
    """The depth-dilution experiment (``python -m eval.depth --config``): a deep narrow SPEN with the residual sum
    and with Attention Residuals, paired by seed. Optional: a plan without a ``depth`` section does not run it."""

    config: str = "hub_configs/spen-depth8/train.yaml"  # the train.py YAML of the residual-sum arm
    seeds: tuple[int, ...] = _rule(_non_negative, FIVE_SEEDS)  # both arms, paired by seed
    max_steps: int | None = _rule(_positive)  # None: the YAML's
    accuracy_margin: float = _rule(_rate, 0.02)  # token identity at the last layer, a fraction
    share_margin: float = _rule(_rate, 0.02)  # the share recovered of earlier blocks' outputs, a fraction
    loss_margin: float = _rule(_margin, 0.02)  # nats


SECTIONS: dict[str, type] = {"grammar": GrammarPlan, "language_model": LanguageModelPlan, "ablation": AblationPlan,
                             "recall": RecallPlan}
SECTIONS["depth"] = DepthPlan
OPTIONAL_SECTIONS = ("depth",)  # absent from a plan: the stage does not run (Plan's field is None)
# Fields a plan may no longer name, each with what to write instead (refused in one line at its YAML line).
RETIRED = {("language_model", "ladder"): "the old unshuffled ladder (docs/scale) no longer carries a row; name the "
                                         "ladder sweep under `committed: ladder:` instead (committed: {ladder: "
                                         "docs/sweeps/ladder})",
           ("ablation", "committed"): "the old ablation reader (docs/ablation, unshuffled) no longer carries a row; "
                                      "name the ablation sweeps under `committed:` instead (committed: "
                                      "{ablation_predictor: docs/sweeps/ablation-predictor, ablation_trace: "
                                      "docs/sweeps/ablation-trace})",
           ("grammar", "arms"): "the grammar arms are a committed sweep now: name its folder under `committed: arms:` "
                                "instead (committed: {arms: docs/sweeps/arms})",
           # issue 32: one vocabulary with the sweep plans (hub_configs/sweeps: lr_grid, max_steps)
           ("recall", "lrs"): "write `lr_grid:` instead (the same rate grid, the sweep plans' word)",
           ("recall", "steps"): "write `max_steps:` instead (the same step cap, the sweep plans' word)",
           # issue 50: the headline pair's rate rule is a sweep plan's `rate:` section, read by the same code
           **{("language_model", old): f"write the rate rule under `rate:` as a sweep plan does ({new}: lr_grid, "
                                       "choose, extend, max_extensions, factor, digits; eval/sweep/plan.py RateRule)"
              for old, new in (("lr_grid", "rate.lr_grid"), ("extend_grid", "rate.extend"),
                               ("extend_factor", "rate.factor"), ("max_extensions", "rate.max_extensions"))}}


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
    depth: DepthPlan | None = None  # None: the plan has no depth section, the stage does not run
    # Committed sweeps (``committed:``, eval/report/committed.py): a claim source (recall_map, ladder,
    # ablation_predictor, ablation_trace, depth, arms) -> the folder of an `ema-boundary sweep` whose results.json
    # carries that claim's row; a source the plan does not name is read from this run's own stages where it has
    # one (the ablations, the recall map, depth); the ladder and the arms have none: without `ladder` its rows
    # are not run, without `arms` the structure rows name no conditions.
    committed: dict[str, str] = field(default_factory=dict)
    declared: dict[str, Any] = field(default_factory=dict)  # the YAML as read
    lines: dict[tuple[str, ...], int] = field(default_factory=dict, repr=False, compare=False)  # key path -> line

    @staticmethod
    def make(scale: str = "tiny", quick: bool = False, corpus: str = "embedded", seed: int = 0,
             max_steps: int | None = None, plan: str | Path | None = None) -> Plan:
        """The plan for ``--scale`` and ``--quick`` (or ``--plan``), with ``--corpus``, ``--seed`` and
        ``--max_steps`` (a cap on every training run, the recall models' included) applied."""
        if scale not in SCALES:
            raise PlanError(f"--scale must be one of {SCALES}, got {scale!r}")
        path = Path(plan) if plan is not None else REPO / PLANS[scale, quick]
        p = Plan.load(path, scale=scale, corpus=corpus, seed=seed)
        if max_steps is None:
            return p
        cap = lambda v: max_steps if v is None else min(v, max_steps)  # noqa: E731
        p = replace(p, language_model=replace(p.language_model, max_steps=cap(p.language_model.max_steps)),
                    ablation=replace(p.ablation, max_steps=cap(p.ablation.max_steps)),
                    recall=replace(p.recall, max_steps=cap(p.recall.max_steps)))
        return p if p.depth is None else replace(p, depth=replace(p.depth, max_steps=cap(p.depth.max_steps)))

    @staticmethod
    def load(path: str | Path, scale: str = "tiny", corpus: str = "embedded", seed: int = 0) -> Plan:
        """Read and check a plan YAML; a :class:`PlanError` names the file, the line and the field (its base
        :class:`~ema_boundary.yamlio.YAMLFileError`: a file that cannot be read as YAML)."""
        path = Path(path)
        raw, lines = read_yaml_file(path, "--plan")
        return _Checker(path, lines).plan(raw, scale, corpus, seed)

    def where(self, *path: str) -> str:
        """``FILE:LINE: a.b`` for a field of this plan, for messages about it found after loading."""
        line = next((self.lines[path[:i]] for i in range(len(path), 0, -1) if path[:i] in self.lines), None)
        return f"{self.path}{f':{line}' if line else ''}: {'.'.join(path)}"

    @property
    def data(self) -> list[str]:
        """train.py's ``--data`` for this corpus."""
        return [self.corpus] if self.corpus in CORPORA else [str(Path(self.corpus).resolve())]

    def yaml_path(self, which: str) -> Path:
        """The train.py YAML of ``which`` ("spen" or "gpt2"), relative paths from the repository root."""
        return in_repo(getattr(self.language_model, which))


class _Checker(Checker):
    """Every check of one report plan file (the dialect's :class:`eval.plans.Checker`), each failure one line with
    the YAML line of the field."""

    def plan(self, raw: Any, scale: str, corpus: str, seed: int) -> Plan:
        raw = raw or {}
        if not isinstance(raw, dict):
            raise self.error((), "a mapping of sections expected")
        top = {"name": str, "workers": int, "committed": dict}
        for key in raw:
            if key not in SECTIONS and key not in top:
                raise self.error((key,), f"is not a field (fields: {', '.join([*top, *SECTIONS])})")
        for where, instead in RETIRED.items():
            section = raw.get(where[0])
            if isinstance(section, dict) and where[1] in section:
                raise self.error(where, f"is retired: {instead}")
        for name in SEED_LISTS:
            count = raw[name].get("seeds") if isinstance(raw.get(name), dict) else None
            if isinstance(count, int) and not isinstance(count, bool):
                raise self.error((name, "seeds"), f"lists the seeds themselves (the sweep plans' word), not a count: "
                                 f"write seeds: {list(range(max(count, 1)))} for {count} seeds from 0")
        parts = {name: self.section(name, cls, raw.get(name)) for name, cls in SECTIONS.items()}
        name = self.value(("name",), str, raw.get("name", self.path.stem))
        workers = self.value(("workers",), int, raw.get("workers", 2), _positive)
        committed = self.committed(raw.get("committed"))
        self.across(parts)
        return Plan(name=name, path=str(self.path), scale=scale, corpus=corpus, seed=seed, workers=workers,
                    committed=committed, declared=raw, lines=self.lines, **parts)

    def section(self, name: str | tuple[str, ...], cls: type, raw: Any) -> Any:  # type: ignore[override]
        """``cls`` from the section ``name`` (absent: its defaults, or None for an optional section)."""
        where = (name,) if isinstance(name, str) else tuple(name)
        if raw is None:
            return None if where[-1] in OPTIONAL_SECTIONS else cls()
        if not isinstance(raw, dict):
            raise self.error(where, "must be a mapping of fields")
        return super().section(where, cls, raw)

    def committed(self, raw: Any) -> dict[str, str]:
        """``committed:``: a claim source -> a committed sweep folder, each checked once here (a results.json of
        ``ema-boundary sweep`` of the source's analysis kind)."""
        # deferred: the sweeps' reader imports scipy (seconds); `ema-boundary --help` reads this module, not a plan
        from eval.report.committed import SOURCES, read_sweep

        raw = self.mapping(("committed",), raw, SOURCES, "claim sources")
        out = {}
        for source, folder in raw.items():
            folder = self.value(("committed", source), str, folder)
            try:
                read_sweep(in_repo(folder), source, folder)
            except UsageError as e:
                raise self.error(("committed", source), str(e).removeprefix(f"committed.{source}: ")) from None
            out[source] = folder
        return out

    def across(self, parts: dict[str, Any]) -> None:
        """The checks that read more than one field: the YAMLs exist, each ablation keeps its reference arm."""
        lm, ablation = parts["language_model"], parts["ablation"]
        for which in ("spen", "gpt2"):
            given = getattr(lm, which)
            if not (REPO / given).is_file() and not Path(given).is_file():
                raise self.error(("language_model", which), f"{given!r}: no such train.py YAML")
        if ablation.budgets is not None and ablation.max_steps is not None:
            raise self.error(("ablation", "budgets"), "and ablation.max_steps: give one (the longest budget is the "
                                                      "verdict's)")
        if lm.rate.choose != "first_seed":  # the pair's every seed trains at the rate its first seed chose
            raise self.error(("language_model", "rate", "choose"), f"must be first_seed (the headline pair's first "
                             f"seed chooses each architecture's rate), got {lm.rate.choose!r}")
        for axis in ("predictors", "traces"):
            arms = getattr(ablation, axis)
            if arms is not None and REFERENCE_ARM not in arms:
                raise self.error(("ablation", axis), f"must include the reference arm {REFERENCE_ARM!r}")
        depth = parts.get("depth")
        if depth is not None and not (REPO / depth.config).is_file() and not Path(depth.config).is_file():
            raise self.error(("depth", "config"), f"{depth.config!r}: no such train.py YAML")


__all__ = ["Plan", "PlanError", "Rule", "in_repo", "GrammarPlan", "LanguageModelPlan", "AblationPlan",
           "RecallPlan", "DepthPlan", "SCALES", "CORPORA", "PLANS", "REPO", "PREDICTOR_ARMS", "TRACE_ARMS",
           "STATE_SIZE_ARMS", "RECALL_MODELS", "REFERENCE_ARM"]
