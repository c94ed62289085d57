"""matplotlib for files only: the Agg backend, set once, before pyplot is imported anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["log_ticks", "pyplot", "save"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (PNG files; never needs a display)."""
    # deferred: matplotlib takes a second; eval.compare and the sweep's readers import this module at their top, and
    # their --help answers without it (Agg is chosen here, before pyplot is imported)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: as matplotlib, after the backend is chosen

    return plt


def save(fig: Any, path: str | Path, dpi: int = 120) -> None:
    """Save ``fig`` as a PNG at ``path`` and close it (figures are not reused)."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    pyplot().close(fig)


def log_ticks(ax: Any, ticks: list[float] | None = None) -> None:
    """A log x-axis without the minor labels that overlap; with ``ticks``, labelled there in plain numbers
    (``1,000``) instead of at the decades."""
    from matplotlib.ticker import FuncFormatter, NullFormatter  # deferred: as in pyplot

    ax.xaxis.set_minor_formatter(NullFormatter())
    if ticks:
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
