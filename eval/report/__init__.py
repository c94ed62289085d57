"""``ema-boundary report``: the project's main job, one command from nothing to the boundary map.

- :mod:`.plan` - what a run trains and probes: the one place that decides ``--quick`` and ``--scale``;
- :mod:`.stages` - each stage through the project's own entry points, recording the argv it ran:
  structure (``grammar_probe``), the predictor and trace ablations (``eval.ablation``), the GPT-2
  baseline (``train.py``), the content probes (``eval.content_probes``);
- :mod:`.assemble` - ``report.json`` from the stages' results;
- :mod:`.render` - ``index.md`` and the figures, from ``report.json``;
- :mod:`.build` - the driver (everything built under a temporary name, renamed at the end);
- :mod:`.cli` - the command line.
"""

from eval.report.cli import main

__all__ = ["main"]
