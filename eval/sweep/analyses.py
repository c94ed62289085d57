"""How a sweep's results are read: the name a plan's ``analysis:`` gives -> the experiment's analysis.

Every analysis is ``analysis(plan, results, folder, reads)`` (:mod:`eval.results`: the runner hands it the plan,
its generic results, the sweep folder and what only the runner can read) and returns a JSON-ready dict with the gates
it passed or failed and why (:mod:`eval.verdicts`), the paired comparisons with their intervals, and a ``verdict``
(with ``reason``) where the experiment decides a claim. Its declared settings are the plan's ``settings`` mapping.
Each lives with its experiment:

- ``ladder``: :mod:`eval.scale.analysis` (the loss gap a - b at every size, behind the gates; where the gap lives,
  eval.gap's measure of each size's pair);
- ``data_axis``: :mod:`eval.scale.data_axis` (the ladder's gap against the distinct training tokens);
- ``ablation``: :mod:`eval.ablation.analysis` (every arm against the reference at every budget);
- ``depth``: :mod:`eval.depth.analysis` (attention over depth against the residual sum);
- ``recall_map``: :mod:`eval.recall_map` (accuracy against the no-lookup floor, the escape comparisons);
- ``arms``: :mod:`eval.arms` (grammar_probe's paper rows, ``arms.json``);
- ``none``: :mod:`eval.results` (each arm's scores with their interval).
"""

from __future__ import annotations

from eval.ablation.analysis import ablation
from eval.arms import arms
from eval.depth.analysis import depth
from eval.recall_map import recall_map
from eval.results import Analysis, none
from eval.scale.analysis import ladder
from eval.scale.data_axis import data_axis

ANALYSES: dict[str, Analysis] = {
    "none": none, "ablation": ablation, "ladder": ladder, "recall_map": recall_map, "depth": depth, "arms": arms,
    "data_axis": data_axis}

__all__ = ["ANALYSES"]
