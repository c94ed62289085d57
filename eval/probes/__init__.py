"""Content probes: what a causal language model keeps of *which* tokens it has seen.

- :mod:`eval.probes.models`: the models read (a checkpoint folder, a hub name, a config), checked before
  any work (``resolve_model``, ``resolve_config``; shared with ``eval.compare``);
- :mod:`eval.probes.identity`: identity at lag, the linear-probe maths;
- :mod:`eval.probes.experiment`: ``ProbeSettings`` and ``run_content_probes`` (identity at lag and the
  recall map of :mod:`eval.recall`, written to an output folder);
- :mod:`eval.probes.render`: the markdown, the figures and each model's verdict;
- ``python -m eval.probes``: the command line (:mod:`eval.probes.__main__`).
"""
