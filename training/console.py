"""train.py's console: its own messages (start, progress, validation, summary) at --log_level, the
libraries' quiet unless asked, warnings about settings that run but are probably not what was meant."""

from __future__ import annotations

import logging
import sys

import datasets
import huggingface_hub
import transformers
from tqdm.auto import tqdm

log = logging.getLogger("train")  # train.py's own messages: start, progress, validation, summary (--log_level)
SUMMARY = 25  # between INFO and WARNING: the last line, shown at --log_level warning too
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": SUMMARY, "error": logging.ERROR}


class ConsoleHandler(logging.Handler):
    """train.py's messages: info on stdout, warnings on stderr, looked up at each message (redirect_stdout works)."""

    bar: tqdm | None = None  # the progress bar on a terminal, if one is shown: messages go above it

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        text = self.format(record)
        if stream.isatty() and ConsoleHandler.bar is not None:
            ConsoleHandler.bar.write(text, file=stream)  # above the progress bar, not through it
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
    if not any(isinstance(h, ConsoleHandler) for h in log.handlers):
        handler = ConsoleHandler()
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
