"""Token accuracy over role labels, overall and per role: an ``evaluate.Metric`` loaded offline.

Load by path (the hub is not needed): ``evaluate.load("grammar_probe/metrics/role_accuracy")``.
One import per line: evaluate's dependency scan misreads comma-separated imports.
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = """Fraction of tokens whose predicted role id equals the gold role id, over all tokens, and the
same fraction restricted to the tokens of each gold role (``per_label``: {label id: accuracy})."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted role ids, one per token.
    references (list of int): gold role ids, one per token.
Returns:
    accuracy (float): correct / total; nan when there are no tokens.
    per_label (dict): {gold label id: accuracy over tokens with that gold label}.
    count (int): number of tokens.
Example:
    >>> m = evaluate.load("grammar_probe/metrics/role_accuracy")
    >>> m.compute(predictions=[0, 1, 1], references=[0, 1, 2])["accuracy"]
    0.6666666666666666
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class RoleAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references):
        pred = np.asarray(predictions)
        gold = np.asarray(references)
        correct = pred == gold
        per_label = {int(c): float(correct[gold == c].mean()) for c in np.unique(gold)}
        accuracy = float(correct.mean()) if len(gold) else float("nan")
        return {"accuracy": accuracy, "per_label": per_label, "count": int(len(gold))}
