"""Running the content probes: identity at lag on trained weights, the recall map on architectures.

:func:`run_content_probes` takes checked models (:mod:`eval.probes.models`), a probe text and
:class:`ProbeSettings`, runs both probes and writes ``content_probes.json``, ``content_probes.md`` and the
figures (:mod:`eval.probes.render`) into an output folder, all at once at the end.

* **Identity at lag** (:mod:`eval.probes.identity`) runs on models with trained weights and a tokenizer,
  on the probe text tokenized by each model's own tokenizer.
* **Associative recall, the map** (:mod:`eval.recall`, Zoology's MQAR) runs on the architecture: a fresh
  model of each config (vocabulary resized to the task's) is trained with one recipe for every model, a
  learning-rate grid declared in advance, the rate chosen on held-out sequences and the chosen model
  scored on others, per pair count. The GPT-2 architecture is the positive control: attention solves
  MQAR, so under a recipe where it reaches 95% at 16 pairs a model that fails fails for its architecture.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import transformers
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from ema_boundary.corpus import EMBEDDED_PYDOC, embedded_documents
from ema_boundary.io import atomic_dir, check_output_dir, write_json, write_text
from ema_boundary.usage import UsageError, first_line
from eval import recall as mqar
from eval.probes.identity import identity_at_lag
from eval.probes.models import TOKENIZER_FILES, ModelError, ModelSpec, load_causal_lm, make_spec, resolve_model
from eval.probes.render import find_control, render_content_probes_figures, render_content_probes_markdown
from eval.recall_arms import escape_comparison

__all__ = ["TOOL", "ProbeInputError", "ProbeSettings", "cap_steps", "check_recall", "default_map_models",
           "identity_inputs", "probe_ids", "probe_text", "run_content_probes"]

TOOL = "eval.probes"  # whose output folder this is (ema_boundary.io's marker)


class ProbeInputError(UsageError):
    """Probe input that cannot be used: one line; nothing written. ``field`` names the argument of
    :func:`run_content_probes` or :class:`ProbeSettings` it is about (a command line names its flag)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _positive_int(owner: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ProbeInputError(f"{owner}.{name} must be a positive integer, got {value!r}", name)


@dataclass
class ProbeSettings:
    """What both probes run with, checked once when made (a bad field is one line naming it).

    ``max_lag``, ``seq_len``, ``num_sequences``, ``num_classes``: identity at lag (lags 1..max_lag, at most
    seq_len - 1, on num_sequences sequences of seq_len tokens, the num_classes most frequent tokens as
    targets). ``task`` and ``recipe``: the recall map (:mod:`eval.recall`; its defaults are the measured
    ones, docs/notes/issue14-phase1.md). ``seed``: the recall models' initialisation and examples;
    ``recall_seeds``: the map's seeds when it runs over several (None: ``seed`` alone). Each seed chooses its
    own learning rate on its own held-out sequences.
    """

    max_lag: int = 64
    seq_len: int = 192
    num_sequences: int = 48
    num_classes: int = 32
    task: mqar.RecallTask = field(default_factory=mqar.RecallTask)
    recipe: mqar.RecallRecipe = field(default_factory=mqar.RecallRecipe)
    seed: int = 0
    recall_seeds: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in ("max_lag", "seq_len", "num_sequences", "num_classes"):
            _positive_int("ProbeSettings", name, getattr(self, name))
        if self.seq_len < 2:
            raise ProbeInputError(f"ProbeSettings.seq_len must be at least 2 (lag 1 needs a previous token), "
                                  f"got {self.seq_len}", "seq_len")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ProbeInputError(f"ProbeSettings.seed must be a non-negative integer, got {self.seed!r}", "seed")
        if self.recall_seeds is not None:
            try:
                self.recall_seeds = mqar.check_seeds(self.recall_seeds)
            except (ValueError, TypeError) as e:
                raise ProbeInputError(f"ProbeSettings.recall_{first_line(e)}", "recall_seeds") from None
        if not isinstance(self.task, mqar.RecallTask):
            raise ProbeInputError(f"ProbeSettings.task must be an eval.recall.RecallTask, got {self.task!r}", "task")
        if not isinstance(self.recipe, mqar.RecallRecipe):
            raise ProbeInputError(f"ProbeSettings.recipe must be an eval.recall.RecallRecipe, got {self.recipe!r}",
                                  "recipe")

    @classmethod
    def quick(cls, seed: int = 0) -> ProbeSettings:
        """Shorter lags and fewer sequences; recall on 2/4/8 pairs with ``RecallRecipe.quick()`` (one
        rate, 1,200 steps at most: the GPT-2 architecture solves it in ~900). A smoke test: the map's
        claim is at 16 pairs."""
        return cls(max_lag=32, seq_len=96, num_sequences=32, task=mqar.RecallTask(pairs=(2, 4, 8)),
                   recipe=mqar.RecallRecipe.quick(), seed=seed)

    @classmethod
    def make(cls, *, quick: bool = False, seed: int = 0, recall_pairs: Sequence[int] | None = None,
             recall_lrs: Sequence[float] | None = None, recall_steps: int | None = None,
             recall_seeds: Sequence[int] | None = None) -> ProbeSettings:
        """The default (or ``quick``) settings with the recall task's pair counts, the recipe's rate grid, its
        step cap and the map's seeds replaced where given; a bad value raises :class:`ProbeInputError` naming
        the field."""
        settings = cls.quick(seed) if quick else cls(seed=seed)
        if recall_seeds is not None:
            settings = replace(settings, recall_seeds=tuple(recall_seeds))
        try:
            if recall_pairs is not None:
                settings = replace(settings, task=replace(settings.task, pairs=tuple(recall_pairs)))
        except ValueError as e:
            raise ProbeInputError(str(e), "recall_pairs") from None
        try:
            if recall_lrs is not None:
                settings = replace(settings, recipe=replace(settings.recipe, lrs=tuple(recall_lrs)))
        except ValueError as e:
            raise ProbeInputError(str(e), "recall_lrs") from None
        if recall_steps is not None:
            _positive_int("ProbeSettings", "recall_steps", recall_steps)
            try:
                settings = replace(settings, recipe=cap_steps(settings.recipe, recall_steps))
            except ValueError as e:
                raise ProbeInputError(str(e), "recall_steps") from None
        return settings

    @property
    def recall_steps(self) -> int:
        return self.recipe.steps

    @property
    def seeds(self) -> tuple[int, ...]:
        """The recall map's seeds."""
        return self.recall_seeds or (self.seed,)

    def identity_dict(self) -> dict[str, int]:
        return {"max_lag": min(self.max_lag, self.seq_len - 1), "seq_len": self.seq_len,
                "num_sequences": self.num_sequences, "num_classes": self.num_classes}


def cap_steps(recipe: mqar.RecallRecipe, steps: int) -> mqar.RecallRecipe:
    """``recipe`` with at most ``steps`` optimizer steps per rate (warmup cut to fit)."""
    return replace(recipe, steps=steps, warmup_steps=min(recipe.warmup_steps, steps - 1))


def default_map_models(width: int = 64) -> list[ModelSpec]:
    """The map of issue 14 as configs: the GPT-2 architecture (the positive control) and every SPEN variant
    of :func:`eval.recall.default_map_configs` (``modeling_spen.variants``), all at width ``width``."""
    where = f"eval.recall.default_map_configs(width={width})"
    return [make_spec(name, "config", where, config, identity_skip="no trained weights (a --config architecture)")
            for name, config in mqar.default_map_configs(width=width).items()]


def check_recall(spec: ModelSpec, trust_remote_code: bool = False) -> None:
    """Fail now, not after other models trained, if the recall task's copy of ``spec`` (its vocabulary and
    positions resized to the task's) does not build."""
    try:
        with torch.device("meta"):
            AutoModelForCausalLM.from_config(mqar.task_config(spec.config, mqar.RecallTask(), True),
                                             trust_remote_code=trust_remote_code)
    except Exception as e:
        raise ModelError(spec.location, f"the config does not build a causal LM for the recall task "
                                        f"({first_line(e, 200)})") from None


def probe_text(path: str | os.PathLike | None = None) -> str:
    """The identity probe's text: a UTF-8 file, or (None) Python's help topics of the embedded corpus."""
    if path is None:
        return "\n\n".join(embedded_documents(EMBEDDED_PYDOC))
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProbeInputError(f"{path}: no such file", "text") from None
    except IsADirectoryError:
        raise ProbeInputError(f"{path}: a folder, not a text file", "text") from None
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not UTF-8 text", "text") from None


def probe_ids(tokenizer: Any, text: str, settings: ProbeSettings, vocab_size: int | None = None,
              where: str = "the tokenizer", max_positions: int | None = None) -> torch.Tensor:
    """The probe text as ``(N, L)`` token ids (at most ``num_sequences`` rows), ``L`` the settings' ``seq_len``
    or the model's position table (``max_positions``), whichever is shorter: a learned position table has no
    row for a position past its end."""
    seq_len = min(settings.seq_len, max_positions) if max_positions else settings.seq_len
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids[0]
    n = min(settings.num_sequences, ids.numel() // seq_len)
    if n < 2:
        raise ModelError(where, f"the probe text is too short: {ids.numel()} tokens, need {2 * seq_len}")
    if vocab_size is not None and int(ids.max()) >= vocab_size:
        raise ModelError(where, f"token id {int(ids.max())} is outside the model's vocabulary ({vocab_size})")
    return ids[: n * seq_len].view(n, seq_len)


def max_positions(config: Any) -> int | None:
    """The longest sequence a model's learned position table covers (None: no such table, e.g. SPEN's traces)."""
    if getattr(config, "model_type", None) == "spen":  # it records max_position_embeddings but reads no table
        return None
    for name in mqar.POSITION_FIELDS:  # the names the recall task grows, under any architecture's spelling
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def identity_inputs(specs: Sequence[ModelSpec], text: str, settings: ProbeSettings,
                    trust_remote_code: bool = False) -> dict[str, torch.Tensor]:
    """The probe text tokenized by each model's own tokenizer (models with a reason to skip left out).

    A checkpoint without any tokenizer file gets ``identity_skip`` set (its recall still runs); a
    tokenizer that is there but does not load is bad input."""
    ids: dict[str, torch.Tensor] = {}
    for spec in specs:
        if spec.identity_skip is not None:
            continue
        if spec.source == "folder" and not any((Path(spec.location) / f).is_file() for f in TOKENIZER_FILES):
            spec.identity_skip = f"no tokenizer in {spec.location} (identity at lag tokenizes the probe text)"
            continue
        try:
            tokenizer = AutoTokenizer.from_pretrained(spec.location, trust_remote_code=trust_remote_code)
        except Exception as e:
            if spec.source == "hub":
                spec.identity_skip = f"no tokenizer available for {spec.location} ({first_line(e, 200)})"
                continue
            raise ModelError(spec.location, f"the tokenizer does not load ({first_line(e, 200)})") from None
        ids[spec.name] = probe_ids(tokenizer, text, settings, getattr(spec.config, "vocab_size", None),
                                   spec.location, max_positions(spec.config))
    return ids


def _load_trained(spec: ModelSpec, trust_remote_code: bool) -> torch.nn.Module:
    # float32 whatever dtype it was saved in: the probe's least squares want the precision. Weights that do not
    # fit their config.json are refused (ModelError naming the folder), not probed as a half-random model.
    return load_causal_lm(spec.location, dtype=torch.float32, trust_remote_code=trust_remote_code)


def _select(names: Sequence[str], which: bool | Collection[str], field: str) -> list[str]:
    if which is True:
        return list(names)
    if which is False:
        return []
    unknown = [n for n in which if n not in names]
    if unknown:
        raise ProbeInputError(f"{unknown[0]}: no such model (models: {', '.join(names)})", field)
    return [n for n in names if n in which]


def run_content_probes(
    models: Sequence[ModelSpec] | Mapping[str, str | Path],
    text: str,
    out_dir: str | Path,
    settings: ProbeSettings | None = None,
    identity: bool | Collection[str] = True,
    recall: bool | Collection[str] = True,
    workers: int = 1,
    threads: int = 1,
    control: str | None = None,
    trust_remote_code: bool = False,
    progress: bool | None = None,
    overwrite: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    """Run the probes on ``models`` and write ``out_dir`` (JSON, markdown, PNGs) atomically at the end.

    Args:
        models: checked :class:`~eval.probes.models.ModelSpec` s, or ``name -> checkpoint folder``.
        text: the identity probe's text (:func:`probe_text`).
        identity, recall: which models each probe runs on (True: all that can; a collection of names).
            Identity at lag runs only on models with trained weights and a tokenizer.
        workers, threads: recall models train in ``workers`` processes of ``threads`` torch threads.
        device: where the recall models train (``"cpu"``, ``"cuda"``); identity at lag runs on the CPU.
        control: the positive control's name (default: the first GPT-2-architecture model with recall).
        overwrite: replace an earlier output of this tool in ``out_dir`` (a folder that is not one is
            never replaced).

    Returns the content of ``content_probes.json``. Bad input raises :class:`ProbeInputError` or
    :class:`~eval.probes.models.ModelError` before any probe runs.
    """
    settings = settings or ProbeSettings()
    check_device(device)
    check_output_dir(out_dir, tool=TOOL, overwrite=overwrite)  # before minutes of probing, not after
    specs = (list(models) if not isinstance(models, Mapping)
             else [resolve_model(f"{name}={path}", trust_remote_code=trust_remote_code)
                   for name, path in models.items()])
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ProbeInputError(f"model name {dup!r} given twice: name them with NAME=...", "models")
    by_name = {s.name: s for s in specs}
    for_identity = _select(names, identity, "identity")
    for_recall = _select(names, recall, "recall")
    if not for_identity and not for_recall:
        raise ProbeInputError("nothing to run: every model is left out of both probes", "models")
    if control is not None and control not in for_recall:
        raise ProbeInputError(f"{control}: not among the models whose recall runs ({', '.join(for_recall)})",
                              "control")
    for name in for_recall:
        check_recall(by_name[name], trust_remote_code)
    ids = identity_inputs([by_name[n] for n in for_identity], text, settings, trust_remote_code)

    started = time.time()
    results: dict[str, Any] = {
        "models": {s.name: s.describe() for s in specs},
        "identity_settings": settings.identity_dict(),
        "identity_at_lag": {},
        "recall": {},
        "recall_settings": None,
        "positive_control": None,
        "recall_escape": None,
        "seed": settings.seed,
    }
    for name in tqdm(list(ids), desc="identity at lag", unit="model", disable=progress is False or not ids):
        model = _load_trained(by_name[name], trust_remote_code)
        max_lag = min(settings.identity_dict()["max_lag"], ids[name].shape[1] - 1)  # a shorter position table
        results["identity_at_lag"][name] = identity_at_lag(model, ids[name], max_lag, settings.num_classes)
        results["models"][name]["identity_seq_len"] = ids[name].shape[1]
        del model
    for spec in specs:
        info = results["models"][spec.name]
        info["identity_at_lag"] = "ran" if spec.name in ids else (spec.identity_skip or "not asked for")
        info["recall"] = "ran" if spec.name in for_recall else "not asked for"
    if for_recall:
        result = mqar.recall_map({n: by_name[n].config for n in for_recall}, settings.task, settings.recipe,
                                 settings.seed, progress, workers=workers, threads=threads,
                                 trust_remote_code=trust_remote_code, seeds=settings.seeds, device=device)
        results["recall"] = result["models"]
        results["recall_settings"] = {"task": result["task"], "recipe": result["recipe"], "seed": result["seed"],
                                      "seeds": result["seeds"], "chance": result["chance"],
                                      "rate_selection": "per seed, on that seed's held-out selection sequences"}
        results["positive_control"] = control or find_control(results["models"], results["recall"])
        results["recall_escape"] = escape_comparison(results["recall"], results["positive_control"])
    results["seconds"] = time.time() - started
    results["environment"] = {**_environment(workers, threads), "device": device}
    with atomic_dir(Path(out_dir), tool=TOOL, overwrite=overwrite) as tmp:
        write_json(tmp / "content_probes.json", results)
        write_text(tmp / "content_probes.md", render_content_probes_markdown(results))
        render_content_probes_figures(results, tmp)
    return results


def check_device(device: str) -> None:
    """``device`` names a torch device this machine has (``cpu``, ``cuda``, ``cuda:N``), else ProbeInputError."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ProbeInputError(f"device {device!r} is not a torch device (cpu, cuda, cuda:N)", "device") from None
    if dev.type == "cuda" and (not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count()):
        raise ProbeInputError(f"device {device!r}: this machine has no such CUDA device", "device")
    if dev.type not in ("cpu", "cuda"):
        raise ProbeInputError(f"device {device!r}: only cpu and cuda are supported", "device")


def _environment(workers: int, threads: int) -> dict[str, Any]:
    try:
        load = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        load = None
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count(), "workers": workers,
            "threads": threads, "load_average_at_end": load}
