"""The weights a run starts from (``--model_name_or_path`` on a folder that holds them, as run_clm): loaded, and
checked against the folder's config.json before anything is written."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel
from transformers.utils import logging as hf_logging

from ema_boundary.usage import first_line
from train_config import ConfigError


def load_pretrained(folder: Path) -> PreTrainedModel:
    """The causal LM saved in ``folder``, in float32 and train mode. Weights that do not load, or do not fit the
    model its config.json builds (a tensor missing, unexpected or of another shape, which transformers would
    initialise afresh with a warning), raise ConfigError in one line naming the folder."""
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the one-line error below replaces transformers' load report
    try:
        model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, output_loading_info=True,
                                                           ignore_mismatched_sizes=True)
    except Exception as e:  # unreadable or truncated weights, a broken index: whatever the loaders raise
        raise ConfigError(f"--model_name_or_path {folder}: the weights do not load ({first_line(e, 200)})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    # A key reported missing that shares its tensor with a loaded one (the LM head tied to the embedding) is there.
    shared: dict[int, set[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        shared.setdefault(id(param), set()).add(name)
    missing = set(info.get("missing_keys") or ())
    missing -= {k for names in shared.values() if names - missing for k in names}
    unexpected, mismatched = sorted(info.get("unexpected_keys") or ()), sorted(info.get("mismatched_keys") or ())
    problems = [f"{len(keys)} {what} (e.g. {sorted(keys)[0]})" for what, keys in
                (("missing", missing), ("unexpected", unexpected), ("of another shape", mismatched)) if keys]
    if problems:
        raise ConfigError(f"--model_name_or_path {folder}: the weights do not fit its config.json: "
                          + "; ".join(problems))
    return model.train()
