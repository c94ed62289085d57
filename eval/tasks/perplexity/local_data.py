"""The project's tasks that read local files load them here (``custom_dataset: !function local_data.load``).

lm-eval would hand a missing file to `datasets`, which fails with a traceback; a task whose file is not written yet
fails instead with one line naming the file and the command that writes it (``dataset_kwargs.make``). Paths are
relative to the working directory, as `datasets` reads them. No import of the project: lm-eval loads this file by
path, beside the task YAML (grammar_roles/local_data.py loads this one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets


def load(data_files: dict[str, str], make: str = "python -m eval.make_data all", **_: Any):
    """The splits of ``data_files`` (JSON lines) as a DatasetDict; a missing file exits with one line."""
    for path in data_files.values():
        if not Path(path).is_file():
            raise SystemExit(f"{path}: no such file (the task's data is written by `{make}`; run it first, from the "
                             "folder lm_eval runs in)")
    return datasets.load_dataset("json", data_files=data_files)
