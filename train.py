"""Train SPEN or the GPT-2 baseline: one nanoGPT-style loop, Accelerate for all device work.

    accelerate launch train.py --config hub_configs/spen-130m/train.yaml           # GPU(s), C4, bf16
    python train.py --config hub_configs/spen-tiny/train.yaml                      # CPU, seconds
    torchrun --nproc_per_node 2 train.py --config hub_configs/gpt2-tiny/train.yaml # 2 CPU processes (gloo)

The YAML names the model (a hub_configs/ config folder, trained from scratch; or, as run_clm, a trained folder whose
weights the run continues from) and the hyperparameters; flags of the same names override it. This file is the loop;
its pieces are the `training` package (data, loss, optimizer and schedule, the run folder and its checkpoints with
their discovery, the model card, the console, stop signals, the hub, the --seeds ensemble), the settings are
train_config.py (every YAML key, the flags, the output folder's rules) and the corpus is ema_boundary/corpus.py. Output
folder: final/ (model + tokenizer + model card), checkpoints/step_N/, tokenizer/, metrics.jsonl, train_config.json.
An earlier run in the output folder resumes from its newest checkpoint; Ctrl-C, SIGTERM and SIGUSR1 save one and
print the command that resumes. `--push_to_hub [--hub_model_id NAME]` checks the hub before training and uploads
final/ once it is complete.
See docs/training.md.
"""

from __future__ import annotations

import json
import logging
import math
import shlex
import sys
import time
import zlib
from datetime import timedelta
from pathlib import Path

import torch
from accelerate import PartialState
from accelerate.utils import set_seed
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModelForCausalLM

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
import train_config
from ema_boundary import corpus, packing
from ema_boundary.corpus import DataError
from ema_boundary.params import parameter_counts
from ema_boundary.usage import first_line
from train_config import EXIT_BAD_INPUT, EXIT_PUSH_FAILED, ConfigError
from training.accelerator import JSONLTracker as JSONLTracker  # tests reach the tracker through train
from training.accelerator import (
    init_trackers,
    join_processes,
    launch_processes,
    log_metrics,
    make_accelerator,
    trackers,
)
from training.card import local_location, model_card
from training.checkpoint import (
    check_model_config,
    find_checkpoint,
    lock_output,
    model_config_record,
    prepare_output,
    save_checkpoint,
    save_final,
)
from training.console import SUMMARY, ConsoleHandler, configure_console, log, warn_about_schedule
from training.data import (
    check_positions,
    check_shared_documents,
    held_out_test,
    outside_fraction,
    seen_tokens,
    tokenizer_for_run,
    training_stream,
)
from training.ensemble import train_seeds
from training.hub import PushError, check_hub, push_to_hub
from training.interrupt import Interrupt, Interrupted
from training.loss import evaluate, objective, perplexity, prediction_loss_weight, train_losses
from training.loss import lm_loss as lm_loss  # the project's loss, used through train by eval's harness test
from training.optim import build_optimizer, build_scheduler
from training.pretrained import load_pretrained


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> Path:
    """Train as the command line says and return the output folder. Bad input raises ConfigError or DataError
    before anything is written; a failed --push_to_hub raises PushError once final/ is complete; Ctrl-C raises
    Interrupted once a checkpoint is saved."""
    interrupt = Interrupt(list(sys.argv[1:] if argv is None else argv))
    with interrupt:  # also releases what the run holds (its output folder's lock), however it ends
        try:
            return train(interrupt)
        except KeyboardInterrupt:
            raise Interrupted(interrupt.message(None), interrupt.status) from None


def train(interrupt: Interrupt) -> Path:
    """The run of ``interrupt.argv`` (see :func:`main`)."""
    argv = interrupt.argv
    started = time.perf_counter()
    args = train_config.parse_args(argv)
    cfg = train_config.load_config(args)
    weights = train_config.pretrained_weights(cfg)  # None: trained from scratch (a config alone)
    if args.seeds is not None:  # several seeds as one ensemble in this process: training/ensemble.py
        if weights is not None:  # the ensemble initialises every seed from scratch: it would drop the weights
            raise ConfigError(f"--seeds trains each seed from scratch, and {weights} holds weights; train one run "
                              "from them (--seed N), or pass its config alone with --config_name")
        return train_seeds(args, argv, args.seeds, args.ensemble_engine, interrupt)
    launch_processes(sys.argv[0] if Path(sys.argv[0]).name == "train.py" else "train.py", argv)  # as launched
    out = Path(cfg["output_dir"])
    earlier = train_config.check_output(out, args.overwrite_output_dir)
    repo_id = train_config.hub_repo_id(args, out)
    cpu, world, accum = join_processes(cfg)
    configure_console(args.log_level, PartialState().is_main_process)
    lock_output(out, ["train.py", *argv], interrupt, world)  # before anything is read from or written to `out`

    # Everything that can fail on bad input, before the first write to `out`.
    ckpt = find_checkpoint(out, args.resume_from_checkpoint, earlier, args.overwrite_output_dir, warn=log.warning)
    # Starting over replaces the earlier run, whatever it was trained from: nothing of it is resumed or checked.
    run_dir, saved = (out, None) if args.overwrite_output_dir else train_config.check_resume(ckpt, out, cfg)
    start = json.loads((ckpt / "data_state.json").read_text()) if ckpt else {"step": 0, "pos": [0, 0, 0]}
    changes = saved["changes"] if saved else []  # settings changed on resume, with their steps
    for c in changes:
        if c["step"] == start["step"]:
            log.info(f"train.py: {c['setting']} changed from {c['from']} to {c['to']} at step {c['step']}")
    metrics_text = None if args.overwrite_output_dir else train_config.kept_metrics(out, start["step"], log.warning)
    n_docs = corpus.check_data(cfg["data"], cfg["val_every"], cfg["test_every"])
    dropped = check_shared_documents(cfg) + outside_fraction(cfg)  # training documents the run does not read
    model_cfg = AutoConfig.from_pretrained(cfg["model_name_or_path"])
    check_positions(cfg, model_cfg)
    if ckpt:
        check_model_config(ckpt, start, model_cfg, Path(cfg["model_name_or_path"]) / "config.json")
    initial = None  # the weights the run starts from, loaded (and checked against config.json) before any write
    if weights is not None and not ckpt:  # a resumed run's weights are its checkpoint's
        initial = load_pretrained(weights)
    tokenizer, tokenizer_name = tokenizer_for_run(cfg, model_cfg.vocab_size, run_dir, saved)
    val = packing.validation_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                       cfg["max_eval_samples"])
    test = held_out_test(cfg, tokenizer)  # None without a test split
    extra_trackers = trackers(cfg)  # report_to: a tracker that is not installed is refused here
    if repo_id:
        repo_id = check_hub(repo_id)
    warn_about_schedule(cfg)  # the input is good: now what may not be what was meant

    accelerator = make_accelerator(cfg, out, accum, cpu, extra_trackers)
    interrupt.out, interrupt.processes, interrupt.main = out, world, accelerator.is_main_process
    prepare_output(accelerator, out, cfg, tokenizer, tokenizer_name, metrics_text, changes, args.overwrite_output_dir,
                   ["train.py", *argv])
    init_trackers(accelerator, cfg)

    set_seed(cfg["seed"])
    # As run_clm: the folder's weights when it has them (model_name_or_path), else a fresh initialisation of the
    # config (config_name, or a folder with config.json alone).
    model = initial if initial is not None else AutoModelForCausalLM.from_config(model_cfg)
    counts = parameter_counts(model)  # before FSDP shards them; tied weights once
    where = f"{accelerator.distributed_type.value} x {world} processes" if world > 1 else "1 process"
    start_from = (f"from the weights of {weights}" if initial is not None
                  else f"resumed from {ckpt.name}" if ckpt else "initialised from scratch")
    log.info(f"train.py: {train_config.model_label(cfg['model_name_or_path'])} ({start_from}), {counts.total:,} "
             "parameters "
             f"({counts.non_embedding:,} non-embedding); {cfg['max_steps']} steps x {cfg['total_train_batch_size']} "
             f"sequences x {cfg['block_size']} tokens; {accelerator.device}, {where}, gradient accumulation {accum}, "
             f"mixed precision {cfg['mixed_precision']}; output {out}")

    optimizer = build_optimizer(model, cfg, fused=accelerator.device.type == "cuda")
    scheduler = build_scheduler(optimizer, cfg)
    # The data position is ours (packing.training_blocks), not the DataLoader's: each block carries the
    # position after it, and a resumed stream starts exactly there (the shuffled order is a function of the
    # seed, the epoch and the position). Accelerate dispatches the batches from process 0, so the stream is
    # read and tokenized once and every process gets its own rows of each global batch.
    train_set = training_stream(cfg, tokenizer, start["pos"])
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=cfg["per_device_train_batch_size"])
    # Validation in training micro-batches: four times larger ones were not consistently faster (BENCHMARKS.md,
    # section 6).
    val_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(val),
                                             batch_size=cfg["per_device_train_batch_size"])
    model, optimizer, scheduler, train_loader, val_loader = accelerator.prepare(
        model, optimizer, scheduler, train_loader, val_loader)
    test_loader = None
    if test is not None:  # scored once, on the final model: nothing is chosen on these blocks
        test_loader = accelerator.prepare(torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(test.blocks), batch_size=cfg["per_device_train_batch_size"]))
    if ckpt:
        try:
            accelerator.load_state(str(ckpt))  # model, optimizer, scheduler, RNG
        except Exception as e:  # whatever torch or safetensors raise for a checkpoint they cannot read
            raise ConfigError(f"{ckpt}: the checkpoint does not load ({first_line(e)}); resume from an earlier "
                              "one with --resume_from_checkpoint DIR") from None
        log.info(f"train.py: resumed from {ckpt} at step {start['step']}")

    tokens_per_step = cfg["total_train_batch_size"] * cfg["block_size"]
    # What each checkpoint keeps beside its data position: the settings it was trained with (and their changes)
    # and the model's config, which a resume must match (train_config.check_resume, check_model_config).
    record = {"config": {**cfg, "tokenizer_used": tokenizer_name, "changes": changes},
              "model_config": model_config_record(model_cfg)}
    weight = prediction_loss_weight(model)  # SPEN's predictor trains on CE + weight * P; GPT-2: 0
    batches = iter(train_loader)
    step, last, pos = start["step"], cfg["max_steps"], start["pos"]
    val_loss = test_loss = float("nan")
    # Progress: a bar on a terminal; log lines (below) when the output goes to a file or pipe.
    show_bar = accelerator.is_local_main_process and sys.stderr.isatty() and log.isEnabledFor(logging.INFO)
    bar = tqdm(total=last, initial=step, disable=not show_bar, dynamic_ncols=True)
    ConsoleHandler.bar = bar if show_bar else None
    # Training losses summed since the last log: [next-token CE, prediction loss], and the step count. The logged
    # `loss` is their mean over the steps since the previous log (as transformers' Trainer logs it), so that
    # it reads beside `val_loss`; a resume at a multiple of log_every gives the same numbers as one run.
    window, window_steps = torch.zeros(2, device=accelerator.device), 0
    interrupt.armed = True  # Ctrl-C, SIGTERM, SIGUSR1 now finish the step and save it
    while step < last:
        step += 1
        log_now = step % cfg["logging_steps"] == 0 or step == last
        save_now = step % cfg["save_steps"] == 0 or step == last
        t0, crc = time.perf_counter(), 0
        for _ in range(accum):
            batch = next(batches)
            with accelerator.accumulate(model):
                # Blocks are packed (no padding), so every micro-batch has the same number of targets: the
                # token mean of each micro-batch, divided by `accum` in backward and averaged over processes
                # by DDP, is exactly the token mean of the whole optimizer step.
                ce, prediction = train_losses(model, batch["input_ids"])
                accelerator.backward(objective(ce, prediction, weight))
            pred = prediction.detach() if prediction is not None else torch.zeros((), device=ce.device)
            window += torch.stack([ce.detach(), pred.float()]) / accum
            if log_now:  # a fingerprint of the rows in global order: resumed runs must see the same ones
                crc = zlib.crc32(accelerator.gather(batch["input_ids"]).cpu().numpy().tobytes(), crc)
        if cfg["max_grad_norm"]:
            accelerator.clip_grad_norm_(model.parameters(), cfg["max_grad_norm"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        bar.update()

        if log_now or save_now:  # the position after the global batch's last row, for the checkpoint
            pos = accelerator.gather(batch["pos"])[-1].tolist()
        metrics = {}
        window_steps += 1
        if log_now:
            loss, pred = (accelerator.reduce(window, "mean") / window_steps).tolist()
            window, window_steps = torch.zeros_like(window), 0
            lr = scheduler.get_last_lr()[0]
            tok_s = tokens_per_step / (time.perf_counter() - t0)
            metrics = {"loss": loss, "lr": lr, "tokens": step * tokens_per_step, "tokens_per_s": tok_s,
                       "batch_crc32": crc, "data_pos": pos}
            if weight:  # SPEN: the prediction loss and the objective it trains on, beside the next-token loss
                metrics |= {"prediction_loss": pred, "objective": loss + weight * pred}
            if step == last:  # how much distinct text the run trained on (train_fraction), in its last record
                metrics |= seen_tokens(train_set, step * tokens_per_step)
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
            if not show_bar:
                log.info(f"step {step}/{last}: loss {loss:.4f}, learning rate {lr:.2e}, {tok_s:,.0f} tokens/s")
        if step % cfg["eval_steps"] == 0 or step == last:
            val_loss = evaluate(model, val_loader, accelerator)
            metrics |= {"val_loss": val_loss, "val_ppl": perplexity(val_loss), "tokens": step * tokens_per_step}
            log.info(f"step {step}/{last}: validation loss {val_loss:.4f}, perplexity {perplexity(val_loss):.2f}")
        if step == last and test_loader is not None:
            test_loss = evaluate(model, test_loader, accelerator)
            metrics |= test.metrics(test_loss)
            log.info(f"step {step}/{last}: test loss {test_loss:.4f}, perplexity {perplexity(test_loss):.2f} "
                     f"({test.tokens:,} tokens of {test.documents} test documents)")
        if metrics:
            log_metrics(accelerator, metrics, step)
        if save_now:
            state = {"step": step, "pos": pos, "tokens": step * tokens_per_step, **record}
            save_checkpoint(accelerator, out, step, state, cfg["save_total_limit"])
        if interrupt.stop_now(accelerator):  # a stop signal: keep the finished step in a checkpoint and stop
            if not save_now:
                pos = accelerator.gather(batch["pos"])[-1].tolist()
                state = {"step": step, "pos": pos, "tokens": step * tokens_per_step, **record}
                save_checkpoint(accelerator, out, step, state, cfg["save_total_limit"])
            bar.close()
            raise Interrupted(interrupt.message(out / "checkpoints" / f"step_{step}"), interrupt.status)
    interrupt.armed = False  # from here on, Ctrl-C stops at once: the last step's checkpoint is saved
    bar.close()
    ConsoleHandler.bar = None

    if math.isnan(val_loss):  # resumed at max_steps: nothing ran, but the card needs the loss
        val_loss = evaluate(model, val_loader, accelerator)
    if test_loader is not None and math.isnan(test_loss):  # the same, and the test score is the run's record
        test_loss = evaluate(model, test_loader, accelerator)
        log_metrics(accelerator, test.metrics(test_loss), step)
    command = "train.py " + shlex.join(argv)
    train_docs = corpus.split_sizes(n_docs, cfg["val_every"], cfg["test_every"])["train"] - dropped if n_docs else 0
    location = repo_id or local_location(out)  # where the card's code loads the model from: no machine path
    final = save_final(accelerator, model, tokenizer, out, model_card(
        cfg, model_cfg, counts, step, pos, train_docs, val_loss, command, tokenizer_name, repo_id or out.resolve().name,
        location, test=test.metrics(test_loss) if test is not None else None,
        epoch_blocks=getattr(train_set, "blocks_per_epoch", 0), changes=changes,
        initial=train_config.model_label(weights) if weights is not None else None))
    accelerator.end_training()  # closes the trackers and the process group
    elapsed = timedelta(seconds=round(time.perf_counter() - started))
    scored = f"; test loss {test_loss:.4f}, perplexity {perplexity(test_loss):.2f}" if test is not None else ""
    log.log(SUMMARY, f"train.py: done in {elapsed}: {step} steps, {step * tokens_per_step:,} tokens; validation "
                     f"loss {val_loss:.4f}, perplexity {perplexity(val_loss):.2f}{scored}; model in {final}")
    if repo_id and accelerator.is_main_process:
        url = push_to_hub(final, repo_id, f"train.py: {step} steps, validation loss {val_loss:.4f}")
        log.log(SUMMARY, f"train.py: pushed {final} to {url}")
    return out


def cli(argv: list[str] | None = None) -> int:
    """train.py as a command: bad input, a failed push and Ctrl-C are one line on stderr and their own exit
    status (train_config.EXIT_*)."""
    try:
        main(argv)
    except (ConfigError, DataError) as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PushError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return EXIT_PUSH_FAILED
    except Interrupted as e:
        if str(e):  # the main process's line (the others stay silent)
            print(e, file=sys.stderr)
        return e.status
    return 0


if __name__ == "__main__":
    sys.exit(cli())
