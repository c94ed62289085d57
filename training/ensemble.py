"""Seeds as one ensemble: ``train.py --seeds 0,1,2,3,4`` trains those seeds together in one process.

Each seed reads exactly what its single run reads: with ``shuffle`` (the default) its own order of the training
blocks, drawn from its seed, and, with ``shuffle: false``, the data in corpus order, one stream shared by all.
Training them together shares everything that is not the model: start-up (imports, the data check, the
tokenizer, the validation blocks), the data (local and embedded data tokenized once for all seeds; unshuffled,
one stream read once per step) and the process. Each seed keeps its own initialisation (``set_seed(seed)`` then
``from_config``, as a single run does), its own data order, its own gradient clipping (the global norm of its own
gradients), its own AdamW state and its own validation loss; its folder ``<output_dir>/seed_<n>/`` is what the
single run
``train.py ... --seed n --output_dir <output_dir>/seed_<n>`` writes (metrics.jsonl, final/ with the model
card, tokenizer/, train_config.json), without intermediate checkpoints: an ensemble run starts fresh.

Two engines compute the K models' steps (:data:`ENGINES`):

* :class:`StackedEnsemble`: one batched model. The parameters of the K models are stacked along a leading
  seed dimension (``torch.func.stack_module_state``) and one forward runs all K (``torch.func.vmap`` over
  ``functional_call``); one AdamW updates the stacked tensors (its update is elementwise, so each seed keeps
  its own moments) and clipping takes one norm per seed. One kernel per operator for all seeds: the way to
  fill a GPU with small models.
* :class:`SequentialEnsemble`: the K models one after another on each shared batch, each with its own AdamW.
  On a CPU this is the faster one: a model of the report's headline shape (16 x 128 tokens, width 32) is
  bound by memory traffic, not by per-operator overhead, and stacking K of them multiplies the working set
  (K x 8 MB of logits) out of the cache (``python -m benchmarks.run --only ensemble``, BENCHMARKS.md).

``auto`` picks the stacked engine on CUDA and the sequential one on the CPU. Both give each seed the losses of
its single run: within float rounding for the stacked engine, the same operations for the sequential one.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import sys
import time
import zlib
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate.utils import set_seed
from torch.func import functional_call, stack_module_state, vmap
from transformers import AutoConfig, AutoModelForCausalLM

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
import train_config
from ema_boundary import corpus, packing
from ema_boundary.io import FolderLock, OutputError, atomic_dir, write_json, write_text
from ema_boundary.params import parameter_counts
from train_config import ConfigError
from training.card import local_location, model_card
from training.console import SUMMARY, configure_console, log
from training.data import (
    check_shared_documents,
    held_out_test,
    outside_fraction,
    seen_tokens,
    tokenizer_for_run,
    training_stream,
)
from training.interrupt import Interrupt
from training.loss import objective, perplexity, prediction_loss_weight
from training.optim import adamw, build_optimizer, build_scheduler

ENGINES = ("auto", "stacked", "sequential")

__all__ = ["ENGINES", "SeedEnsemble", "StackedEnsemble", "SequentialEnsemble", "make_ensemble", "seed_dir",
           "train_seeds"]


def seed_dir(output_dir: str | Path, seed: int) -> Path:
    """The folder of one seed of an ensemble run: ``<output_dir>/seed_<seed>``."""
    return Path(output_dir) / f"seed_{seed}"


# ------------------------------------------------------------------------------------------ engines
class SeedEnsemble:
    """K models of one architecture trained on the same batches; what the ensemble's loop needs of an engine.

    Losses come back as ``(K,)`` tensors, detached, in seed order: ``ce`` (next-token cross-entropy) and
    ``prediction`` (SPEN's prediction loss; None for models without one).
    """

    optimizers: list[torch.optim.Optimizer]

    def __init__(self, models: Sequence[torch.nn.Module], cfg: dict, autocast: torch.autocast | None = None):
        if not models:
            raise ValueError("an ensemble needs at least one model")
        self.models = list(models)
        self.cfg = cfg
        self.weight = prediction_loss_weight(self.models[0])
        self.autocast = autocast

    def __len__(self) -> int:
        return len(self.models)

    def _autocast(self):
        return self.autocast if self.autocast is not None else nullcontext()

    def forward_backward(self, blocks: torch.Tensor, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Losses of every model on ``blocks``: ``(B, T+1)`` shared by the models, or ``(K, B, T+1)``, one batch
        per model; gradients of ``scale x objective`` accumulated."""
        raise NotImplementedError

    def clip_(self, max_norm: float) -> torch.Tensor:
        """Clip each model's gradients to global norm ``max_norm`` (as ``clip_grad_norm_``); the ``(K,)`` norms."""
        raise NotImplementedError

    @torch.no_grad()
    def val_losses(self, batches: Iterable[torch.Tensor]) -> torch.Tensor:
        """Each model's validation loss ``(K,)``: the mean over blocks of the per-block next-token loss."""
        raise NotImplementedError

    def step(self) -> None:
        """One AdamW step of every model, then its gradients cleared."""
        for opt in self.optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)

    def trained_models(self) -> list[torch.nn.Module]:
        """The K models with their current weights (for save_pretrained)."""
        return self.models


class SequentialEnsemble(SeedEnsemble):
    """The K models one after another on each batch, each with its own AdamW: a single run's operations."""

    def __init__(self, models: Sequence[torch.nn.Module], cfg: dict, autocast: torch.autocast | None = None):
        super().__init__(models, cfg, autocast)
        fused = self.models[0].device.type == "cuda"
        self.optimizers = [build_optimizer(m, cfg, fused=fused) for m in self.models]  # the single run's

    def forward_backward(self, blocks: torch.Tensor, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
        ces, preds = [], []
        for k, model in enumerate(self.models):
            rows = blocks[k] if blocks.dim() == 3 else blocks
            with self._autocast():
                out = model(input_ids=rows[:, :-1])
                ce = F.cross_entropy(out.logits.float().flatten(0, 1), rows[:, 1:].flatten())
            pred = getattr(out, "prediction_loss", None)
            (objective(ce, pred, self.weight) * scale).backward()
            ces.append(ce.detach())
            preds.append(pred.detach().float() if pred is not None else None)
        return torch.stack(ces), (torch.stack(preds) if preds[0] is not None else None)

    def clip_(self, max_norm: float) -> torch.Tensor:
        return torch.stack([torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm) for m in self.models])

    @torch.no_grad()
    def val_losses(self, batches: Iterable[torch.Tensor]) -> torch.Tensor:
        total, count = torch.zeros(len(self), device=self.models[0].device), 0
        for m in self.models:
            m.eval()
        for blocks in batches:
            for k, model in enumerate(self.models):
                with self._autocast():
                    logits = model(input_ids=blocks[:, :-1]).logits.float()
                per_token = F.cross_entropy(logits.flatten(0, 1), blocks[:, 1:].flatten(), reduction="none")
                total[k] += per_token.view(len(blocks), -1).mean(1).sum()
            count += len(blocks)
        for m in self.models:
            m.train()
        return total / count


class StackedEnsemble(SeedEnsemble):
    """The K models as one batched model: parameters stacked along a leading seed dimension, run by vmap.

    ``self.params[name]`` is a ``(K, ...)`` leaf holding every model's ``name``; one AdamW updates them all
    (Adam's update is elementwise, so each seed keeps its own moments; weight decay follows the per-model
    rank of the tensor, as in the single run). The models given are the templates: their buffers (the
    fixed trace rates, the same for every seed) are shared, and :meth:`trained_models` writes the stacked
    weights back into them.
    """

    def __init__(self, models: Sequence[torch.nn.Module], cfg: dict, autocast: torch.autocast | None = None):
        super().__init__(models, cfg, autocast)
        buffers = [dict(m.named_buffers()) for m in self.models]
        for name, b in buffers[0].items():  # shared, not stacked: the custom fixed-rate filter needs one set
            if any(not torch.equal(b, other[name]) for other in buffers[1:]):
                raise ValueError(f"buffer {name} differs between the models; a stacked ensemble shares buffers")
        self.buffers = buffers[0]
        params, _ = stack_module_state(self.models)
        self.params = {name: p.detach().requires_grad_() for name, p in params.items()}
        self.template = copy.deepcopy(self.models[0])  # the module functional_call runs with the stacked weights
        # The single run's groups (training.optim): a tensor's rank in one model is its stacked rank - 1.
        self.optimizers = [adamw(list(self.params.values()), cfg, fused=self.models[0].device.type == "cuda",
                                 model_rank=lambda p: p.dim() - 1)]
        self._train_losses = vmap(self._member_losses, in_dims=(0, None, None))
        self._own_batch_losses = vmap(self._member_own_losses, in_dims=(0, None, 0))  # (K, B, T+1): a batch each
        embedding = self.template.get_input_embeddings().weight
        self._embedding = next(n for n, p in self.template.named_parameters() if p is embedding)
        self._val_losses = vmap(self._member_val_losses, in_dims=(0, None, None))

    def _member_losses(self, params: dict, buffers: dict, blocks: torch.Tensor):
        out = functional_call(self.template, (params, buffers), (), {"input_ids": blocks[:, :-1]})
        ce = F.cross_entropy(out.logits.float().flatten(0, 1), blocks[:, 1:].flatten())
        pred = getattr(out, "prediction_loss", None)
        self._has_prediction = pred is not None  # vmap returns tensors only: remember whether it was one
        return ce, (pred.float() if pred is not None else torch.zeros((), device=ce.device))

    def _member_own_losses(self, params: dict, buffers: dict, blocks: torch.Tensor):
        # A batch per member: the token ids are batched by vmap, so the model gets its embeddings (the same lookup
        # as its embedding layer, of the same tied weight) rather than ids it would check with .item().
        embeds = F.embedding(blocks[:, :-1], params[self._embedding])
        out = functional_call(self.template, (params, buffers), (), {"inputs_embeds": embeds})
        ce = F.cross_entropy(out.logits.float().flatten(0, 1), blocks[:, 1:].flatten())
        pred = getattr(out, "prediction_loss", None)
        self._has_prediction = pred is not None
        return ce, (pred.float() if pred is not None else torch.zeros((), device=ce.device))

    def _member_val_losses(self, params: dict, buffers: dict, blocks: torch.Tensor) -> torch.Tensor:
        logits = functional_call(self.template, (params, buffers), (), {"input_ids": blocks[:, :-1]}).logits
        per_token = F.cross_entropy(logits.float().flatten(0, 1), blocks[:, 1:].flatten(), reduction="none")
        return per_token.view(len(blocks), -1).mean(1).sum()

    def forward_backward(self, blocks: torch.Tensor, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
        losses = self._own_batch_losses if blocks.dim() == 3 else self._train_losses
        with self._autocast():
            ce, pred = losses(self.params, self.buffers, blocks)
        has_pred = self._has_prediction
        # The sum over seeds: each seed's parameters get the gradient of its own objective only.
        (objective(ce, pred if has_pred else None, self.weight).sum() * scale).backward()
        return ce.detach(), (pred.detach() if has_pred else None)

    def clip_(self, max_norm: float) -> torch.Tensor:
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        # Each seed's global norm over its own gradients (torch.nn.utils.clip_grad_norm_ per model).
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads], 1).norm(dim=1)
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))).to(g.dtype))
        return norms

    @torch.no_grad()
    def val_losses(self, batches: Iterable[torch.Tensor]) -> torch.Tensor:
        total, count = None, 0
        self.template.eval()
        for blocks in batches:
            with self._autocast():
                sums = self._val_losses(self.params, self.buffers, blocks)
            total = sums if total is None else total + sums
            count += len(blocks)
        self.template.train()
        return total / count

    @torch.no_grad()
    def trained_models(self) -> list[torch.nn.Module]:
        for k, model in enumerate(self.models):
            for name, p in model.named_parameters():
                p.copy_(self.params[name][k])
        return self.models


def make_ensemble(models: Sequence[torch.nn.Module], cfg: dict, engine: str = "auto",
                  autocast: torch.autocast | None = None) -> SeedEnsemble:
    """The engine ``engine`` (:data:`ENGINES`) over ``models``; ``auto``: stacked on CUDA, sequential on CPU."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "auto":
        engine = "stacked" if models[0].device.type == "cuda" else "sequential"
    return (StackedEnsemble if engine == "stacked" else SequentialEnsemble)(models, cfg, autocast)


# ------------------------------------------------------------------------------------------ the run
def _check(cfg: dict, seeds: Sequence[int], args) -> None:
    """What an ensemble run does not do, refused before anything is written (one line each)."""
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds: each seed once, got {','.join(map(str, seeds))}")
    if any(not 0 <= s < 2**32 for s in seeds):
        raise ConfigError(f"--seeds: seeds must be integers in [0, 2**32), got {','.join(map(str, seeds))}")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ConfigError("--seeds trains in one process; launch it with python, not torchrun/accelerate launch")
    refused = {"--resume_from_checkpoint": args.resume_from_checkpoint is not None,
               "--push_to_hub": bool(getattr(args, "push_to_hub", False)),
               f"mixed_precision {cfg['mixed_precision']}": cfg["mixed_precision"] == "fp16",
               "torch_compile": bool(cfg["torch_compile"]),
               f"report_to {cfg['report_to']}": cfg["report_to"] != "none"}
    bad = [name for name, on in refused.items() if on]
    if bad:
        raise ConfigError(f"--seeds: an ensemble run does not support {', '.join(bad)} (train one seed with --seed "
                          "for that)")


def _prepare_seed_folders(out: Path, seeds: Sequence[int], overwrite: bool) -> list[Path]:
    """Check every seed's folder before anything is written: fresh, or train.py's own with --overwrite_output_dir."""
    dirs = [seed_dir(out, s) for s in seeds]
    for d in dirs:
        earlier = train_config.check_output(d, overwrite)
        if earlier and not overwrite:
            raise ConfigError(f"{d}: holds an earlier train.py run; an ensemble run starts fresh: pass "
                              "--overwrite_output_dir or choose another --output_dir")
    return dirs


def _single_run_argv(argv: Sequence[str], seed: int, folder: Path) -> list[str]:
    """The single run's command line that this seed's training reproduces: --seeds n replaced by --seed n."""
    drop = {"--seeds", "--ensemble_engine", "--seed", "--output_dir"}
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        name = a.split("=", 1)[0]
        if name in drop:
            skip = "=" not in a
            continue
        kept.append(a)
    return [*kept, "--seed", str(seed), "--output_dir", str(folder)]


def train_seeds(args, argv: Sequence[str], seeds: Sequence[int], engine: str = "auto",
                interrupt: Interrupt | None = None) -> Path:
    """Train ``seeds`` as one ensemble as ``args`` (train.py's parsed command line) says; return the output folder.

    Writes ``<output_dir>/seed_<n>/`` for each seed. Bad input raises ConfigError or DataError before anything
    is written. ``interrupt`` learns the folders once they are written (for its message) and holds their locks.
    """
    cfg = train_config.load_config(args)
    configure_console(args.log_level, True)
    train_config.resolve_batch(cfg, 1)
    accum = cfg["gradient_accumulation_steps"]
    _check(cfg, seeds, args)
    out = Path(cfg["output_dir"])
    dirs = _prepare_seed_folders(out, seeds, args.overwrite_output_dir)
    if interrupt is not None:  # one writer per folder until the run ends (as training.checkpoint.lock_output)
        for d in dirs:
            lock = FolderLock(d, train_config.TOOL, ["train.py", *argv])
            try:
                lock.acquire()
            except OutputError as e:
                raise ConfigError(str(e)) from None
            interrupt.held.callback(lock.release)
    n_docs = corpus.check_data(cfg["data"], cfg["val_every"], cfg["test_every"])
    dropped = check_shared_documents(cfg) + outside_fraction(cfg)  # training documents the run does not read
    model_cfg = AutoConfig.from_pretrained(cfg["model_name_or_path"])
    tokenizer, tokenizer_name = tokenizer_for_run(cfg, model_cfg.vocab_size, out, None)
    val = packing.validation_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                       cfg["max_eval_samples"])
    test = held_out_test(cfg, tokenizer)  # None without a test split
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if cfg["mixed_precision"] == "bf16" else None)

    # The K runs' folders, as the single run starts them (settings and tokenizer first).
    command = list(sys.argv[1:] if argv is None else argv)
    seed_cfgs = []
    for seed, d in zip(seeds, dirs, strict=True):
        if args.overwrite_output_dir and d.exists():
            train_config.clear_run(d)
        d.mkdir(parents=True, exist_ok=True)
        seed_argv = _single_run_argv(command, seed, d)
        train_config.write_marker(d, ["train.py", *seed_argv])
        seed_cfg = {**cfg, "seed": seed, "output_dir": str(d)}
        seed_cfgs.append(seed_cfg)
        tokenizer.save_pretrained(d / "tokenizer")
        write_json(d / "train_config.json", {**seed_cfg, "tokenizer_used": tokenizer_name, "changes": []})
        write_text(d / "metrics.jsonl", "")
        if interrupt is not None:  # from now on a stop says what the folders hold (Interrupt.message)
            interrupt.seed_dirs.append(d)

    models = []
    for seed in seeds:
        set_seed(seed)  # the single run's initialisation: set_seed, then from_config
        models.append(AutoModelForCausalLM.from_config(model_cfg).to(device))
    counts = parameter_counts(models[0])
    ensemble = make_ensemble(models, cfg, engine, autocast)
    schedulers = [build_scheduler(opt, cfg) for opt in ensemble.optimizers]
    micro = cfg["per_device_train_batch_size"]
    # Each seed's single-run stream; unshuffled, those are all one stream, read once.
    streams = [seeds[0]] if not cfg["shuffle"] else seeds
    tokens = (packing.SplitTokens(cfg["data"], "train", cfg["val_every"], tokenizer, cfg["test_every"],
                                 cfg["train_fraction"])
              if cfg["shuffle"] and cfg["data"] != [corpus.C4] else None)  # tokenized once for every seed
    train_sets = [training_stream(cfg, tokenizer, seed=s, tokens=tokens) for s in streams]
    loaders = [iter(torch.utils.data.DataLoader(ts, batch_size=micro)) for ts in train_sets]
    val_batches = [b.to(device) for b in val.split(micro)]  # train.py's validation batches

    log.info(f"train.py: {Path(cfg['model_name_or_path']).name}, {counts.total:,} parameters, seeds "
                   f"{','.join(map(str, seeds))} as one ensemble ({type(ensemble).__name__}), {device}, "
                   f"{cfg['max_steps']} steps; output in {out}/seed_*")
    tokens_per_step = cfg["total_train_batch_size"] * cfg["block_size"]
    K, last = len(seeds), cfg["max_steps"]
    window, window_steps = torch.zeros(2, K, device=device), 0
    val_losses: list[float] = [float("nan")] * K
    pos, t_start = [[0, 0, 0]] * K, time.perf_counter()
    for step in range(1, last + 1):
        log_now = step % cfg["logging_steps"] == 0 or step == last
        t0, crc = time.perf_counter(), [0] * len(loaders)
        for _ in range(accum):
            batches = [next(loader) for loader in loaders]
            rows = [b["input_ids"] for b in batches]
            blocks = (rows[0] if len(rows) == 1 else torch.stack(rows)).to(device, non_blocking=True)
            ce, pred = ensemble.forward_backward(blocks, 1.0 / accum)
            window[0] += ce / accum
            if pred is not None:
                window[1] += pred / accum
            if log_now:  # each seed's single-run fingerprint of its rows
                crc = [zlib.crc32(r.numpy().tobytes(), c) for r, c in zip(rows, crc, strict=True)]
        if cfg["max_grad_norm"]:
            ensemble.clip_(cfg["max_grad_norm"])
        ensemble.step()
        for s in schedulers:
            s.step()
        window_steps += 1
        rows = [{} for _ in seeds]
        if log_now:
            pos = [b["pos"][-1].tolist() for b in batches] * (K // len(batches))
            crc *= K // len(crc)
            losses = (window / window_steps).tolist()
            window, window_steps = torch.zeros_like(window), 0
            lr = schedulers[0].get_last_lr()[0]
            tok_s = tokens_per_step / (time.perf_counter() - t0)  # per seed: each advanced this many tokens
            for k, row in enumerate(rows):
                row |= {"loss": losses[0][k], "lr": lr, "tokens": step * tokens_per_step, "tokens_per_s": tok_s,
                        "batch_crc32": crc[k], "data_pos": pos[k]}
                if step == last:  # the distinct text trained on (train_fraction), as train.py's last record
                    row |= seen_tokens(train_sets[0], step * tokens_per_step)
                if pred is not None and ensemble.weight:
                    row |= {"prediction_loss": losses[1][k], "objective": losses[0][k] + ensemble.weight * losses[1][k]}
        if step % cfg["eval_steps"] == 0 or step == last:
            val_losses = ensemble.val_losses(val_batches).tolist()
            for k, row in enumerate(rows):
                row |= {"val_loss": val_losses[k], "val_ppl": perplexity(val_losses[k]),
                        "tokens": step * tokens_per_step}
            log.info(f"step {step}/{last}: validation loss " + " ".join(f"{v:.4f}" for v in val_losses))
        if step == last and test is not None:  # train.py's test score, once, on the final models
            for row, loss in zip(rows, ensemble.val_losses([b.to(device) for b in test.blocks.split(micro)]).tolist(),
                                 strict=True):
                row |= test.metrics(loss)
        for d, row in zip(dirs, rows, strict=True):
            if row:
                with (d / "metrics.jsonl").open("a") as f:
                    f.write(json.dumps({"step": step, **row}) + "\n")
    seconds = time.perf_counter() - t_start

    train_docs = corpus.split_sizes(n_docs, cfg["val_every"], cfg["test_every"])["train"] - dropped if n_docs else 0
    epoch_blocks = getattr(train_sets[0], "blocks_per_epoch", 0)
    for model, d, seed_cfg, v, p in zip(ensemble.trained_models(), dirs, seed_cfgs, val_losses, pos, strict=True):
        seed_command = "train.py " + shlex.join(_single_run_argv(command, seed_cfg["seed"], d))
        card = model_card(seed_cfg, model_cfg, counts, last, p, train_docs, v, seed_command, tokenizer_name,
                                d.resolve().name, local_location(d), epoch_blocks=epoch_blocks)
        with atomic_dir(d / "final") as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            card.save(tmp / "README.md")
    log.log(SUMMARY, f"train.py: done in {seconds:.0f} s: {K} seeds x {last} steps, "
                                 f"{K * last * tokens_per_step / seconds:,.0f} tokens/s summed; validation loss "
                                 + " ".join(f"{v:.4f}" for v in val_losses) + f"; models in {out}/seed_*/final")
    return out
