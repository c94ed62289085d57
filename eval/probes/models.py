"""The models the probes (and ``eval.compare``) read: a checkpoint folder, a hub name or a config, checked.

Every check runs before any work and fails with :class:`ModelError`, whose message starts with the path or
name it is about; the command line that read it from a flag puts the flag in front (``--model DIR: ...``).
Configs are read, safetensors headers checked against the file sizes, and the architecture built on the ``meta``
device to count its parameters. :func:`load_causal_lm`, the one loader every evaluation tool uses, refuses weights
that do not fit their config.json (missing, unexpected or resized tensors) rather than scoring a half-random model,
and a model that is not causal (:func:`check_causal`: its logits must not read later tokens); :func:`resolve_model`
loads a folder once with it before any work.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoConfig, AutoModelForCausalLM
from transformers.utils import logging as hf_logging

import modeling_spen  # noqa: F401  registers SPEN with the Auto classes
from ema_boundary.params import parameter_counts
from ema_boundary.usage import UsageError, first_line, looks_like_path

__all__ = ["SOURCES", "TOKENIZER_FILES", "WEIGHT_FILES", "ModelError", "ModelSpec", "build_on_meta",
           "check_causal", "load_causal_lm", "make_spec", "resolve_config", "resolve_model", "split_name"]

SOURCES = ("folder", "hub", "config")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")


class ModelError(UsageError):
    """A model, config or tokenizer that cannot be used: ``"WHERE: problem"``, one line; nothing written.

    ``where`` is the path or hub name as given, so that a command line can say which flag gave it."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


@dataclass
class ModelSpec:
    """One model, checked: where it comes from and what each probe can do with it.

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
    non_embedding_parameters: int | None = None

    @property
    def model_type(self) -> str:
        return str(getattr(self.config, "model_type", "?"))

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {"source": self.source, "location": self.location, "model_type": self.model_type,
                                "architectures": getattr(self.config, "architectures", None),
                                "parameters": self.parameters,
                                "non_embedding_parameters": self.non_embedding_parameters}
        if self.model_type == "spen":  # the map's readers and traces are told apart by these
            info["spen"] = {k: getattr(self.config, k) for k in ("predictor", "predictor_scope", "trace")}
        return info


def split_name(spec: str) -> tuple[str | None, str]:
    """``NAME=WHERE`` or ``WHERE`` (a path that exists is never split, even if it holds '=')."""
    if os.path.exists(spec) or "=" not in spec:
        return None, spec
    name, where = spec.split("=", 1)
    if not name or not where:
        raise ModelError(spec, "give NAME=PATH_OR_NAME or PATH_OR_NAME")
    return name, where


def _read_config_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ModelError(str(path), "not a text file (a config.json is JSON)") from None
    except json.JSONDecodeError as e:
        raise ModelError(str(path), f"not valid JSON (line {e.lineno}: {e.msg})") from None
    except OSError as e:
        raise ModelError(str(path), f"cannot read ({e.strerror})") from None
    if not isinstance(data, dict) or "model_type" not in data:
        raise ModelError(str(path), "no model_type field, so no architecture to build")
    return data


def _load_config(where: str, trust_remote_code: bool) -> Any:
    try:
        return AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
    except Exception as e:  # unknown model_type, bad field values, remote code refused: all one line
        raise ModelError(where, f"the config does not load ({first_line(e, 200)})") from None


def build_on_meta(config: Any, where: str, trust_remote_code: bool = False) -> torch.nn.Module:
    """The causal LM ``config`` defines, built on the meta device (no memory, no time): the check that it
    is a causal LM at all and builds."""
    auto_map = getattr(config, "auto_map", None) or {}
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING and "AutoModelForCausalLM" not in auto_map:
        raise ModelError(where, f"model_type {getattr(config, 'model_type', '?')!r} is not a causal language model "
                                "(no AutoModelForCausalLM class)")
    try:
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception as e:
        raise ModelError(where, f"the config does not build a causal LM ({first_line(e, 200)})") from None


def make_spec(name: str, source: str, location: str, config: Any, trust_remote_code: bool = False,
              identity_skip: str | None = None) -> ModelSpec:
    """A :class:`ModelSpec` of ``config``, its parameters counted on the meta device (total and non-embedding)."""
    counts = parameter_counts(build_on_meta(config, location, trust_remote_code))
    return ModelSpec(name, source, location, config, counts.total, identity_skip, counts.non_embedding)


def _check_weights(folder: Path) -> None:
    """Fail now, in one line naming the file, on missing or broken weights rather than after minutes
    of probing: safetensors headers are read (cheap) and checked against each file's size."""
    present = [f for f in WEIGHT_FILES if (folder / f).is_file()]
    if not present:
        raise ModelError(str(folder), f"no weights ({' or '.join(WEIGHT_FILES[::2])}); for the architecture "
                                      "alone pass it as a config")

    shards: list[Path] = []
    if "model.safetensors" in present:
        shards = [folder / "model.safetensors"]
    elif "model.safetensors.index.json" in present:
        index = folder / "model.safetensors.index.json"
        try:
            shards = [folder / s for s in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
        except (ValueError, KeyError, AttributeError, TypeError):
            raise ModelError(str(index), "not a safetensors index (JSON with a weight_map)") from None
    for shard in shards:
        try:
            with safe_open(str(shard), framework="pt"):
                pass
        except Exception as e:  # SafetensorError (truncated, corrupt), FileNotFoundError
            raise ModelError(str(shard), f"unreadable weights ({first_line(e, 200)})") from None


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """transformers' load report and progress bars off for one load (our one-line error replaces the report),
    restored after."""
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _examples(keys: Any, n: int = 2) -> str:
    names = sorted(k if isinstance(k, str) else k[0] for k in keys)
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def _misfit(model: torch.nn.Module, info: dict[str, Any]) -> str | None:
    """What does not fit between a checkpoint and the model its config.json builds, in words (None: all fits).

    A key reported missing that shares its tensor with a loaded one (a tied head) is not missing."""
    shared: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        shared.setdefault(id(param), []).append(name)
    missing = set(info.get("missing_keys") or ())
    tied_to_loaded = {k for names in shared.values() for k in names if k in missing and set(names) - missing}
    missing -= tied_to_loaded
    unexpected, mismatched = info.get("unexpected_keys") or (), info.get("mismatched_keys") or ()
    parts = []
    if missing:
        parts.append(f"{len(missing)} missing ({_examples(missing)})")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected ({_examples(unexpected)})")
    if mismatched:
        first = sorted(mismatched, key=str)[0]
        shapes = f": {tuple(first[1])} saved, {tuple(first[2])} built" if isinstance(first, tuple) else ""
        parts.append(f"{len(mismatched)} of another shape ({_examples([first], 1)}{shapes})")
    return "; ".join(parts) or None


def load_causal_lm(where: str | os.PathLike, *, dtype: torch.dtype | str | None = torch.float32,
                   trust_remote_code: bool = False, device_map: str | None = None) -> torch.nn.Module:
    """The causal LM saved in ``where`` (a ``save_pretrained`` folder or a hub name), in eval mode, or
    :class:`ModelError` in one line naming it: no config.json, unreadable weights (the file named), or weights
    that do not fit the model its config.json builds (missing, unexpected or resized tensors; tied ones allowed).

    ``dtype`` None leaves transformers' default; ``device_map="meta"`` checks names and shapes without reading
    a tensor (what :func:`resolve_model` does before any work)."""
    where = str(where)
    path = Path(where).expanduser()
    if path.exists() or looks_like_path(where):  # a local folder: the cheap checks first, each naming its file
        if not path.is_dir():
            raise ModelError(where, "no such folder" if not path.exists() else "a file, not a checkpoint folder")
        if not (path / "config.json").is_file():
            raise ModelError(where, "not a checkpoint folder (no config.json)")
        _check_weights(path)
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "output_loading_info": True,
                              # resized tensors are reported below, in one line, instead of raised after a table
                              "ignore_mismatched_sizes": True}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if device_map is not None:
        kwargs["device_map"] = device_map
    try:
        with _quiet_loading():
            model, info = AutoModelForCausalLM.from_pretrained(where, **kwargs)
    except Exception as e:  # a broken index, a shard that fails mid-read, an unknown model_type: one line
        # safetensors were checked above; a pickled pytorch_model.bin is read only now, so name it when it is all
        pickled = [f for f in WEIGHT_FILES if (path / f).is_file()] == ["pytorch_model.bin"]
        if pickled:
            raise ModelError(str(path / "pytorch_model.bin"), f"unreadable weights ({first_line(e, 200)})") from None
        raise ModelError(where, f"the weights do not load ({first_line(e, 200)})") from None
    problem = _misfit(model, info)
    if problem:
        model_type = getattr(model.config, "model_type", "?")
        raise ModelError(where, f"the weights do not fit its config.json (model_type {model_type!r}): {problem}")
    model.eval()
    if device_map != "meta":
        check_causal(model, where)
    return model


CAUSAL_TOKENS = 16  # the length of the sequence the causal check reads


@torch.no_grad()
def check_causal(model: torch.nn.Module, where: str) -> None:
    """Refuse (:class:`ModelError`, one line) a model whose logits at a position depend on later tokens: what the
    next-token scores of every evaluation tool assume. Checked by behaviour, not by name (transformers loads a
    saved ``BertForMaskedLM`` as ``BertLMHeadModel`` with ``is_decoder=False``, which reads the whole sequence):
    the second half of a sequence is changed, and the first half's logits must stay the same."""
    config = model.config
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab < 2:
        return
    limit = next((v for name in ("n_positions", "max_position_embeddings", "n_ctx", "block_size")
                  if isinstance(v := getattr(config, name, None), int) and v > 1), CAUSAL_TOKENS)
    n = min(CAUSAL_TOKENS, limit)
    half = n // 2
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    ids = torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(0)).to(device)
    changed = ids.clone()
    changed[:, half:] = (ids[:, half:] + 1 + torch.arange(n - half, device=device)) % vocab
    try:
        a, b = (model(input_ids=x).logits.float() for x in (ids, changed))
    except Exception as e:  # a model that does not take a plain sequence: said in one line
        raise ModelError(where, f"does not run as a causal LM on {n} tokens ({first_line(e, 200)})") from None
    # A causal model's earlier logits do not move at all (computed from the same inputs); a model that reads ahead
    # moves them by a fraction of what the changed positions move (a freshly initialised BERT: 1e-3 of it).
    leak = float((a[:, :half] - b[:, :half]).abs().max())
    effect = float((a[:, half:] - b[:, half:]).abs().max())
    if leak > 1e-4 * effect and leak > 1e-6 * max(1.0, float(a.abs().max())):
        raise ModelError(where, f"not a causal language model: changing tokens {half + 1}-{n} of a sequence changes "
                                f"the logits at positions 1-{half} (by up to {leak:.3g}); {type(model).__name__} "
                                "reads later tokens, so its next-token scores would be wrong")


def resolve_model(name_or_path: str, trust_remote_code: bool = False) -> ModelSpec:
    """A trained causal LM, ``[NAME=]FOLDER_OR_HUB_NAME``: checked (config, weights, architecture), not loaded.

    A folder needs a config.json and readable weights that fit it (names and shapes, matched on the meta device);
    a name that does not exist locally is looked up on the hub (offline: in its cache) unless it looks like a path
    (then it is a typo)."""
    name, where = split_name(name_or_path)
    path = Path(where).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ModelError(where, "a file, not a checkpoint folder (a config.json is an architecture only)")
        if not (path / "config.json").is_file():
            raise ModelError(where, "not a checkpoint folder (no config.json)")
        _read_config_json(path / "config.json")
        _check_weights(path)
        config = _load_config(str(path), trust_remote_code)
        default = path.resolve().parent.name if path.resolve().name == "final" else path.resolve().name
        spec = make_spec(name or default, "folder", str(path), config, trust_remote_code)
        # Names and shapes matched, and the model checked to be causal, before any work (a tiny model loads in a
        # blink; the tools load it again when they use it).
        load_causal_lm(str(path), trust_remote_code=trust_remote_code)
        return spec
    if looks_like_path(where):
        raise ModelError(where, "no such folder")

    try:  # offline, this succeeds only from the local cache; it fails fast either way
        config = AutoConfig.from_pretrained(where, trust_remote_code=trust_remote_code)
    except Exception as e:  # OSError, ValueError, hub and network errors: all mean "cannot get it"
        raise ModelError(where, f"not a local folder and not available from the hub ({first_line(e, 200)})") from None
    return make_spec(name or where, "hub", where, config, trust_remote_code)


def resolve_config(name_or_path: str, trust_remote_code: bool = False) -> ModelSpec:
    """An architecture only, ``[NAME=]PATH`` to a config.json or a folder holding one."""
    name, where = split_name(name_or_path)
    path = Path(where).expanduser()
    if path.is_dir():
        file = path / "config.json"
        if not file.is_file():
            raise ModelError(where, "no config.json in this folder")
        default = path.resolve().name
    elif path.is_file():
        file, default = path, (path.resolve().parent.name if path.name == "config.json" else path.stem)
    else:
        raise ModelError(where, "no such file or folder")
    _read_config_json(file)
    config = _load_config(str(file), trust_remote_code)
    return make_spec(name or default, "config", str(path), config, trust_remote_code,
                     identity_skip="no trained weights (a --config architecture): train it with train.py "
                                   "and pass the folder with --model_name_or_path")
