"""Every way the project derives a seed from another seed, each a named function (one home, see
docs/architecture.md).

Committed results were drawn from these exact values: a derivation never changes (tests/test_seeding.py pins a
few). A new derivation is added here, under a new name.
"""

from __future__ import annotations

# eval.recall's example streams: offset from the model seed by a prime stride, so that training, selection and
# evaluation examples never come from the same stream (for any seed below the stride).
RECALL_STREAM_STRIDE = 1_000_003
RECALL_TRAIN_STREAM, RECALL_SELECT_STREAM, RECALL_EVAL_STREAM = 1, 2, 3
# grammar_probe: the seeds of one base seed (s * 1000 + r), and a window tagger's seed per window size k.
PROBE_SEEDS_PER_BASE = 1000
WINDOW_SEED_STRIDE = 7


def recall_stream_seed(seed: int, stream: int) -> int:
    """The seed of example stream ``stream`` (:data:`RECALL_TRAIN_STREAM`...) of the model seeded ``seed``."""
    return RECALL_STREAM_STRIDE * stream + seed


def recall_train_seed(seed: int) -> int:
    """The seed of the training examples of a recall model seeded ``seed``."""
    return recall_stream_seed(seed, RECALL_TRAIN_STREAM)


def recall_selection_seed(seed: int) -> int:
    """The seed of the selection examples (what picks a recall model's rate) of the model seeded ``seed``."""
    return recall_stream_seed(seed, RECALL_SELECT_STREAM)


def recall_evaluation_seed() -> int:
    """The seed of the evaluation examples: the task's alone, so every model and seed is scored on the same ones."""
    return recall_stream_seed(0, RECALL_EVAL_STREAM)


def probe_seeds(base: int, count: int) -> list[int]:
    """The ``count`` seeds of grammar_probe's experiment at base seed ``base``: ``base * 1000 + r``."""
    return [base * PROBE_SEEDS_PER_BASE + r for r in range(count)]


def window_tagger_seed(seed: int, k: int) -> int:
    """The initialisation and batch-order seed of the ``k``-token window tagger of probe seed ``seed``."""
    return seed * WINDOW_SEED_STRIDE + k


__all__ = ["PROBE_SEEDS_PER_BASE", "RECALL_EVAL_STREAM", "RECALL_SELECT_STREAM", "RECALL_STREAM_STRIDE",
           "RECALL_TRAIN_STREAM", "WINDOW_SEED_STRIDE", "probe_seeds", "recall_evaluation_seed",
           "recall_selection_seed", "recall_stream_seed", "recall_train_seed", "window_tagger_seed"]
