"""ema_boundary.params: total and non-embedding parameter counts, one definition."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from ema_boundary.params import parameter_counts


def test_gpt2_counts_tied_embeddings_once_and_positions_as_embedding():
    cfg = GPT2Config(vocab_size=100, n_positions=16, n_embd=8, n_layer=1, n_head=2)
    model = GPT2LMHeadModel(cfg)
    counts = parameter_counts(model)
    assert counts.total == sum(p.numel() for p in model.parameters())
    assert counts.embedding == 100 * 8 + 16 * 8
    assert counts.non_embedding == counts.total - 100 * 8 - 16 * 8


def test_untied_head_is_embedding_and_meta_device_works():
    cfg = GPT2Config(vocab_size=100, n_positions=16, n_embd=8, n_layer=1, n_head=2, tie_word_embeddings=False)
    with torch.device("meta"):
        model = GPT2LMHeadModel(cfg)
    counts = parameter_counts(model)
    assert counts.embedding == 2 * 100 * 8 + 16 * 8
    assert counts.as_dict()["non_embedding"] == counts.non_embedding
