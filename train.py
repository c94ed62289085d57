"""Train SPEN or the GPT-2 baseline: one nanoGPT-style loop, Accelerate for all device work.

    accelerate launch train.py --config hub_configs/spen-130m/train.yaml           # GPU(s), C4, bf16
    python train.py --config hub_configs/spen-tiny/train.yaml                      # CPU, seconds
    torchrun --nproc_per_node 2 train.py --config hub_configs/gpt2-tiny/train.yaml # 2 CPU processes (gloo)

The YAML names the model config (a hub_configs/ folder) and the hyperparameters; flags of the same names override
it. The settings (every YAML key, the flags, the output folder's rules, checkpoint discovery) live in
train_config.py; the corpus (documents, tokenizer, packed blocks) in ema_boundary/corpus.py; this file is the
loop. Output folder: final/ (model + tokenizer + model card), checkpoints/step_N/, tokenizer/, metrics.jsonl,
train_config.json. An earlier run in the output folder resumes from its newest checkpoint; Ctrl-C saves one and
prints the command that resumes. `--push_to_hub [--hub_model_id NAME]` checks the hub before training and uploads
final/ once it is complete.
See docs/training.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shlex
import shutil
import signal
import sys
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.tracking import GeneralTracker
from accelerate.utils import broadcast_object_list, is_tensorboard_available, set_seed
from huggingface_hub import EvalResult, HfApi, ModelCard, ModelCardData
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedConfig, get_scheduler

import train_config
from ema_boundary import corpus
from ema_boundary.cli import EXIT_INTERRUPTED, first_line
from ema_boundary.corpus import DataError
from ema_boundary.io import FolderLock, OutputError, atomic_dir, publish_dir, write_json, write_text
from ema_boundary.params import ParameterCounts, parameter_counts
from train_config import EXIT_BAD_INPUT, EXIT_PUSH_FAILED, ConfigError

log = logging.getLogger("train")  # train.py's own messages: start, progress, validation, summary (--log_level)
SUMMARY = 25  # between INFO and WARNING: the last line, shown at --log_level warning too
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": SUMMARY, "error": logging.ERROR}


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
    return torch.optim.AdamW(groups, lr=cfg["learning_rate"], betas=(cfg["adam_beta1"], cfg["adam_beta2"]), fused=fused)


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
    """save_state into a hidden temp folder, then rename: a crash mid-save leaves no `step_N` folder. ``state``
    (the data position, the settings, the model's config) goes into its data_state.json."""
    ckpts, tmp = out / "checkpoints", out / "checkpoints" / f".tmp_step_{step}"
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        # Last, with the size and checksum of every file: a checkpoint with it is complete (checkpoint_problem).
        write_json(tmp / "data_state.json", {**state, "files": train_config.checkpoint_files(tmp)})
        publish_dir(tmp, ckpts / f"step_{step}")  # replaces an older run's step_N when resuming from earlier
        old = sorted(ckpts.glob("step_*"), key=lambda d: int(d.name.split("_")[1]))[:-keep]
        for d in old:
            shutil.rmtree(d)
    accelerator.wait_for_everyone()


@dataclass(frozen=True)
class TestBlocks:
    """The test split's blocks a run scores once at the end, and how much text they are."""

    __test__ = False  # not a pytest class

    blocks: torch.Tensor
    documents: int  # test documents the blocks' targets come from

    @property
    def tokens(self) -> int:
        return self.blocks.shape[0] * (self.blocks.shape[1] - 1)

    def metrics(self, loss: float) -> dict:
        """The last metrics.jsonl record's test fields (eval.runs.read_test reads them)."""
        return {"test_loss": loss, "test_ppl": math.exp(loss), "test_tokens": self.tokens,
                "test_documents": self.documents}


def training_stream(cfg: dict, tokenizer, start: list[int] | tuple[int, int, int] = (0, 0, 0), seed: int | None = None,
                    tokens: corpus.SplitTokens | None = None) -> torch.utils.data.IterableDataset:
    """The run's training blocks from position ``start``, shuffled from ``seed`` (default: the run's) as
    ``shuffle`` and ``shuffle_buffer`` say (corpus.training_blocks); ``tokens``: a training split already read."""
    return corpus.training_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                  seed=cfg["seed"] if seed is None else seed, shuffle=cfg["shuffle"],
                                  shuffle_buffer=cfg["shuffle_buffer"], start=tuple(start),
                                  test_every=cfg["test_every"], tokens=tokens)


def held_out_test(cfg: dict, tokenizer) -> TestBlocks | None:
    """The test blocks of a run with ``test_every`` > 0 (the first ``max_test_samples``, or all), else None.

    Documents no run with the same ``val_every`` and ``test_every`` trains on, and that choose nothing (rates and
    checkpoints are chosen on validation): the score to compare runs on."""
    if not cfg["test_every"]:
        return None
    blocks, documents = corpus.split_blocks(cfg["data"], "test", cfg["val_every"], tokenizer, cfg["block_size"],
                                            cfg["max_test_samples"], cfg["test_every"])
    return TestBlocks(blocks, documents)


# The hub's ids for the data sources that are hub datasets; the card's `datasets` lists them.
HUB_DATASETS = {corpus.C4: "allenai/c4"}
CARD_LICENSE = "apache-2.0"  # the project's license, which the modeling code shipped beside the weights carries


def model_card(cfg: dict, model_config: PreTrainedConfig, counts: ParameterCounts, step: int, data_pos: list[int],
               train_docs: int, val_loss: float, command: str, tokenizer_name: str, name: str,
               location: str, test: dict | None = None, epoch_blocks: int = 0,
               changes: list[dict] | None = None) -> ModelCard:
    """final/README.md as the Hub reads it: metadata (license, language, library, pipeline, tags, datasets, a
    model-index with the validation loss and perplexity), the regime, the command, and a python block that loads
    the model from ``location`` (the folder, or the hub repository it is pushed to) and generates. ``name`` is
    the model's name (the repository id, or the output folder's name).

    ``data_pos`` is the data position after the last step (epoch, document or block, token offset);
    ``train_docs`` the number of training documents (0 for streamed C4, which is not counted); ``epoch_blocks``
    the blocks of one epoch of shuffled local data (0: the data was read by documents); ``test`` the test
    split's metrics (:meth:`TestBlocks.metrics`) of a run with one; ``changes`` the settings changed on resume
    (train_config.check_resume), each with its step.
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
                                            ("perplexity", f"{split} perplexity", math.exp(loss)))]
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
    return ModelCard(f"""---
{meta.to_yaml()}
---
# {name}

A {kind} language model trained from scratch with `train.py` of the ema-boundary project ("EMA Is Not All You
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

- model: {kind}, `{Path(cfg['model_name_or_path']).name}`, {counts.total:,} parameters \
({counts.non_embedding:,} non-embedding)
- data: {corpus.short_name(data)}
- tokenizer: {tokenizer_name}
- tokens seen: {tokens:,} ({step} steps x {cfg['total_train_batch_size']} sequences x {cfg['block_size']} tokens), \
{tokens / counts.total:.3g} per parameter
- epochs: {passes}
- final validation loss: {val_loss:.4f}, perplexity {math.exp(val_loss):.2f} ({cfg['max_eval_samples']} sequences)\
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


def join_processes(cfg: dict) -> tuple[bool, int, int]:
    """Fresh Accelerate state in this process's group: (cpu, processes, gradient accumulation steps)."""
    # Accelerate's state is a per-process singleton: forget an earlier in-process run's settings (mixed
    # precision, accumulation) so that other modules can call main() again with other ones.
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    # Without a GPU, Accelerate uses its multi-CPU (gloo) mode under torchrun only when told it runs on the
    # CPU; otherwise every process would train alone.
    cpu = not torch.cuda.is_available()
    world = PartialState(cpu=cpu).num_processes  # joins the process group of torchrun / accelerate launch
    return cpu, world, train_config.resolve_batch(cfg, world)


def tokenizer_for_run(cfg: dict, vocab_size: int, run_dir: Path, saved: dict | None):
    """A resumed run's own tokenizer, else the configured one (or a BPE trained on the data); and its name."""
    if saved and (run_dir / "tokenizer").is_dir():
        return AutoTokenizer.from_pretrained(run_dir / "tokenizer"), saved["tokenizer_used"]
    return corpus.load_tokenizer(cfg["tokenizer_name"], cfg["data"], cfg["val_every"], vocab_size,
                                     cfg["bpe_train_docs"], cfg["model_name_or_path"], cfg["test_every"])


def make_accelerator(cfg: dict, out: Path, accum: int, cpu: bool) -> Accelerator:
    """Devices, mixed precision, accumulation and trackers (metrics.jsonl always) for one run."""
    extra = [cfg["report_to"]] if cfg["report_to"] != "none" else []
    # step_scheduler_with_optimizer=False: the schedule counts optimizer steps whatever the process count.
    return Accelerator(
        cpu=cpu, mixed_precision=cfg["mixed_precision"], gradient_accumulation_steps=accum,
        log_with=[JSONLTracker(out / "metrics.jsonl"), *extra], project_dir=str(out),
        step_scheduler_with_optimizer=False, dynamo_backend="inductor" if cfg["torch_compile"] else "no")


def prepare_output(accelerator: Accelerator, out: Path, cfg: dict, tokenizer, tokenizer_name: str,
                   metrics_text: str | None, changes: list[dict], overwrite: bool, command: list[str]) -> None:
    """The output folder before the first step: an earlier run cleared (--overwrite_output_dir), the marker,
    tokenizer and settings (with the changes made on resume) saved, leftovers of a killed run gone, and
    metrics.jsonl cut to ``metrics_text`` (train_config.kept_metrics: the steps after the checkpoint are redone)."""
    if accelerator.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        if overwrite:
            train_config.clear_run(out)
        train_config.write_marker(out, command)
        tokenizer.save_pretrained(out / "tokenizer")
        write_json(out / "train_config.json", {**cfg, "tokenizer_used": tokenizer_name, "changes": changes})
        for tmp in [*(out / "checkpoints").glob(".tmp_step_*"), *out.glob(".final.tmp-*")]:  # a crash mid-save
            shutil.rmtree(tmp)
        if metrics_text is not None:
            write_text(out / "metrics.jsonl", metrics_text)
    accelerator.wait_for_everyone()


def save_final(accelerator: Accelerator, model: torch.nn.Module, tokenizer, out: Path, card: ModelCard) -> Path:
    """final/: model (safetensors, config with auto_map, modeling files), tokenizer and model card, atomically."""
    state_dict = accelerator.get_state_dict(model)  # every process takes part (FSDP gathers the shards)
    if accelerator.is_main_process:
        with atomic_dir(out / "final") as tmp:
            accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state_dict)
            tokenizer.save_pretrained(tmp)
            card.save(tmp / "README.md")
    accelerator.wait_for_everyone()
    return out / "final"


class PushError(Exception):
    """The push of a complete final/ to the hub failed: one line naming the repository and the reason."""


def check_hub(repo_id: str) -> str:
    """Before training: the hub accepts the token and has (or now creates) the repository; its full id.

    On the main process only; the others learn the outcome from it (a ConfigError on every process).
    """
    error, full_id = None, repo_id
    if PartialState().is_main_process:
        try:
            api = HfApi()
            api.whoami()  # the credentials, apart from the repository: the error then says which failed
            full_id = api.create_repo(repo_id, exist_ok=True).repo_id
        # Whatever huggingface_hub raises here (offline mode, network, no or bad token, a namespace the token
        # may not write) means the same to the user: no run can be pushed, so none starts.
        except Exception as e:
            error = (f"--push_to_hub: the hub refused {repo_id}: {first_line(e)} (nothing was trained; log in "
                     "with `hf auth login` or set HF_TOKEN, or train without --push_to_hub)")
    error, full_id = broadcast_object_list([error, full_id])
    if error:
        raise ConfigError(error)
    return full_id


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


# ------------------------------------------------------------------------------------------ the console
class _ConsoleHandler(logging.Handler):
    """train.py's messages: info on stdout, warnings on stderr, looked up at each message (redirect_stdout works)."""

    bar: tqdm | None = None  # the progress bar on a terminal, if one is shown: messages go above it

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        text = self.format(record)
        if stream.isatty() and _ConsoleHandler.bar is not None:
            _ConsoleHandler.bar.write(text, file=stream)  # above the progress bar, not through it
        else:
            print(text, file=stream, flush=True)


class _SharedTensorNote(logging.Filter):
    """Drop Accelerate's "Removed shared tensor" warning at every checkpoint: SPEN and GPT-2 tie the LM head to
    the token embedding, safetensors stores the shared matrix once, and loading the checkpoint ties it again
    (tests/test_train_resume.py resumes to the same losses)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Removed shared tensor" not in record.getMessage()


def configure_console(level: str, main_process: bool) -> None:
    """--log_level: train.py's own messages at ``level`` on the main process; the libraries' only at debug."""
    import datasets
    import huggingface_hub
    import transformers

    if not any(isinstance(h, _ConsoleHandler) for h in log.handlers):
        handler = _ConsoleHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.propagate = False
        logging.getLogger("accelerate.utils.other").addFilter(_SharedTensorNote())
    log.setLevel(LEVELS[level] if main_process else logging.ERROR)
    if level == "debug":
        transformers.logging.set_verbosity_info()
        transformers.logging.enable_progress_bar()
        datasets.enable_progress_bars()
        huggingface_hub.utils.enable_progress_bars()
    else:  # "Writing model shards", "Map", download bars: noise around train.py's own progress
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        datasets.disable_progress_bars()
        huggingface_hub.utils.disable_progress_bars()


def warn_about_schedule(cfg: dict) -> None:
    """Settings that run but are probably not what was meant."""
    if cfg["warmup_steps"] >= cfg["max_steps"]:
        log.warning(f"train.py: warning: warmup_steps {cfg['warmup_steps']} >= max_steps {cfg['max_steps']}: the "
                    "learning rate rises for the whole run and never reaches its peak or decays")


# ------------------------------------------------------------------------------------------ Ctrl-C, SIGTERM
# The signals that stop a run with a checkpoint: Ctrl-C, and what clusters send before they stop a job (SIGTERM:
# Slurm's preemption and scancel, docker stop, Kubernetes; SIGUSR1: Slurm's `--signal=USR1@seconds` warning).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGUSR1") if hasattr(signal, name))


def exit_status(signum: int) -> int:
    """The exit status of a run stopped by ``signum``: 128 + the signal's number, as a shell reports a process
    the signal ended (130 Ctrl-C, 143 SIGTERM, 138 SIGUSR1), so that a launcher or Slurm script sees which."""
    return 128 + signum


class Interrupted(Exception):
    """Ctrl-C, SIGTERM or SIGUSR1: the message is one line saying what was saved and the command that resumes;
    ``status`` the exit status (:func:`exit_status`)."""

    def __init__(self, message: str, status: int = EXIT_INTERRUPTED):
        super().__init__(message)
        self.status = status


class Interrupt:
    """Ctrl-C (SIGINT), SIGTERM or SIGUSR1 during training as a request: the step in progress finishes, a
    checkpoint is saved, and the run stops with the command that resumes it. Before the first step, or a second
    signal, stops at once."""

    def __init__(self, argv: list[str]):
        self.argv, self.requested, self.armed = argv, False, False
        self.signum = signal.SIGINT
        self.out: Path | None = None
        self.seed_dirs: list[Path] = []  # an ensemble run's folders (--seeds), once written
        self.processes, self.main = 1, True
        self._previous: dict[int, object] = {}
        self.held = contextlib.ExitStack()  # what the run holds until it ends: its output folders' locks

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self.held.close()

    @property
    def name(self) -> str:
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        return exit_status(self.signum)

    def _handle(self, signum, frame) -> None:
        if not self.requested:
            self.signum = signum
        if not self.armed or self.requested:
            raise KeyboardInterrupt
        self.requested = True
        log.warning(f"train.py: {self.name}: saving a checkpoint after this step ({self.name} again to stop "
                    "without it)")

    def stop_now(self, accelerator: Accelerator) -> bool:
        """Whether any process was interrupted (all processes agree, so that they save the same step)."""
        if self.processes == 1:
            return self.requested
        flag = torch.tensor(float(self.requested), device=accelerator.device)
        return bool(accelerator.reduce(flag, "sum").item())

    def resume_command(self) -> str:
        """The command line that continues this run from its newest checkpoint."""
        args, skip = [], False
        for arg in self.argv:  # the same run, minus what would start it over or point elsewhere
            if skip:
                skip = False
            elif arg in ("--resume_from_checkpoint", "--resume-from-checkpoint"):
                skip = True
            elif arg != "--overwrite_output_dir" and not arg.startswith("--resume_from_checkpoint="):
                args.append(arg)
        script = sys.argv[0] if Path(sys.argv[0]).name == "train.py" else "train.py"
        if self.processes == 1:
            launcher = ["python"]
        elif any(k.startswith("ACCELERATE_") for k in os.environ):  # accelerate launch sets its settings so
            launcher = ["accelerate", "launch", "--num_processes", str(self.processes)]
        else:  # torchrun (one machine; a multi-node run needs its rendezvous flags again)
            launcher = ["torchrun", "--standalone", "--nproc_per_node", str(self.processes)]
        return shlex.join([*launcher, script, *args, "--resume_from_checkpoint", "latest"])

    def message(self, saved: Path | None) -> str:
        """What the main process prints (other processes print nothing: the empty string)."""
        if not self.main:
            return ""
        stopped = "interrupted" if self.signum == signal.SIGINT else f"interrupted by {self.name}"
        if self.seed_dirs:  # an ensemble run: its folders hold the steps logged so far, and no checkpoint
            steps = [sum(1 for _ in (d / "metrics.jsonl").open()) if (d / "metrics.jsonl").is_file() else 0
                     for d in self.seed_dirs]
            parent = self.seed_dirs[0].parent
            return (f"train.py: {stopped}; {parent}/seed_* hold {max(steps)} logged steps each and no checkpoint (an "
                    "ensemble run does not resume: rerun it with --overwrite_output_dir)")
        if self.out is None:
            return f"train.py: {stopped} before training started; nothing was written"
        if saved is not None:
            return f"train.py: {stopped}; checkpoint saved in {saved}; resume with: {self.resume_command()}"
        done = [d for d in (self.out / "checkpoints").glob("step_*") if (d / "data_state.json").is_file()]
        if not done:
            return f"train.py: {stopped} before the first checkpoint; nothing to resume"
        latest = max(done, key=lambda d: int(d.name.split("_")[1]))
        return f"train.py: {stopped}; the newest checkpoint is {latest}; resume with: {self.resume_command()}"


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


def lock_output(out: Path, command: list[str], interrupt: Interrupt, world: int) -> None:
    """One writer per run folder: the main process holds ``out``'s lock (ema_boundary.io.FolderLock) until the
    run ends; if another process holds it, every process stops with one line naming the holder."""
    error = None
    if PartialState().is_main_process:
        lock = FolderLock(out, train_config.TOOL, command)
        try:
            stale = lock.acquire()
        except OutputError as e:
            error = str(e)
        else:
            interrupt.held.callback(lock.release)
            if stale:  # the OS released a killed holder's lock; its record is what is left of it
                log.warning(f"train.py: {out}: the run of pid {stale.get('pid')} on {stale.get('host')} ended "
                            "without releasing its lock (killed?); taken over")
    if world > 1:
        error = broadcast_object_list([error])[0]
    if error:
        raise ConfigError(error)


def check_shared_documents(cfg: dict) -> int:
    """Training documents with the text of a held-out one: refused (one line naming the first), or with
    ``drop_shared_documents`` left out of training (corpus.documents) and their number returned."""
    shared, first = corpus.shared_documents(cfg["data"], cfg["val_every"], cfg["test_every"])
    if shared and not cfg["drop_shared_documents"]:
        raise DataError(f"{first}: {shared} training document(s) have the text of a validation or test document; "
                        "remove them, or set drop_shared_documents: true to leave them out of training")
    if shared:
        log.info(f"train.py: {shared} training document(s) left out: their text is held out ({first})")
    return shared


def check_model_config(ckpt: Path, state: dict, model_cfg: PreTrainedConfig, model_json: Path) -> None:
    """Refuse a resume under another model than the checkpoint's (one line naming the field and both values)."""
    if "model_config" not in state:  # a checkpoint saved before checkpoints kept their model's config
        return
    saved, now = state["model_config"], model_config_record(model_cfg)
    for key in sorted(set(saved) | set(now)):
        if saved.get(key) != now.get(key):
            raise ConfigError(f"{model_json}: {key} is {json.dumps(now.get(key))}, the checkpoint {ckpt} was "
                              f"trained with {json.dumps(saved.get(key))}; resume with the checkpoint's model config, "
                              "or start over with --overwrite_output_dir")


def model_config_record(model_cfg: PreTrainedConfig) -> dict:
    """The model's settings as a checkpoint keeps them: config.json's fields, without the library's bookkeeping."""
    fields = json.loads(model_cfg.to_json_string(use_diff=False))
    return {k: v for k, v in fields.items() if not k.startswith("_") and k != "transformers_version"}


def check_positions(cfg: dict, model_cfg: PreTrainedConfig) -> None:
    """A block longer than the model's positions fails in the first forward pass: refuse it up front."""
    positions = getattr(model_cfg, "n_positions", None) or getattr(model_cfg, "max_position_embeddings", None)
    if positions and cfg["block_size"] > positions:
        raise ConfigError(f"block_size {cfg['block_size']} is more than the {positions} positions of the model "
                          f"({Path(cfg['model_name_or_path']) / 'config.json'}); lower block_size")


def train(interrupt: Interrupt) -> Path:
    """The run of ``interrupt.argv`` (see :func:`main`)."""
    argv = interrupt.argv
    started = time.perf_counter()
    args = train_config.parse_args(argv)
    if args.seeds is not None:  # several seeds as one ensemble in this process: ensemble.py
        import ensemble

        return ensemble.train_seeds(args, argv, args.seeds, args.ensemble_engine, interrupt)
    cfg = train_config.load_config(args)
    out = Path(cfg["output_dir"])
    earlier = train_config.check_output(out, args.overwrite_output_dir)
    repo_id = train_config.hub_repo_id(args, out)
    cpu, world, accum = join_processes(cfg)
    configure_console(args.log_level, PartialState().is_main_process)
    lock_output(out, ["train.py", *argv], interrupt, world)  # before anything is read from or written to `out`

    # Everything that can fail on bad input, before the first write to `out`.
    ckpt = train_config.find_checkpoint(out, args.resume_from_checkpoint, earlier, args.overwrite_output_dir,
                                        warn=log.warning)
    # Starting over replaces the earlier run, whatever it was trained from: nothing of it is resumed or checked.
    run_dir, saved = (out, None) if args.overwrite_output_dir else train_config.check_resume(ckpt, out, cfg)
    start = json.loads((ckpt / "data_state.json").read_text()) if ckpt else {"step": 0, "pos": [0, 0, 0]}
    changes = saved["changes"] if saved else []  # settings changed on resume, with their steps
    for c in changes:
        if c["step"] == start["step"]:
            log.info(f"train.py: {c['setting']} changed from {c['from']} to {c['to']} at step {c['step']}")
    metrics_text = None if args.overwrite_output_dir else train_config.kept_metrics(out, start["step"], log.warning)
    n_docs = corpus.check_data(cfg["data"], cfg["val_every"], cfg["test_every"])
    dropped = check_shared_documents(cfg)
    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)

    model_cfg = AutoConfig.from_pretrained(cfg["model_name_or_path"])
    check_positions(cfg, model_cfg)
    if ckpt:
        check_model_config(ckpt, start, model_cfg, Path(cfg["model_name_or_path"]) / "config.json")
    tokenizer, tokenizer_name = tokenizer_for_run(cfg, model_cfg.vocab_size, run_dir, saved)
    val = corpus.validation_blocks(cfg["data"], cfg["val_every"], tokenizer, cfg["block_size"],
                                       cfg["max_eval_samples"])
    test = held_out_test(cfg, tokenizer)  # None without a test split
    if cfg["report_to"] == "tensorboard" and not is_tensorboard_available():
        raise ConfigError(f"{args.config}: report_to tensorboard, but tensorboard is not installed")
    if repo_id:
        repo_id = check_hub(repo_id)
    warn_about_schedule(cfg)  # the input is good: now what may not be what was meant

    accelerator = make_accelerator(cfg, out, accum, cpu)
    interrupt.out, interrupt.processes, interrupt.main = out, world, accelerator.is_main_process
    prepare_output(accelerator, out, cfg, tokenizer, tokenizer_name, metrics_text, changes, args.overwrite_output_dir,
                   ["train.py", *argv])
    accelerator.init_trackers("train", config={k: str(v) for k, v in cfg.items()})

    set_seed(cfg["seed"])
    model = AutoModelForCausalLM.from_config(model_cfg)
    counts = parameter_counts(model)  # before FSDP shards them; tied weights once
    where = f"{accelerator.distributed_type.value} x {world} processes" if world > 1 else "1 process"
    log.info(f"train.py: {Path(cfg['model_name_or_path']).name}, {counts.total:,} parameters "
             f"({counts.non_embedding:,} non-embedding); {cfg['max_steps']} steps x {cfg['total_train_batch_size']} "
             f"sequences x {cfg['block_size']} tokens; {accelerator.device}, {where}, gradient accumulation {accum}, "
             f"mixed precision {cfg['mixed_precision']}; output {out}")

    optimizer = build_optimizer(model, cfg, fused=accelerator.device.type == "cuda")
    scheduler = get_scheduler("cosine_with_min_lr", optimizer, num_warmup_steps=cfg["warmup_steps"],
                              num_training_steps=cfg["max_steps"],
                              scheduler_specific_kwargs={"min_lr_rate": cfg["min_lr_ratio"]})
    # The data position is ours (corpus.training_blocks), not the DataLoader's: each block carries the
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
    _ConsoleHandler.bar = bar if show_bar else None
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
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tok_s:,.0f}", lr=f"{lr:.2e}")
            if not show_bar:
                log.info(f"step {step}/{last}: loss {loss:.4f}, learning rate {lr:.2e}, {tok_s:,.0f} tokens/s")
        if step % cfg["eval_steps"] == 0 or step == last:
            val_loss = evaluate(model, val_loader, accelerator)
            metrics |= {"val_loss": val_loss, "val_ppl": math.exp(val_loss), "tokens": step * tokens_per_step}
            log.info(f"step {step}/{last}: validation loss {val_loss:.4f}, perplexity {math.exp(val_loss):.2f}")
        if step == last and test_loader is not None:
            test_loss = evaluate(model, test_loader, accelerator)
            metrics |= test.metrics(test_loss)
            log.info(f"step {step}/{last}: test loss {test_loss:.4f}, perplexity {math.exp(test_loss):.2f} "
                     f"({test.tokens:,} tokens of {test.documents} test documents)")
        if metrics:
            accelerator.log(metrics, step=step)
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
    _ConsoleHandler.bar = None

    if math.isnan(val_loss):  # resumed at max_steps: nothing ran, but the card needs the loss
        val_loss = evaluate(model, val_loader, accelerator)
    if test_loader is not None and math.isnan(test_loss):  # the same, and the test score is the run's record
        test_loss = evaluate(model, test_loader, accelerator)
        accelerator.log(test.metrics(test_loss), step=step)
    command = "train.py " + shlex.join(argv)
    train_docs = corpus.split_sizes(n_docs, cfg["val_every"], cfg["test_every"])["train"] - dropped if n_docs else 0
    location = repo_id or str((out / "final").resolve())  # where the card's code loads the model from
    final = save_final(accelerator, model, tokenizer, out, model_card(
        cfg, model_cfg, counts, step, pos, train_docs, val_loss, command, tokenizer_name, repo_id or out.resolve().name,
        location, test=test.metrics(test_loss) if test is not None else None,
        epoch_blocks=getattr(train_set, "blocks_per_epoch", 0), changes=changes))
    accelerator.end_training()  # closes the trackers and the process group
    elapsed = timedelta(seconds=round(time.perf_counter() - started))
    scored = f"; test loss {test_loss:.4f}, perplexity {math.exp(test_loss):.2f}" if test is not None else ""
    log.log(SUMMARY, f"train.py: done in {elapsed}: {step} steps, {step * tokens_per_step:,} tokens; validation "
                     f"loss {val_loss:.4f}, perplexity {math.exp(val_loss):.2f}{scored}; model in {final}")
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
