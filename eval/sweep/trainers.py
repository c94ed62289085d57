"""What trains one run of a sweep: ``train`` (train.py on text), ``recall`` (eval.recall's MQAR) and ``arms``
(grammar_probe's structure experiment at one size and protocol).

A trainer has three parts:

- ``prepare(plan, folder)``: what every run of the sweep shares, built once in the sweep folder before any run
  (the tokenizer); returns paths relative to the sweep folder;
- ``files(spec, paths)``: the files the run reads, written into its folder first (every path in them relative to
  the sweep folder, so that a sweep runs from a clone);
- ``run(spec, paths)``: one run, its files at ``paths`` (:class:`eval.sweep.execute.RunPaths`): it trains, scores
  and returns the run's numbers (JSON-ready), every path it records relative to the sweep folder;
- ``objective``: the validation number the rate rule reads, and whether lower is better.

A run's spec is data (``run.json`` in its folder): the trainer, the arm, the rate, the seed, the steps and the
arm's merged settings. ``python -m eval.sweep.execute runs/<id>`` (from the sweep folder) runs it again.

Each trainer's stack is imported inside the functions that use it (torch under all; train.py, train_config and
datasets for ``train``; eval.recall for ``recall``; grammar_probe's experiment for ``arms``): the runner imports every
trainer to read a plan, and one trainer's stack loads only where that trainer checks, prepares or runs (seconds each
on two cores: a recall sweep never loads datasets, a train sweep never grammar_probe's experiment).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ema_boundary.io import atomic_dir, content_digest, write_json
from ema_boundary.seeding import recall_evaluation_seed, recall_selection_seed
from ema_boundary.usage import UsageError
from eval.plans import in_repo
from eval.runs import DATA_SETTINGS, read_metrics, read_seen, read_test
from eval.scale import fair_pair
from eval.sweep.paths import RunPaths
from eval.sweep.plan import Arm, SweepPlan

# ---------------------------------------------------------------------------------------------
# train: train.py, one run per (arm, rate, seed, steps)
# ---------------------------------------------------------------------------------------------

SWEEP_OWNED = ("output_dir", "max_steps", "learning_rate", "seed", "model_name_or_path")  # set per run
# An arm's keys that are the sweep's, not train.py's: the model, what to measure after training, and which loop
# trains it (``train``: train.py; ``reference``: the plain loop of eval.reference that checks a baseline).
SWEEP_KEYS = ("model", "measure", "depth", "loop")
LOOPS = ("train", "reference")
CHECKPOINT = "recall_checkpoint.pt"  # a recall run's training state while it trains (eval.recall.train_recall)


def model_config(model: Any, where: str) -> dict[str, Any]:
    """A train arm's model config.json as a dict, from its ``model`` setting:

    - a folder (``hub_configs/spen-f64``): its config.json;
    - ``{from: FOLDER, set: {...}}``: that config with fields replaced;
    - ``{fair_pair: {arch: spen|gpt2, width: W, layers: L, vocab_size: V, block_size: B}}``: the scale ladder's
      fair recipe (eval.scale.fair_pair), ``set`` applied after;
    - ``variant: NAME`` beside either: a named SPEN reader or trace (modeling_spen.variants), before ``set``.
    """
    if isinstance(model, str):
        model = {"from": model}
    if not isinstance(model, dict):
        raise UsageError(f"{where}: model must be a folder or a mapping (from/set or fair_pair)")
    if "fair_pair" in model:
        fp = dict(model["fair_pair"])
        arch = fp.pop("arch")
        config = fair_pair(**fp)[arch]
    elif "from" in model:
        path = in_repo(model["from"]) / "config.json"
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"{where}: model.from {model['from']}: no readable config.json ({e})") from None
    else:
        raise UsageError(f"{where}: model needs `from` or `fair_pair`")
    if "variant" in model:
        from modeling_spen.variants import SPEN_VARIANTS  # delayed: its trainer's stack (module docstring)

        if model["variant"] not in SPEN_VARIANTS:
            raise UsageError(f"{where}: model.variant {model['variant']!r} is not a SPEN variant "
                             f"({', '.join(SPEN_VARIANTS)})")
        config = {**config, **SPEN_VARIANTS[model["variant"]]}
    return {**config, **model.get("set", {})}


def _settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The train.py settings of a run (the arm's config without the sweep's own keys)."""
    return {k: v for k, v in spec["config"].items() if k not in SWEEP_KEYS and k not in SWEEP_OWNED}


class TrainTrainer:
    """train.py: the arm's settings are a train.yaml's keys plus ``model`` (:func:`model_config`), ``measure``
    (optional: ``[depth]`` measures depth dilution on the final model, eval.depth) and ``loop`` (``train``, or
    ``reference``: the plain loop of :mod:`eval.reference` on the same settings and tokens)."""

    name = "train"
    objective, lower_is_better = "val_loss", True

    def check(self, plan: SweepPlan) -> None:
        """One data design for every arm; the sweep owns the per-run settings."""
        import train_config  # delayed: its trainer's stack (module docstring)

        first = None
        for arm in plan.arms:
            cfg = plan.config_of(arm)
            where = f"{plan.path}: arms.{arm.name}"
            if "model" not in cfg:
                raise UsageError(f"{where}: no `model` (a config folder, {{from, set}} or {{fair_pair}})")
            if cfg.get("loop", "train") not in LOOPS:
                raise UsageError(f"{where}: loop {cfg['loop']!r} is not one of {', '.join(LOOPS)}")
            # A base train.yaml's per-run settings are the sweep's (dropped); an arm or a base mapping may not set them.
            explicit = {**(plan.base if not isinstance(plan.declared.get("base"), str) else {}), **arm.config}
            for key in explicit:
                if key in SWEEP_OWNED:
                    raise UsageError(f"{where}: {key} is set by the sweep (budgets, rate rule, seeds, its folders)")
            for key in _settings({"config": cfg}):
                if key not in train_config.SETTINGS:
                    raise UsageError(f"{where}: {key} is not a train.py setting (a plan names each setting by its "
                                     "name, as train.py's YAML)")
            if plan.score == "test" and not _defaults(_settings({"config": cfg}))["test_every"]:
                raise UsageError(f"{where}: score: test needs test documents held out (test_every, e.g. 10), or "
                                 "score: validation")
            data = {k: cfg.get(k) for k in DATA_SETTINGS}
            if first is not None and data != first:
                diff = next(k for k in DATA_SETTINGS if data[k] != first[k])
                raise UsageError(f"{where}: {diff} differs from the first arm's ({data[diff]!r} vs {first[diff]!r}): "
                                 "one data design per sweep")
            first = data

    def prepare(self, plan: SweepPlan, folder: Path) -> dict[str, str]:
        """One tokenizer for every run: the settings' own, or a byte-level BPE of the model's vocabulary trained
        on the training split (as train.py trains it), saved in ``shared/tokenizer``."""
        from ema_boundary import corpus  # delayed: its trainer's stack (module docstring)

        out = folder / "shared" / "tokenizer"
        if (out / "tokenizer.json").is_file() or (out / "tokenizer_config.json").is_file():
            return {"tokenizer": "shared/tokenizer"}
        cfg = plan.config_of(plan.arms[0])
        settings = _defaults(_settings({"config": cfg}))
        vocab = model_config(cfg["model"], f"{plan.path}: arms.{plan.arms[0].name}")["vocab_size"]
        data = [settings["data"]] if isinstance(settings["data"], str) else list(settings["data"])
        try:
            tok, _ = corpus.load_tokenizer(settings["tokenizer_name"], _data_paths(data), settings["val_every"], vocab,
                                           settings["bpe_train_docs"], f"{plan.path}: vocab_size",
                                           settings["test_every"])
        except corpus.DataError as e:
            raise UsageError(f"{plan.path}: {e}") from None
        with atomic_dir(out) as tmp:  # whole or absent: a stop mid-save leaves no half tokenizer to reuse
            tok.save_pretrained(tmp)
        return {"tokenizer": "shared/tokenizer"}

    def data_fingerprint(self, plan: SweepPlan) -> str:
        """What the runs read, as content (:func:`ema_boundary.io.content_digest`): the bytes of the data files, or
        for a named corpus its name (the embedded one with the Python version whose library it reads)."""
        from ema_boundary import corpus  # delayed: datasets and torch (module docstring)

        settings = _defaults(_settings({"config": plan.config_of(plan.arms[0])}))
        data = _data_paths([settings["data"]] if isinstance(settings["data"], str) else list(settings["data"]))
        named = [d for d in data if d in (corpus.C4, *corpus.EMBEDDED_SOURCES)]
        for d in data:
            if d not in named and not Path(d).exists():
                raise UsageError(f"{plan.path}: data {d}: no such file or folder")
        python = [f"python {sys.version.split()[0]}"] if any(d in corpus.EMBEDDED_SOURCES for d in named) else []
        return content_digest([d for d in data if d not in named], names=named + python)

    def _yaml(self, spec: dict[str, Any], paths: RunPaths) -> dict[str, Any]:
        """The run's train.yaml settings, every path relative to the sweep folder."""
        settings = {**_settings(spec), "model_name_or_path": paths.relative("model"),
                    "tokenizer_name": spec["shared"]["tokenizer"], "output_dir": paths.relative("train"),
                    "max_steps": spec["steps"], "learning_rate": spec["lr"], "seed": spec["seed"]}
        settings.pop("data", None)
        data = _defaults(_settings(spec))["data"]
        settings["data"] = _data_paths([data] if isinstance(data, str) else list(data), relative_to=paths.sweep)
        return settings

    def files(self, spec: dict[str, Any], paths: RunPaths) -> dict[str, str]:
        """The run's model config and train.yaml (written into its folder before it trains)."""
        config = model_config(spec["config"]["model"], f"arms.{spec['arm']}")
        settings = self._yaml(spec, paths)
        header = f"# run {paths.run} of a sweep; from the sweep folder: {self.command(paths.run, spec)}\n"
        return {"model/config.json": json.dumps(config, indent=2) + "\n",
                "train.yaml": header + yaml.safe_dump(settings, sort_keys=False)}

    def command(self, run: str, spec: dict[str, Any] | None = None) -> str:
        loop = (spec or {}).get("config", {}).get("loop", "train")
        program = "train" if loop == "train" else "eval.reference"
        return shlex.join(["python", "-m", program, "--config", f"{run}/train.yaml"])

    def run(self, spec: dict[str, Any], paths: RunPaths) -> dict[str, Any]:
        import train  # delayed: its trainer's stack (module docstring)

        started, damaged = time.perf_counter(), None
        if spec["config"].get("loop", "train") == "reference":
            from eval.reference import train_reference  # delayed: its trainer's stack (module docstring)

            with _working_folder(paths.sweep):
                train_reference(_defaults(self._yaml(spec, paths)))
        else:
            argv = ["--config", paths.relative("train.yaml"), "--log_level", "warning"]
            damaged = _unresumable(paths.file("train"))
            if damaged:  # the sweep's own run folder: it starts over (train.py alone would ask for the flag)
                print(f"{paths.run}: no checkpoint can be resumed ({damaged}); the run starts over", file=sys.stderr)
                argv.append("--overwrite_output_dir")
            with _working_folder(paths.sweep):
                train.main(argv)  # raises on bad input
        metrics = read_metrics(paths.file("train") / "metrics.jsonl")
        result: dict[str, Any] = {
            "val_loss": metrics["val_loss"][-1] if metrics["val_loss"] else math.nan,
            "steps": metrics["step"][-1] if metrics["step"] else 0,
            "tokens": metrics["tokens"][-1] if metrics["tokens"] else 0,
            "curve": {"val_step": metrics["val_step"], "val_loss": metrics["val_loss"]},
            "parameters": _parameter_counts(paths.file("train") / "final"),
            "seconds": time.perf_counter() - started,
        }
        if spec["config"].get("loop", "train") == "train" and damaged:
            result["started_over"] = damaged  # said in the sweep's line for the run, and kept with its numbers
        test = read_test(paths.file("train") / "metrics.jsonl")
        if test is not None:
            result.update(test)
        result.update(read_seen(paths.file("train") / "metrics.jsonl"))  # distinct training tokens (train_fraction)
        if "depth" in spec["config"].get("measure", ()):
            result["depth"] = _measure_depth(paths.file("train") / "final", spec, paths.sweep)
        return result

    def score(self, result: dict[str, Any], split: str) -> float:
        """The number a seed is scored by: the final model's loss on the test (or validation) blocks."""
        return result["test_loss" if split == "test" else "val_loss"]


def _unresumable(out: Path) -> str | None:
    """Why no checkpoint of the train.py run in ``out`` can be resumed, where it has some and none can (else None:
    train.py resumes from the newest sound one, passing over damaged ones with a line in the run's log)."""
    from training.checkpoint import checkpoint_problem  # delayed: its trainer's stack (module docstring)

    found = sorted((d for d in (out / "checkpoints").glob("step_*") if (d / "data_state.json").is_file()),
                   key=lambda d: int(d.name.split("_")[1]))
    problems = [(d, checkpoint_problem(d)) for d in found]
    if not found or any(problem is None for _, problem in problems):
        return None
    return "; ".join(f"{d.relative_to(out)}: {problem}" for d, problem in problems)


def _defaults(settings: dict[str, Any]) -> dict[str, Any]:
    """train.py's defaults with ``settings`` on top."""
    import train_config  # delayed: its trainer's stack (module docstring)

    return {**{k: s.default for k, s in train_config.SETTINGS.items()}, **settings}


@contextlib.contextmanager
def _working_folder(folder: Path) -> Iterator[None]:
    """``folder`` as the working folder for the block: train.py (and eval.reference) run in this process and resolve
    the relative paths of a run's train.yaml against the working folder; the recorded settings stay relative, so
    a checkpoint resumes from a clone. The one place a run changes the working folder."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _data_paths(data: list[str], relative_to: Path | None = None) -> list[str]:
    """Named corpora as they are; files repository-relative (as plans name them). With ``relative_to`` (the sweep
    folder): relative to it, so that the run's train.yaml runs from a clone."""
    from ema_boundary import corpus  # delayed: its trainer's stack (module docstring)

    named = (corpus.C4, corpus.EMBEDDED, corpus.EMBEDDED_PYDOC, corpus.EMBEDDED_STDLIB)
    out = []
    for d in data:
        if d in named:
            out.append(d)
        else:
            path = in_repo(d)
            out.append(os.path.relpath(path, relative_to) if relative_to is not None else str(path))
    return out


def train_settings(config: dict[str, Any], relative_to: Path | None = None) -> dict[str, Any]:
    """An arm's train.py settings (its ``config`` without the sweep's keys) over train.py's defaults, ``data`` a list
    of paths (:func:`_data_paths`: relative to ``relative_to`` where given)."""
    settings = _defaults(_settings({"config": config}))
    data = settings["data"]
    return {**settings, "data": _data_paths([data] if isinstance(data, str) else list(data), relative_to)}


def _parameter_counts(final: Path) -> dict[str, int]:
    from transformers import AutoConfig  # delayed: its trainer's stack (module docstring)

    from ema_boundary.params import parameter_counts  # delayed: its trainer's stack (module docstring)
    from eval.probes.models import build_on_meta  # delayed: its trainer's stack (module docstring)

    return parameter_counts(build_on_meta(AutoConfig.from_pretrained(final), str(final))).as_dict()


def _measure_depth(final: Path, spec: dict[str, Any], sweep: Path) -> dict[str, Any]:
    """eval.depth's measures of one trained model on the first validation blocks (held-out text; settings
    ``depth: {num_sequences: 64, seq_len: 128, ridge: 1e-3}``), which need no language-model gate: token identity
    and every earlier block recovered at the last layer by a linear probe, the stream norm against depth."""
    from transformers import AutoModelForCausalLM, AutoTokenizer  # delayed: its trainer's stack (module docstring)

    from ema_boundary import corpus, packing  # delayed: its trainer's stack (module docstring)
    from eval.depth import depth_dilution  # delayed: its trainer's stack (module docstring)

    opts = {"num_sequences": 64, "seq_len": 128, "ridge": 1e-3, **spec["config"].get("depth", {})}
    model = AutoModelForCausalLM.from_pretrained(final).eval()
    settings = _defaults(_settings(spec))  # the run's data design (its train.yaml's), its files found from here
    tok = AutoTokenizer.from_pretrained(sweep / spec["shared"]["tokenizer"])
    data = corpus.parse_data(_data_paths([settings["data"]] if isinstance(settings["data"], str)
                                         else list(settings["data"])))
    blocks = packing.validation_blocks(data, settings["val_every"], tok, opts["seq_len"] - 1, opts["num_sequences"])
    return {**depth_dilution(model, blocks, opts["ridge"]), "probe": opts}


# ---------------------------------------------------------------------------------------------
# recall: MQAR (eval.recall), one run per (arm, rate, seed, steps)
# ---------------------------------------------------------------------------------------------


def ngram_lines(plan: SweepPlan, folder: Path, train_tokens: int, arm: Arm | None = None) -> dict[str, Any] | None:
    """Kneser-Ney lines on the blocks the sweep scores (train sweeps; None before the tokenizer exists), counted
    on what a run of ``train_tokens`` of ``arm`` (default: the first) read, its ``train_fraction`` included, with
    each line's ``loss`` (nats); cached in ``shared/ngram_<split>_<tokens>[_f<fraction>].json``."""
    from eval.ngram import kneser_ney  # delayed: torch (module docstring); a cached line needs none

    tok_dir = folder / "shared" / "tokenizer"
    if plan.trainer != "train" or not tok_dir.is_dir():
        return None
    # Kneser-Ney in pure Python: a streamed corpus is counted on at most settings.ngram_tokens (declared).
    train_tokens = min(train_tokens, plan.settings.get("ngram_tokens") or train_tokens)
    s = _defaults(_settings({"config": plan.config_of(arm or plan.arms[0])}))
    fraction = f"_f{s['train_fraction']:g}" if s["train_fraction"] < 1 else ""  # earlier caches keep their names
    cache = folder / "shared" / f"ngram_{plan.score}_{train_tokens}{fraction}.json"
    if cache.is_file():
        return json.loads(cache.read_text())
    s["data"] = _data_paths([s["data"]] if isinstance(s["data"], str) else list(s["data"]))
    lines = kneser_ney(s, tok_dir, train_tokens, plan.score)
    lines["loss"] = {k: math.log(lines[k]) for k in ("unigram", "bigram", "trigram")}
    write_json(cache, lines)
    return lines


class InProcessTrainer:
    """What the trainers that run in the worker itself (no train.py, no files to write) share: nothing to prepare,
    the run's command is ``python -m eval.sweep.execute RUN``, and an arm's settings are checked against ``KEYS``."""

    name = ""  # the trainer's name in a plan (words in messages)
    KEYS: tuple[str, ...] = ()

    def arm_configs(self, plan: SweepPlan, required: str, what: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each arm's settings with the words that name it in a message (``where``), checked: every key one of
        ``KEYS`` and ``required`` present (``what`` says what it should be)."""
        for arm in plan.arms:
            cfg = plan.config_of(arm)
            where = f"{plan.path}: arms.{arm.name}"
            for key in cfg:
                if key not in self.KEYS:
                    raise UsageError(f"{where}: {key} is not {'an' if self.name[0] in 'aeiou' else 'a'} "
                                     f"{self.name} setting ({', '.join(self.KEYS)})")
            if required not in cfg:
                raise UsageError(f"{where}: no `{required}` ({what})")
            yield where, cfg

    def prepare(self, plan: SweepPlan, folder: Path) -> dict[str, str]:
        return {}

    def files(self, spec: dict[str, Any], paths: RunPaths) -> dict[str, str]:
        return {}

    def command(self, run: str, spec: dict[str, Any] | None = None) -> str:
        return shlex.join(["python", "-m", "eval.sweep.execute", run])

    def data_fingerprint(self, plan: SweepPlan) -> str | None:
        return None  # the data is generated from the seeds, or a folder the arm names


class RecallTrainer(InProcessTrainer):
    """eval.recall's MQAR: an arm's settings are ``model`` (the control ``gpt2`` or a SPEN variant name of
    modeling_spen.variants), ``width``/``layers``/``heads``, ``set`` (config fields replaced), ``task``
    (RecallTask fields) and ``recipe`` (RecallRecipe fields but ``steps`` and ``lrs``, which the sweep sets).
    A run trains at its rate, then scores the model on its seed's selection sequences (the validation number
    the rate rule reads: mean accuracy over pair counts) and on the evaluation sequences every model shares."""

    name = "recall"
    objective, lower_is_better = "selection", False
    KEYS = ("model", "width", "layers", "heads", "set", "task", "recipe")

    def check(self, plan: SweepPlan) -> None:
        for where, cfg in self.arm_configs(plan, "model", "gpt2 or a SPEN variant name"):
            for key in ("steps", "lrs"):
                if key in cfg.get("recipe", {}):
                    raise UsageError(f"{where}: recipe.{key} is set by the sweep (budgets, rate rule)")

    def run(self, spec: dict[str, Any], paths: RunPaths) -> dict[str, Any]:
        # delayed: its trainer's stack (module docstring)
        from ema_boundary.params import parameter_counts
        from eval.recall import evaluate_recall, train_recall, weights_finite
        from eval.recall_arms import describe_arm
        from eval.recall_map import build_arm

        started = time.perf_counter()
        config, task, recipe = build_arm(spec)
        seed, lr = spec["seed"], spec["lr"]
        # A run stopped part-way (a sweep run in parts) continues from its last checkpoint, in the run's folder
        # (its recorded cpu_seconds then count the part this process trained).
        model, steps = train_recall(config, task, recipe, lr, seed, progress=False, desc=spec["arm"],
                                    checkpoint=paths.file(CHECKPOINT))
        selection = evaluate_recall(model, task, recipe.select_examples, recall_selection_seed(seed))
        # Every model and seed is scored on the same evaluation sequences (the stream depends on the task only).
        accuracy = evaluate_recall(model, task, recipe.eval_examples, recall_evaluation_seed())
        counts = parameter_counts(model)
        finite = weights_finite(model)  # NaN weights score 0%, a number: the objective says it diverged (execute)
        return {"selection": sum(selection.values()) / len(selection) if finite else math.nan,
                "finite_weights": finite,
                "selection_accuracy": {str(n): a for n, a in selection.items()},
                "accuracy": {str(n): a for n, a in accuracy.items()}, "steps": steps, "chance": task.chance,
                "pairs": list(task.pairs), "queries": {str(n): n * recipe.eval_examples for n in task.pairs},
                "parameters": counts.as_dict(), "arm": describe_arm(model.config, task.seq_len),
                "seconds": time.perf_counter() - started}

    def score(self, result: dict[str, Any], split: str) -> dict[str, float]:
        return result["accuracy"] if split == "test" else result["selection_accuracy"]


# ---------------------------------------------------------------------------------------------
# arms: grammar_probe's structure experiment, one run per (arm, base seed, labelled training sentences)
# ---------------------------------------------------------------------------------------------


class ArmsTrainer(InProcessTrainer):
    """grammar_probe's structure experiment (:func:`grammar_probe.experiment.run_experiment`): one run is one arm at
    one base seed and one size, every model, every test split and every seed of the base (``s * 1000 + r`` for ``r
    < size.seeds``: its intervals bootstrap over them together). The run's budget is the labelled training
    sentences per seed. An arm's settings: ``dataset`` (a ``grammar_probe build`` folder, repository-relative),
    ``size`` (:class:`grammar_probe.protocol.RunSize` fields but ``train_sentences``, over the full preset),
    ``protocol`` (:class:`~grammar_probe.protocol.Protocol` fields: ``word_dropout``, ``unseen``), ``splits``,
    ``spcn`` (SPCNConfig fields), ``workers`` and ``threads`` (the run's own processes and threads: the numbers do
    not depend on them). The models train at the experiment's own rates: the plan's one rate names the run
    folders only. A run's result holds each paper row's values (:func:`grammar_probe.arms.row_values`) and its
    experiment folder (``results.json``, ``report.md``)."""

    name = "arms"
    objective, lower_is_better = "seconds", True  # one rate per arm (check): nothing is chosen by it
    KEYS = ("dataset", "size", "protocol", "splits", "spcn", "workers", "threads")

    def check(self, plan: SweepPlan) -> None:
        from grammar_probe.protocol import RunSize  # delayed: its trainer's stack (module docstring)
        from grammar_probe.spcn import SPCNConfig  # delayed: its trainer's stack (module docstring)

        if len(plan.rate.lr_grid) != 1 or plan.rate.extend or any(a.lr_grid and len(a.lr_grid) != 1
                                                                   for a in plan.arms):
            raise UsageError(f"{plan.path}: rate.lr_grid: one rate, not extended (grammar_probe's models train at "
                             "their own rates; the rate names the run folders only)")
        if len(plan.seeds) != 1 or any(a.seeds and len(a.seeds) != 1 for a in plan.arms):
            raise UsageError(f"{plan.path}: seeds: one base seed (its experiment runs size.seeds seeds, "
                             "s * 1000 + r)")
        fields = {"size": {f.name for f in dataclasses.fields(RunSize)} - {"train_sentences"},
                  "protocol": {"word_dropout", "unseen"}, "spcn": {f.name for f in dataclasses.fields(SPCNConfig)}}
        for where, cfg in self.arm_configs(plan, "dataset", "a folder of `python -m grammar_probe build`"):
            for key, known in fields.items():
                extra = sorted(set(cfg.get(key) or {}) - known)
                if extra:
                    why = " (the budgets are the training sentences)" if extra == ["train_sentences"] else ""
                    raise UsageError(f"{where}: {key}.{extra[0]} is not a field of {key} ({', '.join(sorted(known))})"
                                     + why)

    @staticmethod
    def build(spec: dict[str, Any]) -> tuple[Any, Any, Any]:
        """The run's RunSize (its budget: the training sentences), Protocol and SPCNConfig."""
        from grammar_probe.protocol import FULL, PROTOCOL  # delayed: its trainer's stack (module docstring)
        from grammar_probe.spcn import SPCNConfig  # delayed: its trainer's stack (module docstring)

        cfg = spec["config"]
        size = dataclasses.replace(FULL, **(cfg.get("size") or {}), train_sentences=spec["steps"])
        protocol = dataclasses.replace(PROTOCOL, **(cfg.get("protocol") or {}))
        spcn = {k: tuple(v) if isinstance(v, list) else v for k, v in (cfg.get("spcn") or {}).items()}
        return size, protocol, SPCNConfig(**spcn)

    def run(self, spec: dict[str, Any], paths: RunPaths) -> dict[str, Any]:
        from grammar_probe.arms import row_values  # delayed: its trainer's stack (module docstring)
        from grammar_probe.experiment import run_experiment  # delayed: its trainer's stack (module docstring)

        started = time.perf_counter()
        cfg = spec["config"]
        size, protocol, spcn = self.build(spec)
        out = paths.file("experiment")
        # overwrite: a run that wrote its experiment but not its result.json trains again into its own folder
        results = run_experiment(in_repo(cfg["dataset"]), out, seed=spec["seed"], splits=cfg.get("splits"),
                                 spcn_config=spcn, threads=cfg.get("threads", 1), progress=False, size=size,
                                 workers=cfg.get("workers", 1), overwrite=True, protocol=protocol)
        return {"rows": row_values(results), "seeds": results["seeds"], "train_sentences": size.train_sentences,
                "protocol": results["protocol"], "size": results["size"],
                "train_subsets_disjoint": results["train_subsets_disjoint"],
                "experiment": paths.relative("experiment"),
                "seconds": time.perf_counter() - started}

    def score(self, result: dict[str, Any], split: str) -> dict[str, float]:
        """SPCN's value of each paper row (its interval and verdict are in the result's ``rows``)."""
        return {row: r["models"]["spcn"]["value"]["mean"] for row, r in result["rows"].items() if row != "ratios"}


TRAINERS: dict[str, Any] = {"train": TrainTrainer(), "recall": RecallTrainer(), "arms": ArmsTrainer()}

__all__ = ["ArmsTrainer", "RecallTrainer", "TRAINERS", "TrainTrainer", "model_config", "ngram_lines", "train_settings"]
