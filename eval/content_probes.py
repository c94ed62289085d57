"""Content probes: what a model's hidden state still knows about *which* tokens it has seen.

Two probes, both about token identity (content), not structure:

* **Identity at lag** (:func:`identity_at_lag`). From the hidden state at position t (every
  layer), a linear probe (a ridge-regression classifier, one per lag) predicts the token at
  t - k, for k = 1..K. Targets are restricted to the ``num_classes`` most frequent tokens of
  the probe text so that every class has enough examples; the probe is fit on the first 80% of
  the positions and scored on the rest. Chance is the frequency of the most common class.
  A fixed-decay EMA blurs identity with lag; attention keeps it.

* **Multi-query associative recall** (:func:`associative_recall`, after Zoology's MQAR).
  A sequence lists ``n`` key-value pairs, then asks for the keys again in a random order; the
  model must emit each key's value. Keys and values come from disjoint halves of a small
  vocabulary and are drawn afresh for every sequence, so nothing can be memorised in the
  weights: the answer must be retrieved from context. Each architecture is trained from
  scratch on a mixture of pair counts, with a small learning-rate sweep (recall is known to be
  sensitive to it; the best rate per model is reported), then scored per pair count on fresh
  sequences: accuracy over all query positions.

``python -m eval.content_probes --models CKPT [CKPT ...] --out DIR`` runs both on saved
checkpoints and writes ``DIR/content_probes.json`` and PNG curves.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser
from ema_boundary.figures import pyplot, save
from ema_boundary.io import atomic_dir, check_output_dir, write_json

PROG = "python -m eval.content_probes"

# ---------------------------------------------------------------------------------------------
# Identity at lag
# ---------------------------------------------------------------------------------------------


def fit_lag_probes(
    features: torch.Tensor,
    tokens: torch.Tensor,
    lags: Sequence[int],
    num_classes: int = 32,
    ridge: float = 1.0,
) -> dict[str, list[float]]:
    """Fit one linear probe per lag on ``features`` to predict ``tokens`` at t - lag.

    The probe is a ridge-regression classifier (least squares onto one-hot targets, argmax to
    predict; as scikit-learn's RidgeClassifier): linear, solved in closed form, deterministic, and
    cheap enough to fit 64 lags x every layer on a CPU.

    Args:
        features: ``(N, T, D)`` hidden states of N sequences.
        tokens: ``(N, T)`` the token ids of the same sequences.
        lags: the lags k >= 0 to probe (position t predicts ``tokens[:, t - k]``).
        num_classes: probe targets are the most frequent token ids of ``tokens``; positions whose
            target is another token are left out.
        ridge: L2 penalty on the standardised features.

    Returns:
        ``{"accuracy": [...], "chance": [...]}``, one entry per lag, on held-out sequences
        (the last 20% of the N sequences); chance is the majority class of the fitting set.
    """
    if features.dim() != 3 or tokens.shape != features.shape[:2]:
        raise ValueError(
            f"features (N, T, D) and tokens (N, T) disagree: {tuple(features.shape)}, {tuple(tokens.shape)}"
        )
    N, T, D = features.shape
    kmax = max(lags)
    if kmax >= T:
        raise ValueError(f"largest lag {kmax} needs sequences longer than {T}")
    n_train = max(1, int(round(0.8 * N)))
    if n_train >= N:
        raise ValueError("need at least 2 sequences to hold some out")
    classes = torch.bincount(tokens.flatten()).argsort(descending=True)[:num_classes]
    to_class = torch.full((int(tokens.max()) + 1,), -1, dtype=torch.long)
    to_class[classes] = torch.arange(len(classes))

    # Positions t >= kmax so that every lag has a target; features standardised per channel.
    x = features[:, kmax:].double()
    mean, std = x[:n_train].reshape(-1, D).mean(0), x[:n_train].reshape(-1, D).std(0) + 1e-6
    x = torch.cat([(x - mean) / std, torch.ones_like(x[..., :1])], -1)  # bias column
    xtr, xte = x[:n_train].reshape(-1, D + 1), x[n_train:].reshape(-1, D + 1)
    penalty = ridge * torch.eye(D + 1, dtype=x.dtype)
    penalty[-1, -1] = 0.0  # the bias is not penalised
    accuracy, chance = [], []
    for k in lags:
        y = to_class[tokens[:, kmax - k : T - k]]
        ytr, yte = y[:n_train].reshape(-1), y[n_train:].reshape(-1)
        keep_tr, keep_te = ytr >= 0, yte >= 0
        a, target = xtr[keep_tr], F.one_hot(ytr[keep_tr], len(classes)).double()
        weights = torch.linalg.solve(a.T @ a + penalty, a.T @ target)
        pred = (xte[keep_te] @ weights).argmax(-1)
        accuracy.append(float((pred == yte[keep_te]).double().mean()) if keep_te.any() else float("nan"))
        counts = torch.bincount(ytr[keep_tr], minlength=len(classes))
        chance.append(float(counts.max() / counts.sum()))
    return {"accuracy": accuracy, "chance": chance}


@torch.no_grad()
def hidden_states(model: torch.nn.Module, ids: torch.Tensor, batch_size: int = 8) -> list[torch.Tensor]:
    """Hidden states of every layer (embeddings first) for ``ids`` ``(N, T)``: a list of ``(N, T, D)``."""
    model.eval()
    per_layer: list[list[torch.Tensor]] = []
    for start in range(0, ids.shape[0], batch_size):
        out = model(ids[start : start + batch_size], output_hidden_states=True, use_cache=False)
        if not per_layer:
            per_layer = [[] for _ in out.hidden_states]
        for i, h in enumerate(out.hidden_states):
            per_layer[i].append(h.float())
    return [torch.cat(chunks) for chunks in per_layer]


def identity_at_lag(model: torch.nn.Module, ids: torch.Tensor, max_lag: int = 64, num_classes: int = 32) -> dict:
    """Probe every layer of ``model`` on ``ids`` ``(N, T)`` for the token at lags 1..max_lag."""
    lags = list(range(1, max_lag + 1))
    layers = hidden_states(model, ids)
    result = {"lags": lags, "layers": {}}
    for i, feats in enumerate(layers):
        result["layers"][str(i)] = fit_lag_probes(feats, ids, lags, num_classes=num_classes)
    # The summary curve: the best layer at each lag (what is recoverable anywhere in the model).
    accs = torch.tensor([result["layers"][k]["accuracy"] for k in result["layers"]])
    result["best"] = accs.nan_to_num(-1).max(0).values.tolist()
    result["chance"] = result["layers"]["0"]["chance"]
    return result


# ---------------------------------------------------------------------------------------------
# Multi-query associative recall
# ---------------------------------------------------------------------------------------------


@dataclass
class RecallTask:
    """MQAR sequences: ``k1 v1 ... kn vn  q1 a1 ... qm am`` with keys/values from disjoint ranges.

    Token 0 is padding. Keys are ``1 .. vocab/2 - 1``, values ``vocab/2 .. vocab - 1``. The
    sequence length is fixed at ``4 * max(pairs)`` (pairs, then one query per pair), padded.
    """

    vocab_size: int = 128
    pairs: tuple[int, ...] = (2, 4, 8, 16)

    @property
    def seq_len(self) -> int:
        return 4 * max(self.pairs)

    def sample(self, batch: int, n_pairs: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids, targets)``: targets are -100 except where the next token is an answer."""
        half = self.vocab_size // 2
        if n_pairs > half - 1:
            raise ValueError(f"{n_pairs} pairs need more than {half - 1} distinct keys")
        keys = torch.rand(batch, half - 1, generator=generator).argsort(-1)[:, :n_pairs] + 1
        values = torch.randint(half, self.vocab_size, (batch, n_pairs), generator=generator)
        order = torch.rand(batch, n_pairs, generator=generator).argsort(-1)
        queries, answers = keys.gather(1, order), values.gather(1, order)
        context = torch.stack([keys, values], -1).flatten(1)
        asked = torch.stack([queries, answers], -1).flatten(1)
        ids = torch.zeros(batch, self.seq_len, dtype=torch.long)
        ids[:, : 4 * n_pairs] = torch.cat([context, asked], 1)
        targets = torch.full_like(ids, -100)
        # Position of query j is 2n + 2j; the model must predict its answer there.
        q_pos = 2 * n_pairs + 2 * torch.arange(n_pairs)
        targets[:, q_pos] = answers
        return ids, targets


def _recall_accuracy(model: torch.nn.Module, ids: torch.Tensor, targets: torch.Tensor) -> float:
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits
    keep = targets != -100
    return float((logits.argmax(-1)[keep] == targets[keep]).float().mean())


def train_recall(
    config,
    task: RecallTask,
    lr: float,
    steps: int = 400,
    batch_size: int = 32,
    seed: int = 0,
) -> torch.nn.Module:
    """Train a fresh model of ``config`` (vocab resized to the task's) on a mixture of pair counts."""
    from transformers import AutoModelForCausalLM

    import modeling_spen  # noqa: F401  registers SPEN with the Auto classes

    config = config.__class__.from_dict({**config.to_dict(), "vocab_size": task.vocab_size,
                                         "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.train()
    g = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    for step in range(steps):
        n = task.pairs[step % len(task.pairs)]
        ids, targets = task.sample(batch_size, n, g)
        logits = model(ids, use_cache=False).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return model.eval()


def associative_recall(
    config,
    task: RecallTask | None = None,
    lrs: Sequence[float] = (1e-3, 3e-3),
    steps: int = 400,
    eval_batches: int = 4,
    seed: int = 0,
) -> dict:
    """Train on MQAR for each learning rate; report per-pair-count accuracy of the best rate."""
    task = task or RecallTask()
    sweep = {}
    for lr in lrs:
        model = train_recall(config, task, lr=lr, steps=steps, seed=seed)
        g = torch.Generator().manual_seed(10_000 + seed)  # the same evaluation sequences for every lr
        acc = {}
        for n in task.pairs:
            batches = [task.sample(64, n, g) for _ in range(eval_batches)]
            acc[str(n)] = sum(_recall_accuracy(model, *b) for b in batches) / eval_batches
        sweep[str(lr)] = acc
    best_lr = max(sweep, key=lambda k: sum(sweep[k].values()))
    return {
        "pairs": list(task.pairs),
        "accuracy": [sweep[best_lr][str(n)] for n in task.pairs],
        "best_lr": float(best_lr),
        "sweep": sweep,
        "chance": 1.0 / (task.vocab_size - task.vocab_size // 2),
        "steps": steps,
        "vocab_size": task.vocab_size,
    }


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


@dataclass
class ProbeSettings:
    max_lag: int = 64
    seq_len: int = 192
    num_sequences: int = 48
    num_classes: int = 32
    recall_pairs: tuple[int, ...] = (2, 4, 8, 16)
    recall_steps: int = 300
    recall_lrs: tuple[float, ...] = (1e-3, 3e-3)
    seed: int = 0

    @classmethod
    def quick(cls) -> ProbeSettings:
        return cls(max_lag=32, seq_len=96, num_sequences=32, recall_pairs=(2, 4, 8),
                   recall_steps=150, recall_lrs=(3e-3,))


def _probe_text_ids(tokenizer, text: str, settings: ProbeSettings) -> torch.Tensor:
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids[0]
    n = min(settings.num_sequences, ids.numel() // settings.seq_len)
    if n < 2:
        raise ValueError(f"probe text too short: {ids.numel()} tokens, need {2 * settings.seq_len}")
    return ids[: n * settings.seq_len].view(n, settings.seq_len)


def run_content_probes(
    models: dict[str, str | Path],
    text: str,
    out_dir: str | Path,
    settings: ProbeSettings | None = None,
    recall: bool = True,
) -> dict:
    """Run both probes on the checkpoints in ``models`` (name -> folder) and write JSON + PNGs."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    import modeling_spen  # noqa: F401

    settings = settings or ProbeSettings()
    results: dict = {"settings": asdict(settings),
                     "identity_at_lag": {}, "recall": {}}
    started = time.time()
    for name, path in tqdm(models.items(), desc="content probes", disable=None):
        model = AutoModelForCausalLM.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
        ids = _probe_text_ids(tokenizer, text, settings)
        results["identity_at_lag"][name] = identity_at_lag(
            model, ids, max_lag=min(settings.max_lag, settings.seq_len - 1), num_classes=settings.num_classes
        )
        if recall:
            task = RecallTask(pairs=settings.recall_pairs)
            results["recall"][name] = associative_recall(
                AutoConfig.from_pretrained(path), task, lrs=settings.recall_lrs, steps=settings.recall_steps,
                seed=settings.seed,
            )
    results["seconds"] = time.time() - started
    with atomic_dir(Path(out_dir)) as tmp:
        write_json(tmp / "content_probes.json", results)
        plot_identity(results["identity_at_lag"], tmp / "identity_at_lag.png")
        if recall:
            plot_recall(results["recall"], tmp / "recall.png")
    return results


def plot_identity(curves: dict, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    chance = None
    for name, res in curves.items():
        ax.plot(res["lags"], res["best"], label=name, marker=".", markersize=3)
        chance = res["chance"]
    if chance is not None:
        ax.plot(res["lags"], chance, color="gray", linestyle=":", label="chance (majority class)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("lag k (tokens back)")
    ax.set_ylabel("probe accuracy, token at t-k (best layer)")
    ax.set_title("Token identity recoverable from the hidden state")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, path)


def plot_recall(curves: dict, path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    chance = None
    for name, res in curves.items():
        ax.plot(res["pairs"], res["accuracy"], label=f"{name} (lr {res['best_lr']:g})", marker="o")
        chance = res["chance"]
    if chance is not None:
        ax.axhline(chance, color="gray", linestyle=":", label="chance")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("key-value pairs in context")
    ax.set_ylabel("recall accuracy")
    ax.set_ylim(0, 1.02)
    ax.set_title("Multi-query associative recall")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    save(fig, path)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = UsageParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", required=True,
                   help="checkpoint folders (save_pretrained with a tokenizer), optionally NAME=FOLDER")
    p.add_argument("--out", required=True, help="output folder for content_probes.json and the PNGs")
    p.add_argument("--text", help="text file to probe on (default: the embedded corpus of train_data)")
    p.add_argument("--quick", action="store_true", help="shorter lags, fewer sequences and steps")
    p.add_argument("--no-recall", action="store_true", help="skip the associative-recall training")
    p.add_argument("--recall-steps", type=int, help="training steps of each recall model (default: the preset's)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    models: dict[str, Path] = {}
    for spec in args.models:
        name, _, folder = spec.rpartition("=")
        folder_path = Path(folder)
        if not (folder_path / "config.json").is_file():
            print(f"{PROG}: error: --models {folder}: not a checkpoint folder (no config.json)", file=sys.stderr)
            return EXIT_USAGE
        models[name or folder_path.name] = folder_path
    if args.text is not None:
        path = Path(args.text)
        if not path.is_file():
            print(f"{PROG}: error: --text {path}: no such file", file=sys.stderr)
            return EXIT_USAGE
        text = path.read_text(encoding="utf-8")
    else:
        from train_data import embedded_documents

        text = "\n\n".join(embedded_documents())
    settings = ProbeSettings.quick() if args.quick else ProbeSettings()
    settings.seed = args.seed
    if args.recall_steps is not None:
        if args.recall_steps < 1:
            print(f"{PROG}: error: --recall-steps must be a positive integer, got {args.recall_steps}", file=sys.stderr)
            return EXIT_USAGE
        settings.recall_steps = args.recall_steps
    try:
        check_output_dir(args.out)  # before minutes of probing, not after
        run_content_probes(models, text, args.out, settings, recall=not args.no_recall)
    except (ValueError, UsageError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {Path(args.out) / 'content_probes.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
