"""Content probes: what a causal language model keeps of *which* tokens it has seen.

Two probes, both about token identity (content), not structure:

* **Identity at lag** (:func:`identity_at_lag`), on trained weights. From the hidden state at
  position t (every layer), a linear probe (a ridge-regression classifier, one per lag) predicts
  the token at t - k, for k = 1..K. Targets are the ``num_classes`` most frequent tokens of the
  probe text, so that every class has enough examples; the probe is fit on 80% of the sequences and
  scored on the rest. Chance is the frequency of the most common class. A fixed-decay EMA blurs
  identity with lag; attention need not copy it into the residual stream at all (its memory is the
  key/value cache), which is why the second probe exists.

* **Associative recall, the map** (:mod:`eval.recall`, Zoology's MQAR), on the architecture. A fresh
  model of each config (vocabulary resized to the task's) is trained with one recipe for every
  model, a learning-rate grid declared in advance, the rate chosen on held-out sequences and the
  chosen model scored on others, per pair count. The GPT-2 architecture is the positive control:
  attention solves MQAR, so under a recipe where it reaches 95% at 16 pairs a model that fails fails
  for its architecture.

Any Hugging Face causal LM can be mapped::

    python -m eval.content_probes --model outputs/spen-tiny/final --model gpt2 \\
        --config hub_configs/gpt2-tiny --config mamba=my/mamba/config.json --out DIR

What each input kind gets:

================  ==========================================  ========================================
input             identity at lag                             recall
================  ==========================================  ========================================
``--model DIR``   its weights and tokenizer (skipped, with    a fresh model of its config.json
(checkpoint)      the reason, if the folder has no tokenizer)
``--model NAME``  the same, from the hub (or its cache         a fresh model of its config
(hub)             offline)
``--config P``    skipped: no trained weights (train with     a fresh model of the config
                  train.py, then pass ``--model final/``)
================  ==========================================  ========================================

Writes ``DIR/content_probes.json`` (schema in docs/evaluation.md), ``content_probes.md``
(:func:`render_content_probes_markdown`) and the PNGs of :func:`render_content_probes_figures`,
all at once at the end (nothing is written if anything fails). Bad input -- a missing folder, a
config.json that is not JSON, a truncated ``model.safetensors``, a config that is not a causal LM, a
hub name that cannot be reached -- is one line naming it, exit status 2, before any training.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser, looks_like_path, positive_int
from ema_boundary.figures import pyplot, save
from ema_boundary.io import atomic_dir, check_output_dir, write_json, write_text

# The recall task and recipe live in eval.recall; used through the module so that this one does not
# re-export them (scripts pinned to the old teacher-forced RecallTask of this module then fail loudly).
from eval import recall as mqar

PROG = "python -m eval.content_probes"
SOURCES = ("folder", "hub", "config")
# Issue 14's bar for the positive control, at the pair count the claim is about.
CONTROL_BAR = 0.95
CONTROL_PAIRS = 16
# A model that copies some value of the context without matching its key scores 1/n at n pairs; a
# model counts as reading identity beyond that when it clears it by this much (declared, not tuned).
ABOVE_COPYING = 0.10
# The identity table's lags (and the figure's ticks).
LAG_MARKS = (1, 2, 4, 8, 16, 32, 64)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")


class ProbeInputError(UsageError):
    """A model, config, text or flag the probes cannot use: one line naming it; nothing written."""


# ---------------------------------------------------------------------------------------------
# Identity at lag
# ---------------------------------------------------------------------------------------------


def fit_lag_probes(
    features: torch.Tensor,
    tokens: torch.Tensor,
    lags: Sequence[int],
    num_classes: int = 32,
    ridge: float = 1.0,
) -> dict[str, list[float]]:
    """Fit one linear probe per lag on ``features`` to predict ``tokens`` at t - lag.

    The probe is a ridge-regression classifier (least squares onto one-hot targets, argmax to
    predict; as scikit-learn's RidgeClassifier): linear, solved in closed form, deterministic, and
    cheap enough to fit 64 lags x every layer on a CPU.

    Args:
        features: ``(N, T, D)`` hidden states of N sequences.
        tokens: ``(N, T)`` the token ids of the same sequences.
        lags: the lags k >= 0 to probe (position t predicts ``tokens[:, t - k]``).
        num_classes: probe targets are the most frequent token ids of ``tokens``; positions whose
            target is another token are left out.
        ridge: L2 penalty on the standardised features.

    Returns:
        ``{"accuracy": [...], "chance": [...]}``, one entry per lag, on held-out sequences
        (the last 20% of the N sequences); chance is the majority class of the fitting set.
    """
    if features.dim() != 3 or tokens.shape != features.shape[:2]:
        raise ValueError(
            f"features (N, T, D) and tokens (N, T) disagree: {tuple(features.shape)}, {tuple(tokens.shape)}"
        )
    N, T, D = features.shape
    kmax = max(lags)
    if kmax >= T:
        raise ValueError(f"largest lag {kmax} needs sequences longer than {T}")
    n_train = max(1, int(round(0.8 * N)))
    if n_train >= N:
        raise ValueError("need at least 2 sequences to hold some out")
    classes = torch.bincount(tokens.flatten()).argsort(descending=True)[:num_classes]
    to_class = torch.full((int(tokens.max()) + 1,), -1, dtype=torch.long)
    to_class[classes] = torch.arange(len(classes))

    # Positions t >= kmax so that every lag has a target; features standardised per channel.
    x = features[:, kmax:].double()
    mean, std = x[:n_train].reshape(-1, D).mean(0), x[:n_train].reshape(-1, D).std(0) + 1e-6
    x = torch.cat([(x - mean) / std, torch.ones_like(x[..., :1])], -1)  # bias column
    xtr, xte = x[:n_train].reshape(-1, D + 1), x[n_train:].reshape(-1, D + 1)
    penalty = ridge * torch.eye(D + 1, dtype=x.dtype)
    penalty[-1, -1] = 0.0  # the bias is not penalised
    accuracy, chance = [], []
    for k in lags:
        y = to_class[tokens[:, kmax - k : T - k]]
        ytr, yte = y[:n_train].reshape(-1), y[n_train:].reshape(-1)
        keep_tr, keep_te = ytr >= 0, yte >= 0
        a, target = xtr[keep_tr], F.one_hot(ytr[keep_tr], len(classes)).double()
        weights = torch.linalg.solve(a.T @ a + penalty, a.T @ target)
        pred = (xte[keep_te] @ weights).argmax(-1)
        accuracy.append(float((pred == yte[keep_te]).double().mean()) if keep_te.any() else float("nan"))
        counts = torch.bincount(ytr[keep_tr], minlength=len(classes))
        chance.append(float(counts.max() / counts.sum()))
    return {"accuracy": accuracy, "chance": chance}


def _layer_states(model: torch.nn.Module, out: Any) -> list[torch.Tensor]:
    """The per-layer hidden states of a forward output, however the architecture returns them: a
    tuple (transformers' convention: embeddings first), or one stacked ``(layers, B, T, D)`` tensor."""
    states = getattr(out, "hidden_states", None)
    if isinstance(states, torch.Tensor):
        states = list(states.unbind(0)) if states.dim() == 4 else [states]
    if not states:
        raise ProbeInputError(f"{type(model).__name__} returns no hidden_states with output_hidden_states=True: "
                              "identity at lag needs them")
    return list(states)


@torch.no_grad()
def hidden_states(model: torch.nn.Module, ids: torch.Tensor, batch_size: int = 8) -> list[torch.Tensor]:
    """Hidden states of every layer (embeddings first) for ``ids`` ``(N, T)``: a list of ``(N, T, D)``."""
    model.eval()
    per_layer: list[list[torch.Tensor]] = []
    for start in range(0, ids.shape[0], batch_size):
        out = model(input_ids=ids[start : start + batch_size], output_hidden_states=True, use_cache=False)
        states = _layer_states(model, out)
        if not per_layer:
            per_layer = [[] for _ in states]
        for i, h in enumerate(states):
            per_layer[i].append(h.float())
    return [torch.cat(chunks) for chunks in per_layer]


def identity_at_lag(model: torch.nn.Module, ids: torch.Tensor, max_lag: int = 64, num_classes: int = 32) -> dict:
    """Probe every layer of ``model`` on ``ids`` ``(N, T)`` for the token at lags 1..max_lag.

    Returns ``{"lags", "layers": {layer: {"accuracy", "chance"}}, "best", "chance"}``: ``best`` is the
    best layer at each lag (what is recoverable anywhere in the model), ``chance`` the majority class.
    """
    lags = list(range(1, max_lag + 1))
    layers = hidden_states(model, ids)
    result: dict[str, Any] = {"lags": lags, "layers": {}}
    for i, feats in enumerate(layers):
        result["layers"][str(i)] = fit_lag_probes(feats, ids, lags, num_classes=num_classes)
    accs = torch.tensor([result["layers"][k]["accuracy"] for k in result["layers"]])
    result["best"] = accs.nan_to_num(-1).max(0).values.tolist()
    result["chance"] = result["layers"]["0"]["chance"]
    return result


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------


@dataclass
class ProbeSettings:
    """What both probes run with. The recall task and recipe are :mod:`eval.recall`'s (its defaults
    are the measured ones, docs/notes/issue14-phase1.md); ``recall_steps`` is the recipe's cap."""

    max_lag: int = 64
    seq_len: int = 192
    num_sequences: int = 48
    num_classes: int = 32
    task: mqar.RecallTask = field(default_factory=mqar.RecallTask)
    recipe: mqar.RecallRecipe = field(default_factory=mqar.RecallRecipe)
    seed: int = 0

    @classmethod
    def quick(cls) -> ProbeSettings:
        """Shorter lags and fewer sequences; recall on 2/4/8 pairs with ``RecallRecipe.quick()`` (one
        rate, 1,200 steps at most: the GPT-2 architecture solves it in ~900). A smoke test: the map's
        claim is at 16 pairs."""
        return cls(max_lag=32, seq_len=96, num_sequences=32, task=mqar.RecallTask(pairs=(2, 4, 8)),
                   recipe=mqar.RecallRecipe.quick())

    @property
    def recall_steps(self) -> int:
        return self.recipe.steps

    def identity_dict(self) -> dict[str, int]:
        return {"max_lag": min(self.max_lag, self.seq_len - 1), "seq_len": self.seq_len,
                "num_sequences": self.num_sequences, "num_classes": self.num_classes}


def cap_steps(recipe: mqar.RecallRecipe, steps: int) -> mqar.RecallRecipe:
    """``recipe`` with at most ``steps`` optimizer steps per rate (warmup cut to fit)."""
    return replace(recipe, steps=steps, warmup_steps=min(recipe.warmup_steps, steps - 1))


# ---------------------------------------------------------------------------------------------
# Models: a checkpoint folder, a hub name or a config
# ---------------------------------------------------------------------------------------------


@dataclass
class ModelSpec:
    """One model to map, validated: where it comes from and what each probe can do with it.

    ``source`` is "folder" (a ``save_pretrained`` checkpoint), "hub" (a hub name, online or from the
    cache) or "config" (an architecture only). ``identity_skip`` says why identity at lag does not
    run on it (None: it can).
    """

    name: str
    source: str
    location: str
    config: Any  # transformers.PretrainedConfig
    parameters: int
    identity_skip: str | None = None

    @property
    def model_type(self) -> str:
        return str(getattr(self.config, "model_type", "?"))

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"source": self.source, "location": self.location, "model_type": self.model_type,
                                "architectures": getattr(self.config, "architectures", None),
                                "parameters": self.parameters}
        if self.model_type == "spen":  # the map's readers and traces are told apart by these
            info["spen"] = {k: getattr(self.config, k) for k in ("predictor", "predictor_scope", "trace")}
        return info


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else type(err).__name__)[:200]


def _split_name(spec: str, flag: str) -> tuple[str | None, str]:
    """``NAME=WHERE`` or ``WHERE`` (a path that exists is never split, even if it holds '=')."""
    if os.path.exists(spec) or "=" not in spec:
        return None, spec
    name, where = spec.split("=", 1)
    if not name or not where:
        raise ProbeInputError(f"{flag} {spec}: give NAME=PATH_OR_NAME or PATH_OR_NAME")
    return name, where


def _read_config_json(path: Path, flag: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ProbeInputError(f"{flag} {path}: not a text file (a config.json is JSON)") from None
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{flag} {path}: not valid JSON (line {e.lineno}: {e.msg})") from None
    except OSError as e:
        raise ProbeInputError(f"{flag} {path}: cannot read ({e.strerror})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise ProbeInputError(f"{flag} {path}: no model_type field, so no architecture to build")
    return data


def _load_config(where: str, flag: str, trust_remote_code: bool) -> Any:
    from transformers import AutoConfig

    import modeling_spen  # noqa: F401  registers SPEN with the Auto classes

    try:
        return AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
    except Exception as e:  # unknown model_type, bad field values, remote code refused: all one line
        raise ProbeInputError(f"{flag} {where}: the config does not load ({_one_line(e)})") from None


def _count_parameters(config: Any, where: str, flag: str, trust_remote_code: bool) -> int:
    """Parameters of the causal LM ``config`` defines, built on the meta device (no memory, no time);
    also the check that it is a causal LM at all, and that the recall task's copy of it builds."""
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoModelForCausalLM

    auto_map = getattr(config, "auto_map", None) or {}
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING and "AutoModelForCausalLM" not in auto_map:
        raise ProbeInputError(f"{flag} {where}: model_type {getattr(config, 'model_type', '?')!r} is not a causal "
                              "language model (no AutoModelForCausalLM class)")
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
            AutoModelForCausalLM.from_config(mqar.task_config(config, mqar.RecallTask(), True),
                                             trust_remote_code=trust_remote_code)
    except Exception as e:
        raise ProbeInputError(f"{flag} {where}: the config does not build a causal LM ({_one_line(e)})") from None
    return sum(p.numel() for p in model.parameters())


def _check_weights(folder: Path, flag: str) -> None:
    """Fail now, in one line naming the file, on missing or broken weights rather than after minutes
    of probing: safetensors headers are read (cheap) and checked against each file's size."""
    present = [f for f in WEIGHT_FILES if (folder / f).is_file()]
    if not present:
        raise ProbeInputError(f"{flag} {folder}: no weights ({' or '.join(WEIGHT_FILES[::2])}); "
                              f"for the architecture alone use --config {folder}")
    from safetensors import safe_open

    shards: list[Path] = []
    if "model.safetensors" in present:
        shards = [folder / "model.safetensors"]
    elif "model.safetensors.index.json" in present:
        index = folder / "model.safetensors.index.json"
        try:
            shards = [folder / s for s in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
        except (ValueError, KeyError, AttributeError, TypeError):
            raise ProbeInputError(f"{flag} {index}: not a safetensors index (JSON with a weight_map)") from None
    for shard in shards:
        try:
            with safe_open(str(shard), framework="pt"):
                pass
        except Exception as e:  # SafetensorError (truncated, corrupt), FileNotFoundError
            raise ProbeInputError(f"{flag} {shard}: unreadable weights ({_one_line(e)})") from None


def resolve_model(spec: str, flag: str = "--model", trust_remote_code: bool = False) -> ModelSpec:
    """A trained model, ``[NAME=]FOLDER_OR_HUB_NAME``: validated (config, weights), not yet loaded."""
    name, where = _split_name(spec, flag)
    path = Path(where).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ProbeInputError(f"{flag} {where}: a file, not a checkpoint folder (a config.json goes to --config)")
        if not (path / "config.json").is_file():
            raise ProbeInputError(f"{flag} {where}: not a checkpoint folder (no config.json)")
        _read_config_json(path / "config.json", flag)
        _check_weights(path, flag)
        config = _load_config(str(path), flag, trust_remote_code)
        default = path.resolve().parent.name if path.resolve().name == "final" else path.resolve().name
        return ModelSpec(name or default, "folder", str(path), config,
                         _count_parameters(config, str(path), flag, trust_remote_code))
    if looks_like_path(where):
        raise ProbeInputError(f"{flag} {where}: no such folder")
    from transformers import AutoConfig

    import modeling_spen  # noqa: F401

    try:  # offline, this succeeds only from the local cache; it fails fast either way
        config = AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
    except Exception as e:  # OSError, ValueError, hub and network errors: all mean "cannot get it"
        raise ProbeInputError(f"{flag} {where}: not a local folder and not available from the hub "
                              f"({_one_line(e)})") from None
    return ModelSpec(name or where, "hub", where, config, _count_parameters(config, where, flag, trust_remote_code))


def resolve_config(spec: str, flag: str = "--config", trust_remote_code: bool = False) -> ModelSpec:
    """An architecture only, ``[NAME=]PATH`` to a config.json or a folder holding one."""
    name, where = _split_name(spec, flag)
    path = Path(where).expanduser()
    if path.is_dir():
        file = path / "config.json"
        if not file.is_file():
            raise ProbeInputError(f"{flag} {where}: no config.json in this folder")
        default = path.resolve().name
    elif path.is_file():
        file, default = path, (path.resolve().parent.name if path.name == "config.json" else path.stem)
    else:
        raise ProbeInputError(f"{flag} {where}: no such file or folder")
    _read_config_json(file, flag)
    config = _load_config(str(file), flag, trust_remote_code)
    return ModelSpec(name or default, "config", str(path), config,
                     _count_parameters(config, str(file), flag, trust_remote_code),
                     identity_skip="no trained weights (a --config architecture): train it with train.py "
                                   "and pass the folder with --model")


def default_map_models(width: int = 64) -> list[ModelSpec]:
    """The map of issue 14 as configs: the GPT-2 architecture (the positive control) and the eight SPEN
    readers and traces of :func:`eval.recall.default_map_configs`, all at width ``width``."""
    where = f"eval.recall.default_map_configs(width={width})"
    return [ModelSpec(name, "config", where, config, _count_parameters(config, where, "--default-map", False),
                      identity_skip="no trained weights (a --config architecture)")
            for name, config in mqar.default_map_configs(width=width).items()]


# ---------------------------------------------------------------------------------------------
# Running both probes
# ---------------------------------------------------------------------------------------------


def probe_ids(tokenizer: Any, text: str, settings: ProbeSettings, vocab_size: int | None = None,
              where: str = "the tokenizer") -> torch.Tensor:
    """The probe text as ``(N, seq_len)`` token ids (at most ``num_sequences`` rows)."""
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids[0]
    n = min(settings.num_sequences, ids.numel() // settings.seq_len)
    if n < 2:
        raise ProbeInputError(f"probe text too short for {where}: {ids.numel()} tokens, "
                              f"need {2 * settings.seq_len}")
    if vocab_size is not None and int(ids.max()) >= vocab_size:
        raise ProbeInputError(f"{where}: token id {int(ids.max())} is outside the model's vocabulary ({vocab_size})")
    return ids[: n * settings.seq_len].view(n, settings.seq_len)


def identity_inputs(specs: Sequence[ModelSpec], text: str, settings: ProbeSettings,
                    trust_remote_code: bool = False) -> dict[str, torch.Tensor]:
    """The probe text tokenized by each model's own tokenizer (models with a reason to skip left out).

    A checkpoint without any tokenizer file gets ``identity_skip`` set (its recall still runs); a
    tokenizer that is there but does not load is bad input."""
    from transformers import AutoTokenizer

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
                spec.identity_skip = f"no tokenizer available for {spec.location} ({_one_line(e)})"
                continue
            raise ProbeInputError(f"--model {spec.location}: the tokenizer does not load ({_one_line(e)})") from None
        ids[spec.name] = probe_ids(tokenizer, text, settings, getattr(spec.config, "vocab_size", None),
                                   f"--model {spec.location}")
    return ids


def _load_trained(spec: ModelSpec, trust_remote_code: bool) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    try:  # float32 whatever dtype it was saved in: the probe's least squares want the precision
        return AutoModelForCausalLM.from_pretrained(spec.location, dtype=torch.float32,
                                                    trust_remote_code=trust_remote_code).eval()
    except Exception as e:
        raise ProbeInputError(f"--model {spec.location}: the weights do not load ({_one_line(e)})") from None


def _select(names: Sequence[str], which: bool | Collection[str], flag: str) -> list[str]:
    if which is True:
        return list(names)
    if which is False:
        return []
    unknown = [n for n in which if n not in names]
    if unknown:
        raise ProbeInputError(f"{flag} {unknown[0]}: no such model (models: {', '.join(names)})")
    return [n for n in names if n in which]


def find_control(models: Mapping[str, Mapping[str, Any]], recall: Mapping[str, Any]) -> str | None:
    """The positive control: the first model with recall results whose architecture is GPT-2's."""
    return next((n for n in recall if models.get(n, {}).get("model_type") == "gpt2"), None)


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
) -> dict[str, Any]:
    """Run the probes on ``models`` and write ``out_dir`` (JSON, markdown, PNGs) atomically at the end.

    Args:
        models: validated :class:`ModelSpec` s, or ``name -> checkpoint folder``.
        text: the identity probe's text.
        identity, recall: which models each probe runs on (True: all that can; a collection of names).
            Identity at lag runs only on models with trained weights and a tokenizer.
        workers, threads: recall models train in ``workers`` processes of ``threads`` torch threads.
        control: the positive control's name (default: the first GPT-2-architecture model with recall).

    Returns the content of ``content_probes.json``.
    """
    settings = settings or ProbeSettings()
    specs = (list(models) if not isinstance(models, Mapping)
             else [resolve_model(f"{name}={path}", trust_remote_code=trust_remote_code)
                   for name, path in models.items()])
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ProbeInputError(f"model name {dup!r} given twice: name them with NAME=...")
    by_name = {s.name: s for s in specs}
    for_identity = _select(names, identity, "--identity")
    for_recall = _select(names, recall, "--recall-models")
    if not for_identity and not for_recall:
        raise ProbeInputError("nothing to run: every model is left out of both probes")
    ids = identity_inputs([by_name[n] for n in for_identity], text, settings, trust_remote_code)
    if control is not None and control not in for_recall:
        raise ProbeInputError(f"--control {control}: not among the models whose recall runs ({', '.join(for_recall)})")

    started = time.time()
    results: dict[str, Any] = {
        "models": {s.name: s.describe() for s in specs},
        "identity_settings": settings.identity_dict(),
        "identity_at_lag": {},
        "recall": {},
        "recall_settings": None,
        "positive_control": None,
        "seed": settings.seed,
    }
    for name in tqdm(list(ids), desc="identity at lag", unit="model", disable=progress is False or not ids):
        model = _load_trained(by_name[name], trust_remote_code)
        results["identity_at_lag"][name] = identity_at_lag(model, ids[name], settings.identity_dict()["max_lag"],
                                                           settings.num_classes)
        del model
    for spec in specs:
        info = results["models"][spec.name]
        info["identity_at_lag"] = "ran" if spec.name in ids else (spec.identity_skip or "not asked for")
        info["recall"] = "ran" if spec.name in for_recall else "not asked for"
    if for_recall:
        result = mqar.recall_map({n: by_name[n].config for n in for_recall}, settings.task, settings.recipe,
                            settings.seed, progress, workers=workers, threads=threads,
                            trust_remote_code=trust_remote_code)
        results["recall"] = result["models"]
        results["recall_settings"] = {"task": result["task"], "recipe": result["recipe"], "seed": settings.seed,
                                      "chance": result["chance"]}
        results["positive_control"] = control or find_control(results["models"], results["recall"])
    results["seconds"] = time.time() - started
    results["environment"] = _environment(workers, threads)
    with atomic_dir(Path(out_dir)) as tmp:
        write_json(tmp / "content_probes.json", results)
        write_text(tmp / "content_probes.md", render_content_probes_markdown(results))
        render_content_probes_figures(results, tmp)
    return results


def _environment(workers: int, threads: int) -> dict[str, Any]:
    import platform

    import transformers

    try:
        load = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        load = None
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "cpus": os.cpu_count(), "workers": workers,
            "threads": threads, "load_average_at_end": load}


# ---------------------------------------------------------------------------------------------
# Rendering (the report's content section calls these)
# ---------------------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return "—" if x is None or x != x else f"{100 * x:.1f}%"


def reader_kind(info: Mapping[str, Any]) -> str:
    """Where a model sits on the map: "control" (GPT-2 architecture: attention over tokens), "state"
    (a SPEN reader of the current state of fixed-rate traces), "sequence" (a SPEN reader of every past
    state of fixed-rate traces), "selective" (SPEN with input-dependent trace rates), "other"."""
    if info.get("model_type") == "gpt2":
        return "control"
    spen = info.get("spen")
    if info.get("model_type") != "spen" or not spen:
        return "other"
    if spen.get("trace") == "selective":
        return "selective"
    attends = spen.get("predictor") in ("linear_attention", "softmax_attention")
    return "sequence" if attends and spen.get("predictor_scope") == "sequence" else "state"


KIND_LABELS = {
    "control": "attention over tokens (positive control)",
    "state": "state scope, fixed-rate traces",
    "sequence": "sequence scope, fixed-rate traces",
    "selective": "input-dependent (selective) traces",
    "other": "other architecture",
}


def recall_verdict(result: Mapping[str, Any]) -> str:
    """One model's verdict from its accuracies: recovers content (>= 95% at the largest count, the
    control's bar), up to some count, partly (above copying a context value by 10 points somewhere), or
    not beyond copying."""
    acc = {int(n): a for n, a in result["accuracy"].items()}
    largest = max(acc)
    recalled = [n for n in sorted(acc) if acc[n] >= CONTROL_BAR]
    if largest in recalled:
        return f"recovers content (≥ {CONTROL_BAR:.0%} at {largest} pairs)"
    if recalled:
        return f"recovers up to {max(recalled)} pairs"
    above = [n for n in sorted(acc) if acc[n] >= 1 / n + ABOVE_COPYING]
    if above:
        n = max(above, key=lambda k: acc[k] - 1 / k)
        return f"partly (best {_pct(acc[n])} at {n} pairs, copying {_pct(1 / n)})"
    return "no lookup beyond copying"


def _control_status(results: Mapping[str, Any]) -> tuple[str | None, bool, list[str]]:
    """(control name, passed, sentences) for the map's positive control."""
    recall = results["recall"]
    control = results.get("positive_control") or find_control(results.get("models", {}), recall)
    if control is None or control not in recall:
        return None, False, [
            "**No positive control in this run** (the GPT-2 architecture, `--config hub_configs/gpt2-tiny`): "
            "without a model known to solve the task under this recipe, a model that fails may fail for the "
            "recipe; only positive results (a model that recovers content) say anything."]
    r = recall[control]
    pairs = sorted(int(n) for n in r["accuracy"])
    at = CONTROL_PAIRS if CONTROL_PAIRS in pairs else pairs[-1]
    acc = r["accuracy"][str(at)]
    passed = acc >= CONTROL_BAR and at >= CONTROL_PAIRS
    steps = f"{r['steps']:,} of at most {r['max_steps']:,} steps"
    if acc >= CONTROL_BAR:
        lines = [f"**Positive control:** `{control}` reaches {_pct(acc)} at {at} pairs ({steps}, lr {r['best_lr']:g})"
                 f" against the bar of {CONTROL_BAR:.0%}: the recipe is long enough for attention to learn the "
                 "lookup, so a model that fails under it fails for its architecture (at this size, budget and "
                 "seed)."]
    else:
        lines = [f"**The positive control `{control}` did not reach {CONTROL_BAR:.0%} at {at} pairs "
                 f"({_pct(acc)}, {steps}): this run is too short to say anything about the models that fail.** "
                 "Their failures may be the recipe's, not their architecture's; only positive results stand."]
    if at < CONTROL_PAIRS:
        lines.append(f"This map stops at {at} pairs (e.g. the `--quick` recipe): a smoke test. Issue 14's bar is "
                     f"{CONTROL_BAR:.0%} at {CONTROL_PAIRS} pairs with the default recipe.")
    return control, passed, lines


def _identity_markdown(results: Mapping[str, Any]) -> list[str]:
    s = results.get("identity_settings", {})
    curves = results.get("identity_at_lag", {})
    lines = ["### Token identity at lag", "",
             "What it measures: from the hidden state at position t of each layer, a linear probe (ridge "
             f"classifier, closed form) predicts the token at t − k, among the {s.get('num_classes', 32)} most "
             "frequent tokens of the probe text; fit on 80% of the sequences "
             f"({s.get('num_sequences', '?')} of {s.get('seq_len', '?')} tokens), scored on the other 20%; the "
             "best layer at each lag is shown. Chance is the majority class. For SPEN the hidden state is all "
             "the memory there is; a transformer keeps its memory in the key/value cache and need not copy "
             "past tokens into its residual stream, so what it can *retrieve* is measured by the recall map "
             "below, not here.", ""]
    if curves:
        max_lag = max(len(r["lags"]) for r in curves.values())
        marks = [k for k in LAG_MARKS if k <= max_lag]
        lines += ["| model | " + " | ".join(f"k={k}" for k in marks) + " | chance |",
                  "|---|" + "---:|" * (len(marks) + 1)]
        for name, r in curves.items():
            cells = [_pct(r["best"][k - 1]) if k <= len(r["best"]) else "—" for k in marks]
            lines.append(f"| `{name}` | " + " | ".join(cells) + f" | {_pct(statistics.fmean(r['chance']))} |")
    else:
        lines.append("Not run on any model.")
    skipped = [(n, m.get("identity_at_lag")) for n, m in results.get("models", {}).items()
               if m.get("identity_at_lag") not in (None, "ran", "not asked for")]
    if skipped:  # one line per reason: a recall map's configs all share "no trained weights"
        reasons: dict[str, list[str]] = {}
        for n, why in skipped:
            reasons.setdefault(why, []).append(f"`{n}`")
        lines += [""] + [f"- skipped ({why}): {', '.join(names)}." for why, names in reasons.items()]
    return lines


def _recall_markdown(results: Mapping[str, Any]) -> list[str]:
    recall = results.get("recall") or {}
    lines = ["### Associative recall (MQAR): the map", ""]
    if not recall:
        return lines + ["Not run on any model."]
    settings = results["recall_settings"]
    task, recipe = settings["task"], settings["recipe"]
    models = results.get("models", {})
    pairs = sorted({int(n) for r in recall.values() for n in r["accuracy"]})
    values = task["vocab_size"] - task["vocab_size"] // 2
    lines += [
        f"A context of n key-value pairs, then every key again in a random order; the model must give each key's "
        f"value (vocabulary {task['vocab_size']}, {values} values: chance {_pct(settings['chance'])}). A model "
        "that copies some value of the context without matching its key scores 1/n. Every model is a fresh "
        f"one of its architecture trained with the same recipe (batch {recipe['batch_size']}, at most "
        f"{recipe['steps']:,} steps per rate, curriculum by competence, early stop), one run per rate of the "
        f"grid {{{', '.join(f'{lr:g}' for lr in recipe['lrs'])}}} declared in advance, the rate chosen on "
        f"{recipe['select_examples']} held-out sequences per pair count and the chosen model scored on "
        f"{recipe['eval_examples']} others (the same for every model); seed {settings['seed']}.", ""]
    control, passed, control_lines = _control_status(results)
    lines += ["| model | kind | parameters | " + " | ".join(f"{n} pairs" for n in pairs)
              + " | steps | best lr | verdict (one seed) |",
              "|---|---|---:|" + "---:|" * len(pairs) + "---:|---:|---|"]
    order = sorted(recall, key=lambda n: (n != control, list(KIND_LABELS).index(reader_kind(models.get(n, {})))))
    for name in order:
        r = recall[name]
        cells = [_pct(r["accuracy"][str(n)]) if str(n) in r["accuracy"] else "—" for n in pairs]
        steps = f"{r['steps']:,}" + (" (stopped early)" if r["steps"] < r["max_steps"] else " (max)")
        lines.append(f"| `{name}` | {KIND_LABELS[reader_kind(models.get(name, {}))]} | {r['parameters']:,} | "
                     + " | ".join(cells) + f" | {steps} | {r['best_lr']:g} | {recall_verdict(r)} |")
    lines += ["| chance (a uniform guess among the values) | | | "
              + " | ".join(_pct(settings["chance"]) for _ in pairs) + " | | | |",
              "| copying a context value, keys ignored | | | " + " | ".join(_pct(1 / n) for n in pairs) + " | | | |",
              "", *control_lines, "", "#### What the map says about the traces", "",
              "- **State-scope readers** of fixed-rate traces (SPEN's `none` and `linear` predictors, and the "
              "attention predictors at `state` scope) see at position t only the current trace state: a "
              "fixed-rate mixture of the past. By the data-processing argument no reader of that state can "
              "recover more token identity than the mixture keeps, however it is trained.",
              "- **Sequence-scope readers** (the attention predictors at `sequence` scope) see the trace state of "
              "every past position, and the past states of fixed-rate traces are invertible: "
              "u_t = (h_t − (1 − a) h_{t−1}) / a. They have every input token and are not bound by the "
              "argument: a failure there is the reader's or the recipe's, not the traces'.",
              "- **Input-dependent (selective) traces** choose what to write from the input, as Mamba's gates do: "
              "the paper's escape route, outside the fixed-rate argument.", "", "In this run:", ""]
    for kind in ("state", "sequence", "selective", "other"):
        names = [n for n in order if reader_kind(models.get(n, {})) == kind]
        if names:
            lines.append(f"- {KIND_LABELS[kind]}: " + "; ".join(f"`{n}` {recall_verdict(recall[n])}"
                                                                for n in names) + ".")
    if not passed:
        lines.append("- These verdicts are not backed by a positive control that passed: "
                     + ("a model that recovers content does, but 'no lookup' says nothing." if control
                        else "only 'recovers' verdicts mean anything."))
    lines += ["", f"Every verdict rests on one seed (seed {settings['seed']}) and one training run per learning "
              "rate: a lookup that forms late in one seed can fail to form in another. Read them as this run's, "
              "not as settled properties of the architectures."]
    return lines


def render_content_probes_markdown(results: Mapping[str, Any]) -> str:
    """The content probes as markdown (headings from ``###``): identity at lag (what it measures, a table
    at lags 1, 2, 4, ..., 64 against chance) and the recall map (every model x pair count with its steps,
    beside the positive control and chance; what state- and sequence-scope readers can recover and what
    this run shows, marked as one seed's)."""
    lines = _identity_markdown(results) + [""] + _recall_markdown(results)
    return "\n".join(lines) + "\n"


def render_content_probes_figures(results: Mapping[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """PNG figures in ``out_dir``: ``identity_at_lag`` (best-layer accuracy against lag, chance dotted)
    and ``recall`` (the map as grouped bars: one group per model, one bar per pair count, the chance line
    and the control's bar). Returns name -> path for the figures drawn (a probe that did not run has none)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    curves = results.get("identity_at_lag") or {}
    plt = pyplot()
    if curves:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, r in curves.items():
            ax.plot(r["lags"], r["best"], label=name, marker=".", markersize=3)
        first = next(iter(curves.values()))
        ax.plot(first["lags"], first["chance"], color="gray", linestyle=":", label="chance (majority class)")
        ax.set_xscale("log", base=2)
        ax.set_xticks([k for k in LAG_MARKS if k <= len(first["lags"])],
                      [str(k) for k in LAG_MARKS if k <= len(first["lags"])])
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("lag k (tokens back)")
        ax.set_ylabel("probe accuracy, token at t-k (best layer)")
        ax.set_title("Token identity recoverable from the hidden state")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        paths["identity_at_lag"] = out_dir / "identity_at_lag.png"
        save(fig, paths["identity_at_lag"])
    recall = results.get("recall") or {}
    if recall:
        models = results.get("models", {})
        control = results.get("positive_control")
        names = sorted(recall, key=lambda n: (n != control, list(KIND_LABELS).index(reader_kind(models.get(n, {})))))
        pairs = sorted({int(n) for r in recall.values() for n in r["accuracy"]})
        width = 0.8 / len(pairs)
        fig, ax = plt.subplots(figsize=(max(6.0, 1.0 + 0.75 * len(names)), 4))
        colors = plt.get_cmap("viridis")([i / max(1, len(pairs) - 1) * 0.85 for i in range(len(pairs))])
        for j, n in enumerate(pairs):
            xs = [i + (j - (len(pairs) - 1) / 2) * width for i in range(len(names))]
            ax.bar(xs, [recall[m]["accuracy"].get(str(n), float("nan")) for m in names], width,
                   color=colors[j], label=f"{n} pairs")
        chance = (results.get("recall_settings") or {}).get("chance") or next(iter(recall.values()))["chance"]
        ax.axhline(chance, color="black", linestyle=":", linewidth=1, label=f"chance ({_pct(chance)})")
        ax.axhline(CONTROL_BAR, color="tab:red", linestyle="--", linewidth=0.8,
                   label=f"control's bar ({CONTROL_BAR:.0%})")
        ax.set_xticks(range(len(names)), [f"{m}\n(control)" if m == control else m for m in names],
                      rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.set_ylabel("recall accuracy at the queries")
        ax.set_title("Multi-query associative recall: one recipe for every model")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(axis="y", alpha=0.3)
        paths["recall"] = out_dir / "recall.png"
        save(fig, paths["recall"])
    return paths


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _rate(value: str) -> float:
    try:
        lr = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0 < lr < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a rate in (0, 1)")
    return lr


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = UsageParser(prog=PROG, description=__doc__.split("\n\n")[0],
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    what = p.add_argument_group("models (at least one; each optionally NAME=...)")
    what.add_argument("--model", action="append", default=[], metavar="[NAME=]PATH_OR_HUB_NAME",
                      help="a trained causal LM: a save_pretrained folder (with a tokenizer for identity at lag) "
                           "or a hub name (online, or from the cache offline); repeatable")
    what.add_argument("--config", action="append", default=[], metavar="[NAME=]PATH",
                      help="an architecture only: a config.json or a folder holding one; recall only; repeatable")
    what.add_argument("--models", nargs="+", default=[], metavar="[NAME=]FOLDER",
                      help="checkpoint folders, as --model (kept for the report's command lines)")
    what.add_argument("--default-map", action="store_true",
                      help="add issue 14's map as configs: the GPT-2 architecture and the 8 SPEN readers/traces "
                           "(width 64)")
    what.add_argument("--trust-remote-code", action="store_true",
                      help="run model code that ships with a checkpoint or hub model (SPEN needs none: registered)")
    p.add_argument("--out", required=True, help="output folder (content_probes.json, content_probes.md, PNGs)")
    p.add_argument("--text", help="text file for identity at lag (default: Python's help topics, embedded)")
    p.add_argument("--quick", action="store_true",
                   help="shorter lags, fewer sequences; recall on 2/4/8 pairs with RecallRecipe.quick()")
    p.add_argument("--seed", type=int, default=0, help="seed of the recall models (init and training examples)")
    probes = p.add_argument_group("which probes")
    probes.add_argument("--no-identity", action="store_true", help="skip identity at lag")
    probes.add_argument("--no-recall", action="store_true", help="skip the recall map")
    probes.add_argument("--recall-models", nargs="+", metavar="NAME", help="run recall on these models only")
    probes.add_argument("--control", metavar="NAME",
                        help="the positive control (default: the first GPT-2-architecture model with recall)")
    recipe = p.add_argument_group("the recall recipe (default: eval.recall.RecallRecipe(), the measured one)")
    recipe.add_argument("--recall-steps", type=positive_int, metavar="N",
                        help="at most N optimizer steps per learning rate (default: 2000; --quick 1200)")
    recipe.add_argument("--recall-lrs", type=_rate, nargs="+", metavar="LR",
                        help="the learning-rate grid, declared before the run (default: 1e-3 3e-3 1e-2; --quick 1e-3)")
    recipe.add_argument("--recall-pairs", type=positive_int, nargs="+", metavar="N",
                        help="pair counts scored (default: 2 4 8 16; --quick 2 4 8)")
    run = p.add_argument_group("how it runs")
    run.add_argument("--workers", type=positive_int, default=1,
                     help="processes training recall models at once (default 1)")
    run.add_argument("--threads", type=positive_int, default=1,
                     help="torch threads per process (default 1: on a shared CPU, more are slower)")
    return p.parse_args(argv)


def _settings(args: argparse.Namespace) -> ProbeSettings:
    settings = ProbeSettings.quick() if args.quick else ProbeSettings()
    settings.seed = args.seed
    try:
        if args.recall_pairs is not None:
            settings.task = replace(settings.task, pairs=tuple(args.recall_pairs))
    except ValueError as e:
        raise ProbeInputError(f"--recall-pairs: {e}") from None
    if args.recall_lrs is not None:
        settings.recipe = replace(settings.recipe, lrs=tuple(args.recall_lrs))
    if args.recall_steps is not None:
        settings.recipe = cap_steps(settings.recipe, args.recall_steps)
    return settings


def _probe_text(path: str | None) -> str:
    if path is None:
        from ema_boundary.corpus import EMBEDDED_PYDOC, embedded_documents

        return "\n\n".join(embedded_documents(EMBEDDED_PYDOC))
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProbeInputError(f"--text {path}: no such file") from None
    except IsADirectoryError:
        raise ProbeInputError(f"--text {path}: a folder, not a text file") from None
    except UnicodeDecodeError:
        raise ProbeInputError(f"--text {path}: not UTF-8 text") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help: its status, returned
        return int(e.code or 0)
    torch.set_num_threads(args.threads)
    try:
        settings = _settings(args)
        specs = [resolve_model(s, "--models" if i >= len(args.model) else "--model", args.trust_remote_code)
                 for i, s in enumerate([*args.model, *args.models])]
        specs += [resolve_config(s, "--config", args.trust_remote_code) for s in args.config]
        if args.default_map:
            specs += default_map_models()
        if not specs:
            raise ProbeInputError("no model: give --model, --config, --models or --default-map")
        check_output_dir(args.out)  # before minutes of probing, not after
        needs_text = not args.no_identity and any(s.identity_skip is None for s in specs)
        text = _probe_text(args.text) if needs_text else ""
        run_content_probes(specs, text, args.out, settings,
                           identity=not args.no_identity,
                           recall=False if args.no_recall else (args.recall_models or True),
                           workers=args.workers, threads=args.threads, control=args.control,
                           trust_remote_code=args.trust_remote_code)
    except (ValueError, UsageError) as err:
        print(f"{PROG}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.out) / 'content_probes.json'}")
    return 0


__all__ = [
    "ProbeSettings",
    "ModelSpec",
    "ProbeInputError",
    "fit_lag_probes",
    "hidden_states",
    "identity_at_lag",
    "resolve_model",
    "resolve_config",
    "default_map_models",
    "identity_inputs",
    "run_content_probes",
    "find_control",
    "reader_kind",
    "recall_verdict",
    "render_content_probes_markdown",
    "render_content_probes_figures",
    "main",
]


if __name__ == "__main__":
    sys.exit(main())
