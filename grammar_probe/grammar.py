"""The shipped grammars A and B: 20 roles, 147 training words, clause depth and attachment.

The roles of determiners, nouns, verbs, place nouns and adverbs say which clause the word belongs
to: the main clause or an embedded one (a relative clause opened by "who", a complement clause
opened by "that"). Inside a complement clause the words look exactly like a main clause's; only a
"that" many tokens back tells them apart. Variable-length material (adjective chains, fronted
adverbs and PP chains, chains of 1-5 place PPs on nouns and verbs, nested relatives) lies between a
token and the word that decides its clause, so no window of up to 12 tokens decides the structural
roles (on average over them, >= 10 points below the causal ceiling at every k <= 12), while the whole
prefix does. A clause ends
where the grammar says it must (an object carrying a relative clause ends its clause; a
complement clause runs to the end of its parent), so the prefix always decides.

Which roles come out structural, local, lexical or ambiguous is computed, not declared:
:mod:`grammar_probe.ceilings`. Full tables and measured ceilings: docs/grammar_probe.md.

- **A** (train, validation, the in-domain tests): SVO; subject and object relatives on subjects,
  relatives on objects, complement clauses, fronted adverbs/PPs, PP and adverb tails.
- **B** (transfer): the same roles, words and noun phrases; verb-final clauses (SOV), relatives and
  complement clauses before the verb, no tails after the verb.
- The **counterfactual** grammar is A with the word->role correlation of training reversed
  (``agent_bias`` 0: subjects are animals, objects are persons).
"""

from __future__ import annotations

# The engine's names are re-exported: callers import everything grammar-related from here.
from grammar_probe.pcfg import UNK, Alternative, Grammar, GrammarError, Posteriors, Role, Sentence

__all__ = [
    "UNK",
    "Alternative",
    "Grammar",
    "GrammarError",
    "Posteriors",
    "Role",
    "Sentence",
    "ROLES",
    "ROLE_NAMES",
    "LEXICON",
    "OPEN_CLASSES",
    "RESERVE_LEXICON",
    "DEV_RESERVE_LEXICON",
    "TRAIN_AGENT_BIAS",
    "grammar_a",
    "grammar_b",
]

ROLES: tuple[Role, ...] = (
    Role("DET_MAIN", "determiner in the main clause"),
    Role("DET_EMB", "determiner in an embedded clause"),
    Role("ADJ", "adjective"),
    Role("SUBJ_MAIN", "subject (agent) of the main clause"),
    Role("OBJ_MAIN", "object (patient) of the main clause"),
    Role("SUBJ_EMB", "subject (agent) of an embedded clause"),
    Role("OBJ_EMB", "object (patient) of an embedded clause"),
    Role("VERB_MAIN", "verb of the main clause"),
    Role("VERB_EMB", "verb of an embedded clause"),
    Role("LOC_MAIN", "place noun of a prepositional phrase in the main clause"),
    Role("LOC_EMB", "place noun of a prepositional phrase in an embedded clause"),
    Role("PREP", "preposition"),
    Role("INSTRUMENT", "tool noun after 'with'"),
    Role("COMPANION", "animate noun after 'with'"),
    Role("REL_SUBJ", "'who' opening a subject relative clause"),
    Role("REL_OBJ", "'who' opening an object relative clause"),
    Role("COMP", "'that' opening a complement clause"),
    Role("ADV_MAIN", "adverb of the main verb"),
    Role("ADV_EMB", "adverb of an embedded verb"),
    Role("END", "sentence-final full stop"),
)
ROLE_NAMES: tuple[str, ...] = tuple(r.name for r in ROLES)

# 147 training words. `person` and `animal` are both animate nouns; in training (grammar A with
# TRAIN_AGENT_BIAS) persons are mostly subjects and animals mostly objects, the word->role
# correlation the counterfactual split reverses.
LEXICON: dict[str, tuple[str, ...]] = {
    "det": ("the", "a", "every", "some", "this", "my", "each", "no"),
    "adj": ("big", "small", "old", "young", "red", "green", "happy", "sad", "tall", "short",
            "quiet", "loud", "brave", "shy", "clever", "lazy", "gentle", "angry", "tired", "hungry"),
    "person": ("man", "woman", "boy", "girl", "child", "teacher", "doctor", "farmer", "king", "queen",
               "baker", "sailor", "nurse", "pilot", "singer"),
    "animal": ("dog", "cat", "bird", "horse", "cow", "sheep", "fox", "wolf", "bear", "lion",
               "tiger", "mouse", "rabbit", "duck", "goat"),
    "place": ("park", "garden", "house", "forest", "river", "field", "barn", "kitchen", "school",
              "city", "village", "market", "cave", "lake", "hill"),
    "tool": ("hammer", "stick", "rope", "spoon", "knife", "brush", "pen", "net", "key", "ladder",
             "bucket", "shovel"),
    "verb": ("chased", "saw", "liked", "helped", "pushed", "found", "followed", "watched", "kicked",
             "fed", "called", "visited", "carried", "hugged", "met", "heard", "noticed", "knew",
             "said", "thought", "believed", "remembered", "forgot", "hoped", "slept", "ran", "smiled",
             "laughed", "danced", "jumped", "waited", "sang", "swam", "fell", "arrived", "left"),
    "prep": ("in", "near", "under", "behind", "beside", "inside"),
    "with": ("with",),
    "who": ("who",),
    "that": ("that",),
    "adv": ("quickly", "slowly", "loudly", "quietly", "happily", "sadly", "badly", "well",
            "today", "yesterday", "tomorrow", "now", "later", "early", "again", "soon"),
    "end": (".",),
}

# Unseen-word protocol: nouns and verbs are the open classes. The test's nonce words and the
# development nonce words are disjoint; neither occurs in training.
OPEN_CLASSES: tuple[str, ...] = ("person", "animal", "place", "tool", "verb")
RESERVE_LEXICON: dict[str, tuple[str, ...]] = {
    "person": ("wug", "dax", "fep", "toma", "zib", "gorp"),
    "animal": ("blick", "snorp", "quiff", "marl", "tove", "jabber"),
    "place": ("vell", "krant", "plume", "drabbit", "mosk", "quell"),
    "tool": ("snib", "trell", "gobbet", "flink", "spud", "crond"),
    "verb": ("glorped", "snabbed", "trimbled", "vexed", "flanked", "blicked", "zanned", "pleeped",
             "morked", "skived"),
}
DEV_RESERVE_LEXICON: dict[str, tuple[str, ...]] = {
    "person": ("pilk", "rusp", "nobe", "tarn"),
    "animal": ("grell", "vosk", "wibble", "fant"),
    "place": ("strome", "kell", "nurb", "pask"),
    "tool": ("drin", "ploff", "zell", "harb"),
    "verb": ("brimmed", "cloved", "dwindled", "fremmed", "gasked", "hinted"),
}

# P(a subject is a person) = P(an object is an animal) in training; the counterfactual split uses 0.
TRAIN_AGENT_BIAS = 0.85

# Rule probabilities. They were set while designing the grammar, from the ceilings alone (no model
# was run): complement clauses are frequent because their inside looks exactly like a main clause
# except for the distant "that"; adjective chains and fronted phrases put variable-length material
# between a token and the word that decides its clause. Measured effect: docs/grammar_probe.md.
P_VP = (0.25, 0.15, 0.25, 0.35)  # verb + object, verb + object + relative, verb alone, verb + that-clause
P_ADJ = (0.55, 0.25, 0.12, 0.05, 0.03)  # 0, 1, 2, 3 or 4 adjectives
P_FRONT = (0.4, 0.2, 0.4)  # a clause opens with nothing, a fronted adverb or a fronted PP
P_CHAIN = (0.15, 0.2, 0.2, 0.2, 0.25)  # a place-PP chain ("in the park near the barn ...") of 1 to 5 PPs


def _adjs() -> list[Alternative]:
    """An adjective chain of 0..4 adjectives (written out: recursion must go through embeds)."""
    return [Alternative(w, tuple(["adj:ADJ"] * n)) for n, w in enumerate(P_ADJ)]


def _nonzero(options: list[tuple[float, str]]) -> list[Alternative]:
    return [Alternative(w, (sym,)) for w, sym in options if w > 0]


def _rules_a(agent_bias: float) -> dict[str, list[Alternative]]:
    """Grammar A: SVO; subject and object relatives ('who'); complement clauses ('that')."""
    persons, animals = agent_bias, 1.0 - agent_bias
    rules: dict[str, list[Alternative]] = {
        "S": [Alternative(1.0, ("CLAUSE_MAIN", "end:END"))],
        "ADJS": _adjs(),
        # A clause may open with a fronted adverb or PP, the same way at every depth.
        "CLAUSE_MAIN": [Alternative(1.0, ("FRONT_MAIN", "NP_SUBJ_MAIN", "VP_MAIN"))],
        "CLAUSE_EMB": [Alternative(1.0, ("FRONT_EMB", "NP_SUBJ_EMB", "VP_EMB"))],
        "REL": [
            # subject relative: who chased the cat / who slept in the park
            Alternative(0.5, ("who:REL_SUBJ", "VP_EMB")),
            # object relative: who the cat chased (in the park)
            Alternative(0.5, ("who:REL_OBJ", "NP_SUBJ_EMB", "verb:VERB_EMB", "TAIL_EMB")),
        ],
    }
    for x in ("MAIN", "EMB"):
        # Zero-weight alternatives are left out (the counterfactual grammar uses bias 0).
        rules[f"N_SUBJ_{x}"] = _nonzero([(persons, f"person:SUBJ_{x}"), (animals, f"animal:SUBJ_{x}")])
        rules[f"N_OBJ_{x}"] = _nonzero([(animals, f"person:OBJ_{x}"), (persons, f"animal:OBJ_{x}")])
        # A noun-modifying PP chain belongs to the clause of the noun it modifies. Chains of place PPs
        # look the same in every clause: long stretches that no window can place.
        rules[f"PPL_{x}"] = [Alternative(1.0, ("prep:PREP", f"det:DET_{x}", "ADJS", f"place:LOC_{x}"))]
        rules[f"LOCS_{x}"] = [Alternative(w, tuple([f"PPL_{x}"] * (n + 1))) for n, w in enumerate(P_CHAIN)]
        rules[f"PPN_{x}"] = [Alternative(1.0, (f"LOCS_{x}",))]
        rules[f"NP_SUBJ_{x}"] = [
            Alternative(0.50, (f"det:DET_{x}", "ADJS", f"N_SUBJ_{x}")),
            Alternative(0.15, (f"det:DET_{x}", "ADJS", f"N_SUBJ_{x}", f"PPN_{x}")),
            Alternative(0.25, (f"det:DET_{x}", "ADJS", f"N_SUBJ_{x}", "REL"), embeds=True),
            Alternative(0.10, (f"det:DET_{x}", "ADJS", f"N_SUBJ_{x}", f"PPN_{x}", "REL"), embeds=True),
        ]
        rules[f"VP_{x}"] = [
            Alternative(P_VP[0], (f"verb:VERB_{x}", f"det:DET_{x}", "ADJS", f"N_OBJ_{x}", f"TAIL_{x}")),
            # An object with a relative clause ends its clause: nothing attaches after it.
            Alternative(P_VP[1], (f"verb:VERB_{x}", f"det:DET_{x}", "ADJS", f"N_OBJ_{x}", "REL"), embeds=True),
            Alternative(P_VP[2], (f"verb:VERB_{x}", f"TAIL_{x}")),
            Alternative(P_VP[3], (f"verb:VERB_{x}", "that:COMP", "CLAUSE_EMB"), embeds=True),
        ]
        rules[f"FRONT_{x}"] = [
            Alternative(P_FRONT[0], ()),
            Alternative(P_FRONT[1], (f"adv:ADV_{x}",)),
            Alternative(P_FRONT[2], (f"PPV_{x}",)),
        ]
        rules[f"TAIL_{x}"] = [
            Alternative(0.35, ()),
            Alternative(0.30, (f"PPV_{x}",)),
            Alternative(0.15, (f"adv:ADV_{x}",)),
            Alternative(0.20, (f"PPV_{x}", f"adv:ADV_{x}")),
        ]
        rules[f"PPV_{x}"] = [
            Alternative(0.6, (f"LOCS_{x}",)),
            Alternative(0.2, ("with:PREP", f"det:DET_{x}", "ADJS", "tool:INSTRUMENT")),
            Alternative(0.1, ("with:PREP", f"det:DET_{x}", "ADJS", "person:COMPANION")),
            Alternative(0.1, ("with:PREP", f"det:DET_{x}", "ADJS", "animal:COMPANION")),
        ]
    return rules


def grammar_a(max_depth: int = 2, agent_bias: float = TRAIN_AGENT_BIAS, name: str = "A") -> Grammar:
    """Grammar A. ``agent_bias`` = P(subject is a person) = P(object is an animal)."""
    return Grammar(name, _rules_a(agent_bias), "S", LEXICON, ROLES, max_depth)


def grammar_b(max_depth: int = 2, agent_bias: float = TRAIN_AGENT_BIAS) -> Grammar:
    """Grammar B: same roles and words; verb-final clauses, fronted adverbials, pre-verbal PPs."""
    rules = _rules_a(agent_bias)
    rules["REL"] = [
        Alternative(0.5, ("who:REL_SUBJ", "TAILB_EMB", "verb:VERB_EMB")),
        Alternative(0.5, ("who:REL_OBJ", "NP_SUBJ_EMB", "TAILB_EMB", "verb:VERB_EMB")),
    ]
    for x in ("MAIN", "EMB"):
        rules[f"VP_{x}"] = [
            Alternative(0.45, (f"det:DET_{x}", "ADJS", f"N_OBJ_{x}", f"TAILB_{x}", f"verb:VERB_{x}")),
            Alternative(0.35, (f"TAILB_{x}", f"verb:VERB_{x}")),
            Alternative(0.20, ("that:COMP", "CLAUSE_EMB", f"verb:VERB_{x}"), embeds=True),
        ]
        rules[f"TAILB_{x}"] = [
            Alternative(0.5, ()),
            Alternative(0.3, (f"PPV_{x}",)),
            Alternative(0.2, (f"adv:ADV_{x}",)),
        ]
        del rules[f"TAIL_{x}"]
    return Grammar("B", rules, "S", LEXICON, ROLES, max_depth)
