"""``custom_dataset: !function local_data.load`` of the grammar tasks: perplexity/local_data.py's ``load`` (lm-eval
reads a hook from the file beside the YAML, so this one loads that one by path)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_ema_boundary_task_data",
                                               Path(__file__).resolve().parents[1] / "perplexity" / "local_data.py")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
load = _module.load
