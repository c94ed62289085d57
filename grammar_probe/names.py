"""Names shared by the experiment driver and the renderer (one source for each)."""

from __future__ import annotations

__all__ = ["MODELS"]

# The models scored on every split, in the order tables and plots show them.
MODELS: tuple[str, ...] = ("spcn_probe", "bigru", "control", "causal_gru")
