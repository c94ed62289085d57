"""ema_boundary.format: numbers written the same way everywhere."""

from ema_boundary.format import count, interval, number, pct, with_interval


def test_formats():
    assert pct(0.958) == "95.8%" and pct(None) == "–" and pct(float("nan")) == "–"
    assert number(1.23456) == "1.235" and number(None) == "–"
    assert interval([0.1, 0.2], digits=1, scale=100) == "[10.0, 20.0]"
    assert interval([-0.01, 0.02], digits=2, signed=True) == "[-0.01, +0.02]"
    assert interval(None) == "[–]"
    assert with_interval({"mean": 0.5, "ci95": [0.4, 0.6]}, digits=2) == "0.50 [0.40, 0.60]"
    assert with_interval({}) == "–"
    assert count(1, "seed") == "1 seed" and count(3, "paired seed") == "3 paired seeds" and count(0, "run") == "0 runs"
