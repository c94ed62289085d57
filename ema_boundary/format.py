"""How numbers are written in reports, tables and cards: one home, so every page agrees."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["count", "interval", "number", "pct", "with_interval"]


def _finite(x: float | None) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def count(n: int, word: str) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: ``"1 seed"``, ``"3 seeds"``, ``"0 paired seeds"``."""
    return f"{n} {word}{'s' * (n != 1)}"


def number(x: float | None, digits: int = 3) -> str:
    """``x`` with ``digits`` decimals, or an en dash when there is no value."""
    return f"{x:.{digits}f}" if _finite(x) else "–"


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction in [0, 1] as a percentage: ``0.958`` -> ``"95.8%"``."""
    return f"{100 * x:.{digits}f}%" if _finite(x) else "–"


def interval(ci: Sequence[float] | None, digits: int = 3, scale: float = 1.0, signed: bool = False) -> str:
    """``[lo, hi]`` with ``digits`` decimals (``scale`` 100 writes fractions as points; ``signed`` writes +/-)."""
    if ci is None or len(ci) != 2 or not all(_finite(v) for v in ci):
        return "[–]"
    sign = "+" if signed else ""
    lo, hi = (scale * v for v in ci)
    return f"[{lo:{sign}.{digits}f}, {hi:{sign}.{digits}f}]"


def with_interval(s: Mapping[str, float] | None, digits: int = 3, scale: float = 1.0, signed: bool = False,
                  key: str = "mean") -> str:
    """``"mean [lo, hi]"`` from a summary with ``mean`` and ``ci95`` (as ``ema_boundary.stats`` writes them)."""
    if not s or not _finite(s.get(key)):
        return "–"
    sign = "+" if signed else ""
    return f"{scale * s[key]:{sign}.{digits}f} {interval(s.get('ci95'), digits, scale, signed)}"
