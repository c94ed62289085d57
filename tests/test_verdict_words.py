"""ema_boundary.verdicts: one vocabulary of verdict words, defined in that one file and read by every caller."""

from __future__ import annotations

import ast
from pathlib import Path

from ema_boundary import verdicts as w

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ema_boundary", "eval", "grammar_probe", "training", "modeling_spen", "benchmarks")
HOME = ROOT / "ema_boundary" / "verdicts.py"
WORDS = {v for k, v in vars(w).items() if k.isupper() and isinstance(v, str)}


def test_every_claim_verdict_has_its_word_and_its_short_form() -> None:
    assert {v.value for v in w.Verdict} <= WORDS
    assert set(w.SHORT) == {v.value for v in w.Verdict}
    assert w.Verdict(w.NEITHER_ESCAPES).short == "neither escapes" and w.Verdict.NOT_RESOLVED.short == "not resolved"
    assert w.Verdict.REFUTED.disagrees and not w.Verdict.NOT_RESOLVED.disagrees
    assert not w.Verdict.NOT_RUN.readable and w.Verdict.MET.readable
    assert w.COMPARISON_VERDICTS == (w.EQUIVALENT, w.DIFFERENT, w.UNRESOLVED)
    assert w.higher("attention") == "attention higher"


def _constants(node: ast.AST) -> list[str]:
    """The string constants an assignment's value is made of (a string, or a tuple/list/set of strings)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _constants(e)]
    return []


def test_no_module_defines_a_verdict_word_a_second_time() -> None:
    """A constant (``NAME = "met"``, an Enum member, a tuple of words) equal to a verdict word is a second
    vocabulary: callers import the word from ema_boundary.verdicts instead."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == HOME:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    words = [s for s in _constants(node.value) if s in WORDS]
                    if words:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {words}")
    assert not found, "verdict words defined outside ema_boundary/verdicts.py:\n" + "\n".join(found)
