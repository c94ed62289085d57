"""Text about SPEN for model cards: what it supports of transformers' model conventions, and how.

``SUPPORT_TABLE`` is the table of docs/spen_transformers.md (tests/test_transformers_conventions.py checks that
the two agree and tests/conventions_testkit.py checks every row). Nothing imports this file at load time, so it is
not among the files ``save_pretrained`` copies beside a checkpoint; a model card that wants the table embeds it.
"""

__all__ = ["SUPPORT_TABLE"]

SUPPORT_TABLE = """\
| transformers convention | SPEN | how |
|---|---|---|
| `output_hidden_states=True` | yes | `num_hidden_layers + 1` tensors: the input embeddings, the residual stream each \
later block reads, the final output after `ln_f` (as GPT-2); in the graph (`retain_grad()` works); \
`config.output_hidden_states` is read |
| `output_attentions=True` | accepted; `attentions` is `None` | SPEN has no attention over tokens \
(`has_attentions = False`); the attention predictors attend over trace states and return no weights |
| `generate(inputs_embeds=...)` | yes | greedy, sampling and beam search, with or without `input_ids`; to continue, \
pass the whole sequence's embeddings with the returned `cache` |
| meta-device builds (`torch.device("meta")`, `init_empty_weights()`, `device_map`) | yes | the trace rates (buffers, \
never saved) are set at construction and again by `init_weights()`: after `to_empty()` call `init_weights()`, \
then load |
| a row alone vs in a batch | yes | every output equals the row run alone (float rounding); `prediction_losses` is \
`(batch, num_hidden_layers)`; the scalars `loss`, `lm_loss`, `prediction_loss` are means over the batch's tokens |
| `return_dict=False` | yes | the non-`None` fields as a tuple, in order: `loss`, `logits`, `cache`, `hidden_states`, \
`lm_loss`, `prediction_loss`, `prediction_losses` (`SPENModel`: `last_hidden_state`, `cache`, `hidden_states`, \
`prediction_loss`, `prediction_losses`) |
| `generate(**model_kwargs)` | yes | `prepare_inputs_for_generation` passes every keyword on to `forward` \
(not `labels`) |
| training with `labels` | `SPENForCausalLM` | `loss = lm_loss + prediction_loss_weight * prediction_loss`; \
`SPENModel` has no head and refuses `labels` (a head of your own adds the weighted `prediction_loss` itself) |
| cache | `SPENState` | a recurrent state (constant size but for the `sequence`-scope softmax reader's \
key/value cache); `reorder_cache` for beams; `past_key_values=` accepted; left padding with `attention_mask` |
| gradient checkpointing | no | `supports_gradient_checkpointing = False` |
"""
