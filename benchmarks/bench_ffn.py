"""Where a tiny SPEN training step spends its time, and the cost of the sparse FFN's top-k mask.

Two measurements:

* ``profile``: one training micro-step (forward, next-token loss, backward) of a SPEN model, CPU
  time per operator from ``torch.profiler`` (self time, so nothing is counted twice), grouped into
  the parts of the model: top-k masking (``topk``, ``scatter``, ``gather``, ``kthvalue``,
  comparisons), matrix products, the trace operator, softmax/cross-entropy, and the rest.
* ``masks``: the top-k masking alone, forward and forward+backward, for each implementation in
  :data:`MASKS` at the sizes a model uses (rows = tokens per micro-batch, width = FFN width). All
  keep exactly the ``k`` largest activations per row when there are no ties at the k-th value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

import modeling_spen  # noqa: F401  (registers the SPEN Auto classes)
from modeling_spen import SPENConfig, SPENForCausalLM

from .common import measure, table


def mask_scatter(h: torch.Tensor, k: int) -> torch.Tensor:
    """The original SparseFFN: topk indices, then gather the values and scatter them into zeros."""
    idx = h.topk(k, dim=-1).indices
    return torch.zeros_like(h).scatter(-1, idx, h.gather(-1, idx))


def mask_topk_threshold(h: torch.Tensor, k: int) -> torch.Tensor:
    """Keep ``h >= `` the k-th largest value (from topk, no gradient through the threshold)."""
    threshold = h.detach().topk(k, dim=-1).values[..., -1:]
    return h * (h >= threshold)


def mask_kthvalue_threshold(h: torch.Tensor, k: int) -> torch.Tensor:
    """The same threshold from ``kthvalue`` (the (n - k + 1)-th smallest)."""
    threshold = h.detach().kthvalue(h.shape[-1] - k + 1, dim=-1, keepdim=True).values
    return h * (h >= threshold)


def mask_where_threshold(h: torch.Tensor, k: int) -> torch.Tensor:
    """topk threshold, ``torch.where`` instead of a multiply."""
    threshold = h.detach().topk(k, dim=-1).values[..., -1:]
    return torch.where(h >= threshold, h, 0.0)


MASKS: dict[str, Callable[[torch.Tensor, int], torch.Tensor]] = {
    "scatter (before)": mask_scatter,
    "topk threshold": mask_topk_threshold,
    "kthvalue threshold": mask_kthvalue_threshold,
    "topk threshold, where": mask_where_threshold,
}

GROUPS = {
    "top-k mask": ("topk", "scatter", "gather", "kthvalue", "ge", "mul", "where", "zeros_like", "zero_", "fill_"),
    "matmul": ("addmm", "mm", "bmm", "matmul", "linear", "baddbmm"),
    "traces": ("_FixedRateEMA", "cumsum", "ema"),
    "loss": ("log_softmax", "nll_loss", "cross_entropy", "_log_softmax"),
    "norm": ("layer_norm", "native_layer_norm"),
    "gelu": ("gelu",),
}


def _group(op: str) -> str:
    name = op.split("::")[-1].lower()
    for group, keys in GROUPS.items():
        if any(name == k or name.startswith(k + "_") or name.endswith(k) or k.lower() in name for k in keys):
            return group
    return "other"


def spen_config(size: dict[str, int], **overrides: Any) -> SPENConfig:
    return SPENConfig(
        vocab_size=size["vocab"], hidden_size=size["width"], num_hidden_layers=size["depth"],
        intermediate_size=size["ffn"], num_attention_heads=size["heads"], bos_token_id=0, eos_token_id=0,
        **overrides,
    )  # fmt: skip


def profile_step(size: dict[str, int], batch: int, seq_len: int, repeats: int = 3) -> dict:
    """Self CPU time per operator group of one forward+backward of a SPEN model (summed over repeats)."""
    torch.manual_seed(0)
    model = SPENForCausalLM(spen_config(size)).train()
    ids = torch.randint(0, size["vocab"], (batch, seq_len + 1))

    def step() -> None:
        logits = model(input_ids=ids[:, :-1], use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        model.zero_grad(set_to_none=True)

    step()  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(repeats):
            step()
    per_group: dict[str, float] = defaultdict(float)
    per_op: dict[str, float] = defaultdict(float)
    for event in prof.key_averages():
        if event.key.startswith("aten::") or "Backward" in event.key or event.key.startswith("autograd::"):
            per_op[event.key] += event.self_cpu_time_total
    total = sum(per_op.values())
    for op, us in per_op.items():
        per_group[_group(op)] += us
    rows = [{"group": g, "ms_per_step": us / 1e3 / repeats, "share": us / total} for g, us in per_group.items()]
    rows.sort(key=lambda r: -r["share"])
    top_ops = sorted(per_op.items(), key=lambda kv: -kv[1])[:12]
    return {
        "size": size, "batch": batch, "seq_len": seq_len, "k": spen_config(size).ffn_topk,
        "rows": rows, "top_ops": [{"op": op, "ms_per_step": us / 1e3 / repeats, "share": us / total}
                                  for op, us in top_ops],
    }  # fmt: skip


def time_masks(shapes: list[tuple[int, int, int]], repeats: int) -> dict:
    """Each mask of :data:`MASKS` on ``(rows, width, k)`` shapes: forward and forward+backward."""
    rows = []
    for n, width, k in shapes:
        # Distinct values by construction (a random permutation, centred), so that no row has a tie at
        # its k-th value and every mask must agree exactly; randn ties at 2048 x 2048 happen.
        x = (torch.randperm(n * width).view(n, width).float() / (n * width) - 0.5) * 6
        grad = torch.randn(n, width)
        reference = mask_scatter(x, k)
        base: dict[str, float] = {}
        for name, fn in MASKS.items():
            assert torch.equal(fn(x, k), reference), name  # exact, on distinct random values

            def fwd(fn=fn, x=x, k=k) -> None:
                fn(x, k)

            xr = x.clone().requires_grad_(True)

            def fwd_bwd(fn=fn, xr=xr, k=k, grad=grad) -> None:
                fn(xr, k).backward(grad)
                xr.grad = None

            for pass_, call in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
                t = measure(call, repeats, warmup=2)
                base.setdefault(pass_, t.min)
                rows.append({"rows": n, "width": width, "k": k, "mask": name, "pass": pass_, **t.as_dict(),
                             "speedup": base[pass_] / t.min})  # fmt: skip
    return {"rows": rows}


def run(size: dict[str, int], batch: int, seq_len: int, mask_shapes: list[list[int]], repeats: int) -> dict:
    return {
        "profile": profile_step(size, batch, seq_len, repeats),
        "masks": time_masks([tuple(s) for s in mask_shapes], repeats),
    }


def render(result: dict) -> str:
    p = result["profile"]
    s = p["size"]
    title = (f"SPEN training micro-step (fwd+bwd), width {s['width']}, depth {s['depth']}, FFN {s['ffn']} "
             f"(k = {p['k']}), vocab {s['vocab']}, batch {p['batch']} x T {p['seq_len']}: self CPU time")  # fmt: skip
    out = table(p["rows"], ["group", "ms_per_step", "share"], title)
    out += "\n" + table(p["top_ops"], ["op", "ms_per_step", "share"], "Top operators")
    out += "\n" + table(result["masks"]["rows"], ["rows", "width", "k", "mask", "pass", "min_s", "median_s", "speedup"],
                        "Top-k masking alone (speedup: over the scatter mask, same pass)")  # fmt: skip
    return out
