"""matplotlib for files only: the Agg backend, set once, before pyplot is imported anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (PNG files; never needs a display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str | Path, dpi: int = 120) -> None:
    """Save ``fig`` as a PNG at ``path`` and close it (figures are not reused)."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)
