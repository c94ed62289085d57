"""ema_boundary.corpus: local files through the same `datasets` streaming pipeline as C4; exact resume positions."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import tests.train_testkit  # noqa: F401  (puts the repository root on sys.path)
from ema_boundary import corpus, packing

DOCS = [f"Document number {i} says {'word ' * (i % 7)}and ends." for i in range(23)]


@pytest.fixture(scope="module")
def tokenizer():
    return corpus.train_bpe(iter(DOCS * 3), 300)


def _write(tmp_path, kind: str) -> str:
    path = tmp_path / f"docs.{kind}"
    if kind == "txt":
        path.write_text("\n\n".join(DOCS) + "\n")
    elif kind == "jsonl":
        path.write_text("".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(DOCS)))
    else:
        pq.write_table(pa.table({"text": DOCS, "id": list(range(len(DOCS)))}), path)
    return str(path)


@pytest.mark.parametrize("kind", ["txt", "jsonl", "parquet"])
def test_local_files_give_the_documents_and_hold_out_every_nth(tmp_path, kind):
    path = _write(tmp_path, kind)
    corpus.check_data([path], val_every=5)
    train = [ex["text"] for ex in corpus.documents([path], "train", 5)]
    val = [ex["text"] for ex in corpus.documents([path], "validation", 5)]
    assert val == DOCS[::5]
    assert train == [d for i, d in enumerate(DOCS) if i % 5]


def test_blocks_are_the_documents_joined_with_eos(tmp_path, tokenizer):
    path = _write(tmp_path, "jsonl")
    blocks = list(packing.PackedBlocks([path], "train", 5, tokenizer, block_size=16, repeat=False))
    stream = [t for b in blocks for t in b["input_ids"][:-1].tolist()] + blocks[-1]["input_ids"][-1:].tolist()
    expected = [t for i, d in enumerate(DOCS) if i % 5
                for t in tokenizer(d, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]]
    assert stream == expected[: len(stream)] and len(expected) - len(stream) < 16
    assert all(a["input_ids"][-1] == b["input_ids"][0] for a, b in zip(blocks, blocks[1:], strict=False))


def test_resuming_from_any_position_continues_exactly_across_epochs(tmp_path, tokenizer):
    path = _write(tmp_path, "txt")
    stream = iter(packing.PackedBlocks([path], "train", 5, tokenizer, block_size=16))
    blocks = [next(stream) for _ in range(60)]  # about 3 epochs of this tiny corpus
    assert blocks[-1]["pos"][0] >= 2
    for k in range(1, 59):
        start = blocks[k - 1]["pos"].tolist()
        resumed = iter(packing.PackedBlocks([path], "train", 5, tokenizer, 16, start=start))
        for j in range(k, min(k + 4, 60)):
            block = next(resumed)
            assert block["input_ids"].tolist() == blocks[j]["input_ids"].tolist(), (k, j)
            assert block["pos"].tolist() == blocks[j]["pos"].tolist()


def _token_stream(path: str, tokenizer) -> list[int]:
    return [t for i, d in enumerate(DOCS) if i % 5
            for t in tokenizer(d, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]]


def test_shuffled_blocks_are_every_block_once_per_epoch_in_a_new_order(tmp_path, tokenizer):
    path = _write(tmp_path, "txt")
    ids = _token_stream(path, tokenizer)
    n = (len(ids) - 1) // 16
    blocks = {tuple(ids[i * 16: i * 16 + 17]): i for i in range(n)}  # block contents -> its place in the corpus
    stream = iter(packing.training_blocks([path], 5, tokenizer, 16, seed=7))
    epochs = [[blocks[tuple(next(stream)["input_ids"].tolist())] for _ in range(n)] for _ in range(3)]
    for order in epochs:  # each epoch: every block of the corpus exactly once
        assert sorted(order) == list(range(n))
    assert epochs[0] != epochs[1] != epochs[2]  # a new order each epoch
    assert epochs[0][:2] != [epochs[0][0], epochs[0][0] + 1]  # the first two blocks are not neighbours
    assert epochs[0] != list(range(n))
    other = iter(packing.training_blocks([path], 5, tokenizer, 16, seed=8))
    assert [blocks[tuple(next(other)["input_ids"].tolist())] for _ in range(n)] != epochs[0]  # follows the seed
    unshuffled = iter(packing.training_blocks([path], 5, tokenizer, 16, seed=7, shuffle=False))
    assert [blocks[tuple(next(unshuffled)["input_ids"].tolist())] for _ in range(n)] == list(range(n))


def test_shuffled_blocks_resume_from_any_position_across_epochs(tmp_path, tokenizer):
    path = _write(tmp_path, "jsonl")
    tokens = packing.SplitTokens([path], "train", 5, tokenizer)  # shared: tokenized once
    stream = iter(packing.training_blocks([path], 5, tokenizer, 16, seed=3, tokens=tokens))
    blocks = [next(stream) for _ in range(60)]  # about 3 epochs
    assert blocks[-1]["pos"][0] >= 2 and all(b["pos"][2] == 0 for b in blocks)
    for k in range(1, 59):
        start = blocks[k - 1]["pos"].tolist()
        resumed = iter(packing.training_blocks([path], 5, tokenizer, 16, seed=3, start=start, tokens=tokens))
        for j in range(k, min(k + 3, 60)):
            block = next(resumed)
            assert block["input_ids"].tolist() == blocks[j]["input_ids"].tolist(), (k, j)
            assert block["pos"].tolist() == blocks[j]["pos"].tolist()


def test_documents_shared_with_the_held_out_splits_are_found_and_never_trained_on(tmp_path):
    path = _write(tmp_path, "txt")
    assert corpus.shared_documents([path], 5) == (0, None)
    # The same file twice: each copy's validation documents are training documents of the other. Documents longer
    # than a heading or a one-line speech: a leak, not a repeat.
    long_docs = [doc + " It goes on." * 20 for doc in DOCS]
    assert min(map(len, long_docs)) > corpus.SHORT_DOC_CHARS
    (tmp_path / "docs.txt").write_text("\n\n".join(long_docs) + "\n")
    doubled = long_docs + long_docs
    held = {d for i, d in enumerate(doubled) if i % 5 == 0}
    count, first = corpus.shared_documents([path, path], 5)
    assert count == sum(1 for i, d in enumerate(doubled) if i % 5 and d in held) == 10
    assert first == f"{path}: document 2, also document 25 (validation)"
    train = [ex["text"] for ex in corpus.documents([path, path], "train", 5)]
    assert not held & set(train)
    assert len(train) == sum(1 for i in range(46) if i % 5) - count
    assert corpus.shared_documents(["embedded"], 10) == (0, None)  # not checked: the corpus as Python ships it
    assert corpus.repeated_documents([path, path], 5) == (0, 0, None)


def test_short_repeated_documents_leave_the_held_out_splits_and_stay_in_training(tmp_path):
    # WikiText's shape: the same section headings in every article, between paragraphs that are all distinct.
    paras = []
    for article in range(8):
        paras.append(f"= Article {article} =")
        for heading in ("History", "Reception", "See also"):
            paras += [f"= = {heading} = =", f"Article {article} on {heading.lower()}: " + "words and more. " * 20]
    path = tmp_path / "wiki.txt"
    path.write_text("".join(f" {p} \n \n" for p in paras))
    docs = list(corpus.file_documents(path))
    for test_every in (0, 3):
        held, trained, first = corpus.repeated_documents([str(path)], 5, test_every)
        splits = {s: [ex["text"] for ex in corpus.documents([str(path)], s, 5, test_every)]
                  for s in (("train", "validation", "test") if test_every else ("train", "validation"))}
        held_out = [d for i, d in enumerate(docs) if corpus.split_of(i, 5, test_every) != "train"]
        training = [d for i, d in enumerate(docs) if corpus.split_of(i, 5, test_every) == "train"]
        repeats = {d for d in held_out if d in training}
        assert repeats and all(d.startswith("= = ") for d in repeats)
        assert held == sum(d in repeats for d in held_out) and trained == sum(d in repeats for d in training)
        assert first == next(d for d in held_out if d in repeats)
        assert splits["train"] == training  # training keeps every document
        kept = [text for s, texts in splits.items() if s != "train" for text in texts]
        assert sorted(kept) == sorted(d for d in held_out if d not in repeats)
        assert corpus.shared_documents([str(path)], 5, test_every) == (0, None)  # nothing to refuse


def test_embedded_corpus_is_pythons_help_topics():
    docs = corpus.embedded_documents()
    assert len(docs) > 50 and sum(map(len, docs)) > 300_000
    assert any("for_stmt" in d or "The \"for\" statement" in d for d in docs)


def test_c4_goes_through_the_same_pipeline(tmp_path, tokenizer, monkeypatch):
    # The hub is out of reach in tests: serve C4-shaped local JSON lines (text, timestamp, url) under the
    # real call, load_dataset("allenai/c4", "en", split=..., streaming=True).
    import datasets

    real = datasets.load_dataset
    files = {}
    for split, docs in (("train", DOCS), ("validation", DOCS[:5])):
        files[split] = tmp_path / f"c4-{split}.json"
        files[split].write_text("".join(json.dumps({"text": d, "timestamp": "2019", "url": "u"}) + "\n"
                                        for d in docs))

    def fake(path, name=None, split=None, streaming=False, **kwargs):
        assert (path, name, streaming) == ("allenai/c4", "en", True)
        return real("json", data_files=[str(files[split])], split="train", streaming=True)

    monkeypatch.setattr(datasets, "load_dataset", fake)
    corpus.check_data([corpus.C4], val_every=5)
    assert [ex["text"] for ex in corpus.documents(["c4"], "train", 5)] == DOCS  # no hold-out
    assert [ex["text"] for ex in corpus.documents(["c4"], "validation", 5)] == DOCS[:5]
    # With a test split, C4's validation documents alternate: even ones validation, odd ones test.
    assert [ex["text"] for ex in corpus.documents(["c4"], "validation", 5, test_every=3)] == DOCS[:5:2]
    assert [ex["text"] for ex in corpus.documents(["c4"], "test", 5, test_every=3)] == DOCS[1:5:2]
    assert [ex["text"] for ex in corpus.documents(["c4"], "train", 5, test_every=3)] == DOCS
    blocks = iter(packing.PackedBlocks(["c4"], "train", 5, tokenizer, 16))
    first = [next(blocks) for _ in range(5)]
    start = first[3]["pos"].tolist()
    resumed = next(iter(packing.PackedBlocks(["c4"], "train", 5, tokenizer, 16, start=start)))
    assert resumed["input_ids"].tolist() == first[4]["input_ids"].tolist()

    # Shuffled (the training default): the documents pass through a shuffle buffer drawn from (seed, epoch); the
    # position counts shuffled documents, so a resume continues exactly.
    def shuffled(seed, start=(0, 0, 0)):
        return iter(packing.training_blocks(["c4"], 5, tokenizer, 16, seed=seed, shuffle_buffer=8, start=start))

    plain = [b["input_ids"].tolist() for b in itertools.islice(
        packing.PackedBlocks(["c4"], "train", 5, tokenizer, 16), 30)]
    stream = shuffled(1)
    blocks = [next(stream) for _ in range(30)]
    assert [b["input_ids"].tolist() for b in blocks] != plain
    assert [b["input_ids"].tolist() for b in itertools.islice(shuffled(2), 30)] != [b["input_ids"].tolist()
                                                                                     for b in blocks]
    for k in (1, 7, 20):
        resumed = next(shuffled(1, blocks[k - 1]["pos"].tolist()))
        assert resumed["input_ids"].tolist() == blocks[k]["input_ids"].tolist(), k


def test_c4_out_of_reach_is_one_line(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'allenai/c4' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(corpus.DataError, match=r"^allenai/c4: cannot stream it from the hub \(Couldn't"):
        corpus.check_data([corpus.C4], val_every=5)


# ------------------------------------------------------------------------- what a document is
def _docs(path) -> list[str]:
    return list(corpus.file_documents(path))


def _splits(path, val_every: int) -> tuple[list[str], list[str]]:
    return ([ex["text"] for ex in corpus.documents([str(path)], "train", val_every)],
            [ex["text"] for ex in corpus.documents([str(path)], "validation", val_every)])


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_a_document_is_a_paragraph_between_whitespace_only_lines(tmp_path, line_end, bom):
    # WikiText's separator is a line holding one space; tabs, runs of blank lines and a leading blank also
    # separate. Lines inside a paragraph keep their order; the paragraph's outer whitespace goes.
    lines = [" = Title = ", " ", " First paragraph, line one;", "line two. ", "\t", "", "", "Second.", "   ",
             "Third, after spaces", "and a tab-indented\tword.", ""]
    path = tmp_path / "wiki.txt"
    path.write_bytes((bom + line_end.join(lines)).encode())
    expected = ["= Title =", "First paragraph, line one;\nline two.", "Second.",
                "Third, after spaces\nand a tab-indented\tword."]
    assert _docs(path) == expected
    assert corpus.check_data([str(path)], val_every=2) == 4  # the check counts what the reader reads
    assert _splits(path, 2) == (expected[1::2], expected[::2])


def test_long_text_is_cut_at_lines_then_whitespace_then_anywhere(tmp_path):
    cap = corpus.MAX_DOC_CHARS
    lines = [f"line {i} " + " ".join(["word"] * 150) for i in range(200)]  # ~150k characters, no blank line
    long_line = " ".join(f"w{i}" for i in range(12_000))  # ~70k characters, spaces only
    no_space = "x" * (2 * cap + 123)
    path = tmp_path / "novel.txt"
    path.write_text("\n".join(lines) + "\n\n" + long_line + "\n\n" + no_space + "\n")
    docs = _docs(path)
    by_lines = [d for d in docs if d.startswith("line ")]
    # Whole lines, greedily: as many as fit, and the next one would not have.
    assert "\n".join(by_lines).split("\n") == lines
    for doc, nxt in zip(by_lines, by_lines[1:], strict=False):
        assert len(doc) <= cap < len(doc) + 1 + len(nxt.split("\n")[0])
    by_space = [d for d in docs if d.startswith("w")]
    assert " ".join(by_space) == long_line and all(len(d) <= cap for d in by_space)
    assert all(len(d) > cap - 10 for d in by_space[:-1])  # cut at the last space that fits
    assert docs[len(by_lines) + len(by_space):] == ["x" * cap, "x" * cap, "x" * 123]


def test_a_file_that_is_one_document_is_cut_in_two(tmp_path):
    path = tmp_path / "three_lines.txt"
    text = "alpha beta gamma delta\nepsilon zeta\neta theta iota kappa lambda"
    path.write_text(text)
    first, second = _docs(path)
    assert f"{first} {second}".split() == text.split()
    assert abs(len(first) - len(second)) <= len("lambda") + 1  # at the whitespace nearest the middle
    assert _splits(path, 100) == ([second], [first])  # validation is never empty: it gets the first half


def test_two_documents_give_one_to_each_split(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("The first paragraph.\n\nThe second paragraph.\n")
    assert _splits(path, 100) == (["The second paragraph."], ["The first paragraph."])


def test_records_are_documents_and_huge_ones_are_cut(tmp_path):
    huge = "\r\n".join(f"Sentence {i} of the only record." for i in range(2000))  # ~60k characters
    (tmp_path / "one.jsonl").write_text(json.dumps({"text": huge}) + "\n")
    pq.write_table(pa.table({"text": [huge]}), tmp_path / "one.parquet")
    for name in ("one.jsonl", "one.parquet"):
        docs = _docs(tmp_path / name)
        assert len(docs) == 4 and all(len(d) <= corpus.MAX_DOC_CHARS for d in docs)
        assert "\n".join(docs) == huge.replace("\r\n", "\n")  # cut between lines; CRLF read as LF
    # Several records, one of them huge: the small ones stay whole, in order.
    pq.write_table(pa.table({"text": ["a b", huge, "c d"]}), tmp_path / "three.parquet")
    docs = _docs(tmp_path / "three.parquet")
    assert docs[0] == "a b" and docs[-1] == "c d" and len(docs) == 6


def test_several_files_are_one_stream_held_out_by_document_index(tmp_path):
    (tmp_path / "a.txt").write_text("one\n \ntwo\n \nthree\n")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ("four", "five")))
    data = [str(tmp_path / "a.txt"), str(tmp_path / "b.jsonl")]
    assert corpus.check_data(data, 2) == 5
    assert [ex["text"] for ex in corpus.documents(data, "validation", 2)] == ["one", "three", "five"]
    assert [ex["text"] for ex in corpus.documents(data, "train", 2)] == ["two", "four"]


def test_resume_is_exact_on_cut_documents(tmp_path, tokenizer):
    path = tmp_path / "line.txt"
    path.write_text(" ".join(DOCS * 60))  # one 30k-character line: 2 documents
    stream = iter(packing.PackedBlocks([str(path)], "train", 5, tokenizer, block_size=16))
    blocks = [next(stream) for _ in range(40)]
    for k in (1, 17, 38):
        start = blocks[k - 1]["pos"].tolist()
        resumed = next(iter(packing.PackedBlocks([str(path)], "train", 5, tokenizer, 16, start=start)))
        assert resumed["input_ids"].tolist() == blocks[k]["input_ids"].tolist()


# ---------------------------------------------------------------------------------- embedded corpus
@pytest.fixture
def fresh_stdlib_prose():
    corpus.stdlib_prose.cache_clear()
    yield
    corpus.stdlib_prose.cache_clear()


def test_embedded_is_the_help_topics_then_the_standard_library():
    pydoc = corpus.embedded_documents(corpus.EMBEDDED_PYDOC)
    stdlib = corpus.embedded_documents(corpus.EMBEDDED_STDLIB)
    assert corpus.embedded_documents() == corpus.embedded_documents("embedded") == pydoc + stdlib
    assert len(pydoc) > 50 and len(stdlib) > 300 and sum(map(len, stdlib)) > 1_500_000
    json_doc = next(d for d in stdlib if d.startswith("JSON (JavaScript Object Notation)"))
    assert "Serialize ``obj``" in json_doc  # json.dumps's docstring follows the module's
    with pytest.raises(corpus.DataError, match="embedded:other: not an embedded corpus"):
        corpus.embedded_documents("embedded:other")
    version = ".".join(map(str, sys.version_info[:3]))  # the corpus follows the Python version: the card says it
    assert corpus.short_name(["embedded"]).startswith(f"embedded corpus: Python {version}'s help topics")
    with pytest.raises(corpus.DataError, match="cannot be mixed"):
        corpus.parse_data(["embedded:pydoc", "a.txt"])


def test_module_prose_is_docstrings_and_comment_blocks_in_source_order():
    source = b'''"""A module that shows what counts as prose in the standard library."""
# -----------------------------------------------------------------
# A comment block of two lines, which is long enough
# to count as prose; the ruler above it is dropped.
import os  # short


def f():
    """Return the answer to the question that the comment above asked."""
    return 42


class C:
    """Short."""

    def g(self):
        """| a | b | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 12 |"""
'''
    assert corpus.module_prose(source) == (
        "A module that shows what counts as prose in the standard library.\n\n"
        "A comment block of two lines, which is long enough\nto count as prose; the ruler above it is dropped.\n\n"
        "Return the answer to the question that the comment above asked.")
    assert corpus.module_prose(b"def broken(:\n") == ""


def test_stdlib_prose_skips_tests_and_is_cached_by_file(tmp_path, monkeypatch, fresh_stdlib_prose):
    root = tmp_path / "lib"
    doc = '"""{} is a module whose docstring is long enough to be read."""\n'
    for rel in ("b.py", "a/__init__.py", "a/z.py", "test/test_x.py", "pkg/tests/t.py", "test_top.py",
                "encodings/cp1.py", "idlelib/w.py", "site-packages/p.py", "config-3.11-x86_64/m.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(doc.format(rel))
    (root / "notes.txt").write_text(doc.format("notes.txt"))
    monkeypatch.setattr(corpus.sysconfig, "get_paths", lambda: {"stdlib": str(root)})
    monkeypatch.setattr(corpus, "_cache_dir", lambda: tmp_path / "cache")

    expected = tuple(doc.format(rel).strip('"\n') for rel in ("a/__init__.py", "a/z.py", "b.py"))
    assert corpus.stdlib_prose() == expected
    assert len(list((tmp_path / "cache").glob("stdlib-prose-*.json"))) == 1

    corpus.stdlib_prose.cache_clear()  # a new process: reads the file
    read = corpus.module_prose
    monkeypatch.setattr(corpus, "module_prose", lambda source: pytest.fail("not read from the cache"))
    assert corpus.stdlib_prose() == expected

    corpus.stdlib_prose.cache_clear()  # a changed source file is a new cache file
    monkeypatch.setattr(corpus, "module_prose", read)
    (root / "b.py").write_text(doc.format("b.py, changed,"))
    assert corpus.stdlib_prose()[-1].startswith("b.py, changed, is a module")


def test_an_installation_without_sources_is_one_line(tmp_path, monkeypatch, fresh_stdlib_prose):
    (tmp_path / "lib").mkdir()  # compiled files only, as in the Windows embeddable package
    monkeypatch.setattr(corpus.sysconfig, "get_paths", lambda: {"stdlib": str(tmp_path / "lib")})
    monkeypatch.setattr(corpus, "_cache_dir", lambda: tmp_path / "cache")
    with pytest.raises(corpus.DataError, match=r"^embedded:stdlib: 0 document\(s\) in this Python installation"):
        corpus.check_data([corpus.EMBEDDED_STDLIB], val_every=10)
    n_topics = len(corpus.embedded_documents(corpus.EMBEDDED_PYDOC))
    assert corpus.check_data([corpus.EMBEDDED], val_every=10) == n_topics  # the help topics alone


def test_three_splits_by_index_without_overlap():
    # val_every 4, test_every 2: 0 validation; of the others (1 2 3 5 6 7 9 ...) every 2nd from the first is test.
    letter = {"train": "r", "validation": "v", "test": "t"}
    assert "".join(letter[corpus.split_of(i, 4, 2)] for i in range(10)) == "vtrtvrtrvt"
    for val_every, test_every in ((10, 3), (4, 2), (2, 2), (7, 5)):
        splits = [corpus.split_of(i, val_every, test_every) for i in range(200)]
        assert splits[0] == "validation" and splits[1] == "test" and set(splits) == set(corpus.SPLITS)
        assert splits.count("validation") == len(range(0, 200, val_every))  # validation as without a test split
        others = [s for s in splits if s != "validation"]
        assert others[::test_every] == ["test"] * len(others[::test_every]) and others.count("test") == len(
            others[::test_every])
    assert all(corpus.split_of(i, 10, 0) != "test" for i in range(100))  # test_every 0: the two-way split


def test_a_test_split_leaves_validation_as_it_was_and_takes_from_training(tmp_path, tokenizer):
    path = tmp_path / "docs.txt"
    docs = [f"document number {i} says {' '.join(['word'] * (i % 5 + 1))}." for i in range(30)]
    path.write_text("\n\n".join(docs))
    read = {s: [ex["text"] for ex in corpus.documents([str(path)], s, 5, test_every=3)] for s in corpus.SPLITS}
    assert read["validation"] == [ex["text"] for ex in corpus.documents([str(path)], "validation", 5)]
    two_way_train = [ex["text"] for ex in corpus.documents([str(path)], "train", 5)]
    assert sorted(read["train"] + read["test"]) == sorted(two_way_train)
    assert not set(read["train"]) & set(read["test"]) and len(read["test"]) == 8  # 24 others, every 3rd
    assert read["test"] == [d for i, d in enumerate(docs) if corpus.split_of(i, 5, 3) == "test"]
    assert corpus.check_data([str(path)], 5, test_every=3) == 30
    blocks = packing.test_blocks([str(path)], 5, tokenizer, 8, test_every=3)
    stream = [t for text in read["test"] for t in [*tokenizer(text)["input_ids"], tokenizer.eos_token_id]]
    assert blocks.shape[1] == 9 and blocks[:, :-1].flatten().tolist() == stream[: 8 * len(blocks)]
    assert torch.equal(packing.validation_blocks([str(path)], 5, tokenizer, 8, 3, test_every=3),
                       packing.validation_blocks([str(path)], 5, tokenizer, 8, 3))
    with pytest.raises(corpus.DataError, match="test_every: 0 holds out no test documents"):
        packing.test_blocks([str(path)], 5, tokenizer, 8, test_every=0)
    with pytest.raises(corpus.DataError, match="do not give a train, a validation and a test document"):
        corpus.check_data([str(path)], 2, test_every=1)  # every other document is test: none left to train on


def test_the_embedded_corpus_gives_a_test_split_to_score_on():
    # The bar of issue 20: >= 100 test documents (the tokens, >= 50k, are measured with the report's tokenizer).
    n = len(corpus.embedded_documents())
    splits = [corpus.split_of(i, 10, corpus.DEFAULT_TEST_EVERY) for i in range(n)]
    assert splits.count("test") >= 100 and splits.count("train") > splits.count("test")


def test_split_blocks_count_the_documents_their_targets_come_from(tmp_path, tokenizer):
    path = tmp_path / "docs.txt"
    docs = [f"document number {i} says {' '.join(['word'] * (i % 5 + 1))}." for i in range(30)]
    path.write_text("\n\n".join(docs))
    test_docs = [ex["text"] for ex in corpus.documents([str(path)], "test", 5, test_every=3)]
    lengths = [len(tokenizer(d)["input_ids"]) + 1 for d in test_docs]  # with EOS
    blocks, n_docs = packing.split_blocks([str(path)], "test", 5, tokenizer, 8, None, test_every=3)
    assert torch.equal(blocks, packing.test_blocks([str(path)], 5, tokenizer, 8, test_every=3))
    covered = len(blocks) * 8 + 1  # tokens read: every target and the first block's first input
    assert n_docs == next(i + 1 for i in range(len(lengths)) if sum(lengths[: i + 1]) >= covered)
    two, n_two = packing.split_blocks([str(path)], "test", 5, tokenizer, 8, 2, test_every=3)
    assert len(two) == 2 and n_two == next(i + 1 for i in range(len(lengths)) if sum(lengths[: i + 1]) >= 17)


def _fraction_corpus(tmp_path) -> list[str]:
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join(f"document {i}: " + " ".join(["word"] * (1 + (i * 7) % 13)) + "." for i in range(60)))
    return [str(path)]


def test_a_training_fraction_is_a_nested_subset_of_whole_documents(tmp_path, tokenizer):
    data = _fraction_corpus(tmp_path)
    every = [ex["text"] for ex in corpus.documents(data, "train", 5, 3)]
    total = sum(map(len, every))
    kept = {f: [ex["text"] for ex in corpus.train_documents(data, 5, 3, f)] for f in (0.125, 0.25, 0.5, 1.0)}
    assert kept[1.0] == every
    for small, large in itertools.pairwise(kept):
        assert set(kept[small]) < set(kept[large])  # 1/8 ⊂ 1/4 ⊂ 1/2 ⊂ all, each strictly
    # Whole documents, read in corpus order, the fewest of the fixed (text-hash) order that reach the fraction.
    by_hash = sorted(every, key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    for f, docs in kept.items():
        assert docs == [d for d in every if d in docs] and set(docs) == set(by_hash[: len(docs)])
        assert sum(map(len, docs)) >= f * total > sum(map(len, by_hash[: len(docs) - 1]))
    # The training stream reads the subset's tokens only; the held-out splits' blocks are the same at any fraction.
    tokens = packing.SplitTokens(data, "train", 5, tokenizer, 3, 0.25)
    expected = [t for d in kept[0.25] for t in [*tokenizer(d)["input_ids"], tokenizer.eos_token_id]]
    assert tokens.ids.tolist() == expected
    stream = iter(packing.training_blocks(data, 5, tokenizer, 8, seed=1, test_every=3, train_fraction=0.25))
    n = (len(expected) - 1) // 8
    assert sorted(tuple(next(stream)["input_ids"].tolist()) for _ in range(n)) == sorted(
        tuple(expected[i * 8: i * 8 + 9]) for i in range(n))
    for split in ("validation", "test"):
        assert torch.equal(packing.split_blocks(data, split, 5, tokenizer, 8, None, 3, train_fraction=0.25)[0],
                           packing.split_blocks(data, split, 5, tokenizer, 8, None, 3)[0])
    plain = packing.split_blocks(data, "train", 5, tokenizer, 8, None, 3, train_fraction=0.25)[0]
    assert plain[:, :-1].flatten().tolist() == expected[: 8 * len(plain)]


@pytest.mark.parametrize("data, fraction, message", [
    (None, 0.0, "train_fraction must be a number in (0, 1], got 0.0"),
    (None, 1.5, "train_fraction must be a number in (0, 1], got 1.5"),
    (["c4"], 0.5, "train_fraction 0.5: streamed C4 has no fixed training split"),
])
def test_a_bad_training_fraction_is_one_line(tmp_path, data, fraction, message):
    with pytest.raises(corpus.DataError, match=re.escape(message)):
        corpus.train_documents(data or _fraction_corpus(tmp_path), 5, 3, fraction)
