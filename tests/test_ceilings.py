"""Ceiling estimator (issue 12): exact posteriors, window tables and kinds on grammars whose answers
are known by hand, a brute-force check of the forward-backward, and the shipped grammar's kinds."""

from __future__ import annotations

import itertools
import random
from collections import defaultdict

import pytest

from grammar_probe import ceilings as ceil
from grammar_probe.grammar import OPEN_CLASSES, Alternative, Grammar, Role, grammar_a

FILL = 13  # the cue of TA/TB sits 14 tokens back: beyond any window with k <= 12


def _toy() -> Grammar:
    """Hand-analysable grammar (weights out of 16); every class is a single word named like it.

    - a/b f^7 x: x is TA after a (3/4) or TB after b (1/4): decided by the prefix, not by a window.
    - y c / y d: y is Y1 or Y2 (1/2 each): decided only by the next word.
    - z c: z is Z1 (1/4) or Z2 (3/4) in the very same string: undecidable.
    - w p / w q: P1 or Q1 decided by the word itself.
    - m n / o n: n is N1 after m, N2 after o: the previous word decides, the word alone does not.
    """
    fill = ("f:FILL",) * FILL
    rules = {"S": [
        Alternative(3, ("a:CUE", *fill, "x:TA")),
        Alternative(1, ("b:CUE", *fill, "x:TB")),
        Alternative(2, ("y:Y1", "c:END")),
        Alternative(2, ("y:Y2", "d:END")),
        Alternative(1, ("z:Z1", "c:END")),
        Alternative(3, ("z:Z2", "c:END")),
        Alternative(1, ("w:W", "p:P1")),
        Alternative(1, ("w:W", "q:Q1")),
        Alternative(1, ("m:M", "n:N1")),
        Alternative(1, ("o:O", "n:N2")),
    ]}
    roles = [Role(r, r) for r in ("CUE", "FILL", "TA", "TB", "Y1", "Y2", "END", "Z1", "Z2", "W", "P1", "Q1",
                                  "M", "O", "N1", "N2")]
    lexicon = {w: (w,) for w in "abfxyczdwpqmon"}
    return Grammar("toy", rules, "S", lexicon, roles, max_depth=None)


@pytest.fixture(scope="module")
def toy():
    g = _toy()
    rng = random.Random(0)
    sents = [g.sample(rng) for _ in range(6000)]
    roles, best_k = ceil.estimate_ceilings(g, sents[:1500], sents, unseen=frozenset({"p", "q"}))
    return roles, best_k


def test_exact_ceilings_match_hand_values(toy):
    roles, _ = toy
    expected = {  # role: (causal, bidirectional)
        "TA": (1, 1), "TB": (1, 1),  # the prefix decides
        "Y1": (0.5, 1), "Y2": (0.5, 1),  # a fair tie until the next word
        "Z1": (0, 0), "Z2": (1, 1),  # the same string: the best tagger always says Z2
        "N1": (1, 1), "N2": (1, 1), "P1": (1, 1), "END": (1, 1),
    }
    for role, (causal, bidir) in expected.items():
        assert roles[role].causal == pytest.approx(causal, abs=1e-9), role
        assert roles[role].bidirectional == pytest.approx(bidir, abs=1e-9), role
    assert roles["Z1"].id_causal == pytest.approx(0.25) and roles["Z2"].id_causal == pytest.approx(0.75)
    assert roles["Y1"].id_causal == pytest.approx(0.5) and roles["Y1"].id_bidirectional == pytest.approx(1)
    # Hiding p/q behind <unk> leaves a fair coin between P1 and Q1; nothing else changes.
    assert roles["P1"].causal_unseen == pytest.approx(0.5) and roles["Q1"].id_causal_unseen == pytest.approx(0.5)
    assert roles["TA"].causal_unseen == 1


def test_window_ceilings_match_hand_values(toy):
    roles, best_k = toy
    for k in range(0, 13):  # no window with k <= 12 reaches the cue: the majority TA is always guessed
        assert roles["TA"].window_k[k] == 1 and roles["TB"].window_k[k] == 0
        assert roles["TA"].id_window_k[k] == pytest.approx(0.75, abs=0.03)
        assert roles["TB"].id_window_k[k] == pytest.approx(0.25, abs=0.03)
    # The word n alone: a coin between N1 and N2; the table guesses one of them.
    assert roles["N1"].window_k[0] + roles["N2"].window_k[0] == pytest.approx(1, abs=0.1)
    assert roles["N1"].id_window_k[0] == pytest.approx(0.5, abs=0.03)
    assert roles["N1"].window_k[1] == 1 and roles["N2"].window_k[1] == 1  # the previous word decides
    assert best_k >= 1


def test_kinds_follow_the_rule(toy):
    roles, _ = toy
    kinds = {r: c.kind for r, c in roles.items()}
    assert kinds["TA"] == kinds["TB"] == "structural"
    assert roles["TA"].kinds_by_cap() == {6: "structural", 8: "structural", 12: "structural"}
    assert kinds["Y1"] == kinds["Y2"] == kinds["Z1"] == "ambiguous"
    assert kinds["N1"] == kinds["N2"] == "local"
    assert kinds["P1"] == kinds["CUE"] == kinds["END"] == kinds["Z2"] == "lexical"


def test_derive_kind_thresholds():
    def c(causal, id_causal, id_windows, id_unseen=None):
        return ceil.RoleCeilings(
            tokens=1, causal=causal, bidirectional=1, causal_unseen=causal, window_k={}, window_k_in_sample={},
            window_k_se={}, window_best=0, id_causal=id_causal, id_bidirectional=1,
            id_causal_unseen=id_causal if id_unseen is None else id_unseen,
            id_window_k=dict(enumerate(id_windows)),
        )

    assert ceil.derive_kind(c(0.89, 1, [1] * 7)) == "ambiguous"
    assert ceil.derive_kind(c(1, 1, [0.5] + [0.9] * 6)) == "structural"  # exactly GAP below
    assert ceil.derive_kind(c(1, 1, [0.5] + [0.91] * 6)) == "local"
    assert ceil.derive_kind(c(1, 1, [0.98] + [1] * 6)) == "lexical"  # the word alone, within WORD_TOL
    assert ceil.derive_kind(c(1, 1, [0.5] + [1] * 6, id_unseen=0.9)) == "lexical"  # identity needed
    # The cap decides: a window that reaches the ceiling only at k = 10 is structural under cap 8, not 12.
    late = c(1, 1, [0.5] * 10 + [1] * 3)
    assert ceil.derive_kind(late, 8) == "structural" and ceil.derive_kind(late) == "local"
    assert late.kinds_by_cap() == {6: "structural", 8: "structural", 12: "local"}


def _enumerate(g: Grammar):
    """Every derivation of a finite grammar: (probability, classes, roles)."""
    out = []

    def expand(stack, p, classes, roles):
        if not stack:
            out.append((p, tuple(classes), tuple(roles)))
            return
        (sym, depth), rest = stack[-1], stack[:-1]
        if ":" in sym:
            cls, role = sym.split(":")
            expand(rest, p, classes + [cls], roles + [role])
            return
        alts = [a for a in g.rules[sym] if not a.embeds or depth < g.max_depth]
        total = sum(a.weight for a in alts)
        for a in alts:
            child = depth + 1 if a.embeds else depth
            expand(rest + tuple((s, child) for s in reversed(a.symbols)), p * a.weight / total, classes, roles)

    expand(((g.start, 0),), 1.0, [], [])
    return out


def test_forward_backward_equals_brute_force_on_a_recursive_ambiguous_grammar():
    rules = {
        "S": [Alternative(1, ("X", "e:END"))],
        "X": [Alternative(0.6, ("a:A1", "X2")), Alternative(0.4, ("a:A2", "b:B1"))],
        "X2": [Alternative(0.5, ("b:B2",)), Alternative(0.3, ("c:C", "X"), embeds=True), Alternative(0.2, ())],
    }
    roles = [Role(r, r) for r in ("A1", "A2", "B1", "B2", "C", "END")]
    g = Grammar("rec", rules, "S", {w: (w,) for w in "abce"}, roles, max_depth=2)
    derivations = _enumerate(g)
    assert sum(p for p, _, _ in derivations) == pytest.approx(1)
    for classes in {c for _, c, _ in derivations}:
        post = g.posteriors([frozenset((c,)) for c in classes])
        for t in range(len(classes)):
            causal, bidir = defaultdict(float), defaultdict(float)
            for p, cs, rs in derivations:
                if cs[: t + 1] == classes[: t + 1]:
                    causal[rs[t]] += p
                if cs == classes:
                    bidir[rs[t]] += p
            for brute, exact in ((causal, post.causal[t]), (bidir, post.bidirectional[t])):
                z = sum(brute.values())
                for role in set(brute) | set(exact):
                    assert exact.get(role, 0) == pytest.approx(brute[role] / z, abs=1e-12), (classes, t, role)


def test_held_out_window_is_below_in_sample_for_long_keys():
    """A table keyed by long windows over-fits in sample (rare keys look decided); held out it does not."""
    g = grammar_a()
    rng = random.Random(3)
    rows = [(s.classes, s.roles) for s in (g.sample(rng) for _ in range(300))]
    held, insample = ceil.window_tallies(rows, max_k=6)
    assert insample[6].overall() > held[6].overall() + 0.005
    assert abs(insample[0].overall() - held[0].overall()) < 0.01  # word-class keys: nothing to over-fit


def test_unseen_observation_set_and_impossible_sentence():
    g = _toy()
    post = g.posteriors([frozenset({"p", "q", "w"}), frozenset({"p", "q"})])
    assert post.causal[1] == pytest.approx({"P1": 0.5, "Q1": 0.5})
    with pytest.raises(ValueError, match="cannot produce token 1"):
        g.posteriors([frozenset({"a"}), frozenset({"c"})])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0])
def test_shipped_grammar_structural_roles_need_more_than_a_window(seed):
    """The acceptance property on a small sample: structural roles exist, their causal ceiling is 1 and at
    every window size k <= 12 the window tagger is >= 10 points below it (token-weighted over the structural
    roles); nouns and verbs as <unk> keep structure decidable. (The committed build checks it on 200k
    sentences; this sample is smaller, so the held-out tables are weaker and the check uses a 12-point margin.)"""
    g = grammar_a()
    rng = random.Random(f"test/{seed}")
    sents = [g.sample(rng) for _ in range(8000)]
    roles, _ = ceil.estimate_ceilings(g, sents[:300], sents, unseen=frozenset(OPEN_CLASSES))
    kinds = {r: c.kind for r, c in roles.items()}
    for role in ("DET_MAIN", "DET_EMB", "VERB_MAIN", "VERB_EMB", "OBJ_MAIN", "OBJ_EMB", "LOC_MAIN", "LOC_EMB"):
        assert kinds[role] == "structural", role
    assert kinds["REL_SUBJ"] == kinds["REL_OBJ"] == "ambiguous"
    assert kinds["INSTRUMENT"] == kinds["COMPANION"] == kinds["PREP"] == kinds["END"] == "lexical"
    structural = [c for c in roles.values() if c.kind == "structural"]
    n = sum(c.tokens for c in structural)
    assert sum(c.causal * c.tokens for c in structural) / n == 1
    for k in range(ceil.MAX_WINDOW + 1):
        window = sum(c.window_k[k] * c.tokens for c in structural) / n
        assert 1 - window >= 0.12, k
    assert all(c.causal_unseen == 1 for c in structural)


def test_window_estimate_states_its_sampling_error():
    g = grammar_a()
    rng = random.Random(5)
    rows = [(s.classes, s.roles) for s in (g.sample(rng) for _ in range(2000))]
    est = ceil.window_estimate(rows, max_k=12)
    assert set(est.standard_error) == set(range(13))
    se = est.standard_error[12]["VERB_MAIN"]
    assert 0 < se < 0.05
    assert est.standard_error[0]["END"] == 0  # the full stop is always END: no sampling error at all


def test_sparse_tables_equal_dense_counting():
    """The sparse (key, role) table gives the posterior that plain counting gives."""
    rows = [(("a", "b", "a"), ("X", "Y", "X")), (("a", "b", "b"), ("X", "Y", "Z")), (("b", "a"), ("Z", "X"))]
    t = ceil.WindowTables(rows, ["X", "Y", "Z"], max_k=1)
    gold, credit, ident = t.token_scores(rows)
    # k = 0: "b" is Y twice and Z twice -> a tie (credit 1/2), posterior 1/2 each.
    b_tokens = [i for i, o in enumerate(o for obs, _ in rows for o in obs) if o == "b"]
    assert all(credit[0, i] == 0.5 and ident[0, i] == 0.5 for i in b_tokens)
    # k = 1: "a b" -> Y always, "b b" -> Z, "<s> b" -> Z.
    assert credit[1].tolist() == [1.0] * 8 and ident[1].tolist() == [1.0] * 8


def test_toy_grammar_enumeration_is_complete():
    # Guard for the brute-force helper itself: the toy grammar's 10 sentences, probabilities summing to 1.
    derivations = _enumerate(_toy())
    assert len(derivations) == 10 and sum(p for p, _, _ in derivations) == pytest.approx(1)
    assert len(list(itertools.chain.from_iterable(r for _, _, r in derivations))) == 2 * (FILL + 2) + 8 * 2
