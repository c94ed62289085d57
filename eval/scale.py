"""The scale ladder: SPEN against the GPT-2 architecture at several sizes, the fair recipe at each.

A ladder is a plan YAML (``hub_configs/report/scale.yaml`` for two CPU cores, ``scale-gpu.yaml`` for one GPU):
sizes by width and depth, each with its steps, a small learning-rate grid and a number of seeds, and one
schedule for every run. At each size both architectures are built by the fair recipe (:func:`fair_pair`, the
one of issue 20's headline pair ``hub_configs/{spen,gpt2}-f64``): the same width, depth, tied vocabulary and
block size; ``initializer_range = 1 / sqrt(width)`` for both; GPT-2 heads of size 16 and exactly ``block_size``
learned positions; GPT-2's MLP width chosen so that the two have the same non-embedding parameters.

For each size the runner trains every rate of the grid (the first seed) for both architectures, chooses each
architecture's rate on the validation blocks, trains the other seeds at that rate, and scores every seed's
final checkpoint on the test blocks (documents that neither trained nor chose anything; ``test_every`` of the
plan). Beside each size: the Kneser-Ney bigram on the same test tokens (the competence gate: a model below it
can speak), and the SPEN minus GPT-2 loss gap, with a 95% t interval over paired seeds where there are two or
more.

    python -m eval.scale --plan hub_configs/report/scale.yaml --output_dir outputs/scale    # or: ema-boundary scale

writes ``report.json``, ``index.md`` and ``gap.png`` (the gap against non-embedding parameters, log axis, the
bigram gate per point, the paper's 130M point) into an output folder of its own (a marker names it), with the
runs, logs and configs under ``work/``. Reading and checking a plan imports no torch: a bad plan is refused in
one line naming the file, the YAML line and the field, before any work.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from eval.report.plan import CORPORA, REPO, PlanError, _Checker, _positive, _rate, _rule, read_plan_file

PROG = "python -m eval.scale"
TOOL = "eval.scale"  # the name in its output folder's marker
PLAN = "hub_configs/report/scale.yaml"
ARCHITECTURES = {"spen": "SPEN (EMA traces)", "gpt2": "GPT-2 architecture"}

HEAD_SIZE = 16  # GPT-2's heads in the fair recipe: at least 16 dimensions each (issue 20)
TRACE_RATES = (0.5, 0.1, 0.02)  # SPEN's fixed EMA rates, as every SPEN config of the project
FFN_TOPK = 0.06
MATCH_TOLERANCE = 0.01  # the fair pair's non-embedding counts may differ by at most 1%


def gpt2_inner(width: int) -> int:
    """GPT-2's MLP width that gives its block SPEN's non-embedding parameters at ``width``.

    SPEN's block has ``16 w^2 + 11 w`` (reader ``3 w^2 + w``, context mix ``5 w^2 + w``, FFN of ``4 w``:
    ``8 w^2 + 5 w``, two LayerNorms ``4 w``); GPT-2's ``4 w^2 + 2 w n + n + 9 w``: equal for
    ``n = (12 w^2 + 2 w) / (2 w + 1)``.
    """
    return round((12 * width**2 + 2 * width) / (2 * width + 1))


def parameter_counts(arch: str, width: int, layers: int, vocab_size: int, block_size: int) -> dict[str, int]:
    """Total, embedding and non-embedding parameters of one architecture of the fair pair, counted from the
    formulas (no torch; tests/test_scale.py checks them against ``ema_boundary.params`` on the meta device).

    Embedding: the tied token table (and GPT-2's ``block_size`` learned positions); everything else, the final
    LayerNorm included, is non-embedding.
    """
    if arch == "spen":
        block, embedding = 16 * width**2 + 11 * width, vocab_size * width
    elif arch == "gpt2":
        n = gpt2_inner(width)
        block, embedding = 4 * width**2 + 2 * width * n + n + 9 * width, (vocab_size + block_size) * width
    else:
        raise ValueError(f"unknown architecture {arch!r} (spen, gpt2)")
    non_embedding = layers * block + 2 * width
    return {"total": non_embedding + embedding, "embedding": embedding, "non_embedding": non_embedding}


def fair_pair(width: int, layers: int, vocab_size: int, block_size: int) -> dict[str, dict[str, Any]]:
    """The config.json dicts of SPEN and the GPT-2 architecture at one size of the fair recipe (module docstring)."""
    if width % HEAD_SIZE:
        raise ValueError(f"width {width} is not a multiple of the head size {HEAD_SIZE}")
    heads, init = width // HEAD_SIZE, 1.0 / math.sqrt(width)
    spen = {
        "model_type": "spen", "architectures": ["SPENForCausalLM"], "vocab_size": vocab_size, "hidden_size": width,
        "num_hidden_layers": layers, "intermediate_size": 4 * width, "ffn_topk_fraction": FFN_TOPK, "trace": "ema",
        "trace_rates": list(TRACE_RATES), "predictor": "linear", "predictor_scope": "sequence",
        "num_attention_heads": heads, "layer_norm_epsilon": 1e-5, "initializer_range": init,
        "max_position_embeddings": block_size, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": True,
        "selective_rank": max(1, width // HEAD_SIZE),
    }
    gpt2 = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": vocab_size,
        "n_positions": block_size, "n_embd": width, "n_layer": layers, "n_head": heads, "n_inner": gpt2_inner(width),
        "activation_function": "gelu_new", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "layer_norm_epsilon": 1e-5, "initializer_range": init, "bos_token_id": 0, "eos_token_id": 0,
        "tie_word_embeddings": True,
    }
    return {"spen": spen, "gpt2": gpt2}


# ---------------------------------------------------------------------------------------------
# The plan: a ladder of sizes, declared in a YAML and checked before any work (no torch)
# ---------------------------------------------------------------------------------------------


def _width(v: Any) -> str | None:
    if v <= 0 or v % HEAD_SIZE:
        return f"must be a positive multiple of {HEAD_SIZE} (heads of {HEAD_SIZE} dimensions)"
    return None


def _non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must be a non-negative integer"


@dataclass(frozen=True)
class Size:
    """One rung of the ladder: both architectures at this width and depth."""

    name: str
    width: int = _rule(_width)
    layers: int = _rule(_positive)
    max_steps: int = _rule(_positive)
    lr_grid: tuple[float, ...] = _rule(_rate)  # each architecture's rate chosen on validation (the first seed)
    seeds: int = _rule(_positive, 1)  # at each architecture's chosen rate

    REQUIRED: typing.ClassVar[tuple[str, ...]] = ("name", "width", "layers", "max_steps", "lr_grid")


@dataclass(frozen=True)
class Schedule:
    """The train.py settings every run of the ladder shares (its YAML keys); steps and rate are per size."""

    block_size: int = _rule(_positive, 128)
    batch_size: int = _rule(_positive, 16)  # sequences per optimizer step
    micro_batch_size: int | None = _rule(_positive)  # None: the whole batch in one pass
    warmup_steps: int = _rule(_non_negative, 50)
    min_lr_ratio: float = _rule(lambda v: None if 0 <= v <= 1 else "must lie in [0, 1]", 0.1)
    weight_decay: float = _rule(lambda v: None if v >= 0 else "must be non-negative", 0.1)
    grad_clip: float = _rule(lambda v: None if v >= 0 else "must be non-negative", 1.0)
    mixed_precision: str = _rule(lambda v: None if v in ("no", "bf16", "fp16") else "must be no, bf16 or fp16", "no")
    val_every: int = _rule(_positive, 10)  # every N-th document is validation (chooses the rate)
    eval_blocks: int = _rule(_positive, 200)  # validation blocks train.py scores
    evaluations: int = _rule(_positive, 8)  # validation points along each run (its eval_steps: max_steps / this)


@dataclass(frozen=True)
class ScalePlan:
    """Typed settings of one ladder (:meth:`load` reads them from a plan YAML)."""

    name: str
    path: str
    corpus: str = "embedded"  # "embedded", "c4" or a text file, as train.py's data
    tokenizer: str | None = None  # a hub name or folder; None: a byte-level BPE of vocab_size trained on the data
    vocab_size: int = 1024
    test_every: int = 3  # of the non-validation documents every N-th is test (scores every seed); 0: none
    test_blocks: int | None = None  # test blocks scored (None: all of the split)
    ngram_tokens: int | None = None  # the most training tokens the Kneser-Ney counts read (None: what a run read)
    seed: int = 0  # the first seed; a size's seeds are seed, seed + 1, ...
    workers: int = 2  # train.py runs at a time, one torch thread each
    # A rate chosen at an edge of the rates tried is not yet a choice: with extend_grid the next rate beyond that
    # edge trains (the first seed) and the choice is made again, until it is interior or max_extensions rates were
    # added for that size and architecture. The next rate is the edge times extend_factor (above) or divided by it
    # (below); unset, the grid's own ratio at that edge.
    extend_grid: bool = False
    extend_factor: float | None = None
    max_extensions: int = 2
    schedule: Schedule = field(default_factory=Schedule)
    sizes: tuple[Size, ...] = ()
    declared: dict[str, Any] = field(default_factory=dict)  # the YAML as read

    @staticmethod
    def load(path: str | Path) -> ScalePlan:
        """Read and check a ladder YAML; a :class:`PlanError` names the file, the line and the field."""
        path = Path(path)
        raw, lines = read_plan_file(path)
        return _LadderChecker(path, lines).plan(raw)

    @property
    def data(self) -> list[str]:
        """train.py's ``--data`` for this corpus."""
        return [self.corpus] if self.corpus in CORPORA else [str(Path(self.corpus).resolve())]

    def seeds(self, size: Size) -> list[int]:
        return [self.seed + i for i in range(size.seeds)]

    def counts(self, size: Size) -> dict[str, dict[str, int]]:
        """Each architecture's parameter counts at ``size`` (:func:`parameter_counts`)."""
        return {a: parameter_counts(a, size.width, size.layers, self.vocab_size, self.schedule.block_size)
                for a in ARCHITECTURES}

    def next_rate(self, losses: dict[float, float], added: int) -> float | None:
        """The rate to try beyond the edge where the best of ``losses`` (rate -> validation loss) lies; None when
        the best is interior, the plan extends no grid, ``max_extensions`` were added, or the next rate is not
        below 1."""
        rates = sorted(losses)
        best = min(rates, key=losses.__getitem__)
        if not self.extend_grid or added >= self.max_extensions or len(rates) < 2 or rates[0] < best < rates[-1]:
            return None
        up = best == rates[-1]
        factor = self.extend_factor or (rates[-1] / rates[-2] if up else rates[1] / rates[0])
        rate = float(f"{best * factor if up else best / factor:.6g}")
        return rate if rate < 1 else None

    def tokens(self, size: Size) -> int:
        """Training tokens of every run of ``size``."""
        return size.max_steps * self.schedule.batch_size * self.schedule.block_size


class _LadderChecker(_Checker):
    """The report plan's checks (types, ranges, one line with the YAML line) applied to a ladder."""

    TOP: typing.ClassVar[tuple[str, ...]] = ("name", "corpus", "tokenizer", "vocab_size", "test_every", "test_blocks",
                                             "ngram_tokens", "seed", "workers", "extend_grid", "extend_factor",
                                             "max_extensions", "schedule", "sizes")

    def plan(self, raw: Any) -> ScalePlan:
        raw = raw or {}
        if not isinstance(raw, dict):
            raise self.error((), "a mapping of fields expected")
        for key in raw:
            if key not in self.TOP:
                raise self.error((key,), f"is not a field (fields: {', '.join(self.TOP)})")
        hints = typing.get_type_hints(ScalePlan)
        checks = {"vocab_size": _positive, "test_every": _non_negative, "test_blocks": _positive,
                  "ngram_tokens": _positive, "seed": _non_negative, "workers": _positive, "max_extensions": _positive,
                  "extend_factor": lambda v: None if v > 1 else "must be a factor above 1"}
        values: dict[str, Any] = {}
        for key in self.TOP[:-2]:
            if key in raw:
                values[key] = self.value((key,), hints[key], raw[key], checks.get(key))
        values.setdefault("name", self.path.stem)
        corpus = values.get("corpus", "embedded")
        if corpus not in CORPORA and not Path(corpus).is_file():
            raise self.error(("corpus",), f"{corpus!r}: not {' or '.join(CORPORA)} or an existing text file")
        schedule = self.section("schedule", Schedule, raw.get("schedule"))
        sizes = raw.get("sizes")
        if not isinstance(sizes, list) or len(sizes) < 2:
            raise self.error(("sizes",), "must be a list of at least two sizes (a ladder)")
        ladder = tuple(self.size(i, s) for i, s in enumerate(sizes))
        plan = ScalePlan(path=str(self.path), schedule=schedule, sizes=ladder, declared=raw, **values)
        self.across(plan)
        return plan

    def size(self, i: int, raw: Any) -> Size:
        where = ("sizes", str(i))
        if not isinstance(raw, dict):
            raise self.error(where, f"must be a mapping of {', '.join(f.name for f in fields(Size))}")
        known = {f.name: f for f in fields(Size)}
        hints = typing.get_type_hints(Size)
        for key in raw:
            if key not in known:
                raise self.error((*where, key), f"is not a field (fields: {', '.join(known)})")
        missing = [k for k in Size.REQUIRED if k not in raw]
        if missing:
            raise self.error(where, f"needs {', '.join(missing)}")
        return Size(**{k: self.value((*where, k), hints[k], v, known[k].metadata.get("check")) for k, v in raw.items()})

    def across(self, plan: ScalePlan) -> None:
        """The checks that read more than one field: names unique, sizes growing, the pair matched."""
        names = [s.name for s in plan.sizes]
        previous = 0
        for i, size in enumerate(plan.sizes):
            if size.name in names[:i]:
                raise self.error(("sizes", str(i), "name"), f"{size.name!r} names two sizes")
            counts = plan.counts(size)
            spen, gpt2 = counts["spen"]["non_embedding"], counts["gpt2"]["non_embedding"]
            if abs(spen - gpt2) > MATCH_TOLERANCE * spen:  # cannot happen for the recipe's widths; said if it does
                raise self.error(("sizes", str(i), "width"), f"the fair pair is not matched within "
                                 f"{MATCH_TOLERANCE:.0%} (non-embedding SPEN {spen:,}, GPT-2 {gpt2:,})")
            if spen <= previous:
                raise self.error(("sizes", str(i)), f"must be larger than the size before it "
                                 f"({spen:,} non-embedding parameters, the one before {previous:,})")
            previous = spen
            if plan.extend_grid and len(size.lr_grid) < 2:
                raise self.error(("sizes", str(i), "lr_grid"), "has one rate: extend_grid needs two or more (an "
                                 "edge of one rate points both ways)")


def ladder_hint(path: str | Path | None) -> str | None:
    """For ``ema-boundary report --plan PATH``: if PATH is a ladder (a mapping with ``sizes``), the line that says
    which command runs it; None otherwise (the report's own message stands)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) if path is not None else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(raw, dict) or "sizes" not in raw:
        return None
    return f"--plan {path}: a scale ladder, not a report plan; run it with: ema-boundary scale --plan {path}"


def load_plan(path: str | Path, max_steps: int | None = None) -> ScalePlan:
    """:meth:`ScalePlan.load`, relative paths from the repository root when not found here; ``max_steps`` caps
    every size's steps (a smoke test)."""
    path = Path(path)
    if not path.is_file() and not path.is_absolute() and (REPO / path).is_file():
        path = REPO / path
    plan = ScalePlan.load(path)
    if max_steps is None:
        return plan
    from dataclasses import replace

    return replace(plan, sizes=tuple(replace(s, max_steps=min(s.max_steps, max_steps)) for s in plan.sizes))


# ---------------------------------------------------------------------------------------------
# The runs: configs written from the plan, train.py through eval.runs, every seed scored
# ---------------------------------------------------------------------------------------------


def train_has_test_split() -> bool:
    """Whether train.py holds test documents out of its training split (its ``test_every`` setting)."""
    import train_config

    return "test_every" in train_config.SETTINGS


def scored_split(plan: ScalePlan) -> str:
    """"test" when the plan holds test documents out and train.py keeps them out of training; else
    "validation" (the blocks that also chose the rate: the report says so)."""
    return "test" if plan.test_every and train_has_test_split() else "validation"


def write_configs(plan: ScalePlan, size: Size, folder: Path, tokenizer: Path) -> dict[str, Path]:
    """``folder/<arch>/config.json`` and ``train.yaml`` for both architectures at ``size``; returns the YAMLs."""
    import json

    s = plan.schedule
    out = {}
    for arch, config in fair_pair(size.width, size.layers, plan.vocab_size, s.block_size).items():
        model = folder / arch
        model.mkdir(parents=True, exist_ok=True)
        _write_once(model / "config.json", json.dumps(config, indent=2) + "\n")
        train = {
            "model_config": str(model.resolve()), "data": plan.data, "tokenizer": str(tokenizer),
            "block_size": s.block_size, "batch_size": s.batch_size,
            "micro_batch_size": s.micro_batch_size or s.batch_size, "max_steps": size.max_steps,
            "lr": size.lr_grid[0], "min_lr_ratio": s.min_lr_ratio, "warmup_steps": s.warmup_steps,
            "weight_decay": s.weight_decay, "grad_clip": s.grad_clip, "mixed_precision": s.mixed_precision,
            "log_every": max(1, size.max_steps // 40), "eval_every": max(1, size.max_steps // s.evaluations),
            "eval_blocks": s.eval_blocks, "save_every": size.max_steps, "keep_checkpoints": 1,
            "val_every": s.val_every, "seed": plan.seed,
        }
        if scored_split(plan) == "test":  # train.py holds the test documents out and scores its final model
            train["test_every"] = plan.test_every
            if plan.test_blocks is not None:
                train["max_test_samples"] = plan.test_blocks
        _write_once(model / "train.yaml", f"# {ARCHITECTURES[arch]} at size {size.name} of {plan.path} (eval.scale)\n"
                    + yaml.safe_dump(train, sort_keys=False))
        out[arch] = model / "train.yaml"
    return out


PATH_KEYS = ("model_config", "tokenizer")  # train.yaml's paths into the ladder's own folder, which a kept attempt
# may have been renamed from (.NAME.tmp-* -> NAME.failed): compared without them


def _write_once(path: Path, text: str) -> None:
    """Write a run's config; in a resumed ladder the file is already there and must say the same (but for the
    folder's own paths), else the runs trained from it belong to another plan."""
    from ema_boundary.cli import UsageError

    def settings(t: str) -> Any:
        data = yaml.safe_load(t)
        return {k: v for k, v in data.items() if k not in PATH_KEYS} if isinstance(data, dict) else data

    if path.is_file() and settings(path.read_text()) != settings(text):
        raise UsageError(f"{path}: the ladder being resumed wrote another config here (another plan or sizes); "
                         "resume only with the plan it ran")
    path.write_text(text)


def _restart_if_moved(run: Any, work: Path) -> Any:
    """An unfinished run resumes from its newest checkpoint in place; in a kept attempt that was renamed since
    (.NAME.tmp-* -> NAME.failed) train.py refuses to resume from a model path that moved, so that run starts
    over (train.py's --overwrite_output_dir clears only its own files)."""
    import json

    from eval.runs import Run

    saved = run.output_dir / "train_config.json"
    size, arch = run.name.split("/")[:2]
    if saved.is_file() and json.loads(saved.read_text()).get("model_name_or_path") != str(
            (work / "configs" / size / arch).resolve()):
        return Run(run.name, (*run.argv, "--overwrite_output_dir"))
    return run


def _finished(run: Any, max_steps: int) -> bool:
    """A run of a resumed ladder that needs no training: its final model is saved after all ``max_steps``."""
    from eval.runs import read_metrics

    if not (run.output_dir / "final" / "config.json").is_file():
        return False
    steps = read_metrics(run.output_dir / "metrics.jsonl").get("step") or [0]
    return steps[-1] == max_steps


def build_tokenizer(plan: ScalePlan, folder: Path) -> Path:
    """One tokenizer for every run: the plan's, or a byte-level BPE of ``vocab_size`` trained on the training
    split (the documents no run validates or is tested on)."""
    from ema_boundary import corpus
    from ema_boundary.cli import UsageError

    test_every = plan.test_every if scored_split(plan) == "test" else 0
    try:
        tok, _ = corpus.load_tokenizer(plan.tokenizer, plan.data, plan.schedule.val_every, plan.vocab_size, 100_000,
                                       f"{plan.path}: vocab_size", test_every)
    except corpus.DataError as e:
        raise UsageError(f"{plan.path}: {e}") from None
    tok.save_pretrained(folder)
    return folder.resolve()


def mean_loss(folder: Path, blocks: Any, batch_size: int = 32) -> float:
    """The mean next-token loss of the causal LM in ``folder`` on ``blocks`` ``(N, block_size + 1)``: train.py's
    validation loss (cross-entropy over every block's ``block_size`` targets, no context across blocks)."""
    import torch
    import torch.nn.functional as F
    from transformers.utils import logging

    from eval.probes.models import load_causal_lm  # weights that do not fit their config.json: one line

    logging.disable_progress_bar()  # one load per seed: the ladder's progress lines say what is scored
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_causal_lm(folder, dtype=torch.float32).to(device)
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(blocks), batch_size):
            chunk = blocks[i:i + batch_size].to(device)
            logits = model(input_ids=chunk[:, :-1]).logits.float()
            total += float(F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum"))
    return total / (blocks.shape[0] * (blocks.shape[1] - 1))


def run_ladder(plan: ScalePlan, work: Path, progress: Any = print) -> dict[str, Any]:
    """Train and score the whole ladder under ``work``; returns the report (module docstring).

    Batches of train.py runs (:func:`eval.runs.train_runs`, ``plan.workers`` at a time): every rate of every
    size's grid at the first seed and any rates beyond an edge (:func:`_search_rates`), then the other seeds at
    each architecture's chosen rate; then every seed scored, with the Kneser-Ney lines on the same tokens.
    """
    import resource
    import time

    from transformers import AutoTokenizer

    from eval.runs import Run, param_count, read_metrics, train_runs

    started = time.perf_counter()
    split = scored_split(plan)
    # A resumed ladder keeps its tokenizer: its finished runs were trained and scored with it.
    kept = work / "tokenizer"
    tokenizer = kept.resolve() if (kept / "tokenizer.json").is_file() else build_tokenizer(plan, kept)
    yamls = {size.name: write_configs(plan, size, work / "configs" / size.name, tokenizer) for size in plan.sizes}
    steps = {size.name: size.max_steps for size in plan.sizes}
    reused: list[str] = []

    def run(size: Size, arch: str, lr: float, seed: int) -> Run:
        out = work / "runs" / size.name / arch / f"lr_{lr:g}" / f"seed_{seed}"
        argv = ["--config", yamls[size.name][arch], "--output_dir", out, "--seed", seed, "--learning_rate", lr]
        return Run(f"{size.name}/{arch}/lr_{lr:g}/seed_{seed}", tuple(argv))

    def train(runs: list[Run], desc: str) -> None:
        """train.py for every run not finished by an earlier attempt (an unfinished one resumes from its newest
        checkpoint: train.py's own resumption)."""
        done = [r for r in runs if _finished(r, steps[r.name.split("/")[0]])]
        reused.extend(r.name for r in done)
        todo = [_restart_if_moved(r, work) for r in runs if r not in done]
        if done:
            progress(f"{PROG}: {len(done)} of {len(runs)} {desc} runs finished by the earlier attempt: reused")
        if todo:
            train_runs(todo, work / "logs", plan.workers, desc=desc)

    grid, tried = _search_rates(plan, run, train, work / "logs", progress)
    chosen = {key: min(losses, key=losses.__getitem__) for key, losses in tried.items()}
    more = {(size.name, arch, seed): run(size, arch, chosen[size.name, arch], seed)
            for size in plan.sizes for arch in ARCHITECTURES for seed in plan.seeds(size)[1:]}
    progress(f"{PROG}: rates chosen on validation ({time.perf_counter() - started:.0f} s); {len(more)} more seeds")
    if more:
        train(list(more.values()), desc="more seeds")
    trained = time.perf_counter()

    tok = AutoTokenizer.from_pretrained(tokenizer)
    test_every = plan.test_every if split == "test" else 0
    score = _scorer(plan, split, tok)
    ngram = _ngram_lines(plan, tok, split, test_every)
    progress(f"{PROG}: every seed scored on the {split} blocks; Kneser-Ney n-grams on the same tokens")

    sizes = []
    for size in plan.sizes:
        counts, tokens = plan.counts(size), plan.tokens(size)
        reference = ngram(tokens)
        bigram = math.log(reference["bigram"])
        archs: dict[str, Any] = {}
        for arch in ARCHITECTURES:
            lr, rates = chosen[size.name, arch], tried[size.name, arch]
            runs = {seed: grid[size.name, arch, lr] if seed == plan.seed else more[size.name, arch, seed]
                    for seed in plan.seeds(size)}
            stored = param_count(runs[plan.seed].output_dir / "final")
            if stored != counts[arch]["total"]:
                raise AssertionError(f"{size.name}/{arch}: the checkpoint has {stored:,} parameters, the formula "
                                     f"{counts[arch]['total']:,}")
            per_seed = {}
            for seed, r in runs.items():
                loss, scored = score(r)
                if scored != reference["eval_tokens"]:  # the bigram gate compares the same tokens, or nothing
                    raise AssertionError(f"{r.name}: scored on {scored:,} tokens, the n-gram lines on "
                                         f"{reference['eval_tokens']:,}")
                per_seed[str(seed)] = {"loss": loss, "command": r.command,
                                       "val_loss": read_metrics(r.output_dir / "metrics.jsonl")["val_loss"][-1]}
            losses = [x["loss"] for x in per_seed.values()]
            archs[arch] = {
                "label": ARCHITECTURES[arch], "parameters": counts[arch],
                "tokens_per_parameter": {"total": tokens / counts[arch]["total"],
                                         "non_embedding": tokens / counts[arch]["non_embedding"]},
                "lr_grid": {f"{rate:g}": loss for rate, loss in sorted(rates.items())},
                "lr_extensions": sorted(set(rates) - set(size.lr_grid)),
                "lr": lr, "lr_interior": min(rates) < lr < max(rates),
                "seeds": per_seed, "loss": _interval(losses),
                "below_bigram": all(x < bigram for x in losses),
            }
        gap = _gap({k: v["loss"] for k, v in archs["spen"]["seeds"].items()},
                   {k: v["loss"] for k, v in archs["gpt2"]["seeds"].items()})
        gate = archs["spen"]["below_bigram"] and archs["gpt2"]["below_bigram"]
        sizes.append({
            "name": size.name, "width": size.width, "layers": size.layers, "steps": size.max_steps,
            "train_tokens": tokens,
            "epochs": tokens / reference["train_split_tokens"] if reference["train_split_tokens"] else None,
            "architectures": archs, "ngram": reference, "bigram_loss": bigram, "gate": gate,
            "gap": {**gap, "reading": _reading(gap, gate)},
        })
        progress(f"{PROG}: {size.name}: SPEN {archs['spen']['loss']['mean']:.4f}, GPT-2 "
                 f"{archs['gpt2']['loss']['mean']:.4f}, bigram {bigram:.4f} nats ({split})")
    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {
        "tool": TOOL, "plan": {"path": plan.path, "declared": plan.declared}, "scored_on": split,
        "scored_on_note": _split_note(plan, split), "eval_tokens": sizes[0]["ngram"]["eval_tokens"],
        "eval_documents": _documents(plan, split, test_every),
        "corpus": plan.corpus, "tokenizer": plan.tokenizer or f"byte-level BPE of {plan.vocab_size} tokens "
                                                              "trained on the training split",
        "sizes": sizes, "paper": paper_point(),
        "seconds": {"train": trained - started, "total": time.perf_counter() - started,
                    "cpu": sum(u.ru_utime + u.ru_stime for u in usage)},
        # Runs an earlier attempt finished (--resume_from): their time is not in "seconds"
        "reused_runs": reused,
    }


def _search_rates(plan: ScalePlan, run: Any, train: Any, logs: Path, progress: Any) -> tuple[dict, dict]:
    """Every rate of every size's grid at the first seed, then, by the plan's rule, the rates beyond an edge (one
    batch of runs per extension; ``train(runs, desc)`` trains a batch). Returns the runs by ``(size, arch, rate)``
    and the validation losses by ``(size, arch)``: ``{rate: loss}``."""
    from eval.runs import read_metrics

    sizes = {size.name: size for size in plan.sizes}
    batch = {(size.name, arch, lr): run(size, arch, lr, plan.seed)
             for size in plan.sizes for arch in ARCHITECTURES for lr in size.lr_grid}
    progress(f"{PROG}: {len(plan.sizes)} sizes, {len(batch)} rate-grid runs ({plan.workers} at a time); logs in {logs}")
    runs: dict[tuple[str, str, float], Any] = {}
    tried: dict[tuple[str, str], dict[float, float]] = {(name, arch): {} for name in sizes for arch in ARCHITECTURES}
    for extension in range(plan.max_extensions + 1):  # 0: the declared grid
        train(list(batch.values()), desc=f"grid extension {extension}" if extension else "rate grid")
        for (name, arch, lr), r in batch.items():
            tried[name, arch][lr] = read_metrics(r.output_dir / "metrics.jsonl")["val_loss"][-1]
        runs |= batch
        # next_rate stops at max_extensions added rates, so the loop ends by this break
        beyond = {key: plan.next_rate(losses, added=len(losses) - len(sizes[key[0]].lr_grid))
                  for key, losses in tried.items()}
        batch = {(*key, lr): run(sizes[key[0]], key[1], lr, plan.seed) for key, lr in beyond.items() if lr is not None}
        if not batch:
            break
        progress(f"{PROG}: {len(batch)} rate(s) chosen at an edge of the rates tried: trying "
                 f"{', '.join(f'{n}/{a} {lr:g}' for n, a, lr in batch)} (extension {extension + 1})")
    return runs, tried


def _scorer(plan: ScalePlan, split: str, tok: Any) -> Any:
    """``score(run) -> (loss, tokens scored)``: a finished run's loss on the scored blocks. On the test split,
    train.py's own score of its final model (``test_loss`` on the ``max_test_samples`` first test blocks); on the
    validation split (a train.py without a test split), :func:`mean_loss` of the final checkpoint on the same
    validation blocks for every run."""
    from ema_boundary import corpus
    from ema_boundary.cli import UsageError

    if split == "test":
        from eval.runs import read_test  # with train.py's test split (test_every), eval.runs reads its score

        def from_train(run: Any) -> tuple[float, int]:
            found = read_test(run.output_dir / "metrics.jsonl")
            if found is None:
                raise AssertionError(f"no test_loss in {run.output_dir / 'metrics.jsonl'} ({run.command})")
            return found["test_loss"], found["test_tokens"]

        return from_train
    s = plan.schedule
    try:
        blocks = corpus.validation_blocks(plan.data, s.val_every, tok, s.block_size, plan.test_blocks)
    except corpus.DataError as e:
        raise UsageError(f"{plan.path}: {e}") from None
    targets = blocks.shape[0] * (blocks.shape[1] - 1)
    return lambda run: (mean_loss(run.output_dir / "final", blocks), targets)


def _documents(plan: ScalePlan, split: str, test_every: int) -> int | None:
    """How many documents the scored blocks come from: the whole split's, when every block of a finite corpus is
    scored (None otherwise: a streamed corpus, or the first ``test_blocks`` of the split)."""
    from ema_boundary import corpus

    if plan.corpus == "c4" or plan.test_blocks is not None:
        return None
    return sum(1 for _ in corpus.documents(plan.data, split, plan.schedule.val_every, test_every))


def _split_note(plan: ScalePlan, split: str) -> str:
    if split == "test":
        return (f"every seed scored on the test split (one in {plan.test_every} of the documents that are not "
                "validation): documents that neither trained a model nor chose a rate")
    why = "the plan holds out no test documents" if not plan.test_every else "this train.py has no test_every setting"
    return (f"{why}: every seed scored on the validation split, whose first {plan.schedule.eval_blocks} blocks "
            "also chose the rate")


def _ngram_lines(plan: ScalePlan, tok: Any, split: str, test_every: int) -> Any:
    """``lines(train_tokens)``: the Kneser-Ney references on the scored blocks, counted on what a run of that
    many tokens read (the whole training split once the runs read it all: one count serves every size)."""
    from eval.ngram import ngram_references

    s, cache = plan.schedule, {}

    def lines(train_tokens: int) -> dict[str, Any]:
        train_tokens = min(train_tokens, plan.ngram_tokens or train_tokens)
        full = cache.get("all")
        if full is not None and full["train_split_tokens"] is not None and train_tokens >= full["train_split_tokens"]:
            return full
        if train_tokens not in cache:
            cache[train_tokens] = ngram_references(plan.data, s.val_every, tok, s.block_size, plan.test_blocks,
                                                   train_tokens, split, test_every)
            split_size = cache[train_tokens]["train_split_tokens"]
            if split_size is not None and train_tokens >= split_size:
                cache["all"] = cache[train_tokens]
        return cache[train_tokens]

    return lines


def _interval(values: list[float]) -> dict[str, Any]:
    """Mean, a 95% t interval where there are two or more values (None otherwise), and the values."""
    from ema_boundary.stats import mean_ci

    m = mean_ci(values)
    ci = None if m["n"] < 2 else [float(x) for x in m["ci95"]]
    return {"mean": m["mean"], "ci95": ci, "n": m["n"], "per_seed": values}


def _gap(spen: dict[str, float], gpt2: dict[str, float]) -> dict[str, Any]:
    """SPEN minus GPT-2 loss (nats), paired by seed: positive means SPEN is worse (the paper's direction)."""
    return _interval([spen[k] - gpt2[k] for k in spen if k in gpt2])


def _reading(gap: dict[str, Any], gate: bool) -> str:
    """What the gap at one size may be read as: behind the bigram gate, and only with an interval."""
    if not gate:
        return "not testable in this regime (a model is not below the Kneser-Ney bigram)"
    if gap["ci95"] is None:
        return "one seed: no interval"
    lo, hi = gap["ci95"]
    if lo > 0:
        return "SPEN worse (the 95% interval lies above 0)"
    if hi < 0:
        return "SPEN better (the 95% interval lies below 0)"
    return "not resolved at this budget (the 95% interval contains 0)"


def paper_point() -> dict[str, Any]:
    """The paper's SPEN-130M vs GPT-2 small on C4 as a loss gap: log of the perplexity ratio, in nats."""
    from ema_boundary.paper import PAPER

    ratio = float(PAPER["perplexity_ratio"])
    return {"parameters": 130e6, "parameters_counted": "total (SPEN-130M, GPT-2 small)", "perplexity_ratio": ratio,
            "gap": math.log(ratio), "corpus": "C4"}


# ---------------------------------------------------------------------------------------------
# The figure and the summary
# ---------------------------------------------------------------------------------------------


def render_figure(report: dict[str, Any], path: Path | str) -> None:
    """(a) each architecture's loss against non-embedding parameters with the Kneser-Ney bigram; (b) the SPEN minus
    GPT-2 gap (95% interval where seeds allow), filled where both models are below the bigram, hollow where not,
    and the paper's point (130M parameters, log 7.9 nats)."""
    from ema_boundary.figures import pyplot, save

    plt = pyplot()
    sizes = report["sizes"]
    x = [s["architectures"]["spen"]["parameters"]["non_embedding"] for s in sizes]
    fig, (ax_loss, ax_gap) = plt.subplots(1, 2, figsize=(11, 4))
    for arch, color in (("spen", "tab:blue"), ("gpt2", "tab:orange")):
        loss = [s["architectures"][arch]["loss"] for s in sizes]
        err = [[0 if v["ci95"] is None else v["mean"] - v["ci95"][0] for v in loss],
               [0 if v["ci95"] is None else v["ci95"][1] - v["mean"] for v in loss]]
        ax_loss.errorbar(x, [v["mean"] for v in loss], yerr=err, marker="o", color=color, capsize=3,
                         label=ARCHITECTURES[arch])
    ax_loss.plot(x, [s["bigram_loss"] for s in sizes], ls="--", color="gray", label="Kneser-Ney bigram")
    ax_loss.set(xscale="log", xlabel="non-embedding parameters", ylabel=f"{report['scored_on']} loss (nats)",
                title="(a) loss against size")
    for s, xi in zip(sizes, x, strict=True):
        g = s["gap"]
        err = None if g["ci95"] is None else [[g["mean"] - g["ci95"][0]], [g["ci95"][1] - g["mean"]]]
        ax_gap.errorbar([xi], [g["mean"]], yerr=err, fmt="o", color="tab:purple", capsize=3,
                        mfc="tab:purple" if s["gate"] else "white")
        ax_gap.annotate(s["name"], (xi, g["mean"]), xytext=(4, 4), textcoords="offset points", fontsize=7)
    ax_gap.plot([], [], "o", color="tab:purple", label="both below the bigram")
    ax_gap.plot([], [], "o", color="tab:purple", mfc="white", label="a model above the bigram (not testable)")
    paper = report["paper"]
    ax_gap.plot([paper["parameters"]], [paper["gap"]], "*", ms=14, color="tab:red",
                label=f"paper: 130M, perplexity ratio {paper['perplexity_ratio']:.1f}x ({paper['corpus']})")
    ax_gap.axhline(0.0, color="black", lw=0.8)
    ax_gap.set(xscale="log", xlabel="non-embedding parameters (paper: total)", ylabel="SPEN - GPT-2 loss (nats)",
               title="(b) the gap (> 0: SPEN worse)")
    for ax in (ax_loss, ax_gap):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    save(fig, path)


def _edge(arch: dict[str, Any]) -> str:
    """Beside a chosen rate: whether it is an edge of the rates tried (where a better rate may lie outside)."""
    if len(arch["lr_grid"]) == 1:
        return " (one rate)"
    return "" if arch["lr_interior"] else " (edge)"


def render_index(report: dict[str, Any]) -> str:
    """The markdown summary: one row per size and architecture, the gap per size, what was scored and the time."""
    def f(v: float | None, digits: int = 4) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    n_docs = report["eval_documents"]
    documents = "" if n_docs is None else f" from {n_docs:,} documents"
    lines = [f"# The scale ladder: SPEN vs the GPT-2 architecture ({report['plan']['path']})", "",
             f"Scored on: {report['scored_on_note']} ({report['eval_tokens']:,} tokens{documents}). "
             f"Corpus: {report['corpus']}; "
             f"tokenizer: {report['tokenizer']}. Both architectures at each size by the fair recipe (init "
             "1/sqrt(width), positions = block size, heads of 16, matched non-embedding parameters).", "",
             "| size | architecture | total / non-embedding parameters | tokens | tokens per parameter (total / "
             "non-emb.) | rates tried (validation loss) | chosen | seeds | loss (95% interval) | bigram | below |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in report["sizes"]:
        for a in s["architectures"].values():
            p, t, loss = a["parameters"], a["tokens_per_parameter"], a["loss"]
            added = {f"{lr:g}" for lr in a["lr_extensions"]}
            grid = ", ".join(f"{lr}{' (added)' if lr in added else ''}: {v:.4f}" for lr, v in a["lr_grid"].items())
            ci = "" if loss["ci95"] is None else f" [{f(loss['ci95'][0])}, {f(loss['ci95'][1])}]"
            lines.append(f"| {s['name']} | {a['label']} | {p['total']:,} / {p['non_embedding']:,} | "
                         f"{s['train_tokens']:,} | {t['total']:.3g} / {t['non_embedding']:.3g} | {grid} | {a['lr']:g}"
                         f"{_edge(a)} | {loss['n']} | {f(loss['mean'])}{ci} | "
                         f"{f(s['bigram_loss'])} | {'yes' if a['below_bigram'] else 'no'} |")
    lines += ["", "| size | non-embedding parameters | SPEN - GPT-2 (nats) | 95% interval | seeds | reading |",
              "|---|---|---|---|---|---|"]
    for s in report["sizes"]:
        g = s["gap"]
        ci = "-" if g["ci95"] is None else f"[{g['ci95'][0]:+.4f}, {g['ci95'][1]:+.4f}]"
        lines.append(f"| {s['name']} | {s['architectures']['spen']['parameters']['non_embedding']:,} | "
                     f"{g['mean']:+.4f} | {ci} | {g['n']} | {g['reading']} |")
    paper, sec = report["paper"], report["seconds"]
    lines += ["", f"The paper (SPEN-130M vs GPT-2 small, {paper['corpus']}): perplexity ratio "
              f"{paper['perplexity_ratio']:.1f}x, a gap of {paper['gap']:+.3f} nats at 130M total parameters.", "",
              f"Time: {sec['total'] / 60:.1f} min wall ({sec['train'] / 60:.1f} training), {sec['cpu'] / 60:.1f} "
              "CPU-minutes" + (f", resumed from `{report['resumed_from']}`: {len(report['reused_runs'])} runs finished "
                               "by the earlier attempt were reused and their time is not in these figures"
                               if report.get("resumed_from") else "") + ".",
              "", "![the gap against size](gap.png)", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The command line (also ``ema-boundary scale``)
# ---------------------------------------------------------------------------------------------


def add_arguments(parser: Any) -> None:
    """The flags of ``python -m eval.scale`` and ``ema-boundary scale``."""
    from ema_boundary.cli import add_output_dir, positive_int

    parser.add_argument("--plan", metavar="YAML", default=PLAN,
                        help="the ladder (hub_configs/report/scale.yaml: two CPU cores; scale-gpu.yaml: one GPU)")
    add_output_dir(parser, "the ladder's folder (report.json, index.md, gap.png, work/); an earlier ladder is "
                           "replaced only with --overwrite_output_dir", aliases=(), required=False,
                   default="outputs/scale")
    parser.add_argument("--max_steps", "--max-steps", dest="max_steps", type=positive_int,
                        help="cap on every run's optimizer steps (a smoke test)")
    parser.add_argument("--resume_from", metavar="DIR",
                        help="continue an earlier attempt at --output_dir, kept beside it (OUTPUT_DIR.failed, or "
                             ".OUTPUT_DIR.tmp-* left by a killed run) with the same plan (a subset of its sizes will "
                             "do): finished runs are reused, unfinished ones resume from their newest checkpoint")


def _check_resume(folder: str, output_dir: str) -> Path:
    """The earlier attempt to continue: beside --output_dir, with the tokenizer its runs used (one line if not)."""
    from ema_boundary.io import earlier_attempt

    path = earlier_attempt(output_dir, folder)
    if not (path / "work" / "tokenizer" / "tokenizer.json").is_file():
        from ema_boundary.io import OutputError

        raise OutputError(f"{path}: holds no ladder's work/tokenizer (nothing to resume)")
    return path


def run(parser: Any, args: Any, command: str) -> int:
    """Check the plan and the output folder (exit 2, one line, nothing written), then run the ladder into its
    folder (exit 1 on a failed stage, the partial folder kept with its logs). ``command`` is recorded."""
    import sys
    import traceback

    from ema_boundary import corpus
    from ema_boundary.cli import EXIT_USAGE, UsageError, first_line
    from ema_boundary.io import OutputError, atomic_dir, check_output_dir, write_json, write_text

    try:
        plan = load_plan(args.plan, args.max_steps)
        check_output_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir)
        corpus.check_data(plan.data, plan.schedule.val_every, plan.test_every)  # before hours of training
    except (PlanError, OutputError) as e:
        parser.error(f"--output_dir {e}" if isinstance(e, OutputError) else str(e))
    except corpus.DataError as e:
        parser.error(f"{plan.path}: corpus {first_line(e)}")
    try:
        resume = _check_resume(args.resume_from, args.output_dir) if args.resume_from else None
    except OutputError as e:
        parser.error(f"--resume_from {e}")
    try:
        with atomic_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir, keep_on_error=True,
                        resume=resume) as tmp:
            try:
                report = run_ladder(plan, tmp / "work")
                if resume is not None:
                    report["resumed_from"] = args.resume_from
            except Exception:
                (tmp / "work").mkdir(parents=True, exist_ok=True)
                (tmp / "work" / "error.log").write_text(traceback.format_exc())
                raise
            report["command"] = command
            write_json(tmp / "report.json", report)
            render_figure(report, tmp / "gap.png")
            write_text(tmp / "index.md", render_index(report))
    except UsageError as e:
        print(f"{parser.prog}: error: {first_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # a stage failed: one line; the traceback is in the kept folder's work/error.log
        print(f"{parser.prog}: error: {type(e).__name__}: {first_line(e)}", file=sys.stderr)
        return 1
    print(f"wrote {Path(args.output_dir) / 'index.md'}, report.json and gap.png "
          f"({report['seconds']['total'] / 60:.1f} min)")
    return 0


def main(argv: list[str] | None = None) -> int:
    import shlex
    import sys

    from ema_boundary.cli import UsageParser

    parser = UsageParser(prog=PROG, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
        return run(parser, args, " ".join([PROG, shlex.join(argv if argv is not None else sys.argv[1:])]).strip())
    except SystemExit as e:  # a usage error (printed in one line) or --help
        return int(e.code or 0)


__all__ = ["ScalePlan", "Schedule", "Size", "fair_pair", "gpt2_inner", "ladder_hint", "load_plan", "main", "mean_loss",
           "parameter_counts", "render_figure", "render_index", "run_ladder"]


if __name__ == "__main__":
    raise SystemExit(main())
