"""Train SPEN or the GPT-2 baseline: one nanoGPT-style loop, Accelerate for all device work.

    accelerate launch train.py --config hub_configs/spen-130m/train.yaml           # GPU(s), C4, bf16
    python train.py --config hub_configs/spen-tiny/train.yaml                      # CPU, seconds
    torchrun --nproc_per_node 2 train.py --config hub_configs/gpt2-tiny/train.yaml # 2 CPU processes (gloo)

The YAML names the model config (a hub_configs/ folder) and the hyperparameters; flags override it.
Output folder: final/ (model + tokenizer + model card), checkpoints/step_N/, tokenizer/, metrics.jsonl,
train_config.json. See docs/training.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import time
import zlib
from pathlib import Path

import torch
import torch.nn.functional as F
import yaml
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.tracking import GeneralTracker
from accelerate.utils import is_tensorboard_available, set_seed
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, get_scheduler

import train_data
from train_data import DataError

# Every YAML key: default and meaning. `--help` prints this table, so it is the documentation.
SETTINGS: dict[str, tuple[object, str]] = {
    "model_config": (None, "model config folder, e.g. hub_configs/spen-130m (required)"),
    "data": ("embedded", "'c4' (streamed), 'embedded' (Python's help topics) or local files"),
    "tokenizer": (None, "hub name or folder; null (or unavailable): train a byte-level BPE on the data"),
    "output_dir": (None, "output folder (default: outputs/<model config name>)"),
    "block_size": (1024, "tokens per sequence"),
    "batch_size": (512, "sequences per optimizer step, all processes together"),
    "micro_batch_size": (16, "sequences per process per forward pass (gradient accumulation does the rest)"),
    "max_steps": (5000, "optimizer steps"),
    "lr": (6e-4, "peak learning rate"),
    "min_lr_ratio": (0.1, "final learning rate as a fraction of lr (cosine decay)"),
    "warmup_steps": (200, "linear warmup steps"),
    "weight_decay": (0.1, "AdamW weight decay for matrices and embeddings (not biases, not norms)"),
    "betas": ([0.9, 0.95], "AdamW betas"),
    "grad_clip": (1.0, "clip the global gradient norm to this (0: no clipping)"),
    "mixed_precision": ("no", "'bf16', 'fp16' or 'no' (Accelerate mixed precision)"),
    "compile": (False, "torch.compile the model (through Accelerate's dynamo backend)"),
    "log_every": (10, "write metrics every N steps"),
    "eval_every": (250, "validation loss every N steps (and at the end)"),
    "eval_blocks": (200, "validation sequences (fixed: the first ones of the validation split)"),
    "save_every": (500, "checkpoint every N steps (and at the end)"),
    "keep_checkpoints": (2, "how many recent checkpoints to keep"),
    "val_every": (100, "local/embedded data: every N-th document is held out for validation"),
    "bpe_train_docs": (100000, "documents used to train the BPE tokenizer when one is trained"),
    "seed": (1337, "seed for initialisation (the data order is fixed by the data)"),
    "report_to": ("none", "extra tracker: 'tensorboard', 'wandb' or 'none' (metrics.jsonl always)"),
}


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


# ------------------------------------------------------------------------------------------ config
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    keys = "\n".join(f"  {k:<17} {str(v[0]):<12} {v[1]}" for k, v in SETTINGS.items())
    p = argparse.ArgumentParser(
        prog="train.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train SPEN or the GPT-2 baseline (Accelerate; DDP/FSDP via `accelerate launch`).",
        epilog=f"YAML keys (key, default, meaning):\n{keys}\n\nFull-scale recipe: docs/training.md")
    p.add_argument("--config", required=True, help="training YAML, e.g. hub_configs/spen-130m/train.yaml")
    p.add_argument("--output_dir", help="output folder (overrides the YAML)")
    p.add_argument("--data", nargs="+", metavar="PATH",
                   help="'c4', 'embedded', or local .txt/.jsonl/.parquet files (overrides the YAML)")
    p.add_argument("--tokenizer", metavar="NAME_OR_DIR", help="hub name or folder (overrides the YAML)")
    p.add_argument("--max_steps", type=int, help="optimizer steps (overrides the YAML)")
    p.add_argument("--seed", type=int, help="initialisation seed (overrides the YAML)")
    p.add_argument("--resume_from_checkpoint", metavar="latest|DIR",
                   help="'latest' (newest checkpoint in the output folder; start fresh if none) or a folder")
    p.add_argument("--report_to", choices=["tensorboard", "wandb", "none"], help="extra tracker")
    return p.parse_args(argv)


def resolve_model_config(name: str) -> str:
    """A model config folder as given, or, when relative and absent, inside this repository.

    The shipped YAMLs name `hub_configs/<model>` relative to the repository root; this lets them
    work from any working directory.
    """
    path = Path(name)
    if not (path / "config.json").is_file() and not path.is_absolute():
        in_repo = Path(__file__).resolve().parent / path
        if (in_repo / "config.json").is_file():
            return str(in_repo)
    return name


def load_config(args: argparse.Namespace) -> dict:
    """YAML + flags, checked; errors name the file and line."""
    path = Path(args.config)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        node = yaml.compose(path.read_text())
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise DataError(f"{where}: invalid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected a mapping of settings")
    lines = {k.value: k.start_mark.line + 1 for k, _ in node.value}
    cfg = {k: v[0] for k, v in SETTINGS.items()}
    for key, value in raw.items():
        if key not in SETTINGS:
            raise DataError(f"{path}:{lines[key]}: unknown setting {key!r} (see train.py --help)")
        default = SETTINGS[key][0]
        if isinstance(default, float) and isinstance(value, (int, str)) and not isinstance(value, bool):
            try:  # YAML 1.1 reads 3e-4 (no dot) as a string, and 1 as an int
                value = float(value)
            except ValueError:
                pass
        if not (default is None or value is None or isinstance(value, type(default))):
            raise DataError(f"{path}:{lines[key]}: {key} must be {type(default).__name__}, got {value!r}")
        cfg[key] = value
    for key in ("output_dir", "data", "tokenizer", "max_steps", "seed", "report_to"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if not cfg["model_config"]:
        raise DataError(f"{path}: model_config is missing")
    cfg["model_config"] = resolve_model_config(cfg["model_config"])
    if not (Path(cfg["model_config"]) / "config.json").is_file():
        where = f"{path}:{lines['model_config']}" if "model_config" in lines else str(path)
        raise DataError(f"{where}: {cfg['model_config']}/config.json: no such file")
    cfg["data"] = train_data.parse_data(cfg["data"])
    cfg["output_dir"] = cfg["output_dir"] or f"outputs/{Path(cfg['model_config']).name}"
    return cfg


def find_checkpoint(out: Path, resume: str | None) -> Path | None:
    """The checkpoint to resume from. Only renamed (complete) `step_N` folders count."""
    if resume is None:
        if (out / "checkpoints").exists() or (out / "metrics.jsonl").exists():
            raise DataError(f"{out}: already holds a run; pass --resume_from_checkpoint latest or another "
                            "--output_dir")
        return None
    if resume != "latest":
        if not (Path(resume) / "data_state.json").is_file():
            raise DataError(f"{resume}: not a complete checkpoint (no data_state.json)")
        return Path(resume)
    done = [d for d in (out / "checkpoints").glob("step_*") if (d / "data_state.json").is_file()]
    return max(done, key=lambda d: int(d.name.split("_")[1]), default=None)


# ------------------------------------------------------------------------------------------ pieces
def build_optimizer(model: torch.nn.Module, cfg: dict, fused: bool) -> torch.optim.AdamW:
    # Matrices and embeddings decay; biases and norm gains (1-D) do not, as in GPT-2/nanoGPT.
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg["lr"], betas=tuple(cfg["betas"]), fused=fused)


def lm_loss(model: torch.nn.Module, blocks: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    # The same loss for every model (fair comparison): next-token cross-entropy over all block_size targets.
    logits = model(input_ids=blocks[:, :-1]).logits
    return F.cross_entropy(logits.float().flatten(0, 1), blocks[:, 1:].flatten(), reduction=reduction)


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
        (tmp / "data_state.json").write_text(json.dumps(state))
        final = ckpts / f"step_{step}"
        if final.exists():  # an older run's checkpoint when resuming from an earlier one
            shutil.rmtree(final)
        os.replace(tmp, final)
        old = sorted(ckpts.glob("step_*"), key=lambda d: int(d.name.split("_")[1]))[:-keep]
        for d in old:
            shutil.rmtree(d)
    accelerator.wait_for_everyone()


def model_card(cfg: dict, tokens: int, step: int, val_loss: float, command: str, tokenizer_name: str) -> str:
    return f"""---
library_name: transformers
tags: [ema-boundary, causal-lm]
---
# {Path(cfg['model_config']).name}

Trained with `train.py` of the ema-boundary project.

- model config: `{cfg['model_config']}`
- data: {train_data.short_name(cfg['data'])}
- tokenizer: {tokenizer_name}
- tokens seen: {tokens:,} ({step} steps x {cfg['batch_size']} sequences x {cfg['block_size']} tokens)
- final validation loss: {val_loss:.4f}, perplexity {math.exp(val_loss):.2f} ({cfg['eval_blocks']} sequences)
- mixed precision: {cfg['mixed_precision']}

Command:

```
{command}
```
"""


# ------------------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> Path:
    """Train as the command line says and return the output folder. Bad input raises DataError before
    anything is written."""
    args = parse_args(argv)
    cfg = load_config(args)
    out = Path(cfg["output_dir"])
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
        raise DataError(f"{args.config}: batch_size {cfg['batch_size']} is not a multiple of "
                        f"micro_batch_size {micro} x {world} processes")
    accum = cfg["batch_size"] // (micro * world)

    # Everything that can fail on bad input, before the first write to `out`.
    ckpt = find_checkpoint(out, args.resume_from_checkpoint)
    run_dir = ckpt.parent.parent if ckpt else out  # the run that wrote the checkpoint, if any
    saved_path = run_dir / "train_config.json"
    saved = json.loads(saved_path.read_text()) if saved_path.is_file() else None
    changed = [k for k in ("model_config", "data", "block_size", "batch_size", "val_every")
               if saved and saved[k] != cfg[k]]
    if changed:
        raise DataError(f"{saved_path}: the run to resume used another {', '.join(changed)}")
    train_data.check_data(cfg["data"], cfg["val_every"])
    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)

    model_cfg = AutoConfig.from_pretrained(cfg["model_config"])
    if saved and (run_dir / "tokenizer").is_dir():  # a resumed run keeps its tokenizer
        tokenizer, tokenizer_name = AutoTokenizer.from_pretrained(run_dir / "tokenizer"), saved["tokenizer_used"]
    else:
        tokenizer, tokenizer_name = train_data.load_tokenizer(
            cfg["tokenizer"], cfg["data"], cfg["val_every"], model_cfg.vocab_size, cfg["bpe_train_docs"],
            cfg["model_config"])
    val = train_data.validation_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                       cfg["eval_blocks"])
    if cfg["report_to"] == "tensorboard" and not is_tensorboard_available():
        raise DataError(f"{args.config}: report_to tensorboard, but tensorboard is not installed")

    extra = [cfg["report_to"]] if cfg["report_to"] != "none" else []
    # step_scheduler_with_optimizer=False: the schedule counts optimizer steps whatever the process count.
    accelerator = Accelerator(
        cpu=cpu, mixed_precision=cfg["mixed_precision"], gradient_accumulation_steps=accum,
        log_with=[JSONLTracker(out / "metrics.jsonl"), *extra], project_dir=str(out),
        step_scheduler_with_optimizer=False, dynamo_backend="inductor" if cfg["compile"] else "no")
    accelerator.print(f"{accelerator.distributed_type.value} x {world} processes, {accelerator.device}, "
                      f"mixed precision {cfg['mixed_precision']}, gradient accumulation {accum}")
    start = json.loads((ckpt / "data_state.json").read_text()) if ckpt else {"step": 0, "pos": [0, 0, 0]}
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(out / "tokenizer")
        (out / "train_config.json").write_text(json.dumps({**cfg, "tokenizer_used": tokenizer_name}, indent=1))
        for tmp in (out / "checkpoints").glob(".tmp_step_*"):  # left by a crash mid-save
            shutil.rmtree(tmp)
        # A killed run may have logged steps after its last checkpoint: they are redone, so drop them.
        log = out / "metrics.jsonl"
        if log.exists():
            kept = [ln for ln in log.read_text().splitlines() if json.loads(ln)["step"] <= start["step"]]
            log.write_text("".join(ln + "\n" for ln in kept))
    accelerator.wait_for_everyone()
    accelerator.init_trackers("train", config={k: str(v) for k, v in cfg.items()})

    set_seed(cfg["seed"])
    model = AutoModelForCausalLM.from_config(model_cfg)
    optimizer = build_optimizer(model, cfg, fused=accelerator.device.type == "cuda")
    scheduler = get_scheduler("cosine_with_min_lr", optimizer, num_warmup_steps=cfg["warmup_steps"],
                              num_training_steps=cfg["max_steps"],
                              scheduler_specific_kwargs={"min_lr_rate": cfg["min_lr_ratio"]})
    # The data position is ours (train_data.PackedBlocks), not the DataLoader's: each block carries the
    # position after it, and a resumed stream starts exactly there. Accelerate dispatches the batches
    # from process 0, so the stream is read and tokenized once and every process gets its own rows.
    train_set = train_data.PackedBlocks(cfg["data"], "train", cfg["val_every"], tokenizer,
                                        cfg["block_size"], start=tuple(start["pos"]))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=micro)
    val_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(val), batch_size=micro)
    model, optimizer, scheduler, train_loader, val_loader = accelerator.prepare(
        model, optimizer, scheduler, train_loader, val_loader)
    if ckpt:
        accelerator.load_state(str(ckpt))  # model, optimizer, scheduler, RNG
        accelerator.print(f"resumed from {ckpt} at step {start['step']}")

    tokens_per_step = cfg["batch_size"] * cfg["block_size"]
    batches = iter(train_loader)
    step, last = start["step"], cfg["max_steps"]
    val_loss = float("nan")
    bar = tqdm(total=last, initial=step, disable=not accelerator.is_local_main_process, dynamic_ncols=True)
    while step < last:
        step += 1
        log_now = step % cfg["log_every"] == 0 or step == last
        save_now = step % cfg["save_every"] == 0 or step == last
        t0, loss, crc = time.perf_counter(), torch.zeros((), device=accelerator.device), 0
        for _ in range(accum):
            batch = next(batches)
            with accelerator.accumulate(model):
                # Blocks are packed (no padding), so every micro-batch has the same number of targets: the
                # token mean of each micro-batch, divided by `accum` in backward and averaged over processes
                # by DDP, is exactly the token mean of the whole optimizer step.
                micro_loss = lm_loss(model, batch["input_ids"])
                accelerator.backward(micro_loss)
            loss += micro_loss.detach() / accum
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
        if log_now:
            loss, lr = accelerator.reduce(loss, "mean").item(), scheduler.get_last_lr()[0]
            tok_s = tokens_per_step / (time.perf_counter() - t0)
            metrics = {"loss": loss, "lr": lr, "tokens": step * tokens_per_step, "tokens_per_s": tok_s,
                       "batch_crc32": crc, "data_pos": pos}
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
        if step % cfg["eval_every"] == 0 or step == last:
            val_loss = evaluate(model, val_loader, accelerator)
            metrics |= {"val_loss": val_loss, "val_ppl": math.exp(val_loss)}
        if metrics:
            accelerator.log(metrics, step=step)
        if save_now:
            state = {"step": step, "pos": pos, "tokens": step * tokens_per_step}
            save_checkpoint(accelerator, out, step, state, cfg["keep_checkpoints"])
    bar.close()

    if math.isnan(val_loss):  # resumed at max_steps: nothing ran, but the card needs the loss
        val_loss = evaluate(model, val_loader, accelerator)
    # final/: model + tokenizer + card, renamed into place like the checkpoints.
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        tmp, final = out / ".tmp_final", out / "final"
        shutil.rmtree(tmp, ignore_errors=True)
        accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state_dict)
        tokenizer.save_pretrained(tmp)
        command = "train.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        card = model_card(cfg, step * tokens_per_step, step, val_loss, command, tokenizer_name)
        (tmp / "README.md").write_text(card)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    accelerator.wait_for_everyone()
    accelerator.end_training()  # closes the trackers and the process group
    return out


def cli() -> int:
    try:
        main()
    except DataError as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(cli())
