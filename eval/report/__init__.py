"""``ema-boundary report``: the project's main job, one command from nothing to the boundary map.

- :mod:`.plan` - what a run trains and probes, read from a plan YAML (hub_configs/report/) and checked once,
  before any work (types, ranges, names, each message with the YAML line); ``--quick`` and ``--scale`` only
  choose the file;
- :mod:`.stages` - each stage through the project's own code, recording the command line that reproduces it:
  structure (``grammar_probe``, in child processes), the headline pair and the reader and trace ablations
  (sweeps on the experiment runner, ``eval.sweep``: its layout, rate rule and resume), the n-gram reference
  (``eval.ngram``), the content probes and the recall map (``eval.probes``);
- :mod:`.claims` - the paper's claims as data: measurement, verdict rule, preconditions, tested explanations;
- :mod:`.committed` - the one reader of the committed sweeps a plan names (``committed:``, ``ema-boundary sweep``
  folders under docs/sweeps/): each checked at load, their analyses carrying the claims' rows;
- :mod:`.assemble` - ``report.json`` from the stages' results, every comparison through ``ema_boundary.stats``;
- :mod:`.schema` - report.json's version, its JSON Schema (``report.schema.json``) and the upgrade of older ones;
- :mod:`.render` - ``index.md`` and the README's results block, from ``report.json``;
- :mod:`.figures` - the report's figures, drawn from ``report.json`` or copied from the stages' folders;
- :mod:`.boundary` - the picture of the boundary (``figures/boundary.png``), each claim's verdict on its axis;
- :mod:`.paths` - recorded paths relative to the repository or the output folder (commands that run from a clone);
- :mod:`.build` - the driver (everything built under a temporary name, renamed at the end);
- :mod:`.rerender` - ``ema-boundary render`` and ``readme``: index.md and the README re-rendered from a report.json;
- the command line, ``ema-boundary``: :mod:`ema_boundary.cli` (``python -m eval.report`` runs it too).
"""
