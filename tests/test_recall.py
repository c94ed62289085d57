"""eval.recall: the MQAR task's invariants, the recipe's pieces, a tiny run that learns, the map over seeds, the
arms' two axes (write rule, state numbers checked against the caches the models return) and the escape comparison."""

import math
from dataclasses import replace

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, MambaConfig, MambaForCausalLM

from ema_boundary.stats import accuracy_interval, wilson
from eval.recall import (
    IGNORE,
    PAD,
    Curriculum,
    RecallRecipe,
    RecallTask,
    default_map_configs,
    evaluate_recall,
    map_rule,
    recall_map,
    recall_model,
    task_config,
    train_recall,
)
from eval.recall_arms import describe_arm, escape_comparison, state_numbers, state_parts, write_rule
from modeling_spen import SPENConfig, SPENForCausalLM


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


def test_the_device_moves_the_model_not_the_examples() -> None:
    # A seed draws the same examples wherever the model trains: on the CPU, "cpu" given or not is one run.
    task = RecallTask(vocab_size=18, pairs=(2,))
    recipe = RecallRecipe(steps=20, batch_size=8, lrs=(1e-2,), warmup_steps=2)
    config = GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=8, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    a, _ = train_recall(config, task, recipe, lr=1e-2, seed=3, progress=False)
    b, _ = train_recall(config, task, recipe, lr=1e-2, seed=3, progress=False, device="cpu")
    assert next(b.parameters()).device.type == "cpu"
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert evaluate_recall(a, task, 64, seed=5) == evaluate_recall(b, task, 64, seed=5)


def test_a_stopped_run_resumes_from_its_checkpoint_to_the_uninterrupted_model(tmp_path, monkeypatch) -> None:
    # Two pair counts (the curriculum's state matters) and dropout (the global random stream does too).
    task = RecallTask(vocab_size=18, pairs=(2, 4))
    recipe = RecallRecipe(steps=14, batch_size=8, lrs=(1e-2,), warmup_steps=2, start_pairs=2)
    config = GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=12, resid_pdrop=0.1, embd_pdrop=0.1,
                        attn_pdrop=0)
    whole, whole_steps = train_recall(config, task, recipe, lr=1e-2, seed=4, progress=False)
    ckpt = tmp_path / "recall_checkpoint.pt"
    calls, update = [], Curriculum.update

    def stop_at_step_10(self, n, accuracy):
        calls.append(n)
        if len(calls) == 11:  # a kill during step 10: the checkpoint after step 7 is the last one written
            raise KeyboardInterrupt
        return update(self, n, accuracy)

    monkeypatch.setattr(Curriculum, "update", stop_at_step_10)
    with pytest.raises(KeyboardInterrupt):
        train_recall(config, task, recipe, lr=1e-2, seed=4, progress=False, checkpoint=ckpt, checkpoint_every=4)
    assert torch.load(ckpt, weights_only=True)["step"] == 7 and [f.name for f in tmp_path.iterdir()] == [ckpt.name]
    monkeypatch.setattr(Curriculum, "update", update)
    resumed, steps = train_recall(config, task, recipe, lr=1e-2, seed=4, progress=False, checkpoint=ckpt,
                                  checkpoint_every=4)
    assert steps == whole_steps and not ckpt.exists()  # the state goes once the model is trained
    assert all(torch.equal(x, y) for x, y in zip(whole.state_dict().values(), resumed.state_dict().values(),
                                                 strict=True))


@pytest.mark.parametrize("damage", ["truncated", "not a state"])
def test_a_damaged_checkpoint_is_set_aside_and_training_starts_over(tmp_path, capsys, damage) -> None:
    # As train.py passes over a damaged checkpoint: the run is not lost to a file a kill or a full disk broke.
    task = RecallTask(vocab_size=18, pairs=(2,))
    recipe = RecallRecipe(steps=6, batch_size=8, lrs=(1e-2,), warmup_steps=2)
    config = GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=8, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    whole, whole_steps = train_recall(config, task, recipe, lr=1e-2, seed=2, progress=False)
    ckpt = tmp_path / "recall_checkpoint.pt"
    if damage == "truncated":
        torch.save({"step": 3, "model": whole.state_dict()}, ckpt)
        ckpt.write_bytes(ckpt.read_bytes()[:200])
    else:
        torch.save({"step": 3}, ckpt)  # readable, but without the rest of a training state
    model, steps = train_recall(config, task, recipe, lr=1e-2, seed=2, progress=False, checkpoint=ckpt)
    assert steps == whole_steps
    assert all(torch.equal(x, y) for x, y in zip(whole.state_dict().values(), model.state_dict().values(),
                                                 strict=True))
    assert sorted(f.name for f in tmp_path.iterdir()) == ["recall_checkpoint.pt.damaged"]
    err = capsys.readouterr().err
    assert f"{ckpt}: cannot resume from it" in err and "set aside as recall_checkpoint.pt.damaged" in err


def test_recall_map_reports_every_model() -> None:
    task = RecallTask(vocab_size=16, pairs=(1, 2))
    recipe = RecallRecipe(steps=3, batch_size=4, lrs=(1e-3, 3e-3), warmup_steps=1, select_examples=8,
                          eval_examples=8)
    configs = {name: cfg for name, cfg in default_map_configs(width=16, heads=2).items()
               if name in ("gpt2", "none", "softmax_attention-sequence")}
    seen = []
    result = recall_map(configs, task, recipe, progress=False, on_model=lambda n, r: seen.append(n), seeds=(0, 5))
    assert seen == list(configs) and list(result["models"]) == list(configs)
    assert result["seeds"] == [0, 5] and result["seed"] == 0
    for name, r in result["models"].items():
        assert set(r["accuracy"]) == {"1", "2"} and all(0 <= a <= 1 for a in r["accuracy"].values())
        assert r["best_lr"] in (1e-3, 3e-3) and set(r["seeds"]) == {"0", "5"}
        for n in ("1", "2"):  # the mean over seeds, inside its interval, inside [0, 1]
            per_seed = [r["seeds"][s]["accuracy"][n] for s in ("0", "5")]
            assert r["accuracy"][n] == pytest.approx(sum(per_seed) / 2)
            lo, hi = r["interval"][n]
            assert 0 <= lo <= min(per_seed) + 1e-12 and max(per_seed) - 1e-12 <= hi <= 1
        for run in r["seeds"].values():  # each seed chose its own rate on its own selection sequences
            assert set(run["sweep"]) == {"0.001", "0.003"} and run["best_lr"] in (1e-3, 3e-3)
        assert r["chance"] == task.chance and 1 <= r["steps"] <= 3 and r["max_steps"] == 3
        assert 0 < r["non_embedding_parameters"] < r["parameters"]  # the task's embeddings are not counted
        assert r["state_numbers"] == state_numbers(configs[name], task.seq_len) and r["state_seq_len"] == 6
    assert result["models"]["gpt2"]["write_rule"] == "attention"
    assert result["models"]["none"]["write_rule"] == "fixed"
    assert result["task"]["pairs"] == (1, 2)
    # A seed's run does not depend on which other seeds ran beside it.
    alone = recall_map({"none": configs["none"]}, task, recipe, progress=False, seeds=(5,))
    assert alone["models"]["none"]["seeds"]["5"]["accuracy"] == result["models"]["none"]["seeds"]["5"]["accuracy"]
    with pytest.raises(ValueError, match="seeds must be distinct"):
        recall_map(configs, task, recipe, progress=False, seeds=(1, 1))


def test_the_recall_trainer_chooses_by_the_one_rate_rule() -> None:
    # recall_model takes a RateRule (eval.sweep.plan): the map's own is each seed choosing from recipe.lrs, with no
    # extension; a rule that extends trains the next rate beyond the edge as the sweep runner does.
    from eval.rates import RateRule, choose

    task = RecallTask(vocab_size=16, pairs=(1, 2))
    recipe = RecallRecipe(steps=3, batch_size=4, lrs=(1e-3, 3e-3), warmup_steps=1, select_examples=8, eval_examples=8)
    config = default_map_configs(width=16, heads=2)["none"]
    assert map_rule(recipe) == RateRule(lr_grid=(1e-3, 3e-3), choose="each_seed", extend=False, max_extensions=0)
    def timeless(r: dict) -> dict:
        return {**r, "seconds": 0, "sweep": {k: {**v, "seconds": 0} for k, v in r["sweep"].items()}}

    plain = recall_model(config, task, recipe, seed=3, progress=False)
    ruled = recall_model(config, task, recipe, seed=3, progress=False, rate=map_rule(recipe))
    assert timeless(plain) == timeless(ruled)
    scores = {float(k): sum(v["selection_accuracy"].values()) / 2 for k, v in plain["sweep"].items()}
    assert plain["best_lr"] == choose(scores, lower_is_better=False)
    lone = RateRule(lr_grid=(1e-3,), choose="each_seed", extend=True, max_extensions=1, factor=3.0)
    extended = recall_model(config, task, replace(recipe, lrs=(1e-3,)), seed=3, progress=False, rate=lone)
    assert list(extended["sweep"]) == ["0.001", "0.003"]  # the lone rate, then the one above it
    assert extended["sweep"]["0.003"]["selection_accuracy"] == plain["sweep"]["0.003"]["selection_accuracy"]
    with pytest.raises(ValueError, match="each_seed"):
        recall_map({"none": config}, task, recipe, progress=False, rate=RateRule(lr_grid=(1e-3,)))


def _floats(obj) -> int:
    """Floating-point numbers held in a cache layer (tensors in its attributes and their dicts)."""
    if torch.is_tensor(obj):
        return obj.numel() if obj.is_floating_point() else 0
    if isinstance(obj, dict):
        return sum(_floats(v) for v in obj.values())
    return sum(_floats(v) for v in vars(obj).values()) if hasattr(obj, "__dict__") else 0


SPEN_ARMS = [("linear", "fixed"), ("linear-learned", "learned_lti"), ("linear-selective", "input_gated_diagonal"),
             ("linear-selective_ssm", "input_dependent_outer_product"),
             ("linear-selective_ssm3", "input_dependent_outer_product"), ("linear-ema16", "fixed"),
             ("linear_attention-state", "fixed"), ("softmax_attention-state", "fixed"), ("none", "fixed"),
             ("linear_attention-sequence", "linear_attention"),
             ("softmax_attention-sequence", "attention")]


@pytest.mark.parametrize("name, rule", SPEN_ARMS)
def test_each_spen_arm_has_its_write_rule_and_the_state_its_cache_holds(name: str, rule: str) -> None:
    config = default_map_configs(width=16, heads=2)[name]
    config.vocab_size = 32
    T = 7
    model = SPENForCausalLM(config).eval()
    with torch.no_grad():
        out = model(torch.randint(1, 32, (1, T)), use_cache=True)
    cache = out.cache if hasattr(out, "cache") else out.past_key_values
    assert write_rule(config) == rule
    assert [_floats(layer) for layer in cache.layers] == [state_numbers(config, T)] * config.num_hidden_layers


def test_state_numbers_by_formula() -> None:
    configs = default_map_configs(width=64, heads=4)
    D, T = 64, 48
    assert state_numbers(configs["gpt2"], T) == 2 * D * T  # attention: grows with T
    assert state_numbers(configs["linear"], T) == 3 * D  # the paper's three rates
    assert state_numbers(configs["linear-ema16"], T) == 16 * D and state_numbers(configs["linear-ema64"], T) == 64 * D
    for n, name in ((3, "linear-selective_ssm3"), (16, "linear-selective_ssm"), (64, "linear-selective_ssm64")):
        assert state_parts(configs[name], T) == {"selective state (D x N)": D * n, "read-out slots (S x D)": 3 * D}
    # Linear attention's sums: one (D/H) x (D/H) matrix per head, plus the normaliser and the traces.
    assert state_numbers(configs["linear_attention-sequence"], T) == 4 * 16 * 16 + D + 3 * D
    assert state_numbers(configs["softmax_attention-sequence"], T) == 2 * D * T + 3 * D
    assert describe_arm(configs["gpt2"], T)["state_grows_with_length"]
    assert not describe_arm(configs["linear-selective_ssm"], T)["state_grows_with_length"]
    assert describe_arm(configs["softmax_attention-sequence"], T)["write_rule_label"] == "attention over tokens"


def test_gpt2_and_mamba_state_numbers_are_their_caches() -> None:
    T = 5
    for model in (GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=2, n_head=2, vocab_size=32, n_positions=16)),
                  MambaForCausalLM(MambaConfig(vocab_size=32, hidden_size=16, num_hidden_layers=2, state_size=4))):
        with torch.no_grad():
            out = model(torch.randint(0, 32, (1, T)), use_cache=True)
        cache = next(c for c in (getattr(out, k, None) for k in ("cache", "past_key_values", "cache_params"))
                     if c is not None)
        assert [_floats(layer) for layer in cache.layers] == [state_numbers(model.config, T)] * 2
    assert write_rule(MambaConfig()) == "selective_scan"
    assert describe_arm(object(), T) == {"write_rule": None, "write_rule_label": "not described",
                                         "state_numbers": None, "state_parts": None, "state_seq_len": T,
                                         "state_grows_with_length": False}


def test_rwkv_state_numbers_are_its_state_and_the_field_arms_build() -> None:
    from transformers import RwkvConfig, RwkvForCausalLM

    config = RwkvConfig(vocab_size=32, hidden_size=16, num_hidden_layers=2, attention_hidden_size=16,
                        intermediate_size=32, context_length=8)
    with torch.no_grad():
        state = RwkvForCausalLM(config)(torch.randint(0, 32, (1, 5)), use_cache=True).state
    assert sum(t[0, :, 0].numel() for t in state) == state_numbers(config, 5)  # one layer's share
    assert write_rule(config) == "fixed_decay_weighted_write"
    configs = default_map_configs()
    assert [state_numbers(configs[f"hf-mamba{n}"], 48) for n in ("3", "", "64")] == [448, 1280, 4352]
    assert state_numbers(configs["mixer_mamba"], 48) == 64 * 16 + 64 * 3
    assert {write_rule(configs[a]) for a in ("hf-mamba", "mixer_mamba", "mixer_mamba-lagged")} == {"selective_scan"}


def test_intervals_stay_in_the_unit_range() -> None:
    assert wilson(0, 100)[0] == pytest.approx(0.0, abs=1e-12) and wilson(100, 100)[1] == pytest.approx(1.0)
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    assert accuracy_interval([0.3], 100) == wilson(30, 100)  # one seed: the queries' Wilson interval
    lo, hi = accuracy_interval([0.0, 1.0, 1.0], 100)  # seeds: the bootstrap of their mean
    assert 0.0 <= lo < 2 / 3 < hi == 1.0
    assert accuracy_interval([0.5, 0.5], 100) == (0.5, 0.5)


def _arm(per_seed: dict[int, float], pairs: int = 16) -> dict:
    """A made-up map entry: accuracy at ``pairs`` per seed."""
    return {"accuracy": {str(pairs): sum(per_seed.values()) / len(per_seed)}, "chance": 1 / 64,
            "seeds": {str(s): {"accuracy": {str(pairs): a}} for s, a in per_seed.items()},
            "state_numbers": 1024, "write_rule": "x"}


def _map(selective: dict[int, float], fixed: dict[int, float], control: float = 1.0) -> dict:
    return {"gpt2": _arm(dict.fromkeys(selective, control)), "linear-selective_ssm": _arm(selective),
            "linear-ema16": _arm(fixed)}


def test_escape_selective_above_the_fixed_bank_is_a_verdict() -> None:
    seeds = range(5)
    result = escape_comparison(_map({s: 0.90 + 0.01 * s for s in seeds}, {s: 0.07 + 0.005 * s for s in seeds}),
                               control="gpt2")
    assert result["headline"] == "16" and result["verdict"] == "selective higher" and result["control_passed"]
    c = result["comparisons"]["16"]
    assert list(result["comparisons"]) == ["16"]  # only the sizes whose two arms ran
    assert c["selective"] == "linear-selective_ssm" and c["fixed"] == "linear-ema16" and c["seeds"] == [0, 1, 2, 3, 4]
    assert c["difference"] == pytest.approx(0.84) and 0 < c["ci95"][0] < 0.84 < c["ci95"][1] <= 1
    assert c["copying"] == 1 / 16
    # The other direction, and equality within the margin behind a passing control.
    assert escape_comparison(_map({s: 0.1 + 0.01 * s for s in seeds}, {s: 0.5 + 0.01 * s for s in seeds}),
                             control="gpt2")["verdict"] == "fixed higher"
    equal = _map({s: 0.06 + 0.001 * (s % 2) for s in seeds}, {s: 0.06 for s in seeds})
    assert escape_comparison(equal, control="gpt2")["verdict"] == "equivalent"


def test_escape_not_resolved_without_seeds_interval_or_control() -> None:
    three = escape_comparison(_map({0: 0.95, 1: 0.96, 2: 0.97}, {0: 0.06, 1: 0.06, 2: 0.07}), control="gpt2")
    assert three["verdict"] == "not resolved" and "fewer than the 5" in three["comparisons"]["16"]["reason"]
    # Five seeds, but the differences straddle 0 widely: the interval decides nothing.
    wide = escape_comparison(_map({0: 0.9, 1: 0.1, 2: 0.8, 3: 0.05, 4: 0.5}, {0: 0.1, 1: 0.8, 2: 0.1, 3: 0.7, 4: 0.5}),
                             control="gpt2")
    c = wide["comparisons"]["16"]
    assert wide["verdict"] == "not resolved" and c["ci95"][0] < 0 < c["ci95"][1] and -1 <= c["ci95"][0]
    # Both arms at the copying level is no evidence of equal rules when the control failed too.
    equal = _map({s: 0.06 for s in range(5)}, {s: 0.06 for s in range(5)}, control=0.5)
    result = escape_comparison(equal, control="gpt2")
    assert result["control_passed"] is False and result["verdict"] == "not resolved"
    assert escape_comparison({}, control=None) == {**escape_comparison({}), "verdict": None, "headline": None}
    one = escape_comparison(_map({0: 0.5}, {0: 0.25}))["comparisons"]["16"]
    assert math.isclose(one["difference"], 0.25) and one["ci95"] == [-1.0, 1.0]  # one seed bounds nothing
    assert one["ci90"] == [None, None] and one["p_difference"] is None


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


class _ModeAnswer(torch.nn.Module):
    """Answers every position with the most frequent value seen so far (the smallest id among ties): the no-lookup
    strategy as a model, scored through evaluate_recall."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(()))

    def forward(self, input_ids: torch.Tensor, use_cache: bool = False):
        values = torch.where(input_ids >= self.vocab // 2, input_ids, 0)
        counts = torch.nn.functional.one_hot(values, self.vocab).cumsum(1).float()
        counts[..., 0] = -1  # padding is never an answer
        return type("Out", (), {"logits": counts})()


def test_the_floor_is_what_a_no_lookup_answer_scores_on_the_evaluated_sequences() -> None:
    from eval.recall import NO_LOOKUP_STRATEGIES, no_lookup_floor

    task = RecallTask(vocab_size=24, pairs=(2, 4, 8))  # 12 values: repeats are frequent
    floor = no_lookup_floor(task, 96, seed=7, batch_size=40)
    scored = evaluate_recall(_ModeAnswer(task.vocab_size), task, 96, seed=7, batch_size=40)
    most_frequent = floor["strategies"][NO_LOOKUP_STRATEGIES[0]]
    assert {str(n): a for n, a in scored.items()} == most_frequent  # the same sequences, the same answers
    for n in task.pairs:
        assert floor["floor"][str(n)] == max(s[str(n)] for s in floor["strategies"].values())
        assert floor["floor"][str(n)] > 1 / n  # values repeat: the floor is above 1 / pairs
        assert floor["random_context_value"][str(n)] <= floor["floor"][str(n)]


def _recall_results(per_arm: dict[str, list[float]], configs: dict) -> dict:
    """The runner's results for recall arms whose seeds scored ``per_arm[arm]`` at 16 pairs (no training)."""
    arms = {}
    for arm, accs in per_arm.items():
        described = describe_arm(configs[arm], 48)
        seeds = {str(k): {"score": {"16": a}, "steps": 2000, "lr": 1e-3, "arm": described, "chance": 1 / 64,
                          "parameters": {"non_embedding": 1}} for k, a in enumerate(accs)}
        arms[arm] = {"budgets": {"2000": seeds}}
    return {"arms": arms, "missing": []}


def test_the_map_reads_every_arm_against_the_floor_and_the_ablation_names_the_part(tmp_path) -> None:
    from eval.recall_map import recall_map as analyse
    from eval.sweep.plan import load_plan
    from eval.sweep.runner import Sweep

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text("""
name: t
trainer: recall
analysis: recall_map
seeds: [0, 1, 2, 3, 4]
budgets: [2000]
rate: {lr_grid: [1.0e-3]}
base: {width: 64, layers: 2, heads: 4, task: {vocab_size: 128, pairs: [2, 4, 8, 16]}}
arms:
  gpt2: {config: {model: gpt2}}
  linear-ema16: {config: {model: linear-ema16}}
  linear-s6lagged: {config: {model: linear-s6lagged}}
  mixer_mamba: {config: {model: mixer_mamba}}
  mixer_mamba-conv1: {config: {model: mixer_mamba-conv1}}
  mixer_mamba-nogate: {config: {model: mixer_mamba-nogate}}
  mixer_mamba-lagged: {config: {model: mixer_mamba-lagged}}
  hf-mamba: {config: {model: hf-mamba}}
settings:
  pairs: 16
  control: gpt2
  escape: {"16": [mixer_mamba, linear-ema16], "16-lagged": [linear-s6lagged, linear-ema16]}
  headline: "16"
  ablation: {conv: [mixer_mamba-conv1, mixer_mamba], gate: [mixer_mamba-nogate, mixer_mamba],
             current read: [mixer_mamba-lagged, mixer_mamba]}
  field_check: [mixer_mamba, hf-mamba]
""")
    plan = load_plan(str(plan_file))
    configs = default_map_configs()
    results = _recall_results({
        "gpt2": [1.0, 0.99, 1.0, 1.0, 0.995], "linear-ema16": [0.105, 0.11, 0.104, 0.108, 0.106],
        # above 1/16 + 5 points (0.1125) but not above the measured floor (0.123) + 5 points: no escape
        "linear-s6lagged": [0.16, 0.15, 0.17, 0.165, 0.155],
        "mixer_mamba": [0.95, 0.97, 0.93, 0.96, 0.98], "mixer_mamba-conv1": [0.11, 0.105, 0.12, 0.1, 0.11],
        "mixer_mamba-nogate": [0.94, 0.96, 0.95, 0.97, 0.96], "hf-mamba": [0.96, 0.95, 0.97, 0.94, 0.98],
        "mixer_mamba-lagged": [0.31, 0.30, 0.25, 0.30, 0.25]}, configs)
    a = analyse(plan, results, tmp_path, Sweep(plan, tmp_path))
    assert a["floor"]["kind"] == "no_lookup" and abs(a["copying"] - 0.1232) < 1e-3  # measured, not 1/16
    assert a["rule_escape"]["linear-s6lagged"]["escape"] == "does not escape"
    assert a["escape"]["16-lagged"]["verdict"] == "neither escapes at this budget"
    assert a["escape"]["16"]["verdict"] == "met" and a["verdict"] == "met"
    reading = {row["part"]: row["reading"] for row in a["ablation"]}
    assert reading == {"conv": "lets it escape", "gate": "not needed", "current read": "not resolved at this budget"}
    # above the bar without the part, far below the full block: the reason names the case the rule leaves open
    lagged = next(row for row in a["ablation"] if row["part"] == "current read")
    assert lagged["escape"] == ["escapes", "escapes"] and "both escape" in lagged["reason"]
    assert "lower by 67.6 points" in lagged["reason"]  # 0.958 - 0.282
    assert "the part moves the level, not the escape" in lagged["reason"]
    assert a["field_check"]["verdict"] == "equivalent"
    assert "conv 1" in a["arms"]["mixer_mamba-conv1"]["write_rule_label"]


def test_a_run_left_with_nan_weights_is_recorded_diverged_not_scored_zero(tmp_path, monkeypatch) -> None:
    # A model with NaN weights answers one token everywhere (argmax of NaN): 0% accuracy, a number the rule would
    # read as a rate's score. The recall trainer's objective is NaN for it, so the run is recorded diverged.
    import json

    import eval.recall
    from eval.sweep.execute import execute
    from eval.sweep.paths import RunPaths

    real = eval.recall.train_recall

    def blows_up(*args, **kwargs):
        model, steps = real(*args, **kwargs)
        with torch.no_grad():
            next(model.parameters()).fill_(math.nan)
        return model, steps

    spec = {"sweep": "t", "trainer": "recall", "arm": "gpt2", "lr": 1e-2, "seed": 0, "steps": 2,
            "config": {"model": "gpt2", "width": 16, "layers": 1, "heads": 2, "task": {"vocab_size": 16, "pairs": [2]},
                       "recipe": {"batch_size": 4, "warmup_steps": 1, "select_examples": 8, "eval_examples": 8}},
            "shared": {}}
    results = {}
    for name, train in (("finite", real), ("nan", blows_up)):
        monkeypatch.setattr(eval.recall, "train_recall", train)
        paths = RunPaths(tmp_path / name, "runs/gpt2/lr_0.01/seed_0/steps_2")
        paths.folder.mkdir(parents=True)
        paths.spec.write_text(json.dumps(spec))
        execute(paths.sweep, paths.run)
        results[name] = json.loads(paths.result.read_text())
    assert results["finite"]["finite_weights"] and "diverged" not in results["finite"]
    assert math.isfinite(results["finite"]["selection"])
    nan = results["nan"]
    assert nan["finite_weights"] is False and nan["diverged"] is True and math.isnan(nan["selection"])
    assert nan["accuracy"]["2"] < 0.5  # the accuracy stays recorded, as measured
