"""eval.recall: the MQAR task's invariants, the recipe's pieces, and a tiny run that learns."""

import pytest
import torch
from transformers import GPT2Config

from eval.recall import (
    IGNORE,
    PAD,
    Curriculum,
    RecallRecipe,
    RecallTask,
    default_map_configs,
    evaluate_recall,
    recall_map,
    task_config,
    train_recall,
)
from modeling_spen import SPENConfig


def test_answers_are_the_values_of_the_queried_keys() -> None:
    task = RecallTask(vocab_size=64, pairs=(3, 5))
    ids, targets = task.sample(32, 5, torch.Generator().manual_seed(0))
    assert ids.shape == targets.shape == (32, task.seq_len) == (32, 15)
    for row, tgt in zip(ids.tolist(), targets.tolist(), strict=True):
        context = dict(zip(row[0:10:2], row[1:10:2], strict=True))
        assert len(context) == 5  # distinct keys
        assert all(1 <= k < 32 for k in context) and all(32 <= v < 64 for v in context.values())
        queries = row[10:15]
        assert sorted(queries) == sorted(context)  # every key asked exactly once, answers not in the input
        # Targets only at the query positions, holding the queried key's value.
        assert tgt[10:15] == [context[q] for q in queries]
        assert all(t == IGNORE for t in tgt[:10])


def test_shorter_examples_are_padded_and_chance_is_one_over_the_values() -> None:
    task = RecallTask(vocab_size=64, pairs=(2, 4))
    ids, targets = task.sample(4, 2, torch.Generator().manual_seed(1))
    assert (ids[:, 6:] == PAD).all() and (targets[:, 6:] == IGNORE).all()
    assert (targets[:, 4:6] != IGNORE).all()
    assert task.chance == 1 / 32 and task.num_keys == 31


def test_sampling_is_reproducible_and_fresh() -> None:
    task = RecallTask()
    a = task.sample(8, 4, torch.Generator().manual_seed(7))[0]
    b = task.sample(8, 4, torch.Generator().manual_seed(7))[0]
    c = task.sample(8, 4, torch.Generator().manual_seed(8))[0]
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_curriculum_grows_by_competence_and_by_the_floor() -> None:
    task = RecallTask(pairs=(2, 4, 8, 16))
    recipe = RecallRecipe(steps=100, start_pairs=4, floor=(0.5, 0.9))
    g = torch.Generator().manual_seed(0)
    c = Curriculum(task, recipe, g)
    assert all(1 <= c.pairs(s) <= 4 for s in range(20)) and c.top == 4
    for _ in range(12):  # perfect accuracy at the current largest count: it grows by 2 (running mean > 0.9)
        c.update(c.top, 1.0)
    assert c.top == 6
    assert not c.update(3, 1.0) and c.top == 6  # batches below the top do not count
    slow = Curriculum(task, recipe, g)
    for s in range(100):  # never competent: the floor still brings every count in by 90% of the steps
        slow.pairs(s)
        slow.update(slow.top, 0.0)
    assert slow.top == 16
    done = Curriculum(task, RecallRecipe(steps=100, start_pairs=16), g)
    assert done.top == 16 and any(done.update(16, 1.0) for _ in range(30))  # stops once competent at the top
    assert RecallRecipe(warmup_steps=10).lr_factor(0) == pytest.approx(0.1)
    assert RecallRecipe(warmup_steps=10).lr_factor(500) == 1.0


def test_task_config_resizes_the_vocabulary_and_positions() -> None:
    task = RecallTask(vocab_size=64, pairs=(2, 20))
    gpt2 = task_config(GPT2Config(n_positions=16, vocab_size=50257, n_embd=16, n_layer=1, n_head=2), task, True)
    assert gpt2.vocab_size == 64 and gpt2.n_positions == 60 and gpt2.bos_token_id == PAD
    assert gpt2.initializer_range == 0.25  # 1 / sqrt(16)
    spen = task_config(SPENConfig(hidden_size=8, num_hidden_layers=1, intermediate_size=16), task)
    assert spen.vocab_size == 64 and spen.eos_token_id == PAD
    assert SPENConfig().vocab_size == 50257  # the caller's config is left alone


def test_a_tiny_run_learns_something_above_chance_on_two_pairs() -> None:
    # Two pairs from 8 values: chance 1/8; a model that copies a value from the context without
    # matching keys gets 1/2, one that matches gets 1.
    task = RecallTask(vocab_size=18, pairs=(2,))
    recipe = RecallRecipe(steps=150, batch_size=32, lrs=(1e-2,), warmup_steps=10)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=8, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    model, steps = train_recall(config, task, recipe, lr=1e-2, seed=0, progress=False)
    assert 1 <= steps <= 150
    accuracy = evaluate_recall(model, task, examples=256, seed=123)
    assert accuracy[2] > 3 * task.chance


def test_recall_map_reports_every_model() -> None:
    task = RecallTask(vocab_size=16, pairs=(1, 2))
    recipe = RecallRecipe(steps=3, batch_size=4, lrs=(1e-3, 3e-3), warmup_steps=1, select_examples=8,
                          eval_examples=8)
    configs = {name: cfg for name, cfg in default_map_configs(width=16, heads=2).items()
               if name in ("gpt2", "none", "softmax_attention-sequence")}
    seen = []
    result = recall_map(configs, task, recipe, seed=0, progress=False, on_model=lambda n, r: seen.append(n))
    assert seen == list(configs) and list(result["models"]) == list(configs)
    for r in result["models"].values():
        assert set(r["accuracy"]) == {"1", "2"} and all(0 <= a <= 1 for a in r["accuracy"].values())
        assert r["best_lr"] in (1e-3, 3e-3) and set(r["sweep"]) == {"0.001", "0.003"}
        assert r["chance"] == task.chance and 1 <= r["steps"] <= 3 and r["max_steps"] == 3
        assert 0 < r["non_embedding_parameters"] < r["parameters"]  # the task's embeddings are not counted
    assert result["task"]["pairs"] == (1, 2)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: RecallTask(vocab_size=16, pairs=(8,)), r"RecallTask\.pairs: 8 pairs need 8 distinct keys"),
        (lambda: RecallTask(pairs=()), r"RecallTask\.pairs"),
        (lambda: RecallTask(pairs=(0, 2)), r"RecallTask\.pairs"),
        (lambda: RecallTask(vocab_size=4), r"RecallTask\.vocab_size"),
        (lambda: RecallRecipe(steps=0), r"RecallRecipe\.steps"),
        (lambda: RecallRecipe(lrs=()), r"RecallRecipe\.lrs"),
        (lambda: RecallRecipe(lrs=(2.0,)), r"RecallRecipe\.lrs"),
        (lambda: RecallRecipe(steps=10, warmup_steps=10), r"RecallRecipe\.warmup_steps"),
        (lambda: RecallRecipe(competence=1.5), r"RecallRecipe\.competence"),
        (lambda: RecallRecipe(floor=(0.8, 0.2)), r"RecallRecipe\.floor"),
        (lambda: RecallTask(pairs=(2, 4)).sample(2, 5, torch.Generator()), r"n_pairs must lie in \[1, 4\]"),
    ],
)
def test_bad_input_one_clear_message(make, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()
