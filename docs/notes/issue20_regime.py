"""The fair pair and the regime search of issue 20 (items 1 and 4): configs, parameter counts, runs, the bigram.

The fair pair at width ``w`` (``fair_pair``): SPEN and the GPT-2 architecture with the same width, depth,
vocabulary and block size; ``initializer_range = 1 / sqrt(w)`` for both (the recall recipe's width-aware init,
eval/recall.py); position tables exactly the block size (GPT-2's ``n_positions``; SPEN has none, its
``max_position_embeddings`` is only read by tools); GPT-2 heads of size 16; and GPT-2's MLP width chosen so
that the two have the same NON-embedding parameters (SPEN's block has 16 w^2 + 11 w parameters, GPT-2's
4 w^2 + 2 w n_inner + n_inner + 9 w: n_inner = (12 w^2 + 2 w) / (2 w + 1), rounded). The embedding is tied and
the same for both, so the totals differ only by GPT-2's position table.

    PYTHONPATH=. python docs/notes/issue20_regime.py configs --width 48 --out hub_configs
    PYTHONPATH=. python docs/notes/issue20_regime.py count hub_configs/spen-f48 hub_configs/gpt2-f48
    PYTHONPATH=. python docs/notes/issue20_regime.py ngram --tokenizer outputs/gap-runs/tokenizer
    PYTHONPATH=. OMP_NUM_THREADS=1 nice -n 5 python docs/notes/issue20_regime.py train NAME \\
        --config hub_configs/spen-f48/train.yaml --max_steps 1000 --lr 1e-2 --tokenizer outputs/gap-runs/tokenizer
    PYTHONPATH=. python docs/notes/issue20_regime.py table

``train`` runs ``train.py`` in a child process into ``outputs/gap-runs/NAME`` and appends one JSON line to
``outputs/gap-runs/runs.jsonl``: the command, wall seconds, parameter counts, tokens, tokens per parameter, the
final validation loss and perplexity. ``table`` prints them as the markdown table of issue20_regime.md.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
from ema_boundary import corpus, packing
from eval.gap import class_masks, group_masks, make_tokens, read_documents
from eval.ngram import ORDERS, KneserNey, ngram_perplexities

REPO = Path(__file__).resolve().parents[2]
RUNS = Path("outputs/gap-runs")
VOCAB = 1024
BLOCK = 128
HEAD_SIZE = 16

# The schedule both architectures share (the -w32 configs' data, batch and optimiser; steps and rate per run).
TRAIN = {
    "data": "embedded", "tokenizer": None, "block_size": BLOCK, "batch_size": 16, "micro_batch_size": 16,
    "max_steps": 1000, "lr": 3.0e-3, "min_lr_ratio": 0.1, "warmup_steps": 50, "weight_decay": 0.1,
    "grad_clip": 1.0, "mixed_precision": "no", "log_every": 50, "eval_every": 250, "eval_blocks": 200,
    "save_every": 100_000, "keep_checkpoints": 1, "val_every": 10, "seed": 0,
}


def count_parameters(model: torch.nn.Module) -> dict[str, int]:
    """Total and non-embedding parameters of ``model``: each tensor once (a tied output layer is the input
    embedding), every ``nn.Embedding`` (tokens, learned positions) counted as embedding."""
    seen: set[int] = set()
    total = embedding = 0
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    for p in model.parameters():  # parameters() already yields a shared tensor once; the set makes it explicit
        if id(p) in seen:
            continue
        seen.add(id(p))
        total += p.numel()
        embedding += p.numel() if id(p) in embeddings else 0
    return {"total": total, "non_embedding": total - embedding}


def count_config(folder: str | Path) -> dict[str, int]:
    """:func:`count_parameters` of the model a config folder defines, built on the meta device."""
    with torch.device("meta"):
        return count_parameters(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)))


def fair_pair(width: int, layers: int = 2, block_size: int = BLOCK) -> dict[str, dict]:
    """The two config.json dicts of the fair pair at ``width`` (module docstring)."""
    if width % HEAD_SIZE:
        raise ValueError(f"width {width} is not a multiple of the head size {HEAD_SIZE}")
    heads, init = width // HEAD_SIZE, 1.0 / math.sqrt(width)
    spen = {
        "model_type": "spen", "architectures": ["SPENForCausalLM"], "vocab_size": VOCAB, "hidden_size": width,
        "num_hidden_layers": layers, "intermediate_size": 4 * width, "ffn_topk_fraction": 0.06, "trace": "ema",
        "trace_rates": [0.5, 0.1, 0.02], "predictor": "linear", "predictor_scope": "sequence",
        "num_attention_heads": heads, "layer_norm_epsilon": 1e-5, "initializer_range": init,
        "max_position_embeddings": block_size, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": True,
        "selective_rank": max(1, width // 16),
    }
    n_inner = round((12 * width**2 + 2 * width) / (2 * width + 1))
    gpt2 = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": VOCAB, "n_positions": block_size,
        "n_embd": width, "n_layer": layers, "n_head": heads, "n_inner": n_inner, "activation_function": "gelu_new",
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5,
        "initializer_range": init, "bos_token_id": 0, "eos_token_id": 0, "tie_word_embeddings": True,
    }
    return {"spen": spen, "gpt2": gpt2}


def write_pair(width: int, out: Path, layers: int = 2, steps: int = 1000, lr: float = 3e-3) -> list[Path]:
    """Write ``out/{spen,gpt2}-f{width}/{config.json,train.yaml}``; returns the two folders."""
    folders = []
    for arch, config in fair_pair(width, layers).items():
        folder = out / (f"{arch}-f{width}" + ("" if layers == 2 else f"l{layers}"))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        counts = count_config(folder)
        name = "SPEN" if arch == "spen" else "The GPT-2 architecture"
        header = (
            f"# {name} in the fair pair at width {width} (issue 20; docs/notes/issue20_regime.md):\n"
            f"# init 1/sqrt(width), positions = block size, GPT-2 heads of {HEAD_SIZE}, the same\n"
            f"# schedule as the other architecture's config, matched on non-embedding parameters\n"
            f"# ({counts['non_embedding']:,} non-embedding, {counts['total']:,} in all).\n"
        )
        where = folder.resolve()
        where = where.relative_to(REPO) if where.is_relative_to(REPO) else where
        cfg = {"model_config": str(where), **TRAIN, "output_dir": f"outputs/{folder.name}",
               "max_steps": steps, "lr": lr}
        (folder / "train.yaml").write_text(header + yaml.safe_dump(cfg, sort_keys=False))
        folders.append(folder)
    return folders


def ngram(tokenizer: str) -> dict:
    """Kneser-Ney lines on train.py's validation blocks (the first 200 of the embedded corpus, val_every 10),
    counted on the whole training stream, as the report's ngram stage."""
    tok = AutoTokenizer.from_pretrained(tokenizer)
    stream: list[int] = []
    docs = (d["text"] for d in corpus.documents(["embedded"], "train", TRAIN["val_every"]))
    for texts in packing.batched(docs, 64):
        for ids in tok(texts, add_special_tokens=False, verbose=False)["input_ids"]:
            stream.extend([*ids, tok.eos_token_id])
    val = packing.validation_blocks(["embedded"], TRAIN["val_every"], tok, BLOCK, TRAIN["eval_blocks"])
    return ngram_perplexities(stream, val, len(tok))


def ngram_classes(tokenizer: str) -> dict:
    """Kneser-Ney unigram/bigram/trigram mean loss per eval.gap class and group, on the tokens eval.gap scores
    (the embedded corpus's validation documents, blocks of 128; counted on the training stream): the lines
    beside the two models' per-class losses."""
    tok = AutoTokenizer.from_pretrained(tokenizer)
    stream: list[int] = []
    docs = (d["text"] for d in corpus.documents(["embedded"], "train", TRAIN["val_every"]))
    for texts in packing.batched(docs, 64):
        for ids in tok(texts, add_special_tokens=False, verbose=False)["input_ids"]:
            stream.extend([*ids, tok.eos_token_id])
    tokens = make_tokens(read_documents("embedded", "validation", TRAIN["val_every"]), tok, BLOCK)
    models = {n: KneserNey(stream, n, len(tok)) for n in ORDERS.values()}
    result: dict = {}
    for name, n in ORDERS.items():
        losses = []
        for block in tokens.blocks:
            b = block.tolist()
            for t in range(1, len(b)):
                order = min(n, t + 1)
                losses.append(-math.log(models[order].prob(b[t], b[t - order + 1 : t])))
        loss = torch.tensor(losses, dtype=torch.float64).numpy()
        masks = {"all": loss == loss, **group_masks(tokens.cls), **class_masks(tokens.cls, BLOCK)}
        result[name] = {k: (float(loss[m].mean()) if m.any() else None) for k, m in masks.items()}
    return result


def train(name: str, config: str, max_steps: int, lr: float, tokenizer: str, seed: int) -> dict:
    """One train.py run in a child process; its record appended to RUNS/runs.jsonl."""
    out = RUNS / name
    cmd = [sys.executable, str(REPO / "train.py"), "--config", config, "--output_dir", str(out),
           "--max_steps", str(max_steps), "--lr", str(lr), "--tokenizer", tokenizer, "--seed", str(seed)]
    start, cpu0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
    seconds, cpu1 = time.time() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the run: on a loaded machine the wall time says more about the neighbours than the run.
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    vals = [m for m in metrics if "val_loss" in m]
    cfg = yaml.safe_load(Path(config).read_text())
    counts = count_config(REPO / cfg["model_config"])
    tokens = max_steps * cfg["batch_size"] * cfg["block_size"]
    record = {
        "name": name, "command": " ".join(["python train.py", *cmd[2:]]), "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1), "parameters": counts, "tokens": tokens,
        "tokens_per_parameter": {k: round(tokens / v, 1) for k, v in counts.items()},
        "val_loss": vals[-1]["val_loss"], "val_ppl": vals[-1]["val_ppl"],
        "curve": [(m.get("step"), round(m["val_loss"], 4)) for m in vals],
        "train_loss_end": next((m["loss"] for m in reversed(metrics) if "loss" in m), None),
    }
    with (RUNS / "runs.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")
    return record


def table(bigram_ppl: float) -> str:
    """The runs of RUNS/runs.jsonl as a markdown table, each against the bigram line."""
    rows = ["| run | params total / non-emb | tokens | tok/param total / non-emb | wall s | CPU s | val loss | "
            "val ppl | vs bigram ppl |", "|---|---|---|---|---|---|---|---|---|"]
    for line in (RUNS / "runs.jsonl").read_text().splitlines():
        r = json.loads(line)
        p, t = r["parameters"], r["tokens_per_parameter"]
        verdict = "below" if r["val_ppl"] < bigram_ppl else "above"
        rows.append(f"| {r['name']} | {p['total']:,} / {p['non_embedding']:,} | {r['tokens']:,} | "
                    f"{t['total']} / {t['non_embedding']} | {r['seconds']:.0f} | {r.get('cpu_seconds', '-')} | "
                    f"{r['val_loss']:.4f} | "
                    f"{r['val_ppl']:.1f} | {verdict} ({bigram_ppl:.1f}) |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("configs")
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--out", type=Path, default=REPO / "hub_configs")
    p = sub.add_parser("count")
    p.add_argument("folders", nargs="+")
    p = sub.add_parser("ngram")
    p.add_argument("--tokenizer", required=True)
    p = sub.add_parser("ngram-classes")
    p.add_argument("--tokenizer", required=True)
    p = sub.add_parser("train")
    p.add_argument("name")
    p.add_argument("--config", required=True)
    p.add_argument("--max_steps", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("table")
    p.add_argument("--bigram", type=float, required=True)
    args = parser.parse_args()
    if args.cmd == "configs":
        for folder in write_pair(args.width, args.out, args.layers, args.steps, args.lr):
            print(folder, count_config(folder))
    elif args.cmd == "count":
        for folder in args.folders:
            print(folder, count_config(folder))
    elif args.cmd == "ngram":
        print(json.dumps(ngram(args.tokenizer), indent=1))
    elif args.cmd == "ngram-classes":
        print(json.dumps(ngram_classes(args.tokenizer), indent=1))
    elif args.cmd == "train":
        print(json.dumps(train(args.name, args.config, args.max_steps, args.lr, args.tokenizer, args.seed)))
    else:
        print(table(args.bigram))


if __name__ == "__main__":
    main()
