# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from /tmp/rc/sanity.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
import sys, time, torch, math
import torch.nn.functional as F
from transformers import GPT2Config, AutoModelForCausalLM
from eval.content_probes import RecallTask  # the format with teacher-forced answers, as when these runs were made
torch.set_num_threads(1)
width, heads, lr, wd, n, steps = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]); B = int(sys.argv[7]) if len(sys.argv) > 7 else 64
V = int(sys.argv[8]) if len(sys.argv) > 8 else 128
task = RecallTask(vocab_size=V)
cfg = GPT2Config(vocab_size=V, n_positions=64, n_embd=width, n_layer=2, n_head=heads, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
torch.manual_seed(0); m = AutoModelForCausalLM.from_config(cfg)
opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=wd, betas=(0.9, 0.99))
g = torch.Generator().manual_seed(0); t0 = time.time()
for s in range(steps):
    ids, t = task.sample(B, n, g); ids, t = ids[:, :4*n], t[:, :4*n]
    logits = m(input_ids=ids, use_cache=False).logits
    loss = F.cross_entropy(logits.flatten(0,1), t.flatten(), ignore_index=-100)
    opt.zero_grad(); loss.backward(); opt.step()
    if (s+1) % 100 == 0:
        k = t != -100; acc = (logits.argmax(-1)[k] == t[k]).float().mean().item()
        # accuracy on first query only
        first = (logits.argmax(-1)[:, 2*n] == t[:, 2*n]).float().mean().item()
        print(sys.argv[1:], s+1, round(time.time()-t0), round(loss.item(),3), round(acc,3), "first", round(first,3), flush=True)
