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
- ``window_k`` (k = 0..MAX_WINDOW = 12): the current word and the k previous tokens. No closed form, so a lookup
  table keyed by the window's word classes is fitted on one half of the sample and scored on the
  other, and the other way round: what a concrete window tagger reaches on unseen data, a lower
  bound on the best window. The same tables scored on their own half give the in-sample value, an
  upper bound; both are kept and their difference is the estimator's bias. Keys are word classes,
  not words: the words of a class are interchangeable by construction (drawn uniformly,
  independently of the role), so P(role | window of words) = P(role | window of classes). Unseen
  keys back off to shorter windows. ``window_best`` is the per-role accuracy at the k <= 12 with the
  best overall held-out accuracy: "the best k <= 12 window tagger". ``window_k_se`` is each held-out
  value's sampling error (batch means over 20 interleaved blocks of sentences).
- ``causal_unseen``: the causal posterior when the open-class words are shown as ``<unk>``.

Kinds (thresholds fixed here, before any model was run, and documented in docs/grammar_probe.md):

- ``ambiguous``: causal accuracy < HIGH: even a reader with the whole prefix and the grammar fails;
- ``structural``: otherwise, when the best window's identification (k <= cap, 12 by default) is at least GAP below
  the causal identification: the role needs clause depth or attachment beyond any short window;
- ``lexical``: otherwise, when the current word alone identifies the role as well as the whole
  prefix does (within WORD_TOL), or hiding the word's identity (<unk>) costs at least GAP:
  word identity decides;
- ``local``: none of these: a short window decides the role but the word alone does not.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from grammar_probe.pcfg import UNK, Grammar, Sentence

__all__ = [
    "GAP",
    "HIGH",
    "KINDS",
    "KIND_CAPS",
    "MAX_WINDOW",
    "WORD_TOL",
    "RoleCeilings",
    "WindowEstimate",
    "WindowTables",
    "derive_kind",
    "estimate_ceilings",
    "exact_tallies",
    "window_estimate",
    "window_tallies",
]

HIGH = 0.90  # a causal ceiling below this makes the role ambiguous
GAP = 0.10  # "clearly below": the best k <= cap window at least 10 points under the causal ceiling
WORD_TOL = 0.02  # the word alone "reaches" the ceiling within 2 points
MAX_WINDOW = 12  # the window cap of the kinds: "structural" means no window of up to 12 previous tokens decides
KIND_CAPS: tuple[int, ...] = (6, 8, 12)  # caps of the kinds' sensitivity table
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
    window_k_se: dict[int, float]  # sampling error of window_k (sentence blocks)
    window_best: float
    id_causal: float
    id_bidirectional: float
    id_causal_unseen: float
    id_window_k: dict[int, float]

    @property
    def kind(self) -> str:
        return derive_kind(self)

    def kinds_by_cap(self) -> dict[int, str]:
        """The kind with the window cap at each of :data:`KIND_CAPS` (the sensitivity of the kinds)."""
        return {cap: derive_kind(self, cap) for cap in KIND_CAPS if cap <= max(self.id_window_k)}


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


class _Table:
    """Role counts per window key, stored sparsely: one entry per (key, role) pair that occurred.

    Memory grows with the number of distinct pairs (at most the number of tokens), not keys x roles,
    so windows up to k = 12 over hundreds of thousands of sentences fit.
    """

    def __init__(self, codes: np.ndarray, roles: np.ndarray, n_roles: int) -> None:
        self.n_roles = n_roles
        self.keys, key_of_token = np.unique(codes, return_inverse=True)
        self.total = np.bincount(key_of_token, minlength=len(self.keys))
        self.pairs, self.pair_counts = np.unique(codes * n_roles + roles, return_counts=True)
        key_of_pair = np.searchsorted(self.keys, self.pairs // n_roles)
        self.top = np.zeros(len(self.keys), dtype=np.int64)
        np.maximum.at(self.top, key_of_pair, self.pair_counts)
        self.ties = np.zeros(len(self.keys), dtype=np.int64)  # roles sharing the top count
        np.add.at(self.ties, key_of_pair, self.pair_counts == self.top[key_of_pair])

    def score(self, codes: np.ndarray, roles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each token: whether its key was seen, the argmax credit of its role (1/m among m tied
        roles) and the posterior of its role."""
        if not len(self.keys):
            zero = np.zeros(len(codes))
            return np.zeros(len(codes), dtype=bool), zero, zero
        k = np.clip(np.searchsorted(self.keys, codes), 0, len(self.keys) - 1)
        found = self.keys[k] == codes
        pair = codes * self.n_roles + roles
        p = np.clip(np.searchsorted(self.pairs, pair), 0, len(self.pairs) - 1)
        count = np.where(self.pairs[p] == pair, self.pair_counts[p], 0)
        credit = np.where(found & (count == self.top[k]) & (count > 0), 1.0 / np.maximum(self.ties[k], 1), 0.0)
        ident = np.where(found, count / np.maximum(self.total[k], 1), 0.0)
        return found, credit, ident


Rows = Sequence[tuple[Sequence[str], Sequence[str]]]  # (observations, roles) per sentence


class _Coder:
    """Window codes of every token of ``rows``, one k at a time: code_k = code_{k-1} * base + (the
    observation k tokens back, 0 before the sentence start). Exact (no hashing): base ** (k + 1) fits 64 bits."""

    def __init__(self, rows: Rows, symbols: dict[str, int], role_id: dict[str, int]) -> None:
        self.base = len(symbols) + 2  # 0: before the sentence, base - 1: a symbol never fitted
        unknown = self.base - 1
        self.flat = np.asarray([symbols.get(o, unknown - 1) + 1 for obs, _ in rows for o in obs], dtype=np.int64)
        lengths = np.asarray([len(obs) for obs, _ in rows], dtype=np.int64)
        self.position = np.arange(len(self.flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        self.gold = np.asarray([role_id[r] for _, rs in rows for r in rs], dtype=np.int64)
        self.k = 0
        self.code = self.flat.copy()

    def advance(self) -> np.ndarray:
        self.k += 1
        back = np.zeros_like(self.flat)
        back[self.k :] = self.flat[: len(self.flat) - self.k]
        back[self.position < self.k] = 0
        self.code = self.code * self.base + back
        return self.code


def _check_key_size(max_k: int, n_symbols: int, n_roles: int) -> None:
    if (max_k + 1) * np.log2(n_symbols + 2) + np.log2(max(n_roles, 1)) > 62:
        raise ValueError(f"window k = {max_k} over {n_symbols} symbols does not fit a 64-bit key")


def _symbols(rows: Rows) -> dict[str, int]:
    return {o: i for i, o in enumerate(sorted({o for obs, _ in rows for o in obs}))}


class WindowTables:
    """Lookup tables P(role | current observation and the k previous ones), k = 0..max_k.

    Fitted by counting; a key never seen backs off to the largest shorter window that was seen.
    Observations are word classes or ``<unk>``; one seen only at scoring time matches no key.
    A window reaching before the sentence start sees padding, so it knows how far the start is.
    (Holds every k's table; for hundreds of thousands of sentences use :func:`window_estimate`,
    which streams over k.)
    """

    def __init__(self, rows: Rows, roles: Sequence[str], max_k: int = MAX_WINDOW) -> None:
        self.max_k = max_k
        self.roles = list(roles)
        self._role_id = {r: i for i, r in enumerate(self.roles)}
        self._symbols = _symbols(rows)
        _check_key_size(max_k, len(self._symbols), len(self.roles))
        coder = _Coder(rows, self._symbols, self._role_id)
        self.tables = [_Table(coder.code if k == 0 else coder.advance(), coder.gold, len(self.roles))
                       for k in range(max_k + 1)]

    def token_scores(self, rows: Rows, max_k: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gold role ids (tokens,) and, for every k = 0..max_k, each token's argmax credit and the
        posterior of its role under the backed-off window-k table: two (max_k + 1, tokens) arrays."""
        max_k = self.max_k if max_k is None else max_k
        coder = _Coder(rows, self._symbols, self._role_id)
        credit = np.zeros((max_k + 1, len(coder.gold)))
        ident = np.zeros((max_k + 1, len(coder.gold)))
        previous = (np.zeros(len(coder.gold)), np.zeros(len(coder.gold)))
        for k in range(max_k + 1):
            previous = _back_off(self.tables[k], coder.code if k == 0 else coder.advance(), coder.gold, *previous)
            credit[k], ident[k] = previous
        return coder.gold, credit, ident

    def tally(self, rows: Rows, k: int) -> _Tally:
        gold, credit, ident = self.token_scores(rows, k)
        return _tally(credit[k], ident[k], gold, self.roles)


def _back_off(table: _Table, codes: np.ndarray, gold: np.ndarray, credit: np.ndarray, ident: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Each token's (credit, posterior of its role) under ``table`` where its key was seen, else the
    shorter window's ``credit`` / ``ident``."""
    found, c, i = table.score(codes, gold)
    return np.where(found, c, credit), np.where(found, i, ident)


def _tally(credit: np.ndarray, ident: np.ndarray, roles: np.ndarray, names: Sequence[str]) -> _Tally:
    tally = _Tally.empty()
    n = np.bincount(roles, minlength=len(names))
    acc = np.bincount(roles, weights=credit, minlength=len(names))
    idn = np.bincount(roles, weights=ident, minlength=len(names))
    for r in np.flatnonzero(n):
        tally.acc[names[r]] += float(acc[r])
        tally.ident[names[r]] += float(idn[r])
        tally.count[names[r]] += int(n[r])
    return tally


@dataclass
class WindowEstimate:
    """Window-k accuracies per role, held out (2-fold cross-fitting) and in sample, with sampling errors,
    and (``scored``) other sentence sets tagged by tables fitted on the whole sample."""

    held: dict[int, _Tally]
    in_sample: dict[int, _Tally]
    standard_error: dict[int, dict[str, float]]  # of the held-out per-role accuracy, over sentence blocks
    scored: dict[str, dict[int, _Tally]]


def window_estimate(rows: Rows, max_k: int = MAX_WINDOW, blocks: int = 20,
                    score: dict[str, Rows] | None = None) -> WindowEstimate:
    """Window-k tallies for k = 0..max_k, held out and in sample, and the held-out accuracies' standard
    errors from ``blocks`` interleaved blocks of sentences (batch means: sentences are independent draws,
    tokens of one sentence are not). ``score`` maps names to other (observations, roles) sets, tagged by
    tables fitted on all of ``rows``.

    Streams over k (one k's tables in memory at a time), so 200k sentences and k = 12 fit in memory.
    ``rows`` are (observations, roles) pairs; an observation is a word class or ``<unk>``.
    """
    names = sorted({r for _, roles in rows for r in roles})
    role_id = {r: i for i, r in enumerate(names)}
    symbols = _symbols(rows)
    _check_key_size(max_k, len(symbols), len(names))
    halves = (rows[0::2], rows[1::2])
    coders = [_Coder(h, symbols, role_id) for h in halves]
    whole = _Coder(rows, symbols, role_id)
    others = {name: _Coder(r, symbols, role_id) for name, r in (score or {}).items()}
    held = {k: _Tally.empty() for k in range(max_k + 1)}
    insample = {k: _Tally.empty() for k in range(max_k + 1)}
    scored = {name: {} for name in others}
    block_acc = np.zeros((max_k + 1, blocks, len(names)))
    block_n = np.zeros((blocks, len(names)))
    block = []
    for i in (0, 1):
        lengths = [len(obs) for obs, _ in halves[i]]
        block.append(np.repeat(np.arange(len(lengths)) % blocks, lengths))
        block_n += np.bincount(block[i] * len(names) + coders[i].gold,
                               minlength=blocks * len(names)).reshape(blocks, len(names))
    # Only the previous k's per-token answers are kept (the back-off needs them): memory stays O(tokens).
    zero = [np.zeros(len(c.gold)) for c in coders]
    held_prev = [(z, z) for z in zero]
    in_prev = [(z, z) for z in zero]
    other_prev = {name: (np.zeros(len(c.gold)), np.zeros(len(c.gold))) for name, c in others.items()}
    for k in range(max_k + 1):
        codes = [c.code if k == 0 else c.advance() for c in coders]
        tables = [_Table(codes[i], coders[i].gold, len(names)) for i in (0, 1)]
        for i in (0, 1):
            gold = coders[i].gold
            held_prev[i] = _back_off(tables[1 - i], codes[i], gold, *held_prev[i])  # fitted on the other half
            in_prev[i] = _back_off(tables[i], codes[i], gold, *in_prev[i])  # fitted on this half
            held[k].merge(_tally(*held_prev[i], gold, names))
            insample[k].merge(_tally(*in_prev[i], gold, names))
            block_acc[k] += np.bincount(block[i] * len(names) + gold, weights=held_prev[i][0],
                                        minlength=blocks * len(names)).reshape(blocks, len(names))
        del tables
        if others:
            table = _Table(whole.code if k == 0 else whole.advance(), whole.gold, len(names))
            for name, c in others.items():
                other_prev[name] = _back_off(table, c.code if k == 0 else c.advance(), c.gold, *other_prev[name])
                scored[name][k] = _tally(*other_prev[name], c.gold, names)
            del table
    se: dict[int, dict[str, float]] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for k in range(max_k + 1):
            per_block = block_acc[k] / block_n
            se[k] = {}
            for j, name in enumerate(names):
                v = per_block[block_n[:, j] > 0, j]
                se[k][name] = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
    return WindowEstimate(held, insample, se, scored)


def window_tallies(rows: Rows, max_k: int = MAX_WINDOW) -> tuple[dict[int, _Tally], dict[int, _Tally]]:
    """Window-k tallies for k = 0..max_k, held out (2-fold cross-fitting) and in sample."""
    est = window_estimate(rows, max_k)
    return est.held, est.in_sample


def _observations(sentence: Sentence, unseen: frozenset[str]) -> list[str]:
    return [UNK if c in unseen else c for c in sentence.classes]


def estimate_ceilings(
    grammar: Grammar,
    sentences: Sequence[Sentence],
    window_sentences: Sequence[Sentence] | None = None,
    unseen: frozenset[str] = frozenset(),
    max_k: int = MAX_WINDOW,
    score: dict[str, Sequence[Sentence]] | None = None,
) -> tuple:
    """Ceilings per role and the k of the best window tagger; with ``score``, also the third element
    {name: {k: {role: accuracy}}}: those sentences tagged by window tables fitted on all of
    ``window_sentences``, for every k.

    ``sentences`` feed the exact posteriors; ``window_sentences`` (default: the same) feed the
    window tables, which need more data. ``unseen`` is the set of open classes shown as <unk> for
    ``causal_unseen``.
    """
    causal_t, bidir_t = exact_tallies(grammar, sentences)
    unseen_t, _ = exact_tallies(grammar, sentences, unseen)
    rows = [(_observations(s, frozenset()), s.roles) for s in (window_sentences or sentences)]
    est = window_estimate(rows, max_k, score={name: [(_observations(x, frozenset()), x.roles) for x in sents]
                                              for name, sents in (score or {}).items()})
    held, insample = est.held, est.in_sample
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
            window_k_se={k: est.standard_error[k].get(role, float("nan")) for k in w},
            window_best=w[best_k][0].get(role, 0.0),
            id_causal=c_id[role],
            id_bidirectional=b_id[role],
            id_causal_unseen=u_id[role],
            id_window_k={k: w[k][1].get(role, 0.0) for k in w},
        )
    if score is not None:
        return out, best_k, {name: {k: t.mean()[0] for k, t in per_k.items()} for name, per_k in est.scored.items()}
    return out, best_k


def derive_kind(c: RoleCeilings, cap: int = MAX_WINDOW) -> str:
    """The role's kind from its ceilings, windows up to ``cap`` (the rule is in the module docstring)."""
    if c.causal < HIGH:
        return "ambiguous"
    if max(v for k, v in c.id_window_k.items() if 1 <= k <= cap) <= c.id_causal - GAP:
        return "structural"
    if c.id_window_k[0] >= c.id_causal - WORD_TOL or c.id_causal_unseen <= c.id_causal - GAP:
        return "lexical"
    return "local"
