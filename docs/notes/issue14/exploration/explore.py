# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from /tmp/rc/explore.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
"""Explore: how fast does a model learn MQAR under a schedule of pair counts (sequences truncated to 4n)."""
import sys, time, json, math, argparse, torch
import torch.nn.functional as F
from eval.recall import *
from eval.content_probes import RecallTask  # the format with teacher-forced answers, as when these runs were made
from eval.recall import _stream
p = argparse.ArgumentParser()
p.add_argument("--name", default="gpt2"); p.add_argument("--steps", type=int, default=600)
p.add_argument("--lr", type=float, default=3e-3); p.add_argument("--sched", default="4")  # "4" fixed or "ramp:A-B:frac"
p.add_argument("--batch", type=int, default=64); p.add_argument("--vocab", type=int, default=128)
p.add_argument("--seed", type=int, default=0); p.add_argument("--every", type=int, default=100)
p.add_argument("--warmup", type=int, default=50); p.add_argument("--heads", type=int, default=4)
p.add_argument("--wd", type=float, default=0.1); p.add_argument("--pad", action="store_true")
p.add_argument("--evalpairs", default="2,4,8,16"); p.add_argument("--dense", type=int, default=0); p.add_argument("--const", action="store_true")
a = p.parse_args()
torch.set_num_threads(1)
task = RecallTask(vocab_size=a.vocab)
from transformers import AutoModelForCausalLM
import modeling_spen
torch.manual_seed(a.seed)
model = AutoModelForCausalLM.from_config(task_config(default_map_configs(heads=a.heads)[a.name], task)); model.train()
g = torch.Generator().manual_seed(_stream(a.seed, 1))
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=a.wd)
def factor(s):
    if s < a.warmup: return (s + 1) / a.warmup
    if a.const: return 1.0
    return 0.5 * (1 + math.cos(math.pi * (s - a.warmup) / (a.steps - a.warmup)))
sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
def pairs_at(s):
    if a.sched.startswith("ramp"):
        _, rng, frac = a.sched.split(":"); lo, hi = map(int, rng.split("-"))
        top = lo + (hi - lo) * min(1.0, (s + 1) / (float(frac) * a.steps))
        return int(torch.randint(1, int(round(top)) + 1, (), generator=g))
    if a.sched.startswith("top"):  # ramp the max, sample n in [max/2, max]
        _, rng, frac = a.sched.split(":"); lo, hi = map(int, rng.split("-"))
        top = int(round(lo + (hi - lo) * min(1.0, (s + 1) / (float(frac) * a.steps))))
        return int(torch.randint(max(1, top // 2), top + 1, (), generator=g))
    return int(a.sched)
evalp = [int(x) for x in a.evalpairs.split(",")]
def evaluate():
    model.eval(); out = {}
    ge = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for n in evalp:
            ids, t = task.sample(256, n, ge)
            pr = model(input_ids=ids, use_cache=False).logits.argmax(-1); k = t != -100
            out[n] = round(float((pr[k] == t[k]).float().mean()), 3)
    model.train(); return out
t0 = time.perf_counter(); tt = 0
for step in range(a.steps):
    n = pairs_at(step)
    if a.dense:
        L = a.dense
        half = task.vocab_size // 2
        keys = torch.rand(a.batch, task.num_keys, generator=g).argsort(-1)[:, :n] + 1
        values = torch.randint(half, task.vocab_size, (a.batch, n), generator=g)
        nq = (L - 2 * n) // 2
        rounds = -(-nq // n)
        order = torch.cat([torch.rand(a.batch, n, generator=g).argsort(-1) for _ in range(rounds)], 1)[:, :nq]
        qs, ans = keys.gather(1, order), values.gather(1, order)
        ids = torch.cat([torch.stack([keys, values], -1).flatten(1), torch.stack([qs, ans], -1).flatten(1)], 1)
        targets = torch.full_like(ids, -100); targets[:, 2 * n::2] = ans
    else:
        ids, targets = task.sample(a.batch, n, g)
        if not a.pad: ids, targets = ids[:, :4 * n], targets[:, :4 * n]
    loss = F.cross_entropy(model(input_ids=ids, use_cache=False).logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step()
    if (step + 1) % a.every == 0 or step + 1 == a.steps:
        tt += time.perf_counter() - t0
        print(json.dumps({k: v for k, v in vars(a).items() if k not in ("every",)} | {"step": step + 1, "train_s": round(tt, 1), "loss": round(loss.item(), 3), "acc": evaluate()}), flush=True)
        t0 = time.perf_counter()
