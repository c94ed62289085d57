"""Names shared by the experiment driver, the renderer and the report (one source for each)."""

from __future__ import annotations

__all__ = ["ARGUMENT_ROLES", "MODELS", "MODEL_LABELS", "TRACE_MODELS"]

# The models scored on every split, in the order tables and plots show them: the cheap shortcuts
# first, then the trace models (read by the same linear probe), then the learned recurrences.
MODELS: tuple[str, ...] = ("majority_word", "window", "plain_ema", "spcn_frozen", "spcn", "causal_gru", "bigru")
TRACE_MODELS: tuple[str, ...] = ("plain_ema", "spcn_frozen", "spcn")
MODEL_LABELS: dict[str, str] = {
    "majority_word": "majority role per word",
    "window": "window tagger (best k ≤ 12)",
    "plain_ema": "plain EMA of word codes + probe",
    "spcn_frozen": "SPCN, learning off + probe",
    "spcn": "SPCN + probe",
    "causal_gru": "causal GRU",
    "bigru": "BiGRU",
}
# The roles whose word->role correlation the counterfactual split reverses.
ARGUMENT_ROLES: tuple[str, ...] = ("SUBJ_MAIN", "OBJ_MAIN", "SUBJ_EMB", "OBJ_EMB")
