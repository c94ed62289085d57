# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from /tmp/rc/llama.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
import sys, time, torch
import torch.nn.functional as F
from transformers import LlamaConfig, AutoModelForCausalLM
from eval.content_probes import RecallTask  # the format with teacher-forced answers, as when these runs were made
torch.set_num_threads(1)
lr, n, steps, B = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
task = RecallTask(vocab_size=128)
cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, bos_token_id=0, eos_token_id=0, tie_word_embeddings=True)
torch.manual_seed(0); m = AutoModelForCausalLM.from_config(cfg)
opt = torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0, betas=(0.9, 0.99))
g = torch.Generator().manual_seed(0); t0 = time.time()
for s in range(steps):
    ids, t = task.sample(B, n, g); ids, t = ids[:, :4*n], t[:, :4*n]
    logits = m(input_ids=ids, use_cache=False).logits
    loss = F.cross_entropy(logits.flatten(0,1), t.flatten(), ignore_index=-100)
    opt.zero_grad(); loss.backward(); opt.step()
    if (s+1) % 100 == 0:
        k = t != -100; acc = (logits.argmax(-1)[k] == t[k]).float().mean().item()
        first = (logits.argmax(-1)[:, 2*n] == t[:, 2*n]).float().mean().item()
        print("llama", sys.argv[1:], s+1, round(time.time()-t0), round(loss.item(),3), round(acc,3), "first", round(first,3), flush=True)
