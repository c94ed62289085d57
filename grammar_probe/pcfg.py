"""The grammar engine: probabilistic grammars whose every token carries a grammatical role.

A grammar is data: a rule table (nonterminal -> weighted alternatives), a lexicon (word class ->
words) and the role inventory. Terminals are written ``"<word class>:<ROLE>"``: a word drawn
uniformly from the class, labelled with the role. An alternative flagged ``embeds`` opens a nested
clause (relative or complement clause); it adds one level of depth and is unavailable once the
depth cap is reached, which keeps the language finite-state and makes exact inference possible
(:meth:`Grammar.posteriors`).

Role *kinds* are not declared here: they are computed from the grammar by
:mod:`grammar_probe.ceilings` (what a causal reader, a bidirectional reader and a k-token window
can decide). The shipped grammars live in :mod:`grammar_probe.grammar`.

Everything is validated when a :class:`Grammar` is built; a bad table raises :class:`GrammarError`
naming the rule, symbol or word at fault.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "UNK",
    "Alternative",
    "Grammar",
    "GrammarError",
    "Posteriors",
    "Role",
    "Sentence",
]

UNK = "<unk>"  # the one observation every unseen word becomes (the unseen-word protocol)


class GrammarError(ValueError):
    """A grammar table is malformed; the message names the rule, symbol or word."""


@dataclass(frozen=True)
class Role:
    name: str
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
    classes: tuple[str, ...]  # the word class of each token (what the exact posterior conditions on)
    depth: int


@dataclass(frozen=True)
class Posteriors:
    """Exact role posteriors of one sentence, one dict {role: probability} per token.

    ``causal[t]`` conditions on the observations up to and including t; ``bidirectional[t]`` on the
    whole sentence. Both are computed from the grammar itself (no estimation), so their argmax is the
    best any tagger of that information can do.
    """

    causal: tuple[dict[str, float], ...]
    bidirectional: tuple[dict[str, float], ...]


_Stack = tuple[tuple[str, int], ...]  # pending (symbol, depth) items, top of the stack last


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
        self._closure_memo: dict[_Stack, tuple[tuple[float, str | None, _Stack], ...]] = {}

    # -- validation -------------------------------------------------------------------------------

    def _validate(self) -> None:
        role_names = [r.name for r in self.roles]
        if len(set(role_names)) != len(role_names):
            raise GrammarError(f"grammar {self.name}: duplicate role names")
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
        flat = {lhs: [a for a in alts if not a.embeds] for lhs, alts in self.rules.items()}
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

    def _allowed(self, sym: str, depth: int, cap: int | None) -> tuple[Alternative, ...]:
        return tuple(a for a in self.rules[sym] if not a.embeds or cap is None or depth < cap)

    def sample(
        self,
        rng: random.Random,
        max_depth: int | None = None,
        lexicon: Mapping[str, Sequence[str]] | None = None,
    ) -> Sentence:
        """Draw one sentence. ``lexicon`` overrides word classes (e.g. reserve nonce words)."""
        cap = self.max_depth if max_depth is None else max_depth
        words = {**self.lexicon, **(lexicon or {})}
        tokens: list[str] = []
        roles: list[str] = []
        classes: list[str] = []
        deepest = 0
        # Explicit stack of (symbol, depth): iterative so deep caps cannot hit the recursion limit.
        stack: list[tuple[str, int]] = [(self.start, 0)]
        while stack:
            sym, depth = stack.pop()
            if ":" in sym:
                cls, role = sym.split(":", 1)
                tokens.append(rng.choice(words[cls]))
                roles.append(role)
                classes.append(cls)
                continue
            alts = self._allowed(sym, depth, cap)
            alt = rng.choices(alts, weights=[a.weight for a in alts])[0]
            child = depth + 1 if alt.embeds else depth
            deepest = max(deepest, child)
            stack.extend((s, child) for s in reversed(alt.symbols))
        return Sentence(tuple(tokens), tuple(roles), tuple(classes), deepest)

    # -- exact inference --------------------------------------------------------------------------

    def _closure(self, stack: _Stack) -> tuple[tuple[float, str | None, _Stack], ...]:
        """Every way the derivation can reach its next terminal from ``stack``.

        Returns (probability, terminal symbol, stack after it) triples; terminal ``None`` means the
        sentence ends here (empty stack). Memoised: the depth cap makes the set of stacks finite.
        """
        memo = self._closure_memo.get(stack)
        if memo is not None:
            return memo
        if not stack:
            result: tuple[tuple[float, str | None, _Stack], ...] = ((1.0, None, ()),)
        else:
            (sym, depth), rest = stack[-1], stack[:-1]
            if ":" in sym:
                result = ((1.0, sym, rest),)
            else:
                alts = self._allowed(sym, depth, self.max_depth)
                total = sum(a.weight for a in alts)
                merged: dict[tuple[str | None, _Stack], float] = defaultdict(float)
                for a in alts:
                    child = depth + 1 if a.embeds else depth
                    pushed = rest + tuple((s, child) for s in reversed(a.symbols))
                    for p, term, after in self._closure(pushed):
                        merged[(term, after)] += a.weight / total * p
                result = tuple((p, term, after) for (term, after), p in merged.items())
        self._closure_memo[stack] = result
        return result

    def posteriors(self, observations: Sequence[frozenset[str]]) -> Posteriors:
        """Exact P(role_t | observations) for one sentence, causal and bidirectional.

        ``observations[t]`` is the set of word classes the t-th token may belong to: one class for a
        known word, every open class for an unseen word shown as ``<unk>`` (a nonce word has
        probability one under each open class, so the sets carry the whole likelihood). Forward
        filtering over derivation stacks gives the causal posterior; a backward pass over the same
        stacks gives the bidirectional one. Raises ``ValueError`` if the grammar cannot produce the
        observations.
        """
        T = len(observations)
        alpha: dict[_Stack, float] = {((self.start, 0),): 1.0}
        # joint[t][(role, stack after t)] = forward mass of consuming token t with that role.
        joint: list[dict[tuple[str, _Stack], float]] = []
        causal: list[dict[str, float]] = []
        for t, allowed in enumerate(observations):
            step: dict[tuple[str, _Stack], float] = defaultdict(float)
            for stack, a in alpha.items():
                for p, term, after in self._closure(stack):
                    if term is None:
                        continue
                    cls, role = term.split(":", 1)
                    if cls in allowed:
                        step[(role, after)] += a * p
            total = sum(step.values())
            if total <= 0:
                raise ValueError(f"grammar {self.name} cannot produce token {t} of this sentence")
            step = {k: v / total for k, v in step.items()}  # rescaled per step: no underflow
            joint.append(step)
            by_role: dict[str, float] = defaultdict(float)
            nxt: dict[_Stack, float] = defaultdict(float)
            for (role, after), v in step.items():
                by_role[role] += v
                nxt[after] += v
            causal.append(dict(by_role))
            alpha = dict(nxt)
        # Backward: beta[stack] = P(rest of the observations, then the end | stack after token t).
        beta = {s: sum(p for p, term, _ in self._closure(s) if term is None) for s in alpha}
        bidirectional: list[dict[str, float]] = [{} for _ in range(T)]
        for t in range(T - 1, -1, -1):
            post: dict[str, float] = defaultdict(float)
            for (role, after), v in joint[t].items():
                post[role] += v * beta.get(after, 0.0)
            z = sum(post.values())
            if z <= 0:
                raise ValueError(f"grammar {self.name} cannot finish this sentence")
            bidirectional[t] = {r: v / z for r, v in post.items() if v > 0}
            if t == 0:
                break
            allowed = observations[t]
            prev: dict[_Stack, float] = {}
            for stack in {after for (_, after) in joint[t - 1]}:
                b = 0.0
                for p, term, after in self._closure(stack):
                    if term is not None and term.split(":", 1)[0] in allowed:
                        b += p * beta.get(after, 0.0)
                prev[stack] = b
            scale = max(prev.values()) or 1.0
            beta = {s: b / scale for s, b in prev.items()}
        return Posteriors(tuple(causal), tuple(bidirectional))

    def observe(self, sentence: Sentence, unseen: frozenset[str] = frozenset()) -> list[frozenset[str]]:
        """The observation sets of a sentence when words of the ``unseen`` classes are shown as <unk>."""
        return [unseen if c in unseen else frozenset((c,)) for c in sentence.classes]
