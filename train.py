"""Train SPEN or the GPT-2 baseline: one nanoGPT-style loop, Accelerate for all device work.

    accelerate launch train.py --config hub_configs/spen-130m/train.yaml           # GPU(s), C4, bf16
    python train.py --config hub_configs/spen-tiny/train.yaml                      # CPU, seconds
    torchrun --nproc_per_node 2 train.py --config hub_configs/gpt2-tiny/train.yaml # 2 CPU processes (gloo)

The YAML names the model config (a hub_configs/ folder) and the hyperparameters; flags override it.
The settings (every YAML key, the flags, checkpoint discovery) live in train_config.py; the corpus (documents,
tokenizer, packed blocks) in ema_boundary/corpus.py; this file is the loop. Output folder: final/ (model +
tokenizer + model card), checkpoints/step_N/, tokenizer/, metrics.jsonl, train_config.json.
`--push_to_hub [--hub_model_id NAME]` uploads final/ to the Hugging Face hub once it is complete.
See docs/training.md.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import sys
import time
import zlib
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.tracking import GeneralTracker
from accelerate.utils import is_tensorboard_available, set_seed
from huggingface_hub import HfApi
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedConfig, get_scheduler

import train_config
from ema_boundary import corpus
from ema_boundary.corpus import DataError
from ema_boundary.io import atomic_dir, publish_dir, write_json, write_text
from train_config import EXIT_BAD_INPUT, EXIT_PUSH_FAILED, ConfigError


class JSONLTracker(GeneralTracker):
    """metrics.jsonl as an Accelerate tracker: one JSON object per logged step."""

    name, requires_logging_directory, main_process_only = "jsonl", False, True

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    @property
    def tracker(self) -> Path:
        return self.path

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **values}) + "\n")


# ------------------------------------------------------------------------------------------ pieces
def build_optimizer(model: torch.nn.Module, cfg: dict, fused: bool) -> torch.optim.AdamW:
    # Matrices and embeddings decay; biases and norm gains (1-D) do not, as in GPT-2/nanoGPT.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg["lr"], betas=tuple(cfg["betas"]), fused=fused)


def lm_loss(model: torch.nn.Module, blocks: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    # The same loss for every model (fair comparison): next-token cross-entropy over all block_size targets.
    # Validation and every perplexity of the project are this loss alone.
    return train_losses(model, blocks, reduction)[0]


def train_losses(model: torch.nn.Module, blocks: torch.Tensor,
                 reduction: str = "mean") -> tuple[torch.Tensor, torch.Tensor | None]:
    """Next-token cross-entropy and, for a model whose output carries one (SPEN), its prediction loss.

    The prediction loss ``P`` trains SPEN's predictor to predict its block input (modeling_spen); the
    training objective is ``CE + config.prediction_loss_weight * P`` (:func:`objective`).
    """
    out = model(input_ids=blocks[:, :-1])
    ce = F.cross_entropy(out.logits.float().flatten(0, 1), blocks[:, 1:].flatten(), reduction=reduction)
    return ce, getattr(out, "prediction_loss", None)


def prediction_loss_weight(model: torch.nn.Module) -> float:
    """The model config's ``prediction_loss_weight`` (0 for models without one, e.g. GPT-2)."""
    return float(getattr(getattr(model, "module", model).config, "prediction_loss_weight", 0.0) or 0.0)


def objective(ce: torch.Tensor, prediction: torch.Tensor | None, weight: float) -> torch.Tensor:
    """What training minimises: ``ce + weight * prediction`` (the next-token loss alone without a prediction loss)."""
    return ce if prediction is None or not weight else ce + weight * prediction


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader, accelerator: Accelerator) -> float:
    model.eval()
    total = torch.zeros((), device=accelerator.device)
    count = 0
    for (blocks,) in loader:
        per_block = lm_loss(model, blocks, "none").view(len(blocks), -1).mean(1)
        per_block = accelerator.gather_for_metrics(per_block)  # drops the padding of the last batch
        total, count = total + per_block.sum(), count + len(per_block)
    model.train()
    return (total / count).item()


def save_checkpoint(accelerator: Accelerator, out: Path, step: int, state: dict, keep: int) -> None:
    """save_state into a hidden temp folder, then rename: a crash mid-save leaves no `step_N` folder."""
    ckpts, tmp = out / "checkpoints", out / "checkpoints" / f".tmp_step_{step}"
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        write_json(tmp / "data_state.json", state)
        publish_dir(tmp, ckpts / f"step_{step}")  # replaces an older run's step_N when resuming from earlier
        old = sorted(ckpts.glob("step_*"), key=lambda d: int(d.name.split("_")[1]))[:-keep]
        for d in old:
            shutil.rmtree(d)
    accelerator.wait_for_everyone()


def model_card(cfg: dict, model_config: PreTrainedConfig, n_params: int, step: int, data_pos: list[int],
               train_docs: int, val_loss: float, command: str, tokenizer_name: str) -> str:
    """final/README.md: what was trained, on what, for how long, how well, and the command that did it.

    ``data_pos`` is the data position after the last step (epoch, document, token offset); ``train_docs`` the
    number of training documents (0 for streamed C4, which is not counted).
    """
    kind = model_config.model_type
    tokens = step * cfg["batch_size"] * cfg["block_size"]
    datasets = "datasets: [allenai/c4]\n" if cfg["data"] == [corpus.C4] else ""
    epoch, doc = data_pos[0], data_pos[1]
    if train_docs:  # passes done, plus the share of the training documents read in the current one
        passes = f"{epoch + doc / train_docs:.3g} (passes over the {train_docs:,} training documents)"
    else:
        passes = f"{epoch} complete passes (streamed, not counted)" if epoch else "under one (streamed)"
    # SPEN's modeling code ships beside the weights (auto_map in config.json); GPT-2 is transformers' own.
    remote = ", trust_remote_code=True" if kind == "spen" else ""
    return f"""---
library_name: transformers
pipeline_tag: text-generation
tags: [ema-boundary, causal-lm, {kind}]
{datasets}---
# {Path(cfg['model_config']).name}

Trained with `train.py` of the ema-boundary project ("EMA Is Not All You Need", arXiv 2604.08556).

- model: {kind}, `{cfg['model_config']}`, {n_params:,} parameters
- data: {corpus.short_name(cfg['data'])}
- tokenizer: {tokenizer_name}
- tokens seen: {tokens:,} ({step} steps x {cfg['batch_size']} sequences x {cfg['block_size']} tokens), \
{tokens / n_params:.3g} per parameter
- epochs: {passes}
- final validation loss: {val_loss:.4f}, perplexity {math.exp(val_loss):.2f} ({cfg['eval_blocks']} sequences)
- optimizer: AdamW, peak lr {cfg['lr']:g}, {cfg['warmup_steps']} warmup steps, cosine decay to \
{cfg['min_lr_ratio']:g} x lr, weight decay {cfg['weight_decay']:g}; seed {cfg['seed']}
- mixed precision: {cfg['mixed_precision']}

Command:

```
{command}
```

Load it with `AutoModelForCausalLM.from_pretrained(<this repository or folder>{remote})` and
`AutoTokenizer.from_pretrained(<the same>)`.
"""


def join_processes(cfg: dict, config_path: str) -> tuple[bool, int, int]:
    """Fresh Accelerate state in this process's group: (cpu, processes, gradient accumulation steps)."""
    # Accelerate's state is a per-process singleton: forget an earlier in-process run's settings (mixed
    # precision, accumulation) so that other modules can call main() again with other ones.
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    # Without a GPU, Accelerate uses its multi-CPU (gloo) mode under torchrun only when told it runs on the
    # CPU; otherwise every process would train alone.
    cpu = not torch.cuda.is_available()
    world = PartialState(cpu=cpu).num_processes  # joins the process group of torchrun / accelerate launch
    micro = cfg["micro_batch_size"]
    if cfg["batch_size"] % (micro * world):
        raise ConfigError(f"{config_path}: batch_size {cfg['batch_size']} is not a multiple of "
                          f"micro_batch_size {micro} x {world} processes")
    return cpu, world, cfg["batch_size"] // (micro * world)


def tokenizer_for_run(cfg: dict, vocab_size: int, run_dir: Path, saved: dict | None):
    """A resumed run's own tokenizer, else the configured one (or a BPE trained on the data); and its name."""
    if saved and (run_dir / "tokenizer").is_dir():
        return AutoTokenizer.from_pretrained(run_dir / "tokenizer"), saved["tokenizer_used"]
    return corpus.load_tokenizer(cfg["tokenizer"], cfg["data"], cfg["val_every"], vocab_size,
                                     cfg["bpe_train_docs"], cfg["model_config"])


def make_accelerator(cfg: dict, out: Path, accum: int, cpu: bool) -> Accelerator:
    """Devices, mixed precision, accumulation and trackers (metrics.jsonl always) for one run."""
    extra = [cfg["report_to"]] if cfg["report_to"] != "none" else []
    # step_scheduler_with_optimizer=False: the schedule counts optimizer steps whatever the process count.
    return Accelerator(
        cpu=cpu, mixed_precision=cfg["mixed_precision"], gradient_accumulation_steps=accum,
        log_with=[JSONLTracker(out / "metrics.jsonl"), *extra], project_dir=str(out),
        step_scheduler_with_optimizer=False, dynamo_backend="inductor" if cfg["compile"] else "no")


def prepare_output(accelerator: Accelerator, out: Path, cfg: dict, tokenizer, tokenizer_name: str,
                   start_step: int) -> None:
    """The output folder before the first step: tokenizer and settings saved, leftovers of a killed run gone."""
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(out / "tokenizer")
        write_json(out / "train_config.json", {**cfg, "tokenizer_used": tokenizer_name})
        for tmp in [*(out / "checkpoints").glob(".tmp_step_*"), *out.glob(".final.tmp-*")]:  # a crash mid-save
            shutil.rmtree(tmp)
        # A killed run may have logged steps after its last checkpoint: they are redone, so drop them.
        log = out / "metrics.jsonl"
        if log.exists():
            kept = [ln for ln in log.read_text().splitlines() if json.loads(ln)["step"] <= start_step]
            write_text(log, "".join(ln + "\n" for ln in kept))
    accelerator.wait_for_everyone()


def save_final(accelerator: Accelerator, model: torch.nn.Module, tokenizer, out: Path, card: str) -> Path:
    """final/: model (safetensors, config with auto_map, modeling files), tokenizer and model card, atomically."""
    state_dict = accelerator.get_state_dict(model)  # every process takes part (FSDP gathers the shards)
    if accelerator.is_main_process:
        with atomic_dir(out / "final") as tmp:
            accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state_dict)
            tokenizer.save_pretrained(tmp)
            (tmp / "README.md").write_text(card)
    accelerator.wait_for_everyone()
    return out / "final"


class PushError(Exception):
    """The push of a complete final/ to the hub failed: one line naming the repository and the reason."""


def push_to_hub(folder: Path, repo_id: str, message: str) -> str:
    """Upload ``folder`` to the model repository ``repo_id`` (created if missing); return the repository's URL."""
    try:
        api = HfApi()
        url = api.create_repo(repo_id, exist_ok=True)  # a bare name goes to the token's namespace
        api.upload_folder(repo_id=url.repo_id, folder_path=folder, commit_message=message)
    # Whatever huggingface_hub raises here (offline mode, network, authentication, quota) means the same to the
    # user: the push did not happen, and final/ is complete on disk for a retry.
    except Exception as e:
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise PushError(f"pushing {folder} to the hub as {repo_id} failed: {reason} "
                        f"(final/ is complete; retry with: hf upload {repo_id} {folder})") from None
    return str(url)


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> Path:
    """Train as the command line says and return the output folder. Bad input raises ConfigError or DataError
    before anything is written; a failed --push_to_hub raises PushError once final/ is complete."""
    args = train_config.parse_args(argv)
    cfg = train_config.load_config(args)
    out = Path(cfg["output_dir"])
    repo_id = train_config.hub_repo_id(args, out)
    cpu, world, accum = join_processes(cfg, args.config)

    # Everything that can fail on bad input, before the first write to `out`.
    ckpt = train_config.find_checkpoint(out, args.resume_from_checkpoint)
    run_dir, saved = train_config.check_resume(ckpt, out, cfg)
    n_docs = corpus.check_data(cfg["data"], cfg["val_every"])
    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)

    model_cfg = AutoConfig.from_pretrained(cfg["model_config"])
    tokenizer, tokenizer_name = tokenizer_for_run(cfg, model_cfg.vocab_size, run_dir, saved)
    val = corpus.validation_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                       cfg["eval_blocks"])
    if cfg["report_to"] == "tensorboard" and not is_tensorboard_available():
        raise ConfigError(f"{args.config}: report_to tensorboard, but tensorboard is not installed")

    accelerator = make_accelerator(cfg, out, accum, cpu)
    accelerator.print(f"{accelerator.distributed_type.value} x {world} processes, {accelerator.device}, "
                      f"mixed precision {cfg['mixed_precision']}, gradient accumulation {accum}")
    start = json.loads((ckpt / "data_state.json").read_text()) if ckpt else {"step": 0, "pos": [0, 0, 0]}
    prepare_output(accelerator, out, cfg, tokenizer, tokenizer_name, start["step"])
    accelerator.init_trackers("train", config={k: str(v) for k, v in cfg.items()})

    set_seed(cfg["seed"])
    model = AutoModelForCausalLM.from_config(model_cfg)
    n_params = sum(p.numel() for p in model.parameters())  # before FSDP shards them; tied weights once
    optimizer = build_optimizer(model, cfg, fused=accelerator.device.type == "cuda")
    scheduler = get_scheduler("cosine_with_min_lr", optimizer, num_warmup_steps=cfg["warmup_steps"],
                              num_training_steps=cfg["max_steps"],
                              scheduler_specific_kwargs={"min_lr_rate": cfg["min_lr_ratio"]})
    # The data position is ours (corpus.PackedBlocks), not the DataLoader's: each block carries the
    # position after it, and a resumed stream starts exactly there. Accelerate dispatches the batches
    # from process 0, so the stream is read and tokenized once and every process gets its own rows.
    train_set = corpus.PackedBlocks(cfg["data"], "train", cfg["val_every"], tokenizer,
                                        cfg["block_size"], start=tuple(start["pos"]))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=cfg["micro_batch_size"])
    val_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(val), batch_size=cfg["micro_batch_size"])
    model, optimizer, scheduler, train_loader, val_loader = accelerator.prepare(
        model, optimizer, scheduler, train_loader, val_loader)
    if ckpt:
        accelerator.load_state(str(ckpt))  # model, optimizer, scheduler, RNG
        accelerator.print(f"resumed from {ckpt} at step {start['step']}")

    tokens_per_step = cfg["batch_size"] * cfg["block_size"]
    weight = prediction_loss_weight(model)  # SPEN's predictor trains on CE + weight * P; GPT-2: 0
    batches = iter(train_loader)
    step, last, pos = start["step"], cfg["max_steps"], start["pos"]
    val_loss = float("nan")
    bar = tqdm(total=last, initial=step, disable=not accelerator.is_local_main_process, dynamic_ncols=True)
    # Training losses summed since the last log: [next-token CE, prediction loss], and the step count. The logged
    # `loss` is their mean over the steps since the previous log (as transformers' Trainer logs it), so that
    # it reads beside `val_loss`; a resume at a multiple of log_every gives the same numbers as one run.
    window, window_steps = torch.zeros(2, device=accelerator.device), 0
    while step < last:
        step += 1
        log_now = step % cfg["log_every"] == 0 or step == last
        save_now = step % cfg["save_every"] == 0 or step == last
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
        if cfg["grad_clip"]:
            accelerator.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
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
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
        if step % cfg["eval_every"] == 0 or step == last:
            val_loss = evaluate(model, val_loader, accelerator)
            metrics |= {"val_loss": val_loss, "val_ppl": math.exp(val_loss), "tokens": step * tokens_per_step}
        if metrics:
            accelerator.log(metrics, step=step)
        if save_now:
            state = {"step": step, "pos": pos, "tokens": step * tokens_per_step}
            save_checkpoint(accelerator, out, step, state, cfg["keep_checkpoints"])
    bar.close()

    if math.isnan(val_loss):  # resumed at max_steps: nothing ran, but the card needs the loss
        val_loss = evaluate(model, val_loader, accelerator)
    command = "train.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    # Validation takes every val_every-th document of local or embedded data, from the first.
    train_docs = n_docs - ((n_docs - 1) // cfg["val_every"] + 1) if n_docs else 0
    final = save_final(accelerator, model, tokenizer, out, model_card(
        cfg, model_cfg, n_params, step, pos, train_docs, val_loss, command, tokenizer_name))
    accelerator.end_training()  # closes the trackers and the process group
    if repo_id and accelerator.is_main_process:
        url = push_to_hub(final, repo_id, f"train.py: {step} steps, validation loss {val_loss:.4f}")
        print(f"pushed {final} to {url}")
    return out


def cli(argv: list[str] | None = None) -> int:
    """train.py as a command: bad input and a failed push are one line on stderr and their own exit status."""
    try:
        main(argv)
    except (ConfigError, DataError) as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PushError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return EXIT_PUSH_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(cli())
