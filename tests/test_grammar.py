"""Grammar corpus (issues 4, 12): role inventory, vocabulary, splits, determinism, rejected inputs."""

from __future__ import annotations

import filecmp
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import datasets
import pytest

from ema_boundary.io import MARKER
from grammar_probe.dataset import (
    FEATURES,
    SPLITS,
    build_dataset,
    compute_ceilings,
    load_ceilings,
    load_grammar_dataset,
    write_dataset,
)
from grammar_probe.grammar import (
    DEV_RESERVE_LEXICON,
    LEXICON,
    OPEN_CLASSES,
    RESERVE_LEXICON,
    ROLE_NAMES,
    ROLES,
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


def test_twenty_roles():
    assert len(ROLE_NAMES) == 20 == len(set(ROLE_NAMES))
    assert all(r.description for r in ROLES)


def test_features_and_splits(ds):
    assert tuple(ds) == SPLITS
    for part in ds.values():
        assert part.features == FEATURES
        assert part.features["roles"].feature.names == list(ROLE_NAMES)
    assert set(ds["test_transfer_b"]["grammar"]) == {"B"}
    assert set(ds["train"]["grammar"]) == {"A"}
    assert set(ds["test_counterfactual"]["grammar"]) == {"A_counterfactual"}


def test_exactly_147_training_words(ds):
    assert sum(len(w) for w in LEXICON.values()) == 147
    assert _words(ds["train"]) == {w for ws in LEXICON.values() for w in ws}


def test_every_role_in_train_and_within_a(ds):
    assert _role_names(ds["train"]) == set(ROLE_NAMES)
    assert _role_names(ds["test_within_a"]) == set(ROLE_NAMES)


def _roles_of(split: datasets.Dataset) -> dict[str, set[str]]:
    names = split.features["roles"].feature.names
    out: dict[str, set[str]] = {}
    for toks, rs in zip(split["tokens"], split["roles"], strict=True):
        for w, r in zip(toks, rs, strict=True):
            out.setdefault(w, set()).add(names[r])
    return out


def test_one_word_form_plays_a_role_in_either_clause(ds):
    """Clause membership is not in the word: the same forms are main-clause and embedded-clause words."""
    roles_of = _roles_of(ds["train"])
    assert roles_of["the"] == {"DET_MAIN", "DET_EMB"}
    assert roles_of["who"] == {"REL_SUBJ", "REL_OBJ"}
    assert all(roles_of[v] == {"VERB_MAIN", "VERB_EMB"} for v in LEXICON["verb"])
    assert roles_of["park"] == {"LOC_MAIN", "LOC_EMB"}
    assert {"SUBJ_MAIN", "OBJ_MAIN", "SUBJ_EMB", "OBJ_EMB", "COMPANION"} <= roles_of["dog"] | roles_of["cat"]


def test_lexical_roles_sit_on_their_word_classes(ds):
    roles_of = _roles_of(ds["train"])
    for w, roles in roles_of.items():
        if "INSTRUMENT" in roles:
            assert w in LEXICON["tool"] and roles == {"INSTRUMENT"}
        if "PREP" in roles:
            assert w in LEXICON["prep"] + LEXICON["with"] and roles == {"PREP"}
        if "COMPANION" in roles:
            assert w in LEXICON["person"] + LEXICON["animal"]


def test_counterfactual_reverses_the_training_noun_bias(ds):
    def share(split, prefix, cls):
        names = split.features["roles"].feature.names
        hits = [w in LEXICON[cls] for toks, rs in zip(split["tokens"], split["roles"], strict=True)
                for w, r in zip(toks, rs, strict=True) if names[r].startswith(prefix)]
        return sum(hits) / len(hits)

    assert 0.8 < share(ds["train"], "SUBJ_", "person") < 0.9  # TRAIN_AGENT_BIAS = 0.85
    assert 0.8 < share(ds["train"], "OBJ_", "animal") < 0.9
    assert share(ds["test_counterfactual"], "SUBJ_", "animal") == 1
    assert share(ds["test_counterfactual"], "OBJ_", "person") == 1


def test_test_splits_disjoint_from_train(ds):
    train = {tuple(s) for s in ds["train"]["tokens"]}
    for split in SPLITS[1:]:
        assert not train & {tuple(s) for s in ds[split]["tokens"]}, split


def test_deep_split_is_deeper_than_train(ds):
    assert min(ds["test_deep"]["depth"]) > max(ds["train"]["depth"]) == 2


def test_novel_words_only_nonce_words_in_open_class_slots(ds):
    open_words = {w for c in OPEN_CLASSES for w in LEXICON[c]}
    test_nonce = {w for ws in RESERVE_LEXICON.values() for w in ws}
    dev_nonce = {w for ws in DEV_RESERVE_LEXICON.values() for w in ws}
    assert not test_nonce & dev_nonce and not (test_nonce | dev_nonce) & {w for ws in LEXICON.values() for w in ws}
    novel, dev = _words(ds["test_novel_words"]), _words(ds["validation_novel_words"])
    assert not novel & open_words and not dev & open_words
    assert len(novel & test_nonce) > 0.9 * len(test_nonce) and not novel & dev_nonce
    assert len(dev & dev_nonce) > 0.9 * len(dev_nonce) and not dev & test_nonce
    assert not _words(ds["train"]) & (test_nonce | dev_nonce)
    # Noun and verb roles always land on nonce words; closed-class roles on training words.
    names = ds["test_novel_words"].features["roles"].feature.names
    for toks, rs in zip(ds["test_novel_words"]["tokens"], ds["test_novel_words"]["roles"], strict=True):
        for w, r in zip(toks, rs, strict=True):
            if names[r] in {"SUBJ_MAIN", "OBJ_EMB", "VERB_MAIN", "VERB_EMB", "LOC_MAIN", "INSTRUMENT"}:
                assert w in test_nonce, (w, names[r])
            if names[r].startswith("DET_") or names[r] in {"ADJ", "REL_SUBJ", "COMP", "END", "PREP"}:
                assert w not in test_nonce


@pytest.mark.slow
def test_deterministic_by_fingerprint_and_bytes(tmp_path):
    a, b, c = (build_dataset(seed=s, **SIZES) for s in (5, 5, 6))
    for split in SPLITS:
        assert a[split]._fingerprint == b[split]._fingerprint != c[split]._fingerprint
    write_dataset(a, tmp_path / "a")
    write_dataset(b, tmp_path / "b")
    # Every file but the output marker (it records when the folder was written) is byte-identical.
    cmp = filecmp.dircmp(tmp_path / "a", tmp_path / "b", ignore=[MARKER])
    files = [p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file() and p.name != MARKER]
    assert files and not cmp.diff_files
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


@pytest.fixture(scope="module")
def ceilings(ds) -> dict:
    return compute_ceilings(ds, seed=3, ceiling_sentences=150, window_sentences=1500)


@pytest.mark.slow
def test_ceilings_cover_every_role_and_evaluation_split(ceilings, ds):
    assert list(ceilings["roles"]) == list(ROLE_NAMES)
    assert set(ceilings["splits"]) == set(SPLITS) - {"train", "validation"}
    for c in ceilings["roles"].values():
        assert c["kind"] in ("structural", "local", "lexical", "ambiguous")
        assert set(c["window_k"]) == set(range(13)) and 0 <= c["causal"] <= c["bidirectional"] + 1e-9
    novel = ceilings["splits"]["test_novel_words"]
    assert novel["INSTRUMENT"]["causal"] < 0.6 < ceilings["splits"]["test_within_a"]["INSTRUMENT"]["causal"]
    assert "window_best" in ceilings["splits"]["test_within_a"]["VERB_MAIN"]


def test_round_trip_load_from_disk_and_load_dataset(ds, ceilings, tmp_path):
    write_dataset(ds, tmp_path / "corpus", ceilings=ceilings)
    back = datasets.load_from_disk(str(tmp_path / "corpus"))
    assert back["test_deep"]["tokens"] == ds["test_deep"]["tokens"]
    hub = datasets.load_dataset(str(tmp_path / "corpus"), cache_dir=str(tmp_path / "cache"))
    assert set(hub) == set(SPLITS)
    assert hub["train"].features["roles"].feature.names == list(ROLE_NAMES)
    assert hub["train"]["roles"] == ds["train"]["roles"]
    card = (tmp_path / "corpus" / "README.md").read_text()
    assert card.startswith("---\n") and "configs:" in card
    assert all(r in card for r in ROLE_NAMES) and "blicket" not in card and "wug" in card and "pilk" in card
    assert all(f"| {r} | {c['kind']} |" in card for r, c in ceilings["roles"].items())  # kinds from the ceilings
    load_grammar_dataset(tmp_path / "corpus")
    assert load_ceilings(tmp_path / "corpus") == json.loads(json.dumps(ceilings))


def _grammar(rules, lexicon=None, max_depth=2):
    return Grammar("T", rules, "S", lexicon or {"det": ("the",), "animate": ("dog",)}, ROLES, max_depth)


def test_valid_minimal_grammar_samples():
    g = _grammar({"S": [Alternative(1, ("det:DET_MAIN", "animate:SUBJ_MAIN"))]})
    s = g.sample(random.Random(0))
    assert s.tokens == ("the", "dog") and s.roles == ("DET_MAIN", "SUBJ_MAIN") and s.depth == 0


@pytest.mark.parametrize(
    ("rules", "lexicon", "max_depth", "message"),
    [
        ({"S": [Alternative(1, ("det:DET_NOPE",))]}, None, 2, "unknown role 'DET_NOPE'"),
        ({"S": [Alternative(1, ("det:DET_MAIN",))], "X": [Alternative(1, ("det:SUBJ_MAIN",))]},
         None, 2, "symbol X is unreachable"),
        ({"S": [Alternative(1, ("det:DET_MAIN", "S")), Alternative(1, ())]}, None, 2,
         "rule S recurses into S without an embedding"),
        ({"S": [Alternative(1, ("det:DET_MAIN", "S"), embeds=True), Alternative(1, ())]}, None, None,
         "recursion without a depth cap"),
        ({"S": [Alternative(1, ("det:DET_MAIN", "S"), embeds=True)]}, None, 2, "rule S cannot finish"),
        ({"S": [Alternative(1, ("det:DET_MAIN",))]}, {"det": ("the", "dog"), "animate": ("dog",)}, 2,
         "word 'dog' is listed in two classes"),
        ({"S": [Alternative(1, ("NP",))]}, None, 2, "undefined symbol 'NP'"),
        ({"S": [Alternative(0, ("det:DET_MAIN",))]}, None, 2, "rule S has a weight <= 0"),
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
    # A sampled sentence is a derivation the exact inference accepts (posteriors sum to one).
    g = grammar_a()
    s = g.sample(random.Random(1))
    post = g.posteriors(g.observe(s))
    assert all(sum(p.values()) == pytest.approx(1) for p in (*post.causal, *post.bidirectional))


def test_missing_or_bad_ceilings_file_is_one_clear_error(ds, tmp_path):
    from grammar_probe.dataset import DatasetFormatError

    write_dataset(ds, tmp_path / "nocei")
    with pytest.raises(DatasetFormatError, match="ceilings.json is missing"):
        load_ceilings(tmp_path / "nocei")
    (tmp_path / "nocei" / "ceilings.json").write_text("{not json")
    with pytest.raises(DatasetFormatError, match="not readable JSON"):
        load_ceilings(tmp_path / "nocei")


@pytest.mark.slow
def test_cli_build_rejects_bad_size_with_one_line(tmp_path):
    out = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "grammar_probe", "build", "--output_dir", str(out), "--train_size", "0"],
        capture_output=True, text=True, cwd=Path(__file__).parents[1],
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("python -m grammar_probe build: error: argument --train_size/--train-size: "
                                   "must be a positive integer, got '0'")
    assert not out.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("flag", ["--ceiling_sentences", "--window-sentences", "--seed"])
def test_cli_build_rejects_bad_numbers_before_any_work(tmp_path, capsys, flag):
    from grammar_probe.__main__ import main

    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exit_:
        main(["build", "--output_dir", str(out), flag, "-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and flag.replace("-", "_").lstrip("_") in err.replace("-", "_")
    assert not out.exists() and not list(tmp_path.iterdir())


def _build(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grammar_probe", "build", *argv, "--train_size", "300", "--validation_size", "20",
         "--test_size", "20", "--ceiling_sentences", "50", "--window_sentences", "200"],
        capture_output=True, text=True, cwd=cwd or Path(__file__).parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )


@pytest.mark.slow
def test_cli_build_writes_dataset_and_refuses_to_replace_without_the_flag(tmp_path):
    out = tmp_path / "corpus"
    proc = _build("--out", str(out), "--seed", "3")  # the old spelling stays an alias
    assert proc.returncode == 0, proc.stderr
    assert len(datasets.load_from_disk(str(out))["train"]) == 300
    assert load_ceilings(out)["config"]["window_sentences"] == 200
    assert load_ceilings(out)["config"]["seed"] == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]  # no temp folder left behind
    again = _build("--output_dir", str(out))
    assert again.returncode == 2 and "--overwrite_output_dir" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert _build("--output_dir", str(out), "--overwrite_output_dir").returncode == 0


@pytest.mark.slow
def test_cli_never_replaces_a_folder_the_user_made(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep me")
    proc = _build("--output_dir", str(mine), "--overwrite_output_dir")
    assert proc.returncode == 2 and "is not an output of grammar_probe build" in proc.stderr
    assert (mine / "precious.txt").read_text() == "keep me" and [p.name for p in mine.iterdir()] == ["precious.txt"]
    here = _build("--output_dir", ".", cwd=tmp_path)  # the working folder, refused before any work
    assert here.returncode == 2 and "working folder" in here.stderr


@pytest.mark.slow
def test_cli_help_lists_output_dir_and_defaults():
    for command in ("build", "run", "arms"):
        proc = subprocess.run([sys.executable, "-m", "grammar_probe", command, "--help"], capture_output=True,
                              text=True, cwd=Path(__file__).parents[1])
        assert proc.returncode == 0
        text = " ".join(proc.stdout.split())
        assert "--output_dir" in text and "--overwrite_output_dir" in text and "--seed" in text
        assert "(default: 0)" in text


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


def test_dataset_card_is_a_hub_dataset_card(ds, tmp_path):
    from huggingface_hub import DatasetCard

    from grammar_probe.card import build_card

    path = tmp_path / "README.md"
    path.write_text(build_card(ds, {"seed": 0}, None).content, encoding="utf-8")
    card = DatasetCard.load(path)
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0" and data["language"] == ["en"]
    assert data["task_categories"] == ["token-classification"] and data["task_ids"] == ["parsing"]
    assert data["annotations_creators"] == ["machine-generated"] == data["language_creators"]
    assert data["source_datasets"] == ["original"] and data["pretty_name"].startswith("Grammar-probe")
    assert [c["split"] for c in data["configs"][0]["data_files"]] == list(ds)
    assert "# Grammar-probe role corpus" in card.text and "--seed 0" in card.text
