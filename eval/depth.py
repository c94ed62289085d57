"""Depth dilution: how a SPEN's residual stream keeps (or loses) what entered it, layer by layer.

The residual sum ``x_{l+1} = x_l + f_l(x_l)`` adds every block's output with unit weight: the stream's
magnitude grows with depth and each earlier contribution becomes a smaller share of it. Attention
Residuals (``SPENConfig(residual="attention")``) select over depth instead. For one model and a batch
of token ids this measures, in one forward pass:

(a) ``rms``: the RMS of the stream each block reads (block ``i``'s input, ``i = 0..L-1``; block 0 reads
    the embedding) and of the final stream before the final LayerNorm (entry ``L``);
(b) ``recovered``: from that final stream, how much a linear probe recovers, on held-out sequences,
    of the token embedding (``r2`` of the vector and ``token_accuracy``, token identity at lag 0) and
    of each block's output (``blocks[i]``: the R^2 of what block ``i`` wrote, context mix plus FFN).

The probe is ridge regression on standardised features, fitted on the first 80% of the sequences and
scored on the rest: ``R^2 = 1 - SSE / SST`` over all output coordinates (1: recovered exactly, 0: no
better than the mean). It reads the stream before the final LayerNorm: that is what the blocks
accumulated, and the LayerNorm's per-token rescaling would hide an exact copy from a linear probe.

    python -m eval.depth --model_name_or_path runs/add runs/attention --output_dir runs/depth

writes ``depth.json`` (one entry per model) and ``depth.png`` (both measurements against depth). A
folder with a tokenizer is probed on the embedded help-topics text; one without on random token ids
(``inputs`` in the JSON says which).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser, add_output_dir, first_line, positive_int
from ema_boundary.figures import pyplot, save
from ema_boundary.io import atomic_dir, check_output_dir, write_json

PROG = "python -m eval.depth"
TOOL = "eval.depth"  # the name in its output folder's marker
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")

__all__ = ["depth_dilution", "ridge_r2", "token_accuracy", "probe_ids", "render_depth_figure", "main"]


def _split(n: int) -> int:
    n_train = int(round(0.8 * n))
    if not 1 <= n_train < n:
        raise ValueError(f"need at least 2 sequences to hold some out, got {n}")
    return n_train


def _standardised(features: torch.Tensor, n_train: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Train and held-out design matrices ``(rows, D + 1)``: features standardised on the train split, a bias column."""
    x = features.double()
    flat_train = x[:n_train].reshape(-1, x.shape[-1])
    mean, std = flat_train.mean(0), flat_train.std(0) + 1e-6
    x = torch.cat([(x - mean) / std, torch.ones_like(x[..., :1])], -1)
    return x[:n_train].reshape(-1, x.shape[-1]), x[n_train:].reshape(-1, x.shape[-1])


def _ridge_fit(a: torch.Tensor, target: torch.Tensor, ridge: float) -> torch.Tensor:
    penalty = ridge * torch.eye(a.shape[1], dtype=a.dtype)
    penalty[-1, -1] = 0.0  # the bias is not penalised
    return torch.linalg.solve(a.T @ a + penalty, a.T @ target)


def ridge_r2(features: torch.Tensor, targets: torch.Tensor, ridge: float = 1e-3) -> float:
    """Held-out R^2 of a ridge regression from ``features`` ``(N, T, D)`` to ``targets`` ``(N, T, K)``.

    Fitted on the first 80% of the N sequences, scored on the rest, pooled over the K outputs:
    ``1 - SSE / SST`` with SST around the held-out mean. NaN when the held-out targets are constant.
    """
    n_train = _split(features.shape[0])
    xtr, xte = _standardised(features, n_train)
    y = targets.double()
    ytr, yte = y[:n_train].reshape(-1, y.shape[-1]), y[n_train:].reshape(-1, y.shape[-1])
    weights = _ridge_fit(xtr, ytr, ridge)
    sse = (xte @ weights - yte).pow(2).sum()
    sst = (yte - yte.mean(0)).pow(2).sum()
    return float(1.0 - sse / sst) if sst > 0 else float("nan")


def token_accuracy(features: torch.Tensor, tokens: torch.Tensor, num_classes: int = 32,
                   ridge: float = 1.0) -> dict[str, float]:
    """Token identity at lag 0: a ridge classifier over the ``num_classes`` most frequent tokens, held out.

    Returns ``{"accuracy", "chance"}`` (chance: the majority class of the fitting split); positions whose
    token is not among the classes are left out, as in ``eval.content_probes.fit_lag_probes``.
    """
    n_train = _split(features.shape[0])
    classes = torch.bincount(tokens.flatten()).argsort(descending=True)[:num_classes]
    to_class = torch.full((int(tokens.max()) + 1,), -1, dtype=torch.long)
    to_class[classes] = torch.arange(len(classes))
    xtr, xte = _standardised(features, n_train)
    y = to_class[tokens]
    ytr, yte = y[:n_train].reshape(-1), y[n_train:].reshape(-1)
    keep_tr, keep_te = ytr >= 0, yte >= 0
    weights = _ridge_fit(xtr[keep_tr], F.one_hot(ytr[keep_tr], len(classes)).double(), ridge)
    pred = (xte[keep_te] @ weights).argmax(-1)
    counts = torch.bincount(ytr[keep_tr], minlength=len(classes))
    return {"accuracy": float((pred == yte[keep_te]).double().mean()), "chance": float(counts.max() / counts.sum())}


def _rms(x: torch.Tensor) -> float:
    return float(x.double().pow(2).mean().sqrt())


@torch.no_grad()
def depth_dilution(model: torch.nn.Module, ids: torch.Tensor, ridge: float = 1e-3) -> dict[str, Any]:
    """The depth-dilution measurement of a SPEN causal LM on token ids ``(N, T)`` (module docstring).

    Returns ``{"num_layers", "residual", "rms": [L + 1], "recovered": {"embedding_r2", "token_accuracy",
    "token_chance", "blocks": [L]}}``.
    """
    trunk = getattr(model, "model", None)
    blocks = getattr(trunk, "h", None)
    if blocks is None or not all(hasattr(b, "mix") and hasattr(b, "ffn") and hasattr(b, "ln_1") for b in blocks):
        raise ValueError(f"{type(model).__name__}: depth_dilution measures SPEN models (blocks with mix, ffn, ln_1)")
    if ids.dim() != 2 or ids.shape[0] < 2:
        raise ValueError(f"ids must have shape (sequences >= 2, tokens), got {tuple(ids.shape)}")
    model.eval()
    L = len(blocks)
    inputs: list[torch.Tensor | None] = [None] * L
    writes: list[list[torch.Tensor]] = [[] for _ in range(L)]
    final: list[torch.Tensor] = []
    hooks = []
    for i, block in enumerate(blocks):
        # The stream block i reads is its first LayerNorm's input; what it writes, the mix and FFN outputs.
        hooks.append(block.ln_1.register_forward_pre_hook(lambda m, args, i=i: inputs.__setitem__(i, args[0])))
        hooks.append(block.mix.register_forward_hook(lambda m, args, out, i=i: writes[i].append(out)))
        hooks.append(block.ffn.register_forward_hook(lambda m, args, out, i=i: writes[i].append(out)))
    hooks.append(trunk.ln_f.register_forward_pre_hook(lambda m, args: final.append(args[0])))
    try:
        model(input_ids=ids, use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    stream = final[0].float()
    embedding = trunk.wte(ids).float()
    token = token_accuracy(stream, ids)
    return {
        "num_layers": L,
        "residual": getattr(model.config, "residual", "add"),
        "rms": [_rms(x) for x in inputs] + [_rms(stream)],
        "recovered": {
            "embedding_r2": ridge_r2(stream, embedding, ridge),
            "token_accuracy": token["accuracy"],
            "token_chance": token["chance"],
            "blocks": [ridge_r2(stream, (w[0] + w[1]).float(), ridge) for w in writes],
        },
    }


def probe_ids(folder: str, vocab_size: int, num_sequences: int, seq_len: int, seed: int) -> tuple[torch.Tensor, str]:
    """``(ids (num_sequences, seq_len), what they are)``: the embedded help topics through the folder's
    tokenizer when it has one (consecutive blocks), else uniform random token ids."""
    if any((Path(folder) / f).is_file() for f in TOKENIZER_FILES):
        from transformers import AutoTokenizer

        from ema_boundary.corpus import EMBEDDED_PYDOC, embedded_documents

        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokens = tokenizer("\n\n".join(embedded_documents(EMBEDDED_PYDOC)), return_tensors="pt").input_ids[0]
        need = num_sequences * seq_len
        if tokens.numel() < need:
            raise UsageError(f"--num_sequences x --seq_len = {need} tokens, the probe text has {tokens.numel()}")
        if int(tokens.max()) >= vocab_size:
            raise UsageError(f"--model_name_or_path {folder}: the tokenizer's ids exceed vocab_size {vocab_size}")
        return tokens[:need].view(num_sequences, seq_len), "text (embedded help topics)"
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (num_sequences, seq_len), generator=g), "random token ids"


def render_depth_figure(results: dict[str, dict], path: Path | str) -> None:
    """Two panels against depth: (a) the stream's RMS, (b) the R^2 of each block's output and of the
    embedding (at depth 0) recovered from the final stream, one line per model."""
    plt = pyplot()
    fig, (ax_rms, ax_rec) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, r in results.items():
        L = r["num_layers"]
        ax_rms.plot(range(L + 1), r["rms"], marker="o", label=name)
        rec = r["recovered"]
        ax_rec.plot(range(L + 1), [rec["embedding_r2"], *rec["blocks"]], marker="o", label=name)
    ax_rms.set(xlabel="depth (block input; last: final stream)", ylabel="RMS", title="(a) stream magnitude")
    ax_rec.set(xlabel="source (0: embedding, i: block i-1's output)", ylabel="held-out R$^2$",
               title="(b) recovered from the final stream", ylim=(-0.05, 1.05))
    for ax in (ax_rms, ax_rec):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save(fig, path)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = UsageParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--model_name_or_path", nargs="+", required=True, metavar="FOLDER",
                   help="trained SPEN folders (save_pretrained); several are compared in one figure")
    add_output_dir(p, "output folder (depth.json, depth.png)", aliases=())
    p.add_argument("--num_sequences", type=positive_int, default=64, help="sequences probed (80%% fit, 20%% held out)")
    p.add_argument("--seq_len", type=positive_int, default=128, help="tokens per sequence")
    p.add_argument("--seed", type=int, default=0, help="seed of the random token ids (folders without a tokenizer)")
    p.add_argument("--ridge", type=float, default=1e-3, help="L2 penalty of the probes on standardised features")
    return p.parse_args(argv)


def _short_names(folders: list[str]) -> list[str]:
    """The shortest distinct path tails: ``runs/add/final`` and ``runs/attention/final`` become
    ``add/final`` and ``attention/final``."""
    parts = [Path(f).resolve().parts for f in folders]
    for k in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-k:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(f) for f in folders]  # only when the same folder is there twice, which main refuses


def _load(folder: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)

    logging.disable_progress_bar()  # stderr is for the one-line errors

    if not Path(folder).is_dir():
        raise UsageError(f"--model_name_or_path {folder}: no such folder")
    if not (Path(folder) / "config.json").is_file():
        raise UsageError(f"--model_name_or_path {folder}: no config.json (not a save_pretrained folder)")
    try:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    except Exception as e:
        raise UsageError(f"--model_name_or_path {folder}: does not load ({first_line(e)})") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse_args(argv)
    except SystemExit as e:  # a usage error (already printed in one line) or --help
        return int(e.code or 0)
    try:
        if args.num_sequences < 2:
            raise UsageError("--num_sequences must be >= 2 (20% are held out)")
        if not args.ridge >= 0:
            raise UsageError(f"--ridge must be >= 0, got {args.ridge}")
        check_output_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir)
        results: dict[str, dict] = {}
        if len({Path(f).resolve() for f in args.model_name_or_path}) != len(args.model_name_or_path):
            raise UsageError("--model_name_or_path: the same folder is given twice")
        names = _short_names(args.model_name_or_path)
        for name, folder in zip(names, args.model_name_or_path, strict=True):
            model = _load(folder)
            ids, what = probe_ids(folder, model.config.vocab_size, args.num_sequences, args.seq_len, args.seed)
            try:
                result = depth_dilution(model, ids, args.ridge)
            except ValueError as e:
                raise UsageError(f"--model_name_or_path {folder}: {e}") from None
            results[name] = {"folder": str(folder), "inputs": what, **result}
        # The folder is eval.depth's own (a marker names it): a user's folder is never written into.
        with atomic_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir) as tmp:
            render_depth_figure(results, tmp / "depth.png")
            write_json(tmp / "depth.json", results)
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.output_dir) / 'depth.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
