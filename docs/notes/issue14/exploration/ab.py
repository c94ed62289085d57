# ruff: noqa
# Exploration script of issue 14 phase 1, kept as run (from a scratch folder, as rc/ab.py) so that the note's numbers can be reproduced.
# Run from the repository root with PYTHONPATH=. ; see docs/notes/issue14-phase1.md.
import torch, time
import torch.nn.functional as F
torch.set_num_threads(1)
from transformers import AutoConfig, AutoModelForCausalLM
import modeling_spen
from modeling_spen.modeling_spen import SparseFFN
from benchmarks.common import measure
from benchmarks.bench_ffn import mask_scatter, mask_topk_threshold
new_forward = SparseFFN.forward
def old_forward(self, x):
    h = F.gelu(self.up(x), approximate="tanh")
    return self.down(mask_scatter(h, self.k))
def dense_forward(self, x):
    return self.down(F.gelu(self.up(x), approximate="tanh"))
cfg = AutoConfig.from_pretrained("hub_configs/spen-tiny")
torch.manual_seed(0); m = AutoModelForCausalLM.from_config(cfg).train()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
ids = torch.randint(0, 1024, (8, 129))
def step():
    logits = m(input_ids=ids[:, :-1], use_cache=False).logits
    F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()).backward(); opt.step(); opt.zero_grad(set_to_none=True)
res = {"old": [], "new": [], "dense (no mask, for scale)": []}
for r in range(4):
    for name, fwd in (("old", old_forward), ("new", new_forward), ("dense (no mask, for scale)", dense_forward)):
        SparseFFN.forward = fwd
        res[name].append(measure(step, 10, warmup=2).min)
for k, v in res.items(): print(k, "min ms", round(min(v) * 1e3, 2), [round(x * 1e3, 1) for x in v])
