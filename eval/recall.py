"""Multi-query associative recall (MQAR, after Zoology) with one recipe for every architecture.

The task (:class:`RecallTask`). A sequence lists ``n`` key-value pairs, then asks for every key
again in a random order::

    k1 v1 k2 v2 ... kn vn   q1 q2 ... qn   0 0 ...      (0 = padding)

The model must predict, at the position of ``q_j``, the value that followed that key in the
context; only those positions carry a target and count in the accuracy. As in Zoology's MQAR the
answers are not in the input: with teacher-forced answers (``q1 a1 q2 a2 ...``) the last queries
can be answered by elimination (the value not yet given), a shortcut that gives about 1/2 at four
pairs without any lookup and that small models learn first. Keys and values come from disjoint
halves of a small vocabulary and are drawn afresh for every sequence, so the answer can only come
from the context. Chance is ``1 / number of values``. The sequence length is ``3 * max(pairs)``;
an example with fewer pairs is padded (and, in training, cut to its own length ``3 n``).

The recipe (:class:`RecallRecipe`). The same for every model: a fresh model of the given config
(vocabulary resized to the task's, init std ``1 / sqrt(width)``), AdamW, a curriculum over the pair
count that grows by competence (with a floor in time, so that every model trains on every count),
random position offsets once it grows, early stopping once the largest count is learned, and one
learning-rate grid declared in advance. Each rate trains a model; the rate is chosen on held-out
examples (the *selection* set) and the chosen model is scored on other fresh examples (the
*evaluation* set, the same sequences for every model), per pair count.

The positive control is the GPT-2 architecture (2 layers, width 64): attention solves MQAR
(Zoology), so a model that fails under this recipe fails for its architecture, not for the recipe.
Why the readers of SPEN's traces should differ: a reader of the current trace state only
(``state`` scope) sees a fixed-rate mixture of the past, and by the data-processing inequality can
recover no more identity than that mixture keeps; a reader of every past state (``sequence``
scope) can invert fixed-rate traces, ``u_t = (h_t - (1 - a) h_{t-1}) / a``, and is not so bound.
:func:`recall_map` measures both, beside the positive control and chance.

The map has two axes (issue 22): each arm's **write rule** (fixed rates, learned time-invariant rates,
input-gated diagonal rates, S6's input-dependent decay and outer-product write, linear attention's outer-product
sums that never decay, attention over tokens:
:func:`write_rule`) and its **state numbers per layer** (what one layer keeps to continue a sequence:
:func:`state_numbers`; both in :mod:`eval.recall_arms`), so that "input-dependent selection" and "more state"
(Zoology: recall capacity grows with the state) can be told apart. :func:`eval.recall_arms.escape_comparison` sets
a selective state of N numbers per channel against a bank of N fixed rates, equal state, paired by seed over
:func:`recall_map`'s seeds.
"""

from __future__ import annotations

import copy
import inspect
import math
import multiprocessing
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, GPT2Config, MambaConfig, PretrainedConfig, RwkvConfig

from ema_boundary import stats
from ema_boundary.params import parameter_counts
from ema_boundary.seeding import recall_evaluation_seed, recall_selection_seed, recall_train_seed
from eval.mamba_scan import fast_mamba_scan
from eval.rates import RateRule, choose
from eval.recall_arms import describe_arm
from modeling_spen import SPENConfig  # also registers SPEN with the Auto classes
from modeling_spen.variants import SPEN_VARIANTS
from training.checkpoint import load_state_file, save_state_file

PAD = 0
IGNORE = -100


@dataclass(frozen=True)
class RecallTask:
    """MQAR sequences over a vocabulary of ``vocab_size``: token 0 pads, keys are
    ``1 .. vocab_size // 2 - 1``, values ``vocab_size // 2 .. vocab_size - 1``.

    Args:
        vocab_size: vocabulary of the task (the model's is resized to it).
        pairs: the pair counts evaluated; the sequence length is ``3 * max(pairs)``.
    """

    vocab_size: int = 128
    pairs: tuple[int, ...] = (2, 4, 8, 16)

    def __post_init__(self) -> None:
        v = self.vocab_size
        if isinstance(v, bool) or not isinstance(v, int) or v < 6:
            raise ValueError(f"RecallTask.vocab_size must be an integer >= 6, got {v!r}")
        pairs = tuple(self.pairs)
        if not pairs or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in pairs):
            raise ValueError(f"RecallTask.pairs must be a non-empty list of positive integers, got {self.pairs!r}")
        if max(pairs) > self.num_keys:
            raise ValueError(
                f"RecallTask.pairs: {max(pairs)} pairs need {max(pairs)} distinct keys, "
                f"vocab_size {v} has {self.num_keys}"
            )
        object.__setattr__(self, "pairs", tuple(sorted(set(pairs))))

    @property
    def num_keys(self) -> int:
        return self.vocab_size // 2 - 1

    @property
    def num_values(self) -> int:
        return self.vocab_size - self.vocab_size // 2

    @property
    def seq_len(self) -> int:
        return 3 * max(self.pairs)

    @property
    def chance(self) -> float:
        """Accuracy of a uniform guess among the values (a model that reads nothing from context)."""
        return 1.0 / self.num_values

    def sample(self, batch: int, n_pairs: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids, targets)``, both ``(batch, seq_len)``; targets are -100 except at the queries,
        where they hold the queried key's value. Positions from ``3 * n_pairs`` on are padding."""
        if not 1 <= n_pairs <= max(self.pairs):
            raise ValueError(f"n_pairs must lie in [1, {max(self.pairs)}] for this task, got {n_pairs}")
        half = self.vocab_size // 2
        keys = torch.rand(batch, self.num_keys, generator=generator).argsort(-1)[:, :n_pairs] + 1
        values = torch.randint(half, self.vocab_size, (batch, n_pairs), generator=generator)
        order = torch.rand(batch, n_pairs, generator=generator).argsort(-1)
        ids = torch.full((batch, self.seq_len), PAD, dtype=torch.long)
        ids[:, : 2 * n_pairs] = torch.stack([keys, values], -1).flatten(1)
        ids[:, 2 * n_pairs : 3 * n_pairs] = keys.gather(1, order)
        targets = torch.full_like(ids, IGNORE)
        targets[:, 2 * n_pairs : 3 * n_pairs] = values.gather(1, order)
        return ids, targets


@dataclass(frozen=True)
class RecallRecipe:
    """How every model is trained and scored on MQAR. Sizes measured on 2 CPU cores: see
    docs/notes/issue14-phase1.md, which also records what did not work.

    Four choices make a 2-layer GPT-2 of width 64 learn the lookup in minutes rather than hours;
    each applies to every model alike:

    * ``width_init``: weights drawn with std ``1 / sqrt(hidden_size)`` (the config's
      ``initializer_range`` is overridden). GPT-2's 0.02 suits width 768; at width 64 it starts
      attention so close to uniform that the lookup circuit had not formed after 3,750 steps at four
      pairs (measured), while at 0.125 it formed after 1,400.
    * ``batch_size`` 128: the lookup formed after ~550 steps for each of two seeds, against
      1,400-2,100 steps (and some seeds not within 6,000) at batch 32.
    * ``random_offsets``: once the curriculum has grown past its first count, each training
      sequence starts at a random position (``position_ids`` shifted, for models whose forward takes
      them; Ruoss et al. 2023, "Randomized positional encodings"), so that short examples train
      every position a long one uses. Without it a GPT-2 that solved four pairs stayed at 63% on
      eight (its later positions untrained); with it from the first step, the lookup took about
      twice as many steps to form.
    * a curriculum by competence: the largest pair count ``top`` starts at ``start_pairs`` and grows
      by 2 whenever the running training accuracy at ``top`` exceeds ``competence``, and at least
      linearly from ``floor[0]`` to ``floor[1]`` of the steps, so that every model, learning or not,
      trains on every count. Half the batches are at ``top``, the others at a count drawn from
      ``1 .. top``. Training stops early once ``top`` is the largest count and the running accuracy
      there exceeds ``stop_accuracy`` (``steps`` in the results is what ran).

    The loss is the cross-entropy at the queries, plus, for a model whose output carries a
    ``prediction_loss`` (SPEN), that loss times its config's ``prediction_loss_weight``: each model
    trains with its own objective.

    Args:
        steps: the most optimizer steps per learning rate.
        batch_size: sequences per step.
        lrs: the learning-rate grid, declared in advance; one model per rate.
        warmup_steps: linear warmup, then a constant rate (the circuit can form late; a decaying
            rate would slow what follows).
        start_pairs, competence, floor, stop_accuracy: the curriculum (above).
        width_init, random_offsets: above.
        weight_decay: AdamW weight decay (all parameters).
        grad_clip: global gradient-norm clip.
        select_examples: held-out sequences per pair count that choose the learning rate.
        eval_examples: fresh sequences per pair count that score the chosen model.
    """

    steps: int = 2000
    batch_size: int = 128
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)
    warmup_steps: int = 50
    start_pairs: int = 4
    competence: float = 0.9
    floor: tuple[float, float] = (0.4, 0.8)
    stop_accuracy: float = 0.99
    width_init: bool = True
    random_offsets: bool = True
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    select_examples: int = 256
    eval_examples: int = 1024

    @classmethod
    def quick(cls) -> RecallRecipe:
        """One learning rate (the one the positive control needs), fewer steps and examples, a later
        floor (the lookup forms after ~550 steps at four pairs; growing earlier delays it). Meant for
        ``RecallTask(pairs=(2, 4, 8))``."""
        return cls(steps=1200, lrs=(1e-3,), floor=(0.6, 0.9), select_examples=128, eval_examples=256)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "select_examples", "eval_examples", "start_pairs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RecallRecipe.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.warmup_steps, int) or not 0 <= self.warmup_steps < self.steps:
            raise ValueError(
                f"RecallRecipe.warmup_steps must lie in [0, steps={self.steps}), got {self.warmup_steps!r}"
            )
        lrs = tuple(self.lrs)
        if not lrs or any(not (isinstance(lr, (int, float)) and 0 < lr < 1) for lr in lrs):
            raise ValueError(f"RecallRecipe.lrs must be a non-empty list of rates in (0, 1), got {self.lrs!r}")
        object.__setattr__(self, "lrs", tuple(sorted(float(lr) for lr in lrs)))
        for name in ("competence", "stop_accuracy"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"RecallRecipe.{name} must lie in (0, 1], got {getattr(self, name)!r}")
        f0, f1 = self.floor
        if not 0.0 <= f0 < f1 <= 1.0:
            raise ValueError(f"RecallRecipe.floor must be two fractions 0 <= a < b <= 1, got {self.floor!r}")

    def lr_factor(self, step: int) -> float:
        """Linear warmup, then constant."""
        return min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0


class Curriculum:
    """The pair count of each training batch (see :class:`RecallRecipe`)."""

    def __init__(self, task: RecallTask, recipe: RecallRecipe, generator: torch.Generator) -> None:
        self.largest = max(task.pairs)
        self.start = min(recipe.start_pairs, self.largest)
        self.recipe, self.generator = recipe, generator
        self.top, self.running = self.start, 0.0

    def pairs(self, step: int) -> int:
        f0, f1 = self.recipe.floor
        grown = min(1.0, max(0.0, (step / self.recipe.steps - f0) / (f1 - f0)))
        self.top = max(self.top, int(self.start + grown * (self.largest - self.start)))
        if torch.rand((), generator=self.generator) < 0.5:
            return self.top
        return int(torch.randint(1, self.top + 1, (), generator=self.generator))

    def update(self, n: int, accuracy: float) -> bool:
        """Record the training accuracy of a batch at ``n`` pairs; True when training may stop."""
        if n != self.top:
            return False
        self.running = 0.8 * self.running + 0.2 * accuracy
        if self.top == self.largest:
            return self.running >= self.recipe.stop_accuracy
        if self.running >= self.recipe.competence:
            self.top, self.running = min(self.largest, self.top + 2), 0.0
        return False


# Where configs keep the model width and the longest sequence they accept: transformers has no single
# name (GPT-2 ``n_embd``, most ``hidden_size``, MPT/Whisper-style ``d_model``); configs with an
# ``attribute_map`` answer to ``hidden_size`` whatever they store.
WIDTH_FIELDS = ("hidden_size", "n_embd", "d_model", "dim", "embed_dim", "model_dim")
POSITION_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "max_sequence_length")


def hidden_width(config: PretrainedConfig) -> int:
    """The model width of ``config``, under whichever name its architecture uses (:data:`WIDTH_FIELDS`)."""
    for name in WIDTH_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    raise ValueError(f"{type(config).__name__} ({getattr(config, 'model_type', '?')}): no width field "
                     f"(none of {', '.join(WIDTH_FIELDS)})")


def task_config(config: PretrainedConfig, task: RecallTask, width_init: bool = False) -> PretrainedConfig:
    """A copy of ``config`` with the task's vocabulary, special ids at the padding token, room for
    the task's sequence (position tables grown if they are shorter) and, with ``width_init``,
    ``initializer_range = 1 / sqrt(width)`` (the width under any of :data:`WIDTH_FIELDS`)."""
    config = copy.deepcopy(config)
    if width_init and hasattr(config, "initializer_range"):
        config.initializer_range = 1.0 / math.sqrt(hidden_width(config))
    config.vocab_size = task.vocab_size
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if getattr(config, name, None) is not None:
            setattr(config, name, PAD)
    for name in POSITION_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value < task.seq_len:
            setattr(config, name, task.seq_len)
    return config


@fast_mamba_scan()  # transformers' Mamba arms on the checked fast scan (eval.mamba_scan); no effect on the others
def train_recall(
    config: PretrainedConfig,
    task: RecallTask,
    recipe: RecallRecipe,
    lr: float,
    seed: int = 0,
    progress: bool | None = None,
    desc: str = "recall",
    trust_remote_code: bool = False,
    device: str = "cpu",
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 200,
) -> tuple[torch.nn.Module, int]:
    """Train a fresh model of ``config`` on MQAR with ``recipe`` at learning rate ``lr``.

    Returns the model (in eval mode) and the number of steps run. ``seed`` fixes the
    initialisation and the training examples. Any causal LM of transformers' Auto classes works
    (SPEN is registered; ``trust_remote_code`` for configs whose code lives with a hub model).
    Random position offsets go to models whose ``forward`` takes ``position_ids``; the others
    (SPEN, Mamba: no position table) train without them. ``device``: where the model trains; the examples
    are drawn on the CPU from the seeded generator and moved, so a seed gives the same examples on any device.
    ``checkpoint``: a file the training state (model, optimiser, schedule, curriculum, random streams) is saved to
    every ``checkpoint_every`` steps and continued from when it exists, so a run stopped part-way resumes to the
    model an uninterrupted run trains; removed once training ends.
    """
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(task_config(config, task, recipe.width_init),
                                             trust_remote_code=trust_remote_code).to(device)
    model.train()
    offsets = recipe.random_offsets and "position_ids" in inspect.signature(model.forward).parameters
    generator = torch.Generator().manual_seed(recall_train_seed(seed))
    curriculum = Curriculum(task, recipe, generator)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=recipe.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, recipe.lr_factor)
    first = _resume_recall(checkpoint, model, opt, sched, generator, curriculum)
    bar = tqdm(range(first, recipe.steps), desc=f"{desc} lr {lr:g}", disable=progress is False, leave=False,
               initial=first, total=recipe.steps)
    step = first - 1
    for step in bar:
        n = curriculum.pairs(step)
        ids, targets = task.sample(recipe.batch_size, n, generator)
        ids, targets = ids[:, : 3 * n].to(device), targets[:, : 3 * n].to(device)  # the padding: time, no lesson
        kwargs = {}
        if offsets and curriculum.top > curriculum.start:  # once the lookup works at the first count
            start = torch.randint(0, task.seq_len - 3 * n + 1, (recipe.batch_size, 1), generator=generator)
            kwargs["position_ids"] = (start + torch.arange(3 * n)).to(device)
        out = model(input_ids=ids, use_cache=False, **kwargs)
        logits = out.logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE)
        if getattr(out, "prediction_loss", None) is not None:  # SPEN trains its predictor as configured
            loss = loss + model.config.prediction_loss_weight * out.prediction_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        opt.step()
        sched.step()
        keep = targets != IGNORE
        accuracy = float((logits.detach().argmax(-1)[keep] == targets[keep]).float().mean())
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}", pairs=curriculum.top)
        if curriculum.update(n, accuracy):
            break
        if checkpoint is not None and (step + 1) % checkpoint_every == 0 and step + 1 < recipe.steps:
            _save_recall(checkpoint, step, model, opt, sched, generator, curriculum)
    bar.close()
    if checkpoint is not None:
        Path(checkpoint).unlink(missing_ok=True)  # the finished model is the run's result; its state is not needed
    return model.eval(), step + 1


def weights_finite(model: torch.nn.Module) -> bool:
    """Whether every weight of ``model`` is a finite number. A run whose loss blew up leaves NaN weights, and a NaN
    model's argmax answers one token everywhere: its accuracy is a number (0%), so this, not the accuracy, says it
    diverged."""
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


# What a recall checkpoint holds (training.checkpoint.save_state_file): one without all of it is not resumed.
_STATE_KEYS = ("step", "model", "optimizer", "scheduler", "generator", "torch_rng", "curriculum")


def _save_recall(path: str | Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any,
                 generator: torch.Generator, curriculum: Curriculum) -> None:
    """The training state after ``step``, saved whole so a kill leaves the last one."""
    save_state_file(path, {"step": step, "model": model.state_dict(), "optimizer": opt.state_dict(),
                           "scheduler": sched.state_dict(), "generator": generator.get_state(),
                           "torch_rng": torch.get_rng_state(),
                           "curriculum": {"top": curriculum.top, "running": curriculum.running}})


def _resume_recall(path: str | Path | None, model: torch.nn.Module, opt: torch.optim.Optimizer, sched: Any,
                   generator: torch.Generator, curriculum: Curriculum) -> int:
    """The first step to train: 0, or the step after the one ``path`` holds, its state restored. A state that
    cannot be read is set aside with a warning, and training starts over (training.checkpoint.load_state_file)."""
    state = load_state_file(path, _STATE_KEYS)
    if state is None:
        return 0
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sched.load_state_dict(state["scheduler"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    curriculum.top, curriculum.running = state["curriculum"]["top"], state["curriculum"]["running"]
    return state["step"] + 1


def evaluation_batches(
    task: RecallTask, examples: int, seed: int, batch_size: int = 256
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """``(pairs, ids, targets)`` batches of ``examples`` sequences per pair count, drawn from the stream ``seed`` in
    one order: what :func:`evaluate_recall` scores and :func:`no_lookup_floor` reads (the same sequences)."""
    generator = torch.Generator().manual_seed(seed)
    for n in task.pairs:
        for start in range(0, examples, batch_size):
            yield n, *task.sample(min(batch_size, examples - start), n, generator)


@torch.no_grad()
@fast_mamba_scan()
def evaluate_recall(
    model: torch.nn.Module, task: RecallTask, examples: int, seed: int, batch_size: int = 256
) -> dict[int, float]:
    """Accuracy at the query positions per pair count, on ``examples`` fresh sequences per count
    drawn from the stream ``seed`` (the same sequences for every model given the same seed)."""
    model.eval()
    device = next(model.parameters()).device  # the examples are drawn on the CPU, scored where the model is
    correct = dict.fromkeys(task.pairs, 0)
    total = dict.fromkeys(task.pairs, 0)
    for n, ids, targets in evaluation_batches(task, examples, seed, batch_size):
        ids, targets = ids.to(device), targets.to(device)
        pred = model(input_ids=ids, use_cache=False).logits.argmax(-1)
        keep = targets != IGNORE
        correct[n] += int((pred[keep] == targets[keep]).sum())
        total[n] += int(keep.sum())
    return {n: correct[n] / total[n] for n in task.pairs}


# The answers a model can give without looking a key up: the best of them is the floor that "recall" must pass.
NO_LOOKUP_STRATEGIES = ("most frequent value in the context", "the last pair's value")


def no_lookup_floor(task: RecallTask, examples: int, seed: int, batch_size: int = 256) -> dict[str, Any]:
    """The accuracy of answering without a lookup, on the sequences :func:`evaluate_recall` scores (``examples`` per
    pair count from the stream ``seed``, drawn in batches of ``batch_size``: the draw depends on it), per pair count.

    Strategies (:data:`NO_LOOKUP_STRATEGIES`), each answering every query of a sequence with one value read from its
    context: the most frequent value (ties: the smallest id; every tied value scores the same), and the last pair's
    value. Values repeat across pairs (drawn with replacement), so the most frequent one is right more often than
    ``1 / pairs``. Beside them, for reference only, the expected accuracy of a uniformly random context value.
    Returns ``{"strategies": {name: {pairs: accuracy}}, "random_context_value": {...}, "floor": {pairs: best},
    "best": {pairs: strategy name}}`` (pair counts as strings, JSON-ready).
    """
    hits = {name: dict.fromkeys(task.pairs, 0) for name in NO_LOOKUP_STRATEGIES}
    random_value = dict.fromkeys(task.pairs, 0.0)
    queries = dict.fromkeys(task.pairs, 0)
    for n, ids, targets in evaluation_batches(task, examples, seed, batch_size):
        values = ids[:, 1 : 2 * n : 2]  # (batch, n): the context's values, in order
        answers = targets[:, 2 * n : 3 * n]  # (batch, n): what each query asks for
        counts = F.one_hot(values, task.vocab_size).sum(1)  # (batch, vocab)
        guesses = {NO_LOOKUP_STRATEGIES[0]: counts.argmax(-1), NO_LOOKUP_STRATEGIES[1]: values[:, -1]}
        for name, guess in guesses.items():
            hits[name][n] += int((answers == guess[:, None]).sum())
        random_value[n] += float((counts.float() ** 2).sum() / n)  # sum over sequences of n * sum_v (c_v / n)^2
        queries[n] += answers.numel()
    strategies = {name: {str(n): hits[name][n] / queries[n] for n in task.pairs} for name in NO_LOOKUP_STRATEGIES}
    floor = {str(n): max(s[str(n)] for s in strategies.values()) for n in task.pairs}
    best = {str(n): max(strategies, key=lambda name: strategies[name][str(n)]) for n in task.pairs}
    random_context = {str(n): random_value[n] / queries[n] for n in task.pairs}
    return {"strategies": strategies, "random_context_value": random_context, "floor": floor, "best": best,
            "examples": examples}


def recall_model(
    config: PretrainedConfig,
    task: RecallTask,
    recipe: RecallRecipe,
    seed: int = 0,
    progress: bool | None = None,
    desc: str = "recall",
    trust_remote_code: bool = False,
    device: str = "cpu",
    rate: RateRule | None = None,
) -> dict:
    """One model under the recipe: the learning rate chosen by ``rate`` (the project's one rule,
    :class:`~eval.rates.RateRule`) on the selection examples (mean accuracy over pair counts, higher is better),
    that model scored on the evaluation examples. ``rate`` None: the map's rule, :func:`map_rule`."""
    started = time.perf_counter()
    rate = rate or map_rule(recipe)
    sweep: dict[str, dict] = {}
    scores: dict[float, float] = {}
    trained: dict[float, tuple[torch.nn.Module, int]] = {}

    def selection_score(lr: float) -> float:
        t0 = time.perf_counter()
        model, steps = train_recall(config, task, recipe, lr, seed, progress, desc, trust_remote_code, device)
        selection = evaluate_recall(model, task, recipe.select_examples, recall_selection_seed(seed))
        sweep[f"{lr:g}"] = {"selection_accuracy": {str(n): a for n, a in selection.items()}, "steps": steps,
                            "seconds": time.perf_counter() - t0}
        trained[lr] = model, steps
        # A diverged run (NaN weights) scores NaN: the rule never chooses it (eval.rates.choose)
        scores[lr] = sum(selection.values()) / len(selection) if weights_finite(model) else math.nan
        best = choose(scores, lower_is_better=False)
        for other in [r for r in trained if r != best]:  # only the best model so far is kept (memory)
            del trained[other]
        return scores[lr]

    best_lr = rate.search(selection_score, lower_is_better=False).chosen
    best_model, best_steps = trained[best_lr]
    # The evaluation stream depends on the task only, not on the model seed: every model and every
    # seed is scored on the same sequences.
    accuracy = evaluate_recall(best_model, task, recipe.eval_examples, recall_evaluation_seed())
    counts = parameter_counts(best_model)
    return {
        "pairs": list(task.pairs),
        "accuracy": {str(n): a for n, a in accuracy.items()},
        "best_lr": best_lr,
        "sweep": sweep,
        "chance": task.chance,
        "steps": best_steps,
        "max_steps": recipe.steps,
        "seconds": time.perf_counter() - started,
        "parameters": counts.total,
        "non_embedding_parameters": counts.non_embedding,
    }


def map_rule(recipe: RecallRecipe) -> RateRule:
    """The recall map's rate rule: each seed chooses its own rate from ``recipe.lrs`` on its own selection sequences;
    the grid is not extended (a tie keeps the smaller rate, :func:`eval.rates.choose`)."""
    return RateRule(lr_grid=recipe.lrs, choose="each_seed", extend=False, max_extensions=0)


def recall_map(
    configs: Mapping[str, PretrainedConfig],
    task: RecallTask | None = None,
    recipe: RecallRecipe | None = None,
    seed: int = 0,
    progress: bool | None = None,
    on_model: Callable[[str, dict], None] | None = None,
    workers: int = 1,
    threads: int = 1,
    trust_remote_code: bool = False,
    seeds: Sequence[int] | None = None,
    device: str = "cpu",
    rate: RateRule | None = None,
) -> dict:
    """Every model of ``configs`` (name -> config) under the same task and recipe, once per seed.

    ``seeds`` (default: ``(seed,)``) each fix a model's initialisation, its training examples and its
    selection examples, so each seed chooses its own learning rate on its own held-out sequences; every
    seed is scored on the same evaluation sequences. Returns ``{"task", "recipe", "seed" (the first),
    "seeds", "chance", "models": {name: map_entry(...)}}`` with the models in the order of ``configs``:
    each entry is the mean accuracy over seeds with its interval, the per-seed results under ``"seeds"``
    and the arm's two axes (:func:`describe_arm`). ``on_model(name, entry)`` is called once a model's
    every seed is done. With ``workers > 1`` the (model, seed) runs train in that many processes of
    ``threads`` torch threads each: a run's numbers are the same whichever process trains it (all its
    randomness comes from its seed). ``workers == 1`` trains in this process, at its thread count. ``device``:
    where every model trains (``"cuda"``: the map in minutes; several workers share one GPU). ``rate``: the rule
    each (model, seed) chooses its rate by (None: :func:`map_rule`); its grid becomes the recorded recipe's ``lrs``.
    """
    task = task or RecallTask()
    recipe = recipe or RecallRecipe()
    if rate is not None:
        if rate.choose != "each_seed":
            raise ValueError(f"recall_map: the rate rule must let each seed choose (choose: each_seed), got "
                             f"{rate.choose!r}")
        recipe = replace(recipe, lrs=rate.lr_grid)
    seeds = check_seeds((seed,) if seeds is None else seeds)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    runs: dict[str, dict[int, dict]] = {name: {} for name in configs}
    models: dict[str, dict] = {}
    bar = tqdm(total=len(configs) * len(seeds), desc="recall map", unit="run", disable=progress is False)

    def done(name: str, s: int, result: dict) -> None:
        runs[name][s] = result
        bar.update()
        if len(runs[name]) == len(seeds):
            models[name] = map_entry(configs[name], task, recipe, {k: runs[name][k] for k in seeds})
            if on_model is not None:
                on_model(name, models[name])

    jobs = [(name, s) for name in configs for s in seeds]
    workers = min(workers, len(jobs)) or 1
    if workers == 1:
        for name, s in jobs:
            desc = name if len(seeds) == 1 else f"{name} seed {s}"
            done(name, s, recall_model(configs[name], task, recipe, s, progress, desc=desc,
                                       trust_remote_code=trust_remote_code, device=device, rate=rate))
    else:
        # spawn, not fork: torch's thread pools do not survive a fork.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {pool.submit(_recall_job, (configs[name], task, recipe, s, threads, name, trust_remote_code,
                                                 device, rate)): (name, s) for name, s in jobs}
            for future in as_completed(futures):
                done(*futures[future], future.result())
    bar.close()
    return {"task": asdict(task), "recipe": asdict(recipe), "seed": seeds[0], "seeds": list(seeds),
            "chance": task.chance, "models": {name: models[name] for name in configs}}


def check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    """``seeds`` as a tuple: non-empty, distinct, non-negative integers (ValueError naming them otherwise)."""
    seeds = tuple(seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of non-negative integers, got {list(seeds)!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {list(seeds)!r}")
    return seeds


def map_entry(config: PretrainedConfig, task: RecallTask, recipe: RecallRecipe, runs: Mapping[int, dict]) -> dict:
    """One model of the map from its per-seed :func:`recall_model` results (``seed -> result``).

    ``accuracy`` is the mean over seeds per pair count and ``interval`` its 95% interval
    (:func:`ema_boundary.stats.accuracy_interval`); ``best_lr`` the rate most seeds chose (ties: the smaller),
    ``steps`` the most any seed ran; the per-seed results stay under ``seeds`` (their rate sweeps included); the arm's
    write rule and state numbers per layer at the task's length are those of :func:`describe_arm`.
    """
    seeds = list(runs)
    first = runs[seeds[0]]
    accuracy, interval = {}, {}
    for n in task.pairs:
        per_seed = [runs[s]["accuracy"][str(n)] for s in seeds]
        accuracy[str(n)] = sum(per_seed) / len(per_seed)
        interval[str(n)] = list(stats.accuracy_interval(per_seed, recipe.eval_examples * n))
    chosen = [runs[s]["best_lr"] for s in seeds]
    return {
        "pairs": list(task.pairs),
        "accuracy": accuracy,
        "interval": interval,
        "interval_method": stats.ACCURACY_INTERVAL_METHODS[len(seeds) > 1],
        "best_lr": min(set(chosen), key=lambda lr: (-chosen.count(lr), lr)),
        "chance": task.chance,
        "steps": max(runs[s]["steps"] for s in seeds),
        "max_steps": recipe.steps,
        "seconds": sum(runs[s]["seconds"] for s in seeds),
        "parameters": first["parameters"],
        "non_embedding_parameters": first["non_embedding_parameters"],
        **describe_arm(config, task.seq_len),
        "seeds": {str(s): runs[s] for s in seeds},
    }


def _recall_job(job: tuple) -> dict:
    """One model of the map in a worker process (top-level so that it pickles)."""
    config, task, recipe, seed, threads, name, trust_remote_code, device, rate = job
    torch.set_num_threads(threads)
    return recall_model(config, task, recipe, seed, progress=False, desc=name, trust_remote_code=trust_remote_code,
                        device=device, rate=rate)


# ---------------------------------------------------------------------------------------------
# The models of the map
# ---------------------------------------------------------------------------------------------


def default_map_configs(width: int = 64, layers: int = 2, heads: int = 4) -> dict[str, PretrainedConfig]:
    """The positive control and every SPEN variant, all at one size.

    ``gpt2``: the GPT-2 architecture (learned positions, softmax attention); then each SPEN variant of
    :data:`modeling_spen.variants.SPEN_VARIANTS`, by its name there (the readers over EMA traces: none,
    linear, linear/softmax attention x state/sequence scope; the linear reader over learned, selective and
    selective-SSM traces; the state-size arms: banks of 16 and 64 fixed rates, selective states of 3 and 64
    per channel). SPEN's FFN is 4x the width, as GPT-2's. Each arm's write rule and state numbers per layer:
    :func:`describe_arm`; the pairs of equal state: :data:`eval.recall_arms.ESCAPE_ARMS`.
    """
    gpt2 = GPT2Config(n_embd=width, n_layer=layers, n_head=heads, n_positions=64, vocab_size=128,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    base = dict(hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * width,
                vocab_size=128, bos_token_id=0, eos_token_id=0, selective_rank=max(1, width // 16))
    special = dict(vocab_size=128, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    # transformers' own recurrent families (issue 49): Mamba (expand 1, conv 4, dt rank width / 16, its defaults
    # otherwise) at the map's state sizes, and RWKV-4 (a fixed learned decay per channel, an input-weighted write).
    field = {f"hf-mamba{'' if n == 16 else n}": MambaConfig(hidden_size=width, num_hidden_layers=layers, state_size=n,
                                                            expand=1, conv_kernel=4, **special) for n in (3, 16, 64)}
    field["hf-rwkv"] = RwkvConfig(hidden_size=width, num_hidden_layers=layers, attention_hidden_size=width,
                                  intermediate_size=4 * width, context_length=64, **special)
    return {"gpt2": gpt2, **{name: SPENConfig(**base, **fields) for name, fields in SPEN_VARIANTS.items()}, **field}


__all__ = [
    "RecallTask",
    "RecallRecipe",
    "Curriculum",
    "task_config",
    "hidden_width",
    "train_recall",
    "evaluate_recall",
    "evaluation_batches",
    "no_lookup_floor",
    "NO_LOOKUP_STRATEGIES",
    "recall_model",
    "recall_map",
    "check_seeds",
    "map_entry",
    "default_map_configs",
]

