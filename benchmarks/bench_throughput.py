"""Training throughput at the report's headline shape, side by side in one process.

What bounds the report is how many tokens it trains in its budget. This measures, in one run so that the
machine's load hits every row alike:

* **roofline**: a 512-cube float32 GEMM, the machine's best arithmetic rate on these threads;
* **bare step**: one training step of each headline model (``hub_configs/spen-w32``, ``gpt2-w32``; batch 16 x
  128, random tokens): forward, the training objective, backward, clipping, AdamW: what no loop can beat;
* **ensemble step**: the same step for K seeds at once (``ensemble.py``), with each engine;
* **validation**: one validation of the YAML's blocks (no gradients), in training micro-batches (as train.py
  runs it) and in batches four times larger (its ``s_per_step`` is seconds per validation);
* **data**: drawing one step's batch from train.py's data pipeline (embedded corpus, packed blocks);
* **train.py**: ``train.main`` end to end on the model's YAML (its logging and evaluation cadence), single seed
  and ``--seeds`` (K seeds). Runs of two lengths: the difference is the loop's cost per step (data, step,
  logging, evaluation at the configured cadence), the short run's remainder is the start-up;
* **report**: the per-worker rate of the committed report's headline stage (``docs/report/report.json``): an
  earlier run, for reference, not measured here.

Effective FLOP/s counts the matrix products of one forward and backward (``torch.utils.flop_counter``) and
divides by the measured time; its share of the GEMM rate says how far each row is from the arithmetic bound.
A profile of each bare step (torch.profiler, operators by self CPU time) says where the rest goes.

Time is this process's CPU time (``time.process_time``), not wall time: on a machine shared with other jobs the
wall clock counts the time the scheduler gives to them, the CPU time only the work done here (one torch thread).
Steps are timed as medians (the bare step's over three sets of repeats spread over the run), comparable with the
train.py rows, which are means over tens of seconds.
"""

from __future__ import annotations

import functools
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
import train
import train_config
from ema_boundary import corpus, packing
from training.ensemble import make_ensemble

from .common import Timing, table

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = {"spen": "spen-w32", "gpt2": "gpt2-w32"}


def cpu_timed(fn, repeats: int, warmup: int = 2) -> Timing:
    """CPU seconds of this process for each of ``repeats`` calls of ``fn``, after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    gc.collect()
    samples = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        samples.append(time.process_time() - t0)
    return Timing(samples)


def gemm_roofline(n: int = 512, repeats: int = 5) -> dict[str, Any]:
    """GFLOP/s of an ``n``-cube float32 matrix product on the current torch threads."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    t = cpu_timed(lambda: torch.mm(a, b, out=out), repeats)
    return {"n": n, "flop_per_s": 2 * n**3 / t.min, **t.as_dict()}


def _settings(arch: str) -> dict[str, Any]:
    return train_config.read_yaml(ROOT / "hub_configs" / HEADLINE[arch] / "train.yaml")


def _models(arch: str, seeds: list[int]) -> list[torch.nn.Module]:
    cfg = AutoConfig.from_pretrained(ROOT / "hub_configs" / HEADLINE[arch])
    models = []
    for s in seeds:
        torch.manual_seed(s)
        models.append(AutoModelForCausalLM.from_config(cfg))
    return models


def _blocks(cfg: dict, vocab: int = 1024) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (cfg["total_train_batch_size"], cfg["block_size"] + 1), generator=g)


def step_flops(model: torch.nn.Module, blocks: torch.Tensor) -> int:
    """Matrix-product FLOPs of one forward and backward of ``model`` on ``blocks``."""
    with FlopCounterMode(display=False) as counter:
        out = model(input_ids=blocks[:, :-1])
        F.cross_entropy(out.logits.flatten(0, 1), blocks[:, 1:].flatten()).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def ensemble_step(arch: str, seeds: list[int], engine: str, repeats: int) -> dict[str, Any]:
    """One training step of ``len(seeds)`` models (ensemble.py's engine), timed; one seed is the bare step."""
    cfg = _settings(arch)
    ens = make_ensemble(_models(arch, seeds), cfg, engine)
    blocks = _blocks(cfg)

    def step() -> None:
        ens.forward_backward(blocks)
        ens.clip_(cfg["max_grad_norm"])
        ens.step()

    t = cpu_timed(step, repeats)  # the warm-up creates the AdamW state
    return {"tokens_per_step": len(seeds) * blocks[:, 1:].numel(), **t.as_dict(), "samples": t.samples}


def validation(arch: str, batch_sizes: list[int], repeats: int) -> dict[int, float]:
    """CPU seconds of one validation (the YAML's max_eval_samples blocks, no gradients) at each forward batch size."""
    cfg = _settings(arch)
    model = _models(arch, [0])[0].eval()
    blocks = torch.randint(0, 1024, (cfg["max_eval_samples"], cfg["block_size"] + 1),
                           generator=torch.Generator().manual_seed(0))

    @torch.no_grad()
    def once(size: int) -> None:
        for b in blocks.split(size):
            train.lm_loss(model, b, "none")

    return {size: cpu_timed(lambda size=size: once(size), repeats, warmup=1).median for size in batch_sizes}


def data_pipeline(arch: str, steps: int, tokenizer: str) -> dict[str, Any]:
    """Seconds per step spent drawing train.py's batches (embedded corpus, packed blocks, the DataLoader)."""
    cfg = _settings(arch)
    tok = AutoTokenizer.from_pretrained(tokenizer)
    blocks = packing.PackedBlocks(cfg["data"], "train", cfg["val_every"], tok, cfg["block_size"])
    loader = iter(torch.utils.data.DataLoader(blocks, batch_size=cfg["per_device_train_batch_size"]))
    next(loader)  # the first batch opens the corpus
    t0 = time.process_time()
    for _ in range(steps):
        next(loader)
    return {"s_per_step": (time.process_time() - t0) / steps, "steps": steps}


def _train_py(arch: str, steps: int, tokenizer: str, seeds: list[int] | None, work: Path) -> float:
    """CPU seconds of ``train.main`` (in this process) for ``steps`` steps of the model's YAML."""
    out = work / f"{arch}_{steps}_{len(seeds or [0])}"
    argv = ["--config", str(ROOT / "hub_configs" / HEADLINE[arch] / "train.yaml"), "--max_steps", str(steps),
            "--tokenizer_name", tokenizer, "--output_dir", str(out), "--log_level", "warning",
            *(["--seeds", ",".join(map(str, seeds))] if seeds else [])]
    t0 = time.process_time()
    train.main(argv)
    return time.process_time() - t0


def train_py(arch: str, short: int, long: int, tokenizer: str, work: Path, seeds: list[int] | None = None) -> dict:
    """train.py's loop cost per step and start-up, from two run lengths (``long - short`` steps apart)."""
    t_short = _train_py(arch, short, tokenizer, seeds, work)
    t_long = _train_py(arch, long, tokenizer, seeds, work)
    per_step = (t_long - t_short) / (long - short)
    return {"s_per_step": per_step, "startup_s": max(0.0, t_short - short * per_step),
            "short_s": t_short, "long_s": t_long, "steps": [short, long]}


def profile_step(arch: str, steps: int = 3, top: int = 8) -> list[dict[str, Any]]:
    """The operators of the bare step by self CPU time: the share of each in ``steps`` steps."""
    cfg = _settings(arch)
    ens = make_ensemble(_models(arch, [0]), cfg, "sequential")
    blocks = _blocks(cfg)
    for _ in range(2):
        ens.forward_backward(blocks)
        ens.step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            ens.forward_backward(blocks)
            ens.clip_(cfg["max_grad_norm"])
            ens.step()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    events.sort(key=lambda e: -e.self_cpu_time_total)
    rows = [{"arch": arch, "op": e.key, "calls_per_step": e.count / steps,
             "ms_per_step": e.self_cpu_time_total / 1e3 / steps, "share": e.self_cpu_time_total / total}
            for e in events[:top]]
    rest = total - sum(e.self_cpu_time_total for e in events[:top])
    rows.append({"arch": arch, "op": f"({len(events) - top} other operators)", "ms_per_step": rest / 1e3 / steps,
                 "share": rest / total, "calls_per_step": sum(e.count for e in events[top:]) / steps})
    return rows


def report_per_worker(path: Path = ROOT / "docs" / "report" / "report.json") -> dict[str, Any] | None:
    """Tokens per second per worker in the committed report's headline stage (grid and seeds of both models)."""
    if not path.is_file():
        return None
    r = json.loads(path.read_text())
    content, env = r.get("content", {}), r.get("environment", {})
    seconds = env.get("stage_seconds", {}).get("language_model")
    by_arch, grids = content.get("regime", {}).get("by_architecture"), content.get("learning_rate")
    if not (seconds and by_arch and grids):
        return None
    # Each architecture: its learning-rate grid at the first seed, then the other seeds at the chosen rate.
    tokens = sum(a["train_tokens"] * (len(grids[w]["grid"]) + a["seeds"] - 1) for w, a in by_arch.items())
    return {"tokens_per_s": tokens / seconds / env["workers"], "tokens": tokens, "seconds": seconds,
            "workers": env["workers"], "source": str(path.relative_to(ROOT))}


def _row(arch: str, tokens: int, flops: int, roofline: float, what: str, s_per_step: float, n_seeds: int = 1,
         **extra) -> dict[str, Any]:
    """A table row: ``n_seeds`` models' steps of ``tokens`` tokens and ``flops`` FLOPs each in ``s_per_step``."""
    return {"arch": arch, "what": what, "seeds": n_seeds, "s_per_step": s_per_step,
            "tokens_per_s": n_seeds * tokens / s_per_step, "gflop_per_s": n_seeds * flops / s_per_step / 1e9,
            "of_roofline": n_seeds * flops / s_per_step / roofline, **extra}


def run(seeds: int, repeats: int, short: int, long: int, data_steps: int, engines: list[str],
        end_to_end: bool = True) -> dict[str, Any]:
    """Every row of the throughput table; ``seeds`` models in the ensemble rows."""
    roof = gemm_roofline()
    rows: list[dict[str, Any]] = []
    profiles: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench_throughput_") as tmp:
        work = Path(tmp)
        tokenizer = work / "tokenizer"  # the report passes one tokenizer to every run: so do these
        corpus.train_bpe(iter(corpus.embedded_documents()), 1024).save_pretrained(tokenizer)
        for arch in HEADLINE:
            cfg = _settings(arch)
            tokens = cfg["total_train_batch_size"] * cfg["block_size"]
            flops = step_flops(_models(arch, [0])[0], _blocks(cfg))

            row = functools.partial(_row, arch, tokens, flops, roof["flop_per_s"])
            # The bare step is measured three times, between the other rows: its median over all three is the
            # reference, so that load that comes and goes during the minutes of train.py runs hits both sides.
            bare = ensemble_step(arch, [0], "sequential", repeats)["samples"]
            arch_rows = []
            for engine in engines:
                ens = ensemble_step(arch, list(range(seeds)), engine, repeats)
                arch_rows.append(row(f"ensemble step ({engine})", ens["median_s"], seeds))
            # Validation as train.py runs it (training micro-batches), and in larger batches.
            sizes = [cfg["per_device_train_batch_size"], 4 * cfg["per_device_train_batch_size"]]
            for size, seconds in validation(arch, sizes, max(1, repeats // 2)).items():
                arch_rows.append({"arch": arch, "what": f"validation, {size} blocks per forward",
                                  "s_per_step": seconds, "tokens_per_s": cfg["max_eval_samples"] * cfg["block_size"]
                                  / seconds})
            data = data_pipeline(arch, data_steps, str(tokenizer))
            arch_rows.append({"arch": arch, "what": "data pipeline", "s_per_step": data["s_per_step"],
                              "tokens_per_s": tokens / data["s_per_step"]})
            if end_to_end:
                single = train_py(arch, short, long, str(tokenizer), work)
                arch_rows.append(row("train.py", single["s_per_step"], startup_s=single["startup_s"]))
                bare += ensemble_step(arch, [0], "sequential", repeats)["samples"]
                ens = train_py(arch, short, long, str(tokenizer), work, list(range(seeds)))
                arch_rows.append(row("train.py --seeds", ens["s_per_step"], seeds, startup_s=ens["startup_s"]))
                bare += ensemble_step(arch, [0], "sequential", repeats)["samples"]
            rows += [row("bare step", statistics.median(bare)), *arch_rows]
            profiles += profile_step(arch)
    base = {r["arch"]: r["tokens_per_s"] for r in rows if r["what"] == "bare step"}
    single = {r["arch"]: r["tokens_per_s"] for r in rows if r["what"] == "train.py"}
    for r in rows:
        r["vs_bare_step"] = r["tokens_per_s"] / base[r["arch"]]
        if r["arch"] in single:
            r["vs_train_py"] = r["tokens_per_s"] / single[r["arch"]]
    report = report_per_worker()
    if report:
        rows.append({"arch": "both", "what": f"report, per worker ({report['source']}, an earlier run)",
                     "tokens_per_s": report["tokens_per_s"]})
    return {"roofline": roof, "rows": rows, "profile": profiles, "report": report, "seeds": seeds,
            "shape": "batch 16 x 128 tokens", "threads": torch.get_num_threads()}


def render(result: dict) -> str:
    roof = result["roofline"]
    title = (f"Throughput at the headline shape ({result['shape']}, {result['threads']} thread(s)); GEMM roofline "
             f"{roof['flop_per_s'] / 1e9:.1f} GFLOP/s ({roof['n']}-cube float32)")
    cols = ["arch", "what", "seeds", "s_per_step", "tokens_per_s", "gflop_per_s", "of_roofline", "vs_bare_step",
            "vs_train_py", "startup_s"]
    profile = table(result["profile"], ["arch", "op", "calls_per_step", "ms_per_step", "share"],
                    "Where the bare step's time goes (torch.profiler, self CPU time)")
    return table(result["rows"], cols, title) + "\n" + profile
