# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from a scratch folder, as rc/ex2.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
import sys, time, json, math, argparse, torch
import torch.nn.functional as F
from eval.recall import *
p = argparse.ArgumentParser()
p.add_argument("--name", default="gpt2"); p.add_argument("--steps", type=int, default=2000)
p.add_argument("--lr", type=float, default=3e-3); p.add_argument("--sched", default="4")
p.add_argument("--batch", type=int, default=32); p.add_argument("--vocab", type=int, default=128)
p.add_argument("--seed", type=int, default=0); p.add_argument("--every", type=int, default=100)
p.add_argument("--warmup", type=int, default=50); p.add_argument("--wd", type=float, default=0.0)
p.add_argument("--evalpairs", default="4"); p.add_argument("--cos", action="store_true"); p.add_argument("--width", type=int, default=64); p.add_argument("--init", type=float, default=0.02); p.add_argument("--packed", action="store_true"); p.add_argument("--vpack", type=int, default=0); p.add_argument("--offsets", action="store_true")
a = p.parse_args()
torch.set_num_threads(1)
task = RecallTask(vocab_size=a.vocab)
from transformers import AutoModelForCausalLM
import modeling_spen
torch.manual_seed(a.seed)
from transformers import LlamaConfig
cfgs = default_map_configs(width=a.width)
cfgs["llama"] = LlamaConfig(vocab_size=128, hidden_size=a.width, intermediate_size=4 * a.width, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)
c = task_config(cfgs[a.name], task); c.initializer_range = a.init
model = AutoModelForCausalLM.from_config(c); model.train()
g = torch.Generator().manual_seed(1000 + a.seed)
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=a.wd)
def factor(s):
    if s < a.warmup: return (s + 1) / a.warmup
    return 0.5 * (1 + math.cos(math.pi * (s - a.warmup) / (a.steps - a.warmup))) if a.cos else 1.0
sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
state = {"top": 2, "ema": 0.0}
def pairs_at(s):
    if a.sched.startswith("adapt"):  # adapt:floor_frac
        _, start, f0, f1 = a.sched.split(":")
        start, f0, f1 = int(start), float(f0), float(f1)
        if s == 0: state["top"] = start
        floor = start + (16 - start) * min(1.0, max(0.0, (s / a.steps - f0) / (f1 - f0)))
        state["top"] = max(state["top"], int(floor))
        top = state["top"]
        if torch.rand((), generator=g) < 0.5:
            return top
        return int(torch.randint(1, top + 1, (), generator=g))
    if a.sched.startswith("ramp"):  # ramp:lo-hi:frac, n uniform in [1, top]
        _, rng, frac = a.sched.split(":"); lo, hi = map(int, rng.split("-"))
        top = lo + (hi - lo) * min(1.0, (s + 1) / (float(frac) * a.steps))
        return int(torch.randint(1, int(round(top)) + 1, (), generator=g))
    if a.sched.startswith("top"):  # top:lo-hi:frac, n uniform in [top/2, top]
        _, rng, frac = a.sched.split(":"); lo, hi = map(int, rng.split("-"))
        top = int(round(lo + (hi - lo) * min(1.0, (s + 1) / (float(frac) * a.steps))))
        return int(torch.randint(max(1, top // 2), top + 1, (), generator=g))
    return int(a.sched)
evalp = [int(x) for x in a.evalpairs.split(",")]
t0 = time.perf_counter(); tt = 0
for step in range(a.steps):
    n = pairs_at(step)
    if a.vpack:
        L = task.seq_len; top = a.vpack
        ids = torch.zeros(a.batch, L, dtype=torch.long); targets = torch.full((a.batch, L), -100)
        for b in range(a.batch):
            perm = (torch.randperm(task.num_keys, generator=g) + 1).tolist(); pos = 0
            while True:
                m = int(torch.randint(1, top + 1, (), generator=g))
                if pos + 3 * m > L:
                    m = (L - pos) // 3
                    if m == 0: break
                ks = [perm.pop() for _ in range(m)]; vs = torch.randint(64, 128, (m,), generator=g).tolist()
                order = torch.randperm(m, generator=g).tolist()
                seq = [x for kv in zip(ks, vs) for x in kv] + [ks[o] for o in order]
                ids[b, pos:pos + 3 * m] = torch.tensor(seq)
                targets[b, pos + 2 * m:pos + 3 * m] = torch.tensor([vs[o] for o in order])
                pos += 3 * m
    elif a.packed:
        L = task.seq_len; c = L // (3 * n)
        keys = torch.rand(a.batch, task.num_keys, generator=g).argsort(-1)[:, :c * n].view(a.batch, c, n) + 1
        values = torch.randint(64, 128, (a.batch, c, n), generator=g)
        order = torch.rand(a.batch, c, n, generator=g).argsort(-1)
        chunk = torch.cat([torch.stack([keys, values], -1).flatten(2), keys.gather(2, order)], 2)
        tchunk = torch.cat([torch.full((a.batch, c, 2 * n), -100), values.gather(2, order)], 2)
        ids = torch.zeros(a.batch, L, dtype=torch.long); targets = torch.full((a.batch, L), -100)
        ids[:, :c * 3 * n] = chunk.flatten(1); targets[:, :c * 3 * n] = tchunk.flatten(1)
    else:
        ids, targets = task.sample(a.batch, n, g); ids, targets = ids[:, :3 * n], targets[:, :3 * n]
    kw = {}
    if a.offsets:
        Lb = ids.shape[1]; off = torch.randint(0, task.seq_len - Lb + 1, (ids.shape[0], 1), generator=g)
        kw["position_ids"] = off + torch.arange(Lb)
    logits = model(input_ids=ids, use_cache=False, **kw).logits
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    if a.sched.startswith("adapt") and n == state["top"]:
        k = targets != -100
        acc_b = (logits.argmax(-1)[k] == targets[k]).float().mean().item()
        state["ema"] = 0.8 * state["ema"] + 0.2 * acc_b
        if state["ema"] > 0.9 and state["top"] < 16:
            state["top"] = min(16, state["top"] + 2); state["ema"] = 0.0
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step()
    if (step + 1) % a.every == 0 or step + 1 == a.steps:
        tt += time.perf_counter() - t0
        acc = {k: round(v, 3) for k, v in evaluate_recall(model, task, 256, 99).items() if k in evalp}; model.train()
        print(json.dumps({k: v for k, v in vars(a).items() if k not in ("every", "evalpairs")} | {"step": step + 1, "train_s": round(tt, 1), "loss": round(loss.item(), 3), "acc": acc, "top": state["top"]}), flush=True)
        t0 = time.perf_counter()
