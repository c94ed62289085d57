"""generate() through the recurrent state: greedy, sampling, beam search, padding, pipeline."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, pipeline

from modeling_spen import SPENState
from tests.test_modeling import tiny_model

VARIANTS = [
    ("linear", "sequence", "ema"),
    ("linear_attention", "sequence", "learned"),
    ("softmax_attention", "sequence", "selective"),
    ("softmax_attention", "state", "ema"),
    ("linear", "sequence", "selective_ssm"),
]


def _argmax_loop(model, ids: torch.Tensor, n: int) -> torch.Tensor:
    """Greedy decoding that recomputes the whole prefix each step (no state)."""
    for _ in range(n):
        nxt = model(ids, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)
    return ids


@pytest.mark.parametrize("predictor, scope, trace", VARIANTS)
def test_greedy_equals_argmax_loop_and_feeds_one_token(predictor, scope, trace) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace)
    seen_lengths = []
    hook = model.model.register_forward_pre_hook(
        lambda mod, args, kwargs: seen_lengths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    prompt = torch.randint(1, 61, (2, 7), generator=torch.Generator().manual_seed(0))
    out = model.generate(prompt, max_new_tokens=10, do_sample=False, pad_token_id=0)
    hook.remove()
    assert torch.equal(out, _argmax_loop(model, prompt, 10))
    assert seen_lengths[0] == 7 and seen_lengths[1:] == [1] * 9


def test_left_padded_batch_continues_like_each_sequence_alone() -> None:
    for predictor, scope, trace in VARIANTS:
        model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace)
        g = torch.Generator().manual_seed(1)
        short, long = torch.randint(1, 61, (1, 4), generator=g), torch.randint(1, 61, (1, 9), generator=g)
        batch = torch.cat([torch.cat([torch.zeros(1, 5, dtype=torch.long), short], 1), long])
        mask = torch.ones_like(batch)
        mask[0, :5] = 0
        out = model.generate(batch, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
        alone_short = model.generate(short, max_new_tokens=6, do_sample=False, pad_token_id=0)
        alone_long = model.generate(long, max_new_tokens=6, do_sample=False, pad_token_id=0)
        assert torch.equal(out[0, 9:], alone_short[0, 4:]), (predictor, scope, trace)
        assert torch.equal(out[1, 9:], alone_long[0, 9:]), (predictor, scope, trace)
        # The logits themselves, not just the argmax, match at the real positions.
        padded = model(batch, attention_mask=mask).logits
        torch.testing.assert_close(padded[0, 5:], model(short).logits[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("predictor, scope, trace", VARIANTS[:3])
def test_beam_search_with_state_equals_without(predictor, scope, trace) -> None:
    model = tiny_model(predictor=predictor, predictor_scope=scope, trace=trace)
    prompt = torch.randint(1, 61, (2, 5), generator=torch.Generator().manual_seed(2))
    kwargs = dict(max_new_tokens=6, num_beams=3, do_sample=False, pad_token_id=0, num_return_sequences=2)
    with_state = model.generate(prompt, **kwargs)
    without = model.generate(prompt, use_cache=False, **kwargs)
    assert torch.equal(with_state, without)


def test_sampling_is_reproducible_and_uses_state() -> None:
    model = tiny_model()
    prompt = torch.randint(1, 61, (1, 5))
    torch.manual_seed(3)
    a = model.generate(prompt, max_new_tokens=12, do_sample=True, top_k=10, pad_token_id=0)
    torch.manual_seed(3)
    b = model.generate(prompt, max_new_tokens=12, do_sample=True, top_k=10, pad_token_id=0)
    torch.manual_seed(3)
    c = model.generate(prompt, max_new_tokens=12, do_sample=True, top_k=10, pad_token_id=0, use_cache=False)
    assert a.shape == (1, 17) and torch.equal(a, b) and torch.equal(a, c)


def test_state_reorder_selects_batch_rows() -> None:
    model = tiny_model(predictor="softmax_attention")
    state = model(torch.randint(1, 61, (3, 4)), use_cache=True).cache
    before = [dict(layer) for layer in state.layers]
    state.reorder_cache(torch.tensor([2, 2, 0]))
    for layer, old in zip(state.layers, before, strict=True):
        for name, tensor in layer.items():
            assert torch.equal(tensor, old[name][[2, 2, 0]])
    assert isinstance(state, SPENState)


def _tiny_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = "the cat sat on a mat and dog ran to big red house".split()
    tok.train_from_iterator([" ".join(words)] * 3, trainers.WordLevelTrainer(special_tokens=["<eos>", "<unk>"]))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>")


def test_text_generation_pipeline() -> None:
    tokenizer = _tiny_tokenizer()
    model = tiny_model(vocab_size=len(tokenizer))
    generator = pipeline("text-generation", model=model, tokenizer=tokenizer)
    out = generator("the cat sat", max_new_tokens=5, do_sample=False)
    assert out[0]["generated_text"].startswith("the cat sat")
    ids = generator("the cat sat", max_new_tokens=5, do_sample=False, return_tensors=True)[0]["generated_token_ids"]
    prompt = tokenizer("the cat sat", return_tensors="pt").input_ids
    assert list(ids) == _argmax_loop(model, prompt, 5)[0].tolist()
