"""Grammar corpus (issue 4): role inventory, vocabulary, splits, determinism, rejected inputs."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from grammar_probe.dataset import FEATURES, SPLITS, build_dataset, load_grammar_dataset, write_dataset
from grammar_probe.grammar import (
    LEXICON,
    OPEN_CLASSES,
    RESERVE_LEXICON,
    ROLE_NAMES,
    ROLES,
    STRUCTURAL,
    Alternative,
    Grammar,
    GrammarError,
    grammar_a,
)

SIZES = dict(train_size=800, validation_size=60, test_size=120)


@pytest.fixture(scope="module")
def ds() -> datasets.DatasetDict:
    return build_dataset(seed=3, **SIZES)


def _words(split: datasets.Dataset) -> set[str]:
    return {w for s in split["tokens"] for w in s}


def _role_names(split: datasets.Dataset) -> set[str]:
    names = split.features["roles"].feature.names
    return {names[r] for rs in split["roles"] for r in rs}


def test_twenty_roles_of_both_kinds():
    assert len(ROLE_NAMES) == 20 == len(set(ROLE_NAMES))
    assert {r.kind for r in ROLES} == {"structural", "lexical"}


def test_features_and_splits(ds):
    assert tuple(ds) == SPLITS
    for part in ds.values():
        assert part.features == FEATURES
        assert part.features["roles"].feature.names == list(ROLE_NAMES)
    assert set(ds["test_transfer_b"]["grammar"]) == {"B"}
    assert set(ds["train"]["grammar"]) == {"A"}


def test_exactly_147_training_words(ds):
    assert sum(len(w) for w in LEXICON.values()) == 147
    assert _words(ds["train"]) == {w for ws in LEXICON.values() for w in ws}


def test_every_role_in_train_and_within_a(ds):
    assert _role_names(ds["train"]) == set(ROLE_NAMES)
    assert _role_names(ds["test_within_a"]) == set(ROLE_NAMES)


def test_some_word_form_carries_two_structural_roles(ds):
    names = ds["train"].features["roles"].feature.names
    structural = {r.name for r in ROLES if r.kind == STRUCTURAL}
    roles_of: dict[str, set[str]] = {}
    for toks, rs in zip(ds["train"]["tokens"], ds["train"]["roles"], strict=True):
        for w, r in zip(toks, rs, strict=True):
            if names[r] in structural:
                roles_of.setdefault(w, set()).add(names[r])
    assert roles_of["the"] >= {"DET_AGENT", "DET_PATIENT", "DET_OBLIQUE"}
    assert roles_of["that"] == {"REL_PRON", "COMP"}
    # Every structural role is shared by some word form with another role: position decides.
    for role in structural:
        assert any(role in rs and len(rs) >= 2 for rs in roles_of.values()), role


def test_lexical_roles_are_decided_by_word_identity(ds):
    names = ds["train"].features["roles"].feature.names
    lexical = {r.name for r in ROLES if r.kind != STRUCTURAL}
    for toks, rs in zip(ds["train"]["tokens"], ds["train"]["roles"], strict=True):
        for w, r in zip(toks, rs, strict=True):
            if names[r] == "VERB_TRANS":
                assert w in LEXICON["vtrans"]
            if names[r] in lexical:
                assert w not in LEXICON["animate"] and w not in LEXICON["det"]


def test_test_splits_disjoint_from_train(ds):
    train = {tuple(s) for s in ds["train"]["tokens"]}
    for split in SPLITS[1:]:
        assert not train & {tuple(s) for s in ds[split]["tokens"]}, split


def test_deep_split_is_deeper_than_train(ds):
    assert min(ds["test_deep"]["depth"]) > max(ds["train"]["depth"]) == 2


def test_novel_words_only_reserve_words_in_open_class_slots(ds):
    open_words = {w for c in OPEN_CLASSES for w in LEXICON[c]}
    reserve = {w for ws in RESERVE_LEXICON.values() for w in ws}
    novel = _words(ds["test_novel_words"])
    assert not novel & open_words
    assert len(novel & reserve) > 0.9 * len(reserve)
    assert not _words(ds["train"]) & reserve
    # Open-class roles always land on reserve words; closed-class roles on training words.
    names = ds["test_novel_words"].features["roles"].feature.names
    for toks, rs in zip(ds["test_novel_words"]["tokens"], ds["test_novel_words"]["roles"], strict=True):
        for w, r in zip(toks, rs, strict=True):
            if names[r] in {"AGENT", "PATIENT", "ADJ_AGENT", "VERB_TRANS", "LOCATION", "ADV_TIME"}:
                assert w in reserve, (w, names[r])
            if names[r].startswith("DET_") or names[r] in {"REL_PRON", "COMP", "END"}:
                assert w not in reserve


def test_deterministic_by_fingerprint_and_bytes(tmp_path):
    a, b, c = (build_dataset(seed=s, **SIZES) for s in (5, 5, 6))
    for split in SPLITS:
        assert a[split]._fingerprint == b[split]._fingerprint != c[split]._fingerprint
    write_dataset(a, tmp_path / "a")
    write_dataset(b, tmp_path / "b")
    cmp = filecmp.dircmp(tmp_path / "a", tmp_path / "b")
    files = [p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()]
    assert files and not cmp.diff_files
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_round_trip_load_from_disk_and_load_dataset(ds, tmp_path):
    write_dataset(ds, tmp_path / "corpus")
    back = datasets.load_from_disk(str(tmp_path / "corpus"))
    assert back["test_deep"]["tokens"] == ds["test_deep"]["tokens"]
    hub = datasets.load_dataset(str(tmp_path / "corpus"), cache_dir=str(tmp_path / "cache"))
    assert set(hub) == set(SPLITS)
    assert hub["train"].features["roles"].feature.names == list(ROLE_NAMES)
    assert hub["train"]["roles"] == ds["train"]["roles"]
    card = (tmp_path / "corpus" / "README.md").read_text()
    assert card.startswith("---\n") and "configs:" in card
    assert all(r in card for r in ROLE_NAMES) and "blicket" not in card and "wug" in card
    load_grammar_dataset(tmp_path / "corpus")


def _grammar(rules, lexicon=None, max_depth=2):
    return Grammar("T", rules, "S", lexicon or {"det": ("the",), "animate": ("dog",)}, ROLES, max_depth)


def test_valid_minimal_grammar_samples():
    g = _grammar({"S": [Alternative(1, ("det:DET_AGENT", "animate:AGENT"))]})
    import random

    s = g.sample(random.Random(0))
    assert s.tokens == ("the", "dog") and s.roles == ("DET_AGENT", "AGENT") and s.depth == 0


@pytest.mark.parametrize(
    ("rules", "lexicon", "max_depth", "message"),
    [
        ({"S": [Alternative(1, ("det:DET_NOPE",))]}, None, 2, "unknown role 'DET_NOPE'"),
        ({"S": [Alternative(1, ("det:DET_AGENT",))], "X": [Alternative(1, ("det:AGENT",))]},
         None, 2, "symbol X is unreachable"),
        ({"S": [Alternative(1, ("det:DET_AGENT", "S")), Alternative(1, ())]}, None, 2,
         "rule S recurses into S without an embedding"),
        ({"S": [Alternative(1, ("det:DET_AGENT", "S"), embeds=True), Alternative(1, ())]}, None, None,
         "recursion without a depth cap"),
        ({"S": [Alternative(1, ("det:DET_AGENT", "S"), embeds=True)]}, None, 2, "rule S cannot finish"),
        ({"S": [Alternative(1, ("det:DET_AGENT",))]}, {"det": ("the", "dog"), "animate": ("dog",)}, 2,
         "word 'dog' is listed in two classes"),
        ({"S": [Alternative(1, ("NP",))]}, None, 2, "undefined symbol 'NP'"),
        ({"S": [Alternative(0, ("det:DET_AGENT",))]}, None, 2, "rule S has a weight <= 0"),
    ],
)
def test_bad_grammars_rejected_naming_the_culprit(rules, lexicon, max_depth, message):
    with pytest.raises(GrammarError, match=message):
        _grammar(rules, lexicon, max_depth)


@pytest.mark.parametrize("field", ["train_size", "validation_size", "test_size"])
@pytest.mark.parametrize("value", [0, -3])
def test_bad_sizes_rejected(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a positive integer"):
        build_dataset(**{**SIZES, field: value})


def test_shipped_grammars_validate():
    assert grammar_a().max_depth == 2
    with pytest.raises(GrammarError, match="depth cap"):
        grammar_a(max_depth=None)


def test_cli_build_rejects_bad_size_with_one_line(tmp_path):
    out = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "grammar_probe", "build", "--out", str(out), "--train-size", "0"],
        capture_output=True, text=True, cwd=Path(__file__).parents[1],
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: train_size must be a positive integer, got 0"
    assert not out.exists() and not list(tmp_path.iterdir())


def test_cli_build_writes_dataset(tmp_path):
    out = tmp_path / "corpus"
    proc = subprocess.run(
        [sys.executable, "-m", "grammar_probe", "build", "--out", str(out), "--train-size", "300",
         "--validation-size", "20", "--test-size", "20"],
        capture_output=True, text=True, cwd=Path(__file__).parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    assert len(datasets.load_from_disk(str(out))["train"]) == 300
    assert [p.name for p in tmp_path.iterdir()] == ["corpus"]  # no temp folder left behind


def test_atomic_dir_replaces_on_success_and_keeps_old_on_failure(tmp_path):
    from ema_boundary.io import atomic_dir

    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("first")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("half-written")
        raise RuntimeError("boom")
    assert (target / "a.txt").read_text() == "first"
    with atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("second")
    assert sorted(p.name for p in target.iterdir()) == ["b.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
