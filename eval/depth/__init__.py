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

**The experiment** (``--config`` instead of ``--model_name_or_path``) trains the models first and compares them:

    python -m eval.depth --config hub_configs/spen-depth8/train.yaml --seeds 5 --seed 0 --max_steps 2000 \
        --output_dir outputs/depth --workers 2

The command (``eval/depth/__main__.py``) is an alias of the experiment runner (``ema-boundary sweep``): its flags
become a sweep plan (:func:`eval.sweep.alias.depth_sweep_plan` through :func:`experiment_plan`, the shape of
``hub_configs/sweeps/depth.yaml``) whose two arms
are the YAML's model with ``residual`` ``add`` and ``attention``, every seed of each (the design is blocked by
seed), each final model measured as above on the first ``--num_sequences`` validation blocks (held-out text; the
``train`` trainer's ``measure: [depth]``), read by the runner's ``depth`` analysis: the paired table (attention
minus add, per seed: token identity recovered at the last layer, the share recovered of each earlier block's
output, R^2 clipped to [0, 1], the log of the final stream's RMS growth and the loss), each row with its 95% t
interval, an equivalence test against a margin declared before the run and a verdict from the interval
(:func:`paired_row`), the loss behind the Kneser-Ney bigram on the same tokens (the competence gate), and the claim
"fixed accumulation across depth dilutes; input-dependent depth selection recovers it" by :data:`CLAIM_RULE`
(:func:`claim_verdict`). The sweep folder holds every run and ``results.json``; ``--resume_from DIR`` continues it,
``ema-boundary sweep --summarize DIR`` rebuilds its results. The report's depth stage (``eval/report/stages.py``)
declares the same plan (:func:`experiment_plan`) and runs it on the runner, then writes its ``depth.json`` from the
runner's results with :func:`run_scalars`, :func:`paired_table`, :func:`gate_record` and :func:`claim_verdict`,
and its figure with :func:`render_experiment_figure`.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoTokenizer

from ema_boundary import stats
from ema_boundary.corpus import EMBEDDED_PYDOC, embedded_documents
from ema_boundary.figures import pyplot, save
from ema_boundary.io import atomic_dir, check_output_dir, write_json
from ema_boundary.usage import (
    UsageError,
)
from ema_boundary.verdicts import (
    A_HIGHER,
    A_LOWER,
    EQUIVALENT,
    MET,
    NOT_RESOLVED,
    NOT_TESTABLE,
    PARTLY_MET,
    REFUTED,
    UNRESOLVED,
    higher,
)
from eval import verdicts
from eval.plans import data_sources, repo_path
from eval.probes.models import ModelError, load_causal_lm
from eval.runs import read_spen_yaml

PROG = "python -m eval.depth"
TOOL = "eval.depth"  # the name in its output folder's marker
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json")

__all__ = ["depth_dilution", "ridge_r2", "token_accuracy", "probe_ids", "render_depth_figure",
           "RESIDUALS", "REFERENCE", "MARGINS", "MIN_SEEDS", "CLAIM_RULE", "run_scalars",
           "experiment_plan", "measure_folders",
           "paired_row", "paired_table", "gate_record", "claim_verdict", "render_experiment_figure"]


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
    token is not among the classes are left out, as in ``eval.probes.identity.fit_lag_probes``.
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


# ---------------------------------------------------------------------------------------------
# The experiment: train add and attention twins with the same seeds, measure, compare paired by seed
# ---------------------------------------------------------------------------------------------

RESIDUALS = ("add", "attention")  # SPENConfig.residual's values
REFERENCE, SELECTION = "add", "attention"  # fixed accumulation, input-dependent selection in depth
MIN_SEEDS = 5  # the suite's rule: a verdict that rests on a difference needs >= 5 paired seeds
# Declared before the run (the command's flags): differences smaller than these count as "equal" only through the
# equivalence test. Shares and accuracies are fractions (0.02 = 2 points); the loss is in nats.
MARGINS = {"token_accuracy": 0.02, "earlier_share": 0.02, "val_loss": 0.02}
DESIGN = ("seed-blocked: every residual arm trains with each seed from the same YAML (only the model config's "
          "`residual` differs), reading the same batches in the same order with the same tokenizer; the arms are "
          "compared within seed (attention minus add)")
CLAIM = "fixed accumulation across depth dilutes; input-dependent depth selection recovers it"
CLAIM_RULE = (
    "refuted if attention residuals recover no more token identity at the last layer than the residual sum "
    "(add higher, or equivalent within the declared margin); met if they recover more (95% interval above 0), "
    "the sum's final stream grows more with depth (the measured dilution: log RMS growth, add higher) and "
    "attention's validation loss is lower; partly met if they recover more but the growth or the loss "
    "difference is not shown; otherwise not resolved. Each difference: paired by seed, >= 5 seeds. The "
    "loss counts only where both arms are below the Kneser-Ney bigram on the same tokens (the competence gate); "
    "where the gate fails the claim is not testable in this regime")
# A row's verdict names the arm (eval.verdicts.difference_verdict of attention - add, "not resolved" in short).
ATTENTION_HIGHER, ADD_HIGHER = higher("attention"), higher("add")
ROW_WORDS = {A_HIGHER: ATTENTION_HIGHER, A_LOWER: ADD_HIGHER, NOT_RESOLVED: UNRESOLVED}


def run_scalars(measured: Mapping[str, Any]) -> dict[str, Any]:
    """What the paired table compares, from one model's :func:`depth_dilution`: token identity at the last layer,
    the share recovered of each block's output (R^2 clipped to [0, 1]) and its mean over the blocks before the last,
    and the final stream's RMS over the embedding's (its growth with depth)."""
    rec = measured["recovered"]
    shares = [min(1.0, max(0.0, r)) for r in rec["blocks"]]
    earlier = shares[:-1] or shares
    return {"token_accuracy": rec["token_accuracy"], "token_chance": rec["token_chance"],
            "embedding_share": min(1.0, max(0.0, rec["embedding_r2"])), "block_share": shares,
            "earlier_share": statistics.fmean(earlier), "rms_growth": measured["rms"][-1] / measured["rms"][0]}


def paired_row(attention: Mapping[str, float], add: Mapping[str, float], margin: float | None,
               bounded: bool, min_seeds: int = MIN_SEEDS) -> dict[str, Any]:
    """``attention - add`` paired by seed (:func:`ema_boundary.stats.compare`): the arms' means, the difference with
    its 95% t interval (clipped to [-1, 1] when ``bounded``: the range of a difference of two fractions), the 90%
    interval, the equivalence test against ``margin`` and a verdict from the interval only
    (:func:`eval.verdicts.difference_verdict`, the arm named: :data:`ROW_WORDS`): fewer than ``min_seeds`` paired
    seeds: "not resolved"; the 95% interval above 0: "attention higher", below: "add higher"; the 90% interval
    inside ``(-margin, margin)``: "equivalent"; otherwise "not resolved"."""
    c = stats.compare(attention, add, margin)
    kind, (lo, hi), reason = verdicts.difference_verdict(c, min_seeds, (-1.0, 1.0) if bounded else None)
    seeds = list(c.seeds)
    return {"attention": statistics.fmean(attention[s] for s in seeds), "add": statistics.fmean(add[s] for s in seeds),
            "difference": c.difference, "ci95": [_finite(lo), _finite(hi)], "ci90": [_finite(x) for x in c.ci90],
            "p_difference": _finite(c.p_difference), "margin": margin, "seeds": seeds,
            "verdict": ROW_WORDS.get(kind, kind), "reason": reason}


def _finite(x: float) -> float | None:
    """None for what one seed cannot estimate (JSON without NaN)."""
    return x if math.isfinite(x) else None


def paired_table(runs: Mapping[str, Mapping[str, Mapping[str, Any]]], margins: Mapping[str, float] = MARGINS,
                 min_seeds: int = MIN_SEEDS) -> dict[str, Any]:
    """The paired comparisons attention - add over ``runs`` (``{residual: {seed: run}}``, each run with its
    :func:`run_scalars` and ``val_loss``): ``token_accuracy``, ``embedding_share`` (the token vector's R^2, clipped),
    ``earlier_share``, ``log_rms_growth``, ``val_loss`` and ``block_share`` (one row per block)."""
    sel, ref = runs[SELECTION], runs[REFERENCE]

    def values(arm: Mapping[str, Mapping[str, Any]], key: str, f=lambda v: v) -> dict[str, float]:
        return {s: f(r[key]) for s, r in arm.items()}

    table = {
        "token_accuracy": paired_row(values(sel, "token_accuracy"), values(ref, "token_accuracy"),
                                     margins["token_accuracy"], True, min_seeds),
        "embedding_share": paired_row(values(sel, "embedding_share"), values(ref, "embedding_share"),
                                      margins["earlier_share"], True, min_seeds),
        "earlier_share": paired_row(values(sel, "earlier_share"), values(ref, "earlier_share"),
                                    margins["earlier_share"], True, min_seeds),
        # Growth is a ratio: compared on the log scale, no margin (the sign is what the claim reads).
        "log_rms_growth": paired_row(values(sel, "rms_growth", math.log), values(ref, "rms_growth", math.log), None,
                                     False, min_seeds),
        "val_loss": paired_row(values(sel, "val_loss"), values(ref, "val_loss"), margins["val_loss"], False,
                               min_seeds),
    }
    layers = len(next(iter(ref.values()))["block_share"])
    table["block_share"] = [
        paired_row({s: r["block_share"][i] for s, r in sel.items()}, {s: r["block_share"][i] for s, r in ref.items()},
                   margins["earlier_share"], True, min_seeds) for i in range(layers)]
    return table


def gate_record(losses: Mapping[str, float], ngram: Mapping[str, Any]) -> dict[str, Any]:
    """The competence gate (:func:`eval.verdicts.ngram_gate`: every arm's mean validation loss, ``{residual: nats}``,
    below the Kneser-Ney bigram's on the same blocks) as depth.json records it: ``{"holds", "numbers",
    "bigram_loss"}``."""
    bigram = math.log(ngram["bigram"])
    gate = verdicts.ngram_gate(losses, bigram)
    numbers = (", ".join(f"`{r}` {loss:.3f} nats (perplexity {math.exp(loss):.1f})" for r, loss in losses.items())
               + f"; Kneser-Ney bigram {bigram:.3f} nats (perplexity {ngram['bigram']:.1f}) on the same tokens")
    return {"holds": gate.holds, "numbers": numbers, "bigram_loss": bigram}


def claim_verdict(table: Mapping[str, Any], gate: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The claim's verdict by :data:`CLAIM_RULE` from :func:`paired_table`'s rows: ``{"verdict", "reason",
    "conclusion"}``; ``conclusion`` is the verdict, or "not testable in this regime" where ``gate`` fails."""
    acc, growth, loss = table["token_accuracy"], table["log_rms_growth"], table["val_loss"]
    if acc["verdict"] in (ADD_HIGHER, EQUIVALENT):
        verdict = REFUTED
        reason = f"token identity at the last layer: {acc['verdict']} ({acc['reason']})"
    elif acc["verdict"] != ATTENTION_HIGHER:
        verdict, reason = NOT_RESOLVED, f"token identity at the last layer: {acc['reason']}"
    else:
        diluted = growth["verdict"] == ADD_HIGHER
        better = loss["verdict"] == ADD_HIGHER  # the sum's loss is higher: attention's lower
        verdict = MET if diluted and better else PARTLY_MET
        reason = (f"attention recovers more token identity ({acc['reason']}); the sum's stream grows "
                  + ("more" if diluted else f"not shown more ({growth['verdict']})")
                  + f"; attention's loss {'lower' if better else loss['verdict']}")
    testable = gate is None or gate.get("holds") is True
    return {"verdict": verdict, "reason": reason, "conclusion": verdict if testable else NOT_TESTABLE}


def render_experiment_figure(result: Mapping[str, Any], path: Path | str) -> None:
    """Three panels: (a) the stream's RMS against depth, (b) the share recovered of the embedding and of each block's
    output from the final stream (mean over seeds, the seeds' range shaded), (c) token identity at the last layer
    per seed, the two arms of a seed joined, chance marked."""
    plt = pyplot()
    fig, (ax_rms, ax_rec, ax_tok) = plt.subplots(1, 3, figsize=(14, 3.9))
    for residual, runs in result["runs"].items():
        rms = [r["rms"] for r in runs.values()]
        rec = [[r["embedding_share"], *r["block_share"]] for r in runs.values()]
        for ax, curves in ((ax_rms, rms), (ax_rec, rec)):
            x = range(len(curves[0]))
            cols = list(zip(*curves, strict=True))
            label = f"{residual} ({len(curves)} seeds)"
            line = ax.plot(x, [statistics.fmean(c) for c in cols], marker="o", label=label)
            ax.fill_between(x, [min(c) for c in cols], [max(c) for c in cols], alpha=0.2, color=line[0].get_color())
    seeds = [str(s) for s in result["seeds"]]
    for s in seeds:
        ax_tok.plot([0, 1], [result["runs"][r][s]["token_accuracy"] for r in (REFERENCE, SELECTION)], color="gray",
                    marker="o", alpha=0.7)
    chance = statistics.fmean(r["token_chance"] for r in result["runs"][REFERENCE].values())
    ax_tok.axhline(chance, color="black", ls=":", lw=1, label=f"majority token ({chance:.1%})")
    row = result["table"]["token_accuracy"]
    ax_tok.set(xticks=[0, 1], xticklabels=[REFERENCE, SELECTION], xlim=(-0.3, 1.3), ylabel="held-out accuracy",
               title=f"(c) token identity, last layer\nattention − add {row['difference']:+.3f}: {row['verdict']}")
    ax_rms.set(xlabel="depth (block input; last: final stream)", ylabel="RMS", title="(a) stream magnitude")
    ax_rms.set_yscale("log")
    ax_rec.set(xlabel="source (0: embedding, i: block i-1's output)", ylabel="share recovered (R$^2$, clipped)",
               title="(b) recovered from the final stream", ylim=(-0.05, 1.05))
    for ax in (ax_rms, ax_rec, ax_tok):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{result['num_layers']} blocks, width {result['hidden_size']}, {result['max_steps']} steps: "
                 f"{result['conclusion']}", fontsize=9)
    fig.tight_layout()
    save(fig, path)


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
    # The project's one loader: a missing folder or config.json, unreadable weights (the file named) or weights
    # that do not fit their config.json are one line; its progress bars are off (stderr is for that line).
    if not Path(folder).is_dir():
        raise UsageError(f"--model_name_or_path {folder}: no such folder")
    try:
        return load_causal_lm(folder, dtype=torch.float32)
    except ModelError as e:
        raise UsageError(f"--model_name_or_path {e}") from None


def experiment_plan(config: str | Path, seeds: int | Sequence[int], *, seed: int | None = None,
                    max_steps: int | None = None, lr: float | None = None, data: Sequence[str] | None = None,
                    tokenizer: str | Path | None = None, workers: int = 1, margins: Mapping[str, float] = MARGINS,
                    num_sequences: int = 64, seq_len: int = 128, ridge: float = 1e-3) -> dict[str, Any]:
    """The experiment as a sweep plan's mapping (the shape of ``hub_configs/sweeps/depth.yaml``; what the command
    line and the report's depth stage declare): the YAML ``config`` as the base, one arm per residual over its
    model (only ``residual`` set), ``seeds`` (a list: those seeds; a count, the command line's: ``seed``, default
    the YAML's, + 0..seeds-1), one budget (``max_steps``, default the YAML's) at one rate (``lr``, default the
    YAML's), every final model measured (``measure: [depth]`` on the first ``num_sequences`` validation blocks),
    read by the runner's ``depth`` analysis against the declared ``margins``. Bad values: one UsageError naming
    the flag."""
    if lr is not None and not 0 < lr < 1:
        raise UsageError(f"--learning_rate must be a rate in (0, 1), got {lr!r}")
    for name, value in margins.items():
        if not 0 < value < 1:
            raise UsageError(f"--{name}_margin must lie in (0, 1), got {value!r}")
    if num_sequences < 2:
        raise UsageError("--num_sequences must be >= 2 (20% are held out)")
    if tokenizer is not None and not (Path(tokenizer) / "tokenizer_config.json").is_file():
        raise UsageError(f"--tokenizer {tokenizer}: not a tokenizer folder (no tokenizer_config.json)")
    cfg = read_spen_yaml(Path(config), "the experiment swaps SPEN's residual")
    first = cfg["seed"] if seed is None else seed
    seed_list = [first + i for i in range(seeds)] if isinstance(seeds, int) else list(seeds)
    shared: dict[str, Any] = {"measure": ["depth"],
                              "depth": {"num_sequences": num_sequences, "seq_len": seq_len, "ridge": ridge}}
    if data or any(Path(d).exists() for d in cfg["data"]):  # files: named as the plan reads them
        shared["data"] = data_sources(list(data or cfg["data"]))
    if tokenizer:
        shared["tokenizer_name"] = repo_path(tokenizer)
    model = repo_path(cfg["model_name_or_path"])
    return {
        "name": "depth", "trainer": "train", "analysis": "depth", "seeds": seed_list,
        "budgets": [max_steps or cfg["max_steps"]],
        "score": "test" if cfg["test_every"] else "validation", "workers": workers,
        "rate": {"lr_grid": [float(lr or cfg["learning_rate"])], "choose": "first_seed"},
        "base": repo_path(config),
        "arms": {r: {"config": {"model": {"from": model, "set": {"residual": r}}, **shared}} for r in RESIDUALS},
        # the loss row read as the committed sweep reads it: behind the trigram line (issue 49)
        "settings": {"selection": SELECTION, "reference": REFERENCE, "gate_ngram": "bigram", "min_seeds": MIN_SEEDS,
                     "loss_gate_ngram": "trigram", "margins": dict(margins)},
    }


def measure_folders(args: argparse.Namespace) -> None:
    if args.num_sequences < 2:
        raise UsageError("--num_sequences must be >= 2 (20% are held out)")
    check_output_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir)
    results: dict[str, dict] = {}
    if len({Path(f).resolve() for f in args.model_name_or_path}) != len(args.model_name_or_path):
        raise UsageError("--model_name_or_path: the same folder is given twice")
    names = _short_names(args.model_name_or_path)
    for name, folder in zip(names, args.model_name_or_path, strict=True):
        model = _load(folder)
        ids, what = probe_ids(folder, model.config.vocab_size, args.num_sequences, args.seq_len, args.seed or 0)
        try:
            result = depth_dilution(model, ids, args.ridge)
        except ValueError as e:
            raise UsageError(f"--model_name_or_path {folder}: {e}") from None
        results[name] = {"folder": str(folder), "inputs": what, **result}
    # The folder is eval.depth's own (a marker names it): a user's folder is never written into.
    with atomic_dir(args.output_dir, tool=TOOL, overwrite=args.overwrite_output_dir) as tmp:
        render_depth_figure(results, tmp / "depth.png")
        write_json(tmp / "depth.json", results)

