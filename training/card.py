"""final/README.md: the model card as the Hub reads it (metadata, model-index) and as a reader needs it (the
regime, the command, code that loads the model)."""

from __future__ import annotations

import json
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData
from transformers import PreTrainedConfig

from ema_boundary import corpus
from ema_boundary.params import ParameterCounts
from training.loss import perplexity

# The hub's ids for the data sources that are hub datasets; the card's `datasets` lists them.
HUB_DATASETS = {corpus.C4: "allenai/c4"}
CARD_LICENSE = "apache-2.0"  # the project's license, which the modeling code shipped beside the weights carries


def local_location(output_dir: str | Path) -> str:
    """final/ as a card's snippet loads it when it is not pushed: the output folder as given when that is relative
    (the snippet runs from where train.py ran), else by its name alone; never a path of the training machine."""
    out = Path(output_dir)
    if out.is_absolute() or ".." in out.parts:
        out = Path(out.resolve().name)
    return (out / "final").as_posix()


def model_card(cfg: dict, model_config: PreTrainedConfig, counts: ParameterCounts, step: int, data_pos: list[int],
               train_docs: int, val_loss: float, command: str, tokenizer_name: str, name: str,
               location: str, test: dict | None = None, epoch_blocks: int = 0,
               changes: list[dict] | None = None, initial: str | None = None) -> ModelCard:
    """final/README.md as the Hub reads it: metadata (license, language, library, pipeline, tags, datasets, a
    model-index with the validation loss and perplexity), the regime, the command, and a python block that loads
    the model from ``location`` (the folder, or the hub repository it is pushed to) and generates. ``name`` is
    the model's name (the repository id, or the output folder's name).

    ``data_pos`` is the data position after the last step (epoch, document or block, token offset);
    ``train_docs`` the number of training documents (0 for streamed C4, which is not counted); ``epoch_blocks``
    the blocks of one epoch of shuffled local data (0: the data was read by documents); ``test`` the test
    split's metrics (:meth:`TestBlocks.metrics`) of a run with one; ``changes`` the settings changed on resume
    (train_config.check_resume), each with its step; ``initial`` the name of the model whose weights the run
    started from (None: from scratch). ``location`` is written as given: a repository id or a relative folder,
    never a path of the machine that trained it.
    """
    kind = model_config.model_type
    tokens = step * cfg["total_train_batch_size"] * cfg["block_size"]
    data, epoch, doc = cfg["data"], data_pos[0], data_pos[1]
    order = "shuffled" if cfg.get("shuffle") else "in corpus order"
    if train_docs and epoch_blocks:  # passes done, plus the share of the blocks read in the current one
        passes = (f"{epoch + doc / epoch_blocks:.3g} (passes over the {train_docs:,} training documents, as "
                  f"{epoch_blocks:,} blocks shuffled each epoch)")
    elif train_docs:  # passes done, plus the share of the training documents read in the current one
        passes = f"{epoch + doc / train_docs:.3g} (passes over the {train_docs:,} training documents, {order})"
    else:
        buffer = f", {order}" + (f" through a {cfg['shuffle_buffer']:,}-document buffer" if cfg.get("shuffle") else "")
        passes = (f"{epoch} complete passes (streamed{buffer}; not counted)" if epoch
                  else f"under one (streamed{buffer})")
    hub_ids = [HUB_DATASETS[d] for d in data if d in HUB_DATASETS]
    if hub_ids:
        dataset = {"dataset_type": hub_ids[0], "dataset_name": "C4 (en)", "dataset_config": "en"}
    elif data[0] in corpus.EMBEDDED_SOURCES:
        dataset = {"dataset_type": "embedded", "dataset_name": f"{data[0]} corpus (every {cfg['val_every']}th "
                                                              "document held out)"}
    else:
        dataset = {"dataset_type": "text", "dataset_name": ", ".join(Path(d).name for d in data)}
    scores = [("validation", val_loss)] + ([("test", test["test_loss"])] if test else [])
    results = [EvalResult(task_type="text-generation", task_name="Causal language modeling", dataset_split=split,
                          metric_type=metric, metric_name=label, metric_value=round(value, 4), **dataset)
               for split, loss in scores
               for metric, label, value in (("loss", f"{split} loss (nats per token)", loss),
                                            ("perplexity", f"{split} perplexity", perplexity(loss)))]
    english = data[0] in (corpus.C4, *corpus.EMBEDDED_SOURCES)  # local files: their language is unknown
    meta = ModelCardData(license=CARD_LICENSE, language="en" if english else None, library_name="transformers",
                         pipeline_tag="text-generation", tags=["ema-boundary", "causal-lm", kind],
                         datasets=hub_ids or None, model_name=name, eval_results=results)
    # SPEN's modeling code ships beside the weights (auto_map in config.json); GPT-2 is transformers' own.
    remote = ", trust_remote_code=True" if kind == "spen" else ""
    prompt = "The for statement" if data[0] in corpus.EMBEDDED_SOURCES else "The"
    changed = "".join(f"\n- changed on resume at step {c['step']}: {c['setting']} {c['from']} -> {c['to']}"
                      for c in changes or [])
    test_line = (f"\n- test loss: {test['test_loss']:.4f}, perplexity {test['test_ppl']:.2f} ({test['test_tokens']:,} "
                 f"tokens of {test['test_documents']} held-out test documents, every {cfg['test_every']}th of the "
                 "documents not held out for validation)" if test else "")
    origin = f"trained from the weights of `{initial}`" if initial else "trained from scratch"
    return ModelCard(f"""---
{meta.to_yaml()}
---
# {name}

A {kind} language model {origin} with `train.py` of the ema-boundary project ("EMA Is Not All You
Need", arXiv 2604.08556).

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

path = {json.dumps(location)}
tokenizer = AutoTokenizer.from_pretrained(path{remote})
model = AutoModelForCausalLM.from_pretrained(path{remote})
inputs = tokenizer({json.dumps(prompt)}, return_tensors="pt")
output = model.generate(**inputs, max_new_tokens=20, do_sample=False, pad_token_id=tokenizer.eos_token_id)
print(tokenizer.decode(output[0]))
```

## Regime

- model: {kind}, `{Path(cfg['model_name_or_path']).name if not initial else initial}`, {counts.total:,} parameters \
({counts.non_embedding:,} non-embedding)
- data: {corpus.short_name(data)}
- tokenizer: {tokenizer_name}
- tokens seen: {tokens:,} ({step} steps x {cfg['total_train_batch_size']} sequences x {cfg['block_size']} tokens), \
{tokens / counts.total:.3g} per parameter
- epochs: {passes}
- final validation loss: {val_loss:.4f}, perplexity {perplexity(val_loss):.2f} ({cfg['max_eval_samples']} sequences)\
{test_line}
- optimizer: AdamW, peak learning rate {cfg['learning_rate']:g}, {cfg['warmup_steps']} warmup steps, cosine decay \
to {cfg['min_lr_ratio']:g} x the peak, weight decay {cfg['weight_decay']:g}, betas ({cfg['adam_beta1']:g}, \
{cfg['adam_beta2']:g}); seed {cfg['seed']}
- mixed precision: {cfg['mixed_precision']}{changed}

Command:

```
{command}
```
""")
