"""A run's data: its training stream (shuffled as the settings say), its test blocks, its tokenizer, and
the checks of data against settings and model before anything is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedConfig

from ema_boundary import corpus, packing
from ema_boundary.corpus import DataError
from train_config import ConfigError
from training.console import log
from training.loss import perplexity


@dataclass(frozen=True)
class TestBlocks:
    """The test split's blocks a run scores once at the end, and how much text they are."""

    __test__ = False  # not a pytest class

    blocks: torch.Tensor
    documents: int  # test documents the blocks' targets come from

    @property
    def tokens(self) -> int:
        return self.blocks.shape[0] * (self.blocks.shape[1] - 1)

    def metrics(self, loss: float) -> dict:
        """The last metrics.jsonl record's test fields (eval.runs.read_test reads them)."""
        return {"test_loss": loss, "test_ppl": perplexity(loss), "test_tokens": self.tokens,
                "test_documents": self.documents}


def training_stream(cfg: dict, tokenizer, start: list[int] | tuple[int, int, int] = (0, 0, 0), seed: int | None = None,
                    tokens: packing.SplitTokens | None = None) -> torch.utils.data.IterableDataset:
    """The run's training blocks from position ``start``, shuffled from ``seed`` (default: the run's) as
    ``shuffle`` and ``shuffle_buffer`` say (packing.training_blocks); ``tokens``: a training split already read."""
    return packing.training_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                  seed=cfg["seed"] if seed is None else seed, shuffle=cfg["shuffle"],
                                  shuffle_buffer=cfg["shuffle_buffer"], start=tuple(start),
                                  test_every=cfg["test_every"], tokens=tokens, train_fraction=cfg["train_fraction"])


def outside_fraction(cfg: dict) -> int:
    """The training documents a run with ``train_fraction`` < 1 does not read (corpus.train_documents: its nested
    subset), counted before anything is written; 0 at 1. The model card counts the documents trained on."""
    if cfg["train_fraction"] == 1:
        return 0
    every = corpus.documents(cfg["data"], "train", cfg["val_every"], cfg["test_every"])
    kept = corpus.train_documents(cfg["data"], cfg["val_every"], cfg["test_every"], cfg["train_fraction"])
    return sum(1 for _ in every) - sum(1 for _ in kept)


def seen_tokens(train_set: torch.utils.data.IterableDataset, tokens_read: int) -> dict[str, int]:
    """How much distinct text a run trained on, for its metrics.jsonl: the training (sub)split's tokens as its
    shuffled blocks' targets (``train_split_tokens``) and how many of them the ``tokens_read`` covered
    (``distinct_train_tokens``: each epoch reads every block once). Streamed or unshuffled data: {} (no fixed
    block count)."""
    per_epoch = getattr(train_set, "blocks_per_epoch", None)
    if not per_epoch:
        return {}
    split = per_epoch * train_set.block_size
    return {"train_split_tokens": split, "distinct_train_tokens": min(tokens_read, split)}


def held_out_test(cfg: dict, tokenizer) -> TestBlocks | None:
    """The test blocks of a run with ``test_every`` > 0 (the first ``max_test_samples``, or all), else None.

    Documents no run with the same ``val_every`` and ``test_every`` trains on, and that choose nothing (rates and
    checkpoints are chosen on validation): the score to compare runs on."""
    if not cfg["test_every"]:
        return None
    blocks, documents = packing.split_blocks(cfg["data"], "test", cfg["val_every"], tokenizer, cfg["block_size"],
                                            cfg["max_test_samples"], cfg["test_every"])
    return TestBlocks(blocks, documents)


def tokenizer_for_run(cfg: dict, vocab_size: int, run_dir: Path, saved: dict | None):
    """A resumed run's own tokenizer, else the configured one (or a BPE trained on the data); and its name."""
    if saved and (run_dir / "tokenizer").is_dir():
        return AutoTokenizer.from_pretrained(run_dir / "tokenizer"), saved["tokenizer_used"]
    return corpus.load_tokenizer(cfg["tokenizer_name"], cfg["data"], cfg["val_every"], vocab_size,
                                     cfg["bpe_train_docs"], cfg["model_name_or_path"], cfg["test_every"])


def check_shared_documents(cfg: dict) -> int:
    """Text shared between training and the held-out splits of local files. Short exact repeats (headings, one-line
    speeches: corpus.repeated_documents) are left out of validation and test, reported in one line. Longer shared
    documents are a leak (a file given twice, a copied paragraph): refused in one line naming the first, or with
    ``drop_shared_documents`` left out of training (corpus.documents) and their number returned."""
    data, val_every, test_every = cfg["data"], cfg["val_every"], cfg["test_every"]
    held_out, trained, text = corpus.repeated_documents(data, val_every, test_every)
    if held_out:
        example = text if len(text) <= 40 else text[:37] + "..."
        log.info(f"train.py: {held_out} held-out document(s) left out of validation and test: short texts that "
                 f"training also holds ({trained} copies; <= {corpus.SHORT_DOC_CHARS} characters, e.g. {example!r})")
    shared, first = corpus.shared_documents(data, val_every, test_every)
    if shared and not cfg["drop_shared_documents"]:
        raise DataError(f"{first}: {shared} training document(s) have the text of a validation or test document "
                        f"longer than {corpus.SHORT_DOC_CHARS} characters (a file given twice? a copied passage?); "
                        "remove them, or set drop_shared_documents: true to leave them out of training")
    if shared:
        log.info(f"train.py: {shared} training document(s) left out: their text is held out ({first})")
    return shared


def check_positions(cfg: dict, model_cfg: PreTrainedConfig) -> None:
    """A block longer than the model's positions fails in the first forward pass: refuse it up front."""
    positions = getattr(model_cfg, "n_positions", None) or getattr(model_cfg, "max_position_embeddings", None)
    if positions and cfg["block_size"] > positions:
        raise ConfigError(f"block_size {cfg['block_size']} is more than the {positions} positions of the model "
                          f"({Path(cfg['model_name_or_path']) / 'config.json'}); lower block_size")
