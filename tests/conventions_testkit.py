"""Checks that a SPEN model behaves as every transformers model does (issue 36), on a model object alone.

Imports nothing of the project: tests/test_transformers_conventions.py runs these checks on models built here
and, in a fresh process, on a model loaded with ``from_pretrained(..., trust_remote_code=True)`` (whose classes
come from the files saved beside the weights). Each check raises AssertionError naming what differs.

Tolerances: a row run alone and the same row in a batch go through different matmul shapes, so they agree to
float rounding (as transformers' own batching test, 1e-5); everything else is compared exactly.
"""

from __future__ import annotations

import torch
from torch import nn

# transformers 5.24 renamed the cache field from `past_key_values` to `cache`.
GEN = dict(do_sample=False, pad_token_id=0)


def _cache_field(out) -> str:
    return "cache" if "cache" in type(out).__dataclass_fields__ else "past_key_values"


def check_hidden_states(model: nn.Module, ids: torch.Tensor) -> None:
    """``output_hidden_states``: L + 1 tensors, the embeddings first, each what the next block reads, the last
    after ``ln_f``; the same from ``config.output_hidden_states``; all in the graph (``retain_grad`` works)."""
    L = model.config.num_hidden_layers
    for net in (model, model.model):
        reads: list[torch.Tensor] = []  # what each block's first LayerNorm reads: the residual stream
        hooks = [block.ln_1.register_forward_hook(lambda m, args, out, reads=reads: reads.append(args[0]))
                 for block in model.model.h]
        try:
            out = net(ids, output_hidden_states=True)
        finally:
            for h in hooks:
                h.remove()
        hs = out.hidden_states
        assert isinstance(hs, tuple) and len(hs) == L + 1, f"{type(net).__name__}: {len(hs or ())} hidden states"
        assert all(h.shape == (*ids.shape, model.config.hidden_size) for h in hs)
        assert torch.equal(hs[0], model.get_input_embeddings()(ids)), "hidden_states[0] is not the embeddings"
        for i in range(1, L):
            torch.testing.assert_close(hs[i], reads[i], rtol=0, atol=0,
                                       msg=f"hidden_states[{i}] is not block {i}'s input")
        last = out.last_hidden_state if net is model.model else None
        if last is not None:
            assert torch.equal(hs[-1], last), "hidden_states[-1] is not last_hidden_state"
        else:
            torch.testing.assert_close(model.lm_head(hs[-1]), out.logits, rtol=0, atol=0)
        for h in hs:
            h.retain_grad()
        (out.logits if last is None else last).float().pow(2).sum().backward()
        for i, h in enumerate(hs):
            assert h.grad is not None and h.grad.abs().sum() > 0, f"hidden_states[{i}] retained no gradient"
        model.zero_grad(set_to_none=True)
        assert net(ids).hidden_states is None
    old = model.config.output_hidden_states
    model.config.output_hidden_states = True
    try:
        assert len(model(ids).hidden_states) == L + 1, "config.output_hidden_states=True is not read"
        assert model(ids, output_hidden_states=False).hidden_states is None
    finally:
        model.config.output_hidden_states = old


def check_no_attentions(model: nn.Module, ids: torch.Tensor) -> None:
    """SPEN has no attention over tokens: ``output_attentions=True`` is accepted and ``attentions`` is None."""
    with torch.no_grad():
        for net in (model, model.model):
            assert net(ids, output_attentions=True).attentions is None
        out = model.generate(ids, max_new_tokens=2, output_attentions=True, return_dict_in_generate=True, **GEN)
    assert all(a is None for a in out.attentions)


@torch.no_grad()
def check_generate_from_embeds(model: nn.Module, ids: torch.Tensor, new: int = 4) -> None:
    """``generate(inputs_embeds=...)`` equals ``generate(input_ids)``: greedy, sampling and beam, with or without
    the ids, feeding one token per step after the prompt, and continued from its returned state."""
    P = ids.shape[1]
    embeds = model.get_input_embeddings()(ids)
    fed: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda m, args, kw: fed.append((kw["inputs_embeds"] if kw.get("inputs_embeds") is not None
                                        else kw["input_ids"]).shape[1]), with_kwargs=True)
    try:
        ref = model.generate(ids, max_new_tokens=new, **GEN)
        fed.clear()
        from_embeds = model.generate(inputs_embeds=embeds, max_new_tokens=new, **GEN)
        assert fed == [P] + [1] * (new - 1), f"forward saw lengths {fed}"
    finally:
        hook.remove()
    assert torch.equal(from_embeds, ref[:, P:]), "greedy from inputs_embeds differs from input_ids"
    assert torch.equal(model.generate(input_ids=ids, inputs_embeds=embeds, max_new_tokens=new, **GEN), ref)
    sampled = []
    for kwargs in ({"input_ids": ids}, {"inputs_embeds": embeds}):
        torch.manual_seed(0)
        sampled.append(model.generate(**kwargs, max_new_tokens=new, do_sample=True, pad_token_id=0))
    assert torch.equal(sampled[1], sampled[0][:, P:]), "sampling from inputs_embeds differs"
    beam = dict(max_new_tokens=new, num_beams=3, num_return_sequences=2, **GEN)
    beam_ref = model.generate(ids, **beam)
    assert torch.equal(model.generate(inputs_embeds=embeds, **beam), beam_ref[:, P:]), "beam search differs"
    assert torch.equal(model.generate(input_ids=ids, inputs_embeds=embeds, **beam), beam_ref)
    # Continue from the state: the embeddings of the whole sequence so far, as transformers models take them.
    scores = dict(return_dict_in_generate=True, output_logits=True, **GEN)
    full = model.generate(ids, max_new_tokens=2 * new, **scores)
    first = model.generate(inputs_embeds=embeds, max_new_tokens=new, **scores)
    state = getattr(first, _cache_field(first))
    so_far = torch.cat([embeds, model.get_input_embeddings()(first.sequences)], 1)
    second = model.generate(inputs_embeds=so_far, max_new_tokens=new, **{_cache_field(first): state}, **scores)
    assert state.get_seq_length() == P + 2 * new - 1
    assert torch.equal(torch.cat([first.sequences, second.sequences], 1), full.sequences[:, P:])
    torch.testing.assert_close(torch.stack(first.logits + second.logits), torch.stack(full.logits),
                               rtol=1e-5, atol=1e-5)


def _fields_equal(a: object, b: object, rtol: float, atol: float, what: str) -> None:
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _fields_equal(x, y, rtol, atol, f"{what}[{i}]")


@torch.no_grad()
def check_rows_alone(model: nn.Module, ids: torch.Tensor) -> None:
    """Each row of a batch gives every output field (logits, hidden states, per-row prediction losses, the state)
    as when run alone; a left-padded row gives its real positions' values. Scalar losses are batch-level."""
    B, T = ids.shape
    for net in (model, model.model):
        batch = net(ids, output_hidden_states=True)
        for b in range(B):
            alone = net(ids[b : b + 1], output_hidden_states=True)
            for key, value in alone.items():
                if isinstance(value, torch.Tensor) and value.dim() == 0:
                    continue  # a scalar loss: a mean over the whole batch by definition
                if key in ("cache", "past_key_values"):
                    state_b, state_1 = batch[key], value
                    for layer_b, layer_1 in zip(state_b.layers, state_1.layers, strict=True):
                        for name, t in layer_1.items():
                            _fields_equal(layer_b[name][b : b + 1], t, 1e-5, 1e-5, f"state {name}")
                    continue
                sliced = tuple(h[b : b + 1] for h in batch[key]) if isinstance(value, tuple) else batch[key][b : b + 1]
                _fields_equal(sliced, value, 1e-5, 1e-5, f"{type(net).__name__}.{key} of row {b}")
    # Left padding: the padded row's real positions equal the row alone, prediction losses included.
    pad = 3
    padded = torch.cat([torch.zeros(B, pad, dtype=ids.dtype), ids], 1)
    padded[1:, :pad] = ids[1:, :pad]  # only row 0 is padded
    mask = torch.ones_like(padded)
    mask[0, :pad] = 0
    out = model(padded, attention_mask=mask)
    alone = model(ids[:1])
    torch.testing.assert_close(out.logits[:1, pad:], alone.logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.prediction_losses[:1], alone.prediction_losses, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.prediction_losses[1:], model(padded[1:]).prediction_losses, rtol=1e-5, atol=1e-6)
    # The training loss P weighs every real token the same: per block, errors summed over rows / tokens.
    positions = mask.sum(1).to(out.prediction_losses)
    expected = ((out.prediction_losses * positions[:, None]).sum(0) / positions.sum()).mean()
    torch.testing.assert_close(out.prediction_loss, expected)


@torch.no_grad()
def check_tuple_outputs(model: nn.Module, ids: torch.Tensor) -> None:
    """``return_dict=False`` (argument or ``config.return_dict``) gives the dataclass's non-None fields, in the
    documented order."""
    causal_order = ["loss", "logits", "cache", "hidden_states", "lm_loss", "prediction_loss", "prediction_losses"]
    base_order = ["last_hidden_state", "cache", "hidden_states", "prediction_loss", "prediction_losses"]
    for net, kwargs, order in ((model, {"labels": ids}, causal_order), (model.model, {}, base_order)):
        out = net(ids, output_hidden_states=True, use_cache=True, **kwargs)
        expected = [k if k != "cache" else _cache_field(out) for k in order]
        assert list(out.keys()) == expected, f"{type(net).__name__} fields {list(out.keys())}"
        for how in ("argument", "config"):
            if how == "argument":
                tup = net(ids, output_hidden_states=True, use_cache=True, return_dict=False, **kwargs)
            else:
                model.config.return_dict = False
                try:
                    tup = net(ids, output_hidden_states=True, use_cache=True, **kwargs)
                finally:
                    model.config.return_dict = True
            assert isinstance(tup, tuple) and len(tup) == len(out), f"{type(net).__name__}: {type(tup)}"
            for key, got, want in zip(out.keys(), tup, out.values(), strict=True):
                if key in ("cache", "past_key_values"):
                    assert type(got) is type(want) and got.get_seq_length() == want.get_seq_length()
                else:
                    _fields_equal(got, want, 0, 0, f"{type(net).__name__} tuple field {key}")
        # Without labels, hidden states or a state the optional fields drop out, the order unchanged.
        short = net(ids, use_cache=False, return_dict=False)
        kept = [k for k in expected if k not in ("loss", "lm_loss", "hidden_states", _cache_field(out))]
        assert len(short) == len(kept), kept


def check_kwargs_forwarded(model: nn.Module, ids: torch.Tensor) -> None:
    """``prepare_inputs_for_generation`` passes every model keyword on, as transformers' own does, and what
    callers give ``generate(**kwargs)`` reaches ``forward``."""
    inputs = model.prepare_inputs_for_generation(ids, attention_mask=torch.ones_like(ids), foo="bar",
                                                 output_hidden_states=True, labels=ids)
    assert inputs["foo"] == "bar" and inputs["output_hidden_states"] is True, inputs.keys()
    assert "labels" not in inputs and torch.equal(inputs["input_ids"], ids)
    seen: list[dict] = []
    hook = model.register_forward_pre_hook(lambda m, args, kw: seen.append(dict(kw)), with_kwargs=True)
    try:
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=3, output_hidden_states=True, return_dict_in_generate=True,
                                 logits_to_keep=1, **GEN)
    finally:
        hook.remove()
    assert seen and all(kw.get("output_hidden_states") is True and kw.get("logits_to_keep") == 1 for kw in seen)
    L = model.config.num_hidden_layers
    assert len(out.hidden_states) == 3 and all(len(step) == L + 1 for step in out.hidden_states)


def check_which_classes_train(model: nn.Module, ids: torch.Tensor) -> None:
    """The causal LM takes ``labels`` and returns ``loss``; the base model (no LM head) refuses them."""
    out = model(ids, labels=ids)
    assert out.loss is not None and out.loss.requires_grad
    try:
        model.model(ids, labels=ids)
    except TypeError as e:
        assert "labels" in str(e)
    else:
        raise AssertionError("SPENModel accepted labels")


@torch.no_grad()
def check_meta_builds(model: nn.Module, ids: torch.Tensor) -> None:
    """A model built on the meta device, or with ``init_empty_weights``, then loaded, gives the same logits
    bit for bit; buffers that are never saved are recomputed by ``init_weights`` and set at construction."""
    from accelerate import init_empty_weights
    from transformers.initialization import no_init_weights

    cls, state_dict = type(model), model.state_dict()
    expected = model(ids).logits
    buffers = dict(model.named_buffers())
    # 1. torch.device("meta"), then real memory (garbage: NaN here), init_weights(), the checkpoint.
    with torch.device("meta"):
        meta = cls(model.config)
    meta.to_empty(device="cpu")
    for t in (*meta.parameters(), *meta.buffers()):
        t.fill_(float("nan"))
    meta.init_weights()
    for name, buf in meta.named_buffers():
        assert torch.equal(buf, buffers[name]), f"init_weights() did not restore buffer {name}"
    meta.load_state_dict(state_dict)
    assert torch.equal(meta.eval()(ids).logits, expected), "meta build + init_weights + load differs"
    # 2. accelerate's init_empty_weights (buffers stay real), then the checkpoint assigned.
    with init_empty_weights():
        empty = cls(model.config)
    empty.load_state_dict(state_dict, assign=True)
    empty.tie_weights()
    assert torch.equal(empty.eval()(ids).logits, expected), "init_empty_weights + load differs"
    # 3. Buffers right at construction, without any weight init (transformers' test of buffer init).
    with no_init_weights():
        bare = cls(model.config)
    for name, buf in bare.named_buffers():
        assert torch.equal(buf, buffers[name]), f"buffer {name} is not set at construction"
