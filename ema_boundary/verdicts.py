"""The verdict words: every verdict the suite writes, in one vocabulary.

Three layers of words, each a plain string (they go into JSON as they are):

- a paired comparison (:func:`ema_boundary.stats.compare`): :data:`EQUIVALENT`, :data:`DIFFERENT` or
  :data:`UNRESOLVED` (:data:`COMPARISON_VERDICTS`); read as a conclusion: :data:`HIGHER`, :data:`LOWER`,
  :data:`EQUIVALENT` or :data:`NOT_RESOLVED`;
- a difference read from its interval (:func:`eval.verdicts.difference_verdict`): :data:`A_HIGHER`,
  :data:`A_LOWER`, :data:`EQUIVALENT` or :data:`UNRESOLVED`; a table names the arm: :func:`higher`
  ("attention higher");
- a claim (:class:`Verdict`): met, refuted, not resolved at this budget, not testable in this regime ...; an arm
  against the copying bar: :data:`ESCAPES`, :data:`DOES_NOT_ESCAPE` or :data:`UNRESOLVED`; a part of a block:
  :data:`LETS_IT_ESCAPE`, :data:`NOT_NEEDED` or :data:`NOT_RESOLVED`.

It lives in ``ema_boundary`` because grammar_probe writes verdicts too and may not import ``eval``; the gates and
the rules that turn intervals into these words live in :mod:`eval.verdicts` and :mod:`ema_boundary.stats`.
"""

from __future__ import annotations

from enum import Enum

# A paired comparison (stats.compare) and its reading.
EQUIVALENT = "equivalent"
DIFFERENT = "different"
UNRESOLVED = "not resolved"
COMPARISON_VERDICTS = (EQUIVALENT, DIFFERENT, UNRESOLVED)
HIGHER, LOWER = "higher", "lower"
# A difference a - b read from its 95% interval (eval.verdicts.difference_verdict).
A_HIGHER, A_LOWER = "a higher", "a lower"

# A claim.
MET = "met"
PARTLY_MET = "partly met"
REFUTED = "refuted"
PARTLY_REFUTED = "partly refuted"
NOT_RESOLVED = "not resolved at this budget"
NOT_TESTABLE = "not testable in this regime"
NOT_RUN = "not run"
# A refutation read outside the claim's regime: it says what was seen, not that the claim is false where it was made.
OPPOSITE = "opposite direction"
NOT_REPRODUCED = "not reproduced"
# A resolved difference (or equivalence) between two arms that both stay at the floor: neither met nor refuted.
NEITHER_ESCAPES = "neither escapes at this budget"
# grammar_probe: the paper's number lies beyond what any causal reader can reach on the grammar.
UNREACHABLE = "not reachable on this grammar"

# One arm against the copying bar (its 95% interval above, below or across it), and what a part of a block does
# for it (the arm without the part against the full arm).
ESCAPES, DOES_NOT_ESCAPE = "escapes", "does not escape"
LETS_IT_ESCAPE, NOT_NEEDED = "lets it escape", "not needed"

# A trend of the gap against training data (eval.scale.data_axis): its slope's 95% interval toward 0, away from it,
# or across 0.
NARROWS, WIDENS, FLAT = "narrows", "widens", "does not narrow"

# A gate's failure (eval.verdicts.reference_gate): the baseline scores worse than its plain reference on the same
# tokens. It names the fact, not a cause: a baseline can be worse by under-training or by over-fitting.
WORSE_THAN_REFERENCE = "baseline worse than its plain reference"

# The one- or two-word form of each claim verdict, for the report's first table and the boundary figure.
SHORT = {MET: "met", PARTLY_MET: "partly met", REFUTED: "refuted", PARTLY_REFUTED: "partly refuted",
         NOT_RESOLVED: "not resolved", NOT_TESTABLE: "not testable", NOT_RUN: "not run", OPPOSITE: "opposite direction",
         NOT_REPRODUCED: "not reproduced", NEITHER_ESCAPES: "neither escapes"}


def higher(name: str) -> str:
    """The verdict "``name`` is higher" of a difference between two named arms (``"attention higher"``)."""
    return f"{name} higher"


class Verdict(str, Enum):
    """What a claim's row concludes. Only :attr:`REFUTED` and :attr:`PARTLY_REFUTED` (and their forms outside the
    claim's regime) disagree with the paper."""

    MET = MET
    PARTLY_MET = PARTLY_MET
    REFUTED = REFUTED
    PARTLY_REFUTED = PARTLY_REFUTED
    NOT_RESOLVED = NOT_RESOLVED
    NOT_TESTABLE = NOT_TESTABLE
    NOT_RUN = NOT_RUN
    OPPOSITE = OPPOSITE
    NOT_REPRODUCED = NOT_REPRODUCED
    NEITHER_ESCAPES = NEITHER_ESCAPES

    @property
    def disagrees(self) -> bool:
        return self in (Verdict.REFUTED, Verdict.PARTLY_REFUTED, Verdict.OPPOSITE, Verdict.NOT_REPRODUCED)

    @property
    def readable(self) -> bool:
        """Whether the row reads its measurement at all (not "not testable", not "not run")."""
        return self not in (Verdict.NOT_TESTABLE, Verdict.NOT_RUN)

    @property
    def short(self) -> str:
        """One or two words, for the one-screen table."""
        return SHORT[self.value]


__all__ = ["A_HIGHER", "A_LOWER", "COMPARISON_VERDICTS", "DIFFERENT", "DOES_NOT_ESCAPE", "EQUIVALENT", "ESCAPES",
           "FLAT", "HIGHER", "LETS_IT_ESCAPE", "LOWER", "MET", "NARROWS", "NEITHER_ESCAPES", "NOT_NEEDED",
           "NOT_REPRODUCED", "NOT_RESOLVED", "NOT_RUN", "NOT_TESTABLE", "OPPOSITE", "PARTLY_MET", "PARTLY_REFUTED",
           "REFUTED", "SHORT", "UNREACHABLE", "UNRESOLVED", "Verdict", "WIDENS", "higher"]
