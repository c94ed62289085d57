"""train_data: local files through the same `datasets` streaming pipeline as C4; exact resume positions."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tests.train_testkit  # noqa: F401  (puts the repository root on sys.path)
import train_data

DOCS = [f"Document number {i} says {'word ' * (i % 7)}and ends." for i in range(23)]


@pytest.fixture(scope="module")
def tokenizer():
    return train_data.train_bpe(iter(DOCS * 3), 300)


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
    train_data.check_data([path], val_every=5)
    train = [ex["text"] for ex in train_data.documents([path], "train", 5)]
    val = [ex["text"] for ex in train_data.documents([path], "validation", 5)]
    assert val == DOCS[::5]
    assert train == [d for i, d in enumerate(DOCS) if i % 5]


def test_blocks_are_the_documents_joined_with_eos(tmp_path, tokenizer):
    path = _write(tmp_path, "jsonl")
    blocks = list(train_data.PackedBlocks([path], "train", 5, tokenizer, block_size=16, repeat=False))
    stream = [t for b in blocks for t in b["input_ids"][:-1].tolist()] + blocks[-1]["input_ids"][-1:].tolist()
    expected = [t for i, d in enumerate(DOCS) if i % 5
                for t in tokenizer(d, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]]
    assert stream == expected[: len(stream)] and len(expected) - len(stream) < 16
    assert all(a["input_ids"][-1] == b["input_ids"][0] for a, b in zip(blocks, blocks[1:], strict=False))


def test_resuming_from_any_position_continues_exactly_across_epochs(tmp_path, tokenizer):
    path = _write(tmp_path, "txt")
    stream = iter(train_data.PackedBlocks([path], "train", 5, tokenizer, block_size=16))
    blocks = [next(stream) for _ in range(60)]  # about 3 epochs of this tiny corpus
    assert blocks[-1]["pos"][0] >= 2
    for k in range(1, 59):
        start = blocks[k - 1]["pos"].tolist()
        resumed = iter(train_data.PackedBlocks([path], "train", 5, tokenizer, 16, start=start))
        for j in range(k, min(k + 4, 60)):
            block = next(resumed)
            assert block["input_ids"].tolist() == blocks[j]["input_ids"].tolist(), (k, j)
            assert block["pos"].tolist() == blocks[j]["pos"].tolist()


def test_embedded_corpus_is_pythons_help_topics():
    docs = train_data.embedded_documents()
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
    train_data.check_data([train_data.C4], val_every=5)
    assert [ex["text"] for ex in train_data.documents(["c4"], "train", 5)] == DOCS  # no hold-out
    assert [ex["text"] for ex in train_data.documents(["c4"], "validation", 5)] == DOCS[:5]
    blocks = iter(train_data.PackedBlocks(["c4"], "train", 5, tokenizer, 16))
    first = [next(blocks) for _ in range(5)]
    start = first[3]["pos"].tolist()
    resumed = next(iter(train_data.PackedBlocks(["c4"], "train", 5, tokenizer, 16, start=start)))
    assert resumed["input_ids"].tolist() == first[4]["input_ids"].tolist()


def test_c4_out_of_reach_is_one_line(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'allenai/c4' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(train_data.DataError, match=r"^allenai/c4: cannot stream it from the hub \(Couldn't"):
        train_data.check_data([train_data.C4], val_every=5)
