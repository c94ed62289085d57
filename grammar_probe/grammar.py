"""Grammars A and B: probabilistic grammars whose every token carries one of 20 grammatical roles.

A grammar is data: a rule table (nonterminal -> weighted alternatives), a lexicon (word class ->
words) and the role inventory. Terminals are written ``"<word class>:<ROLE>"``: a word drawn
uniformly from the class, labelled with the role. An alternative flagged ``embeds`` opens a nested
clause (relative or complement clause); it adds one level of depth and is unavailable once the
depth cap is reached, which is what keeps recursion finite.

Role kinds (the paper's distinction):

- **structural**: one word form carries several roles and its position alone decides which
  ("the" is the determiner of the agent, of the patient or of an oblique phrase; an animate noun
  is agent, patient or companion; "that" is a relative pronoun or a complementiser).
- **lexical**: the slot admits words of several roles and only the word's identity decides
  (a verb is transitive, intransitive or a verb of saying; "with the hammer" is an instrument,
  "in the park" a location; "quickly" is manner, "today" time).

Everything is validated when a :class:`Grammar` is built; a bad table raises :class:`GrammarError`
naming the rule, symbol or word at fault.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "ROLES",
    "ROLE_NAMES",
    "STRUCTURAL",
    "LEXICAL",
    "LEXICON",
    "RESERVE_LEXICON",
    "OPEN_CLASSES",
    "Alternative",
    "Grammar",
    "GrammarError",
    "Role",
    "Sentence",
    "grammar_a",
    "grammar_b",
]

STRUCTURAL = "structural"
LEXICAL = "lexical"


class GrammarError(ValueError):
    """A grammar table is malformed; the message names the rule, symbol or word."""


@dataclass(frozen=True)
class Role:
    name: str
    kind: str  # STRUCTURAL or LEXICAL
    description: str


@dataclass(frozen=True)
class Alternative:
    """One right-hand side of a rule, chosen with probability proportional to ``weight``."""

    weight: float
    symbols: tuple[str, ...]
    embeds: bool = False  # opens a nested clause: depth + 1, forbidden at the depth cap


@dataclass(frozen=True)
class Sentence:
    tokens: tuple[str, ...]
    roles: tuple[str, ...]
    depth: int


ROLES: tuple[Role, ...] = (
    Role("DET_AGENT", STRUCTURAL, "determiner of the agent noun phrase"),
    Role("DET_PATIENT", STRUCTURAL, "determiner of the patient noun phrase"),
    Role("DET_OBLIQUE", STRUCTURAL, "determiner inside a prepositional phrase"),
    Role("ADJ_AGENT", STRUCTURAL, "adjective modifying the agent"),
    Role("ADJ_PATIENT", STRUCTURAL, "adjective modifying the patient"),
    Role("AGENT", STRUCTURAL, "head noun of the agent (subject of its clause)"),
    Role("PATIENT", STRUCTURAL, "head noun of the patient (object of a transitive verb)"),
    Role("COMPANION", STRUCTURAL, "animate noun after 'with' (accompaniment)"),
    Role("REL_PRON", STRUCTURAL, "'that' opening a relative clause"),
    Role("COMP", STRUCTURAL, "'that' opening a complement clause after a verb of saying"),
    Role("VERB_TRANS", LEXICAL, "transitive verb"),
    Role("VERB_INTRANS", LEXICAL, "intransitive verb"),
    Role("VERB_COMM", LEXICAL, "verb of saying/thinking taking a complement clause"),
    Role("PREP_LOC", LEXICAL, "locative preposition"),
    Role("PREP_WITH", LEXICAL, "'with' (instrument or companion)"),
    Role("LOCATION", LEXICAL, "place noun after a locative preposition"),
    Role("INSTRUMENT", LEXICAL, "tool noun after 'with'"),
    Role("ADV_MANNER", LEXICAL, "manner adverb"),
    Role("ADV_TIME", LEXICAL, "time adverb"),
    Role("END", LEXICAL, "sentence-final full stop"),
)
ROLE_NAMES: tuple[str, ...] = tuple(r.name for r in ROLES)

# 147 training words. Closed classes are shared by both grammars and by every split; open classes
# are the slots that the novel-word split refills from RESERVE_LEXICON.
LEXICON: dict[str, tuple[str, ...]] = {
    "det": ("the", "a", "every", "some", "this", "my", "each", "no"),
    "adj": ("big", "small", "old", "young", "red", "green", "happy", "sad", "tall", "short",
            "quiet", "loud", "brave", "shy", "clever", "lazy", "gentle", "angry", "tired", "hungry"),
    "animate": ("dog", "cat", "bird", "horse", "cow", "sheep", "fox", "wolf", "bear", "lion",
                "tiger", "mouse", "rabbit", "duck", "goat", "pig", "frog", "owl", "man", "woman",
                "boy", "girl", "child", "teacher", "doctor", "farmer", "king", "queen", "baker",
                "sailor"),
    "place": ("park", "garden", "house", "forest", "river", "field", "barn", "kitchen", "school",
              "city", "village", "market", "cave", "lake", "hill"),
    "tool": ("hammer", "stick", "rope", "spoon", "knife", "brush", "pen", "net", "key", "ladder",
             "bucket", "shovel"),
    "vtrans": ("chased", "saw", "liked", "helped", "pushed", "found", "followed", "watched",
               "kicked", "fed", "called", "visited", "carried", "bit", "hugged", "met"),
    "vintrans": ("slept", "ran", "smiled", "laughed", "danced", "jumped", "cried", "waited",
                 "sang", "swam", "fell", "arrived"),
    "vcomm": ("said", "thought", "knew", "believed", "claimed", "heard", "noticed", "hoped"),
    "prep_loc": ("in", "near", "under", "behind", "beside", "inside"),
    "with": ("with",),
    "that": ("that",),
    "adv_manner": ("quickly", "slowly", "loudly", "quietly", "happily", "sadly", "badly", "well"),
    "adv_time": ("today", "yesterday", "tomorrow", "now", "later", "early", "again", "soon",
                 "tonight"),
    "end": (".",),
}

# Nonce words never seen in training, one set per open class.
RESERVE_LEXICON: dict[str, tuple[str, ...]] = {
    "adj": ("blick", "frumpy", "zorpy", "glimmy", "plonky", "snarfy"),
    "animate": ("wug", "dax", "fep", "toma", "zib", "gorp"),
    "place": ("vell", "krant", "plume", "drabbit", "mosk", "quell"),
    "tool": ("snib", "trell", "gobbet", "flink", "spud", "crond"),
    "vtrans": ("glorped", "snabbed", "trimbled", "vexed", "flanked", "blicked"),
    "vintrans": ("zanned", "pleeped", "morked", "skived", "drooped", "hummed"),
    "vcomm": ("quoffed", "mulled", "grooked", "spanned"),
    "adv_manner": ("blithely", "zorply", "grimly", "briskly"),
    "adv_time": ("anon", "erstwhile", "betimes", "forthwith"),
}
OPEN_CLASSES: tuple[str, ...] = tuple(RESERVE_LEXICON)


def _shared_rules() -> dict[str, list[Alternative]]:
    return {
        "PP": [
            Alternative(0.5, ("prep_loc:PREP_LOC", "det:DET_OBLIQUE", "place:LOCATION")),
            Alternative(0.25, ("with:PREP_WITH", "det:DET_OBLIQUE", "tool:INSTRUMENT")),
            Alternative(0.25, ("with:PREP_WITH", "det:DET_OBLIQUE", "animate:COMPANION")),
        ],
        "ADV": [
            Alternative(0.5, ("adv_manner:ADV_MANNER",)),
            Alternative(0.5, ("adv_time:ADV_TIME",)),
        ],
    }


def _noun_phrase(det: str, adj: str, noun: str, rel: str) -> list[Alternative]:
    """det (adj) noun (relative clause): the relative clause is the embedding alternative."""
    return [
        Alternative(0.5, (f"det:{det}", f"animate:{noun}")),
        Alternative(0.3, (f"det:{det}", f"adj:{adj}", f"animate:{noun}")),
        Alternative(0.2, (f"det:{det}", f"animate:{noun}", rel), embeds=True),
    ]


def grammar_a(max_depth: int = 2) -> Grammar:
    """Grammar A: SVO clauses, post-verbal PPs and adverbs, subject relative clauses, complements."""
    rules = {
        "S": [Alternative(1.0, ("CLAUSE", "end:END"))],
        "CLAUSE": [Alternative(1.0, ("NP_AGENT", "VP"))],
        "NP_AGENT": _noun_phrase("DET_AGENT", "ADJ_AGENT", "AGENT", "REL"),
        "NP_PATIENT": _noun_phrase("DET_PATIENT", "ADJ_PATIENT", "PATIENT", "REL"),
        # Subject relative: "that chased the cat", "that slept in the park".
        "REL": [
            Alternative(0.6, ("that:REL_PRON", "vtrans:VERB_TRANS", "NP_PATIENT")),
            Alternative(0.2, ("that:REL_PRON", "vintrans:VERB_INTRANS")),
            Alternative(0.2, ("that:REL_PRON", "vintrans:VERB_INTRANS", "PP")),
        ],
        "VP": [
            Alternative(0.45, ("vtrans:VERB_TRANS", "NP_PATIENT", "TAIL")),
            Alternative(0.35, ("vintrans:VERB_INTRANS", "TAIL")),
            Alternative(0.2, ("vcomm:VERB_COMM", "that:COMP", "CLAUSE"), embeds=True),
        ],
        "TAIL": [
            Alternative(0.3, ()),
            Alternative(0.3, ("PP",)),
            Alternative(0.2, ("ADV",)),
            Alternative(0.2, ("PP", "ADV")),
        ],
        **_shared_rules(),
    }
    return Grammar("A", rules, "S", LEXICON, ROLES, max_depth)


def grammar_b(max_depth: int = 2) -> Grammar:
    """Grammar B: same roles and words, verb-final clauses, fronted adverbials, object relatives."""
    rules = {
        "S": [Alternative(1.0, ("FRONT", "CLAUSE", "end:END"))],
        "FRONT": [
            Alternative(0.5, ()),
            Alternative(0.25, ("ADV",)),
            Alternative(0.25, ("PP",)),
        ],
        "CLAUSE": [Alternative(1.0, ("NP_AGENT", "VP"))],
        "NP_AGENT": _noun_phrase("DET_AGENT", "ADJ_AGENT", "AGENT", "REL"),
        "NP_PATIENT": _noun_phrase("DET_PATIENT", "ADJ_PATIENT", "PATIENT", "REL"),
        # Object relative, verb-final: "that the cat chased"; or subject relative "that slept".
        "REL": [
            Alternative(0.5, ("that:REL_PRON", "NP_AGENT", "vtrans:VERB_TRANS")),
            Alternative(0.5, ("that:REL_PRON", "vintrans:VERB_INTRANS")),
        ],
        "VP": [
            Alternative(0.45, ("NP_PATIENT", "vtrans:VERB_TRANS")),
            Alternative(0.2, ("vintrans:VERB_INTRANS",)),
            Alternative(0.15, ("PP", "vintrans:VERB_INTRANS")),
            Alternative(0.2, ("vcomm:VERB_COMM", "that:COMP", "CLAUSE"), embeds=True),
        ],
        **_shared_rules(),
    }
    return Grammar("B", rules, "S", LEXICON, ROLES, max_depth)


class Grammar:
    """A validated probabilistic grammar with role-labelled terminals and a clause-depth cap."""

    def __init__(
        self,
        name: str,
        rules: Mapping[str, Sequence[Alternative]],
        start: str,
        lexicon: Mapping[str, Sequence[str]],
        roles: Sequence[Role],
        max_depth: int | None,
    ) -> None:
        self.name = name
        self.rules = {lhs: tuple(alts) for lhs, alts in rules.items()}
        self.start = start
        self.lexicon = {cls: tuple(words) for cls, words in lexicon.items()}
        self.roles = tuple(roles)
        self.max_depth = max_depth
        self._validate()
        self.role_index = {r.name: i for i, r in enumerate(self.roles)}
        self.word_class = {w: cls for cls, words in self.lexicon.items() for w in words}

    # -- validation -------------------------------------------------------------------------------

    def _validate(self) -> None:
        role_names = [r.name for r in self.roles]
        if len(set(role_names)) != len(role_names):
            raise GrammarError(f"grammar {self.name}: duplicate role names")
        for r in self.roles:
            if r.kind not in (STRUCTURAL, LEXICAL):
                raise GrammarError(f"grammar {self.name}: role {r.name} has unknown kind {r.kind!r}")
        owner: dict[str, str] = {}
        for cls, words in self.lexicon.items():
            if not words:
                raise GrammarError(f"grammar {self.name}: word class {cls!r} is empty")
            for w in words:
                if w in owner and owner[w] != cls:
                    raise GrammarError(
                        f"grammar {self.name}: word {w!r} is listed in two classes: {owner[w]!r} and {cls!r}"
                    )
                owner[w] = cls
        if self.start not in self.rules:
            raise GrammarError(f"grammar {self.name}: start symbol {self.start!r} has no rule")
        embedding = any(a.embeds for alts in self.rules.values() for a in alts)
        if embedding and (not isinstance(self.max_depth, int) or self.max_depth < 0):
            raise GrammarError(
                f"grammar {self.name}: recursion without a depth cap (max_depth={self.max_depth!r})"
            )
        for lhs, alts in self.rules.items():
            if not alts:
                raise GrammarError(f"grammar {self.name}: rule {lhs} has no alternatives")
            for a in alts:
                if not a.weight > 0:
                    raise GrammarError(f"grammar {self.name}: rule {lhs} has a weight <= 0: {a.weight}")
                for sym in a.symbols:
                    self._check_symbol(lhs, sym, set(role_names))
        self._check_reachable()
        self._check_bounded()

    def _check_symbol(self, lhs: str, sym: str, role_names: set[str]) -> None:
        if ":" in sym:
            cls, role = sym.split(":", 1)
            if cls not in self.lexicon:
                raise GrammarError(f"grammar {self.name}: rule {lhs} uses unknown word class {cls!r}")
            if role not in role_names:
                raise GrammarError(f"grammar {self.name}: rule {lhs} uses unknown role {role!r}")
        elif sym not in self.rules:
            raise GrammarError(f"grammar {self.name}: rule {lhs} uses undefined symbol {sym!r}")

    def _check_reachable(self) -> None:
        seen, todo = {self.start}, [self.start]
        while todo:
            for a in self.rules[todo.pop()]:
                for sym in a.symbols:
                    if ":" not in sym and sym not in seen:
                        seen.add(sym)
                        todo.append(sym)
        unreachable = sorted(set(self.rules) - seen)
        if unreachable:
            raise GrammarError(
                f"grammar {self.name}: symbol {unreachable[0]} is unreachable from {self.start}"
            )

    def _check_bounded(self) -> None:
        """Recursion must pass through an ``embeds`` alternative, and every symbol must be able to
        finish at the depth cap (using non-embedding alternatives only)."""
        flat = {
            lhs: [a for a in alts if not a.embeds] for lhs, alts in self.rules.items()
        }
        state: dict[str, int] = {}  # 1 = on stack, 2 = done

        def visit(lhs: str) -> None:
            state[lhs] = 1
            for a in flat[lhs]:
                for sym in a.symbols:
                    if ":" in sym:
                        continue
                    if state.get(sym) == 1:
                        raise GrammarError(
                            f"grammar {self.name}: rule {lhs} recurses into {sym} without an embedding "
                            "alternative (recursion without a depth cap)"
                        )
                    if sym not in state:
                        visit(sym)
            state[lhs] = 2

        for lhs in self.rules:
            if lhs not in state:
                visit(lhs)
        finishes: set[str] = set()
        changed = True
        while changed:
            changed = False
            for lhs, alts in flat.items():
                if lhs not in finishes and any(
                    all(":" in s or s in finishes for s in a.symbols) for a in alts
                ):
                    finishes.add(lhs)
                    changed = True
        stuck = sorted(set(self.rules) - finishes)
        if stuck:
            raise GrammarError(
                f"grammar {self.name}: rule {stuck[0]} cannot finish at the depth cap "
                "(every alternative embeds)"
            )

    # -- sampling ---------------------------------------------------------------------------------

    def sample(
        self,
        rng: random.Random,
        max_depth: int | None = None,
        lexicon: Mapping[str, Sequence[str]] | None = None,
    ) -> Sentence:
        """Draw one sentence. ``lexicon`` overrides word classes (e.g. the reserve nonce words)."""
        cap = self.max_depth if max_depth is None else max_depth
        words = {**self.lexicon, **(lexicon or {})}
        tokens: list[str] = []
        roles: list[str] = []
        deepest = 0
        # Explicit stack of (symbol, depth): iterative so deep caps cannot hit the recursion limit.
        stack: list[tuple[str, int]] = [(self.start, 0)]
        while stack:
            sym, depth = stack.pop()
            if ":" in sym:
                cls, role = sym.split(":", 1)
                tokens.append(rng.choice(words[cls]))
                roles.append(role)
                continue
            alts = [a for a in self.rules[sym] if not a.embeds or depth < cap]
            alt = rng.choices(alts, weights=[a.weight for a in alts])[0]
            child = depth + 1 if alt.embeds else depth
            deepest = max(deepest, child)
            stack.extend((s, child) for s in reversed(alt.symbols))
        return Sentence(tuple(tokens), tuple(roles), deepest)

    def roles_of_kind(self, kind: str) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles if r.kind == kind)
