"""Deprecated: ``python -m eval.content_probes`` is ``python -m eval.probes`` (kept for one release).

The code lives in the package :mod:`eval.probes`; the names below are re-exported for scripts that
imported them from here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from eval.probes.__main__ import main as _main
from eval.probes.experiment import ProbeSettings, run_content_probes
from eval.probes.models import ModelSpec, resolve_config, resolve_model
from eval.probes.render import (
    reader_kind,
    recall_verdict,
    render_content_probes_figures,
    render_content_probes_markdown,
)

__all__ = ["ModelSpec", "ProbeSettings", "main", "reader_kind", "recall_verdict", "render_content_probes_figures",
           "render_content_probes_markdown", "resolve_config", "resolve_model", "run_content_probes"]


def main(argv: Sequence[str] | None = None) -> int:
    print("note: python -m eval.content_probes is deprecated; use python -m eval.probes (same flags)",
          file=sys.stderr)
    return _main(argv)


if __name__ == "__main__":
    sys.exit(main())
