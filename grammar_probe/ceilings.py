"""Decidability ceilings per role, and each role's kind, computed from the grammar.

For every role, on a large fresh sample of sentences, two numbers per kind of information:

- *accuracy*: the per-role accuracy of the best tagger that has that information (the argmax of
  P(role | information); a token's credit is 1/m when its role is among m tied argmax roles);
- *identification*: the posterior the information gives to the true role, averaged over the role's
  tokens, E[P(role_t | information) | role_t = r]. It equals the accuracy when the information
  decides the role, and unlike a per-role accuracy it is not inflated for the majority role of an
  undecided context (a tagger that always answers VERB_EMB after a verb gets VERB_EMB "right" 100%
  of the time without deciding anything). It never decreases when information is added, so it is
  what the kind rule compares.

Information levels:

- ``causal``: the words up to and including t. Exact: the grammar's own posterior
  P(role_t | prefix), from forward filtering over derivation stacks (:meth:`Grammar.posteriors`).
  No lookup table is fitted, so nothing over-fits (a table keyed by long prefixes would find most
  keys unique and look 100% decidable); the only error is Monte Carlo error over sentences.
- ``bidirectional``: the whole sentence (forward-backward over the same stacks).
- ``window_k`` (k = 0..6): the current word and the k previous tokens. No closed form, so a lookup
  table keyed by the window's word classes is fitted on one half of the sample and scored on the
  other, and the other way round: what a concrete window tagger reaches on unseen data, a lower
  bound on the best window. The same tables scored on their own half give the in-sample value, an
  upper bound; both are kept and their difference is the estimator's bias. Keys are word classes,
  not words: the words of a class are interchangeable by construction (drawn uniformly,
  independently of the role), so P(role | window of words) = P(role | window of classes). Unseen
  keys back off to shorter windows. ``window_best`` is the per-role accuracy at the k <= 6 with the
  best overall held-out accuracy: "the best k <= 6 window tagger".
- ``causal_unseen``: the causal posterior when the open-class words are shown as ``<unk>``.

Kinds (thresholds fixed here, before any model was run, and documented in docs/grammar_probe.md):

- ``ambiguous``: causal accuracy < HIGH: even a reader with the whole prefix and the grammar fails;
- ``structural``: otherwise, when the best window's identification (k <= 6) is at least GAP below
  the causal identification: the role needs clause depth or attachment beyond any short window;
- ``lexical``: otherwise, when the current word alone identifies the role as well as the whole
  prefix does (within WORD_TOL), or hiding the word's identity (<unk>) costs at least GAP:
  word identity decides;
- ``local``: none of these: a short window decides the role but the word alone does not.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from grammar_probe.pcfg import UNK, Grammar, Sentence

__all__ = [
    "GAP",
    "HIGH",
    "KINDS",
    "MAX_WINDOW",
    "WORD_TOL",
    "RoleCeilings",
    "WindowTables",
    "derive_kind",
    "score_windows",
    "estimate_ceilings",
    "exact_tallies",
    "window_tallies",
]

HIGH = 0.90  # a causal ceiling below this makes the role ambiguous
GAP = 0.10  # "clearly below": the best k <= 6 window at least 10 points under the causal ceiling
WORD_TOL = 0.02  # the word alone "reaches" the ceiling within 2 points
MAX_WINDOW = 6
KINDS: tuple[str, ...] = ("structural", "local", "lexical", "ambiguous")
BOS = "<s>"


@dataclass
class RoleCeilings:
    tokens: int
    causal: float
    bidirectional: float
    causal_unseen: float
    window_k: dict[int, float]
    window_k_in_sample: dict[int, float]
    window_best: float
    id_causal: float
    id_bidirectional: float
    id_causal_unseen: float
    id_window_k: dict[int, float]

    @property
    def kind(self) -> str:
        return derive_kind(self)


def _credit(post: dict[str, float], role: str) -> float:
    """1/m if ``role`` is among the m argmax roles of ``post``, else 0."""
    if not post:
        return 0.0
    top = max(post.values())
    best = [r for r, p in post.items() if p >= top - 1e-12]
    return 1.0 / len(best) if role in best else 0.0


@dataclass
class _Tally:
    """Per-role sums of accuracy credit and identification, and token counts."""

    acc: dict[str, float]
    ident: dict[str, float]
    count: Counter

    @classmethod
    def empty(cls) -> _Tally:
        return cls(defaultdict(float), defaultdict(float), Counter())

    def add(self, post: dict[str, float], role: str) -> None:
        self.acc[role] += _credit(post, role)
        z = sum(post.values())
        self.ident[role] += post.get(role, 0.0) / z if z > 0 else 0.0
        self.count[role] += 1

    def merge(self, other: _Tally) -> None:
        for r, n in other.count.items():
            self.acc[r] += other.acc[r]
            self.ident[r] += other.ident[r]
            self.count[r] += n

    def mean(self) -> tuple[dict[str, float], dict[str, float]]:
        return ({r: self.acc[r] / n for r, n in self.count.items()},
                {r: self.ident[r] / n for r, n in self.count.items()})

    def overall(self) -> float:
        return sum(self.acc.values()) / max(1, sum(self.count.values()))


def exact_tallies(
    grammar: Grammar, sentences: Sequence[Sentence], unseen: frozenset[str] = frozenset()
) -> tuple[_Tally, _Tally]:
    """Causal and bidirectional tallies from the grammar's exact posteriors."""
    causal, bidir = _Tally.empty(), _Tally.empty()
    for s in sentences:
        post = grammar.posteriors(grammar.observe(s, unseen))
        for t, role in enumerate(s.roles):
            causal.add(post.causal[t], role)
            bidir.add(post.bidirectional[t], role)
    return causal, bidir


@dataclass
class _Table:
    keys: np.ndarray  # sorted window codes
    counts: np.ndarray  # (keys, roles) role counts per window

    @classmethod
    def fit(cls, codes: np.ndarray, roles: np.ndarray, n_roles: int) -> _Table:
        keys, inv = np.unique(codes, return_inverse=True)
        counts = np.zeros((len(keys), n_roles))
        np.add.at(counts, (inv, roles), 1.0)
        return cls(keys, counts)

    def lookup(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each code in ``counts`` and whether the code was seen at all."""
        if not len(self.keys):
            return np.zeros(len(codes), dtype=np.int64), np.zeros(len(codes), dtype=bool)
        idx = np.clip(np.searchsorted(self.keys, codes), 0, len(self.keys) - 1)
        return idx, self.keys[idx] == codes


class WindowTables:
    """Lookup tables P(role | current observation and the k previous ones), k = 0..max_k.

    Fitted by counting; a key never seen backs off to the largest shorter window that was seen.
    Observations are word classes or ``<unk>``; one seen only at scoring time matches no key.
    """

    def __init__(self, rows: Sequence[tuple[Sequence[str], Sequence[str]]], roles: Sequence[str],
                 max_k: int = MAX_WINDOW) -> None:
        self.max_k = max_k
        self.roles = list(roles)
        self._role_id = {r: i for i, r in enumerate(self.roles)}
        self._symbols = {o: i for i, o in enumerate(sorted({o for obs, _ in rows for o in obs}))}
        gold = self._gold(rows)
        self.tables = [_Table.fit(self._codes(rows, k), gold, len(self.roles)) for k in range(max_k + 1)]

    def _gold(self, rows: Sequence[tuple[Sequence[str], Sequence[str]]]) -> np.ndarray:
        return np.asarray([self._role_id[r] for _, rs in rows for r in rs], dtype=np.int64)

    def _codes(self, rows: Sequence[tuple[Sequence[str], Sequence[str]]], k: int) -> np.ndarray:
        """One integer per token encoding its window (base = number of symbols + 2 ids)."""
        base = len(self._symbols) + 2  # 0: before the sentence, last: a symbol never fitted
        unknown = base - 1
        out = []
        for obs, _ in rows:
            ids = [0] * k + [self._symbols.get(o, unknown - 1) + 1 for o in obs]
            code = np.zeros(len(obs), dtype=np.int64)
            for j in range(k + 1):  # position t-k+j of the window
                code = code * base + np.asarray(ids[j : j + len(obs)], dtype=np.int64)
            out.append(code)
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def posteriors(self, rows: Sequence[tuple[Sequence[str], Sequence[str]]], k: int) -> np.ndarray:
        """(tokens, roles) P(role | window-k) for the tokens of ``rows``, backing off."""
        post = np.zeros((sum(len(obs) for obs, _ in rows), len(self.roles)))
        for j in range(k + 1):  # larger windows override shorter ones where their key was seen
            idx, found = self.tables[j].lookup(self._codes(rows, j))
            counts = self.tables[j].counts[idx]
            p = counts / np.maximum(counts.sum(1, keepdims=True), 1.0)
            post = np.where(found[:, None], p, post)
        return post

    def tally(self, rows: Sequence[tuple[Sequence[str], Sequence[str]]], k: int) -> _Tally:
        return _tally(self.posteriors(rows, k), self._gold(rows), self.roles)


def _tally(post: np.ndarray, roles: np.ndarray, names: Sequence[str]) -> _Tally:
    tally = _Tally.empty()
    top = post.max(1, keepdims=True)
    is_top = (post >= top - 1e-12) & (top > 0)
    credit = is_top[np.arange(len(roles)), roles] / np.maximum(is_top.sum(1), 1)
    ident = post[np.arange(len(roles)), roles]
    for r in np.unique(roles):
        m = roles == r
        tally.acc[names[r]] += float(credit[m].sum())
        tally.ident[names[r]] += float(ident[m].sum())
        tally.count[names[r]] += int(m.sum())
    return tally


def window_tallies(
    rows: Sequence[tuple[Sequence[str], Sequence[str]]], max_k: int = MAX_WINDOW
) -> tuple[dict[int, _Tally], dict[int, _Tally]]:
    """Window-k tallies for k = 0..max_k, held out (2-fold cross-fitting) and in sample.

    ``rows`` are (observations, roles) pairs; an observation is a word class or ``<unk>``.
    """
    names = sorted({r for _, roles in rows for r in roles})
    halves = (rows[0::2], rows[1::2])
    fitted = [WindowTables(h, names, max_k) for h in halves]
    held, insample = {}, {}
    for k in range(max_k + 1):
        held[k], insample[k] = _Tally.empty(), _Tally.empty()
        for i in (0, 1):
            held[k].merge(fitted[1 - i].tally(halves[i], k))  # fitted on the other half
            insample[k].merge(fitted[i].tally(halves[i], k))  # fitted on this half
    return held, insample


def score_windows(tables: WindowTables, sentences: Sequence[Sentence], k: int,
                  unseen: frozenset[str] = frozenset()) -> dict[str, float]:
    """Per-role accuracy of the window-k tagger ``tables`` on ``sentences``."""
    acc, _ = tables.tally([(_observations(s, unseen), s.roles) for s in sentences], k).mean()
    return acc


def _observations(sentence: Sentence, unseen: frozenset[str]) -> list[str]:
    return [UNK if c in unseen else c for c in sentence.classes]


def sample_sentences(draw: Callable[[random.Random], Sentence], n: int, seed: str) -> list[Sentence]:
    rng = random.Random(seed)
    return [draw(rng) for _ in range(n)]


def estimate_ceilings(
    grammar: Grammar,
    sentences: Sequence[Sentence],
    window_sentences: Sequence[Sentence] | None = None,
    unseen: frozenset[str] = frozenset(),
    max_k: int = MAX_WINDOW,
    return_tables: bool = False,
) -> tuple:
    """Ceilings per role and the k of the best window tagger (and, with ``return_tables``, window
    tables fitted on all of ``window_sentences``, to score other sentences with).

    ``sentences`` feed the exact posteriors; ``window_sentences`` (default: the same) feed the
    window tables, which need more data. ``unseen`` is the set of open classes shown as <unk> for
    ``causal_unseen``.
    """
    causal_t, bidir_t = exact_tallies(grammar, sentences)
    unseen_t, _ = exact_tallies(grammar, sentences, unseen)
    rows = [(_observations(s, frozenset()), s.roles) for s in (window_sentences or sentences)]
    held, insample = window_tallies(rows, max_k)
    best_k = max(range(1, max_k + 1), key=lambda k: (held[k].overall(), -k))
    (c_acc, c_id), (b_acc, b_id), (u_acc, u_id) = causal_t.mean(), bidir_t.mean(), unseen_t.mean()
    w = {k: held[k].mean() for k in held}
    w_in = {k: insample[k].mean()[0] for k in insample}
    out = {}
    for role, n in causal_t.count.items():
        out[role] = RoleCeilings(
            tokens=int(n),
            causal=c_acc[role],
            bidirectional=b_acc[role],
            causal_unseen=u_acc[role],
            window_k={k: w[k][0].get(role, 0.0) for k in w},
            window_k_in_sample={k: w_in[k].get(role, 0.0) for k in w_in},
            window_best=w[best_k][0].get(role, 0.0),
            id_causal=c_id[role],
            id_bidirectional=b_id[role],
            id_causal_unseen=u_id[role],
            id_window_k={k: w[k][1].get(role, 0.0) for k in w},
        )
    if return_tables:
        return out, best_k, WindowTables(rows, sorted(causal_t.count), max_k)
    return out, best_k


def derive_kind(c: RoleCeilings) -> str:
    """The role's kind from its ceilings (the rule is in the module docstring)."""
    if c.causal < HIGH:
        return "ambiguous"
    if max(v for k, v in c.id_window_k.items() if 1 <= k <= MAX_WINDOW) <= c.id_causal - GAP:
        return "structural"
    if c.id_window_k[0] >= c.id_causal - WORD_TOL or c.id_causal_unseen <= c.id_causal - GAP:
        return "lexical"
    return "local"
