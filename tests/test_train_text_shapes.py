"""Files shaped like real corpora train: each is cut into documents by the one rule, both splits get text, and
train.py runs two steps on it. The text is made up here (pseudo-words in English punctuation), not copied."""

from __future__ import annotations

import json
import math
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import train
from ema_boundary import corpus
from tests.train_testkit import metrics, write_config

CAP = corpus.MAX_DOC_CHARS
SYLLABLES = "ka lo mi ra ne to su vi pe da ri no be fu".split()


def words(rng: random.Random, n: int) -> str:
    # Thousands of distinct words: a 1024-token BPE cannot learn them all, as with real text.
    return " ".join(rng.choice(["the", "of", "and", "a"]) if rng.random() < 0.3 else
                    "".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(n))


def sentence(rng: random.Random) -> str:
    return words(rng, rng.randint(6, 18)).capitalize() + "."


def paragraph(rng: random.Random, n: int) -> str:
    return " ".join(sentence(rng) for _ in range(n))


def wrap(text: str, width: int = 72) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


def wikitext(rng):
    """WikiText-2 raw: headings ' = T = ', one paragraph per line with a leading space, ' ' lines between."""
    paras = []
    for k in range(12):
        paras += [f"= = Section {k} = =", *(paragraph(rng, rng.randint(3, 8)) for _ in range(3))]
    paras.insert(0, "= Article =")
    return "".join(f" {p} \n \n" for p in paras).encode(), paras


def bom_crlf(rng):
    """Windows Notepad: a byte-order mark, CRLF line ends, wrapped paragraphs with blank lines between."""
    paras = ["\n".join(wrap(paragraph(rng, 6))) for _ in range(20)]
    return ("\ufeff" + "\n\n".join(paras).replace("\n", "\r\n") + "\r\n").encode(), paras


def one_paragraph(rng):
    """A book without blank lines: one wrapped paragraph of ~80k characters."""
    return ("\n".join(wrap(paragraph(rng, 900))) + "\n").encode(), None


def sentence_per_line(rng):
    return "".join(sentence(rng) + "\n" for _ in range(3000)).encode(), None


def one_long_line(rng):
    text = ""
    while len(text) < 200_000:
        text += paragraph(rng, 50) + " "
    return text.strip().encode(), None


def three_long_lines(rng):
    """The issue's example: 3 lines of 2,000 words each."""
    return "".join(words(rng, 2000) + "\n" for _ in range(3)).encode(), None


def three_short_lines(rng):
    return "".join(paragraph(rng, 8) + "\n" for _ in range(3)).encode(), None


def two_paragraphs(rng):
    paras = [paragraph(rng, 25), paragraph(rng, 25)]
    return "\n\n".join(paras).encode(), paras


SHAPES = {f.__name__: f for f in (wikitext, bom_crlf, one_paragraph, sentence_per_line, one_long_line,
                                  three_long_lines, three_short_lines, two_paragraphs)}


def write_shape(tmp_path, name: str, seed: int = 0) -> tuple[str, str, list[str] | None]:
    data, expected = SHAPES[name](random.Random(seed))
    path = tmp_path / f"{name}.txt"
    path.write_bytes(data)
    return str(path), data.decode("utf-8-sig"), expected


def two_steps(tmp_path, data: list[str]) -> None:
    cfg = write_config(tmp_path / "train.yaml", max_steps=2, eval_steps=2, save_steps=2)
    out = train.main(["--config", str(cfg), "--data", *data, "--output_dir", str(tmp_path / "out")])
    log = metrics(out)
    assert [m["step"] for m in log] == [1, 2] and math.isfinite(log[-1]["val_loss"])
    assert (out / "final" / "model.safetensors").is_file()


@pytest.mark.parametrize("name", SHAPES)
def test_text_file_shapes_give_documents_and_train(tmp_path, name):
    path, text, expected = write_shape(tmp_path, name)
    docs = list(corpus.file_documents(path))
    if expected is not None:
        assert docs == expected
    # Nothing lost, nothing repeated, nothing too big; no BOM or CR left.
    assert " ".join(docs).split() == text.split()
    assert all(0 < len(d) <= CAP and d == d.strip() and "\r" not in d and "\ufeff" not in d for d in docs)
    if name in ("one_paragraph", "sentence_per_line"):  # no blank line: cut between lines
        assert "\n".join(docs) == text.strip()
    assert corpus.check_data([path], val_every=10) == len(docs) >= 2
    val = [ex["text"] for ex in corpus.documents([path], "validation", 10)]
    assert val == docs[::10] and len(docs) > len(val)
    two_steps(tmp_path, [path])


def test_jsonl_with_one_huge_record_trains(tmp_path):
    rng = random.Random(1)
    record = "\n\n".join(paragraph(rng, 30) for _ in range(60))  # ~150k characters in one JSON line
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"text": record, "meta": {"source": "test"}}) + "\n")
    docs = list(corpus.file_documents(path))
    assert len(docs) >= math.ceil(len(record) / CAP) and all(len(d) <= CAP for d in docs)
    assert "\n".join(docs).split() == record.split()
    two_steps(tmp_path, [str(path)])


def test_parquet_with_one_huge_row_and_a_text_file_train_together(tmp_path):
    rng = random.Random(2)
    row = " ".join(paragraph(rng, 30) for _ in range(60))  # one line, no newline: cut at spaces
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"text": [row], "id": [7]}), path)
    docs = list(corpus.file_documents(path))
    assert " ".join(docs) == row and all(CAP - 40 < len(d) <= CAP for d in docs[:-1])
    txt, _, _ = write_shape(tmp_path, "three_short_lines")
    two_steps(tmp_path, [str(path), txt])


def shakespeare(rng):
    """TinyShakespeare's shape: speeches 'SPEAKER:' + verse lines, blank lines between; the short ones repeat
    exactly (one-line speeches: 'All:' / 'Ay, ay.'), the long ones do not."""
    stock = ["All:\nAy, ay.", "First Citizen:\nWe know't, we know't.", "Second Servant:\nHere, sir.",
             "All:\nNo more talking on't; let it be done: away, away!"]
    speakers = ["ROMEO", "JULIET", "MENENIUS", "First Citizen"]
    speeches = [rng.choice(stock) if rng.random() < 0.25 else
                f"{rng.choice(speakers)}:\n" + "\n".join(wrap(paragraph(rng, 4))) for _ in range(160)]
    return ("\n\n".join(speeches) + "\n").encode(), speeches


@pytest.mark.parametrize("shape", ["wikitext_headings", "shakespeare"])
def test_real_text_with_repeated_headings_or_speeches_trains_as_it_comes(tmp_path, shape, capsys):
    rng = random.Random(5)
    if shape == "shakespeare":
        data, docs = shakespeare(rng)
    else:  # WikiText-2 as it comes: every article repeats the same section headings
        paras = []
        for k in range(10):
            paras.append(f"= Article {k} =")
            for heading in ("History", "Description", "Reception"):
                paras += [f"= = {heading} = =", *(paragraph(rng, rng.randint(3, 6)) for _ in range(3))]
        data, docs = "".join(f" {p} \n \n" for p in paras).encode(), paras
    path = tmp_path / f"{shape}.txt"
    path.write_bytes(data)
    assert list(corpus.file_documents(path)) == docs
    held_out = {d for i, d in enumerate(docs) if i % 10 == 0}
    assert held_out & {d for i, d in enumerate(docs) if i % 10}  # short texts both held out and trained on

    two_steps(tmp_path, [str(path)])  # no flag
    printed = capsys.readouterr().out
    left_out = [line for line in printed.splitlines() if "left out of validation and test" in line]
    assert len(left_out) == 1, printed
    val = [ex["text"] for ex in corpus.documents([str(path)], "validation", 10)]
    train_docs = [ex["text"] for ex in corpus.documents([str(path)], "train", 10)]
    assert val and not set(val) & set(train_docs) and len(train_docs) == sum(1 for i in range(len(docs)) if i % 10)
    assert left_out[0].startswith(f"train.py: {sum(1 for i, d in enumerate(docs) if i % 10 == 0) - len(val)} "
                                  "held-out document(s) left out of validation and test: short texts")


def test_a_long_shared_passage_is_still_refused_with_the_fix_named(tmp_path, capsys):
    rng = random.Random(6)
    paras = [paragraph(rng, 5) for _ in range(30)]
    paras[13] = paras[10]  # a copied paragraph of ~500 characters: a validation document trained on
    path = tmp_path / "copied.txt"
    path.write_text("\n\n".join(paras))
    cfg = write_config(tmp_path / "train.yaml", max_steps=2, eval_steps=2, save_steps=2)
    assert train.cli(["--config", str(cfg), "--data", str(path), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"train.py: error: {path}: document 13, also document 10 (validation): 1 training document(s) "
                   "have the text of a validation or test document longer than 200 characters (a file given twice? a "
                   "copied passage?); remove them, or set drop_shared_documents: true to leave them out of training")
    assert not (tmp_path / "out").exists()
