"""The paper's central control as one command: swap the predictor (or the trace), keep everything else.

    python -m eval.ablation --config hub_configs/spen-f64/train.yaml --trace linear,linear-learned,linear-selective \\
        --seeds 5 --seed 0 --lr_grid 3e-3,1e-2,3e-2 --budgets 200,700,2000 --workers 2 --output_dir outputs/trace

The command (``eval/ablation/__main__.py``) is an alias of the experiment runner (``ema-boundary sweep``): its
flags become a sweep plan (:func:`eval.sweep.alias.ablation_sweep_plan`; the line above is
``hub_configs/sweeps/ablation-trace.yaml`` exactly), run into one sweep
folder (``DIR/runs/<arm>/lr_<rate>/seed_<s>/steps_<n>/``, ``DIR/results.json`` with the ``ablation`` analysis of
:mod:`eval.sweep.analyses`); ``--resume_from DIR`` continues it and ``--summarize DIR`` rebuilds its results.
``--overwrite_output_dir`` no longer applies (a sweep folder is continued, never replaced).

Every arm trains from the same YAML on the same data in the same order, with the same tokenizer and the same
seeds; only the SPEN config fields of the arm differ (named SPEN variants, ``modeling_spen.variants``). The design
is **blocked by seed**: arms are compared within seed (paired), each against a reference arm (``linear``, the
paper's static reader over EMA traces, for both ablations) through :func:`ema_boundary.stats.compare_arms`: the
paired difference with its 95% interval, an equivalence test (TOST) against a margin declared before the run,
Holm-adjusted across arms, and a verdict; the overall question (does any arm differ?) is the seed-blocked F test.

What stays of the tool's own orchestration is the reading of the folders it wrote before it became an alias of
the sweep (the committed ``docs/ablation``, the unshuffled record; the report reads the ablation sweeps instead):
``--summarize DIR`` (:func:`summarize_budgets`) rebuilds their budgets.json and budgets.png; :func:`rates_moved`
(how far learned write rates moved). The report's ablation stage runs on the runner too and reads the comparisons
through :func:`analyse` (``eval/report/stages.py``).

Such a folder (the output of the earlier ``--budgets``) holds ``steps_<N>/`` for each budget, each one budget's
ablation folder (this tool's marker; ``ablation.json``: the design, per arm and seed the final validation loss, its
curve and the command of the run, the parameters of each arm, the comparisons and the overall test, the wall time
``seconds``; ``loss_curves.png``; ``runs/<arm>/seed_<n>/`` with each final model, ``configs/<arm>/`` and
``tokenizer/``, which the committed folders leave out). The longest budget chose each arm's rate, every shorter one
trained each arm at it, all with one tokenizer. The verdict is the longest budget's, and counts only where its
reference arm is below the Kneser-Ney bigram on the same tokens. Beside them, ``budgets.png`` (each arm minus the
reference against training tokens, and the reference's loss against the bigram line) and ``budgets.json``:

- ``tool`` ("eval.ablation"), ``kind`` ("budgets"), ``axis``, ``command`` (the line that reproduced the folder),
  ``config``, ``reference``, ``equivalence_margin``, ``seeds``, ``lr_grid``, ``rates`` (the longest's grid: each
  arm's losses, choice and ``edge``; null without a grid), ``lrs`` (``{arm: rate}``, every budget's);
- ``scored_on`` ("test" or "validation"), ``eval_tokens`` (the tokens each loss is a mean over);
- ``parameters`` (``{arm: {"total", "non_embedding"}}``), ``parameter_difference`` (``{arm: non-embedding minus
  the reference's}``);
- ``ngram``: eval.ngram's Kneser-Ney ``unigram``/``bigram``/``trigram`` perplexities on the blocks scored, with
  the same tokenizer, counted on the training stream up to the longest budget's tokens (and ``split``,
  ``eval_tokens``, ``train_tokens``...); ``bigram_loss``: ln of the bigram perplexity, in nats;
- ``budgets``: ascending by steps, each ``{"max_steps", "tokens", "folder": "steps_<N>", "final_loss": {arm:
  {seed: loss}}, "mean_loss": {arm: mean}, "comparisons", "overall", "statement", "reference_loss" (the
  reference's mean), "reference_below_bigram" (the gate)}``, and for learned or selective trace arms
  ``"rates_moved": {arm: {"max", "mean", "per_seed"}}`` (described by the top-level ``rates_moved_measure``);
- ``longest`` (the steps whose verdict counts), ``seconds`` (the sum of the budgets' own, or null when one is not
  recorded).

``--summarize DIR`` rebuilds budgets.json and budgets.png from ``DIR/steps_*/ablation.json`` without training
(:func:`summarize_budgets`): ``DIR`` is this tool's own output, or a folder whose every child is a ``steps_<N>``
output of this tool (moved in by hand) besides this tool's own budgets.json/png.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM

import train_config
from ema_boundary import corpus, stats
from ema_boundary.figures import pyplot, save
from ema_boundary.io import MARKER, atomic_files, output_owner, read_json, write_json
from ema_boundary.usage import UsageError
from ema_boundary.verdicts import DIFFERENT, EQUIVALENT
from ema_boundary.yamlio import YAMLFileError, read_yaml_file
from eval import verdicts
from eval.ngram import kneser_ney
from eval.probes.models import load_causal_lm
from eval.runs import DATA_SETTINGS, read_spen_yaml
from modeling_spen.modeling_spen import SPENTraces  # importing modeling_spen registers SPEN with the Auto classes
from modeling_spen.variants import PREDICTOR_VARIANTS, REFERENCE_VARIANT, SPEN_VARIANTS, TRACE_VARIANTS

# The arms are named SPEN variants (modeling_spen.variants, one table for the ablations, the recall map and the
# plans): the paper's ablation swaps the reader over the fixed-rate traces, the trace ablation swaps the trace
# under the linear reader. Both compare with the paper's linear reader over EMA traces.
REFERENCE = {"predictor": REFERENCE_VARIANT, "trace": REFERENCE_VARIANT}
TOOL = "eval.ablation"  # whose output folder this is (ema_boundary.io's marker)
DEFAULT_MARGIN = 0.02  # nats; declare your own before the run (--margin)
CURVE_POINTS = 8  # validation evaluations per run of the report's ablations (eval_steps = max_steps // CURVE_POINTS)
DESIGN = ("seed-blocked: every arm trains with each seed; a seed fixes the initialisation stream and every arm "
          "reads the same batches in the same order, so the arms are compared within seed (paired differences)")


def _variants(variants: Sequence[str] | None, traces: Sequence[str] | None) -> tuple[str, dict[str, dict]]:
    if traces is not None and variants is not None:
        raise UsageError("--variants and --trace are two different ablations: give one of them")
    if traces is not None:
        bad = [t for t in traces if t not in TRACE_VARIANTS]
        if bad or not traces:
            raise UsageError(f"--trace: {bad or 'nothing'} not in {list(TRACE_VARIANTS)}")
        return "trace", {t: SPEN_VARIANTS[t] for t in dict.fromkeys(traces)}
    names = list(PREDICTOR_VARIANTS) if variants is None else list(dict.fromkeys(variants))
    bad = [v for v in names if v not in PREDICTOR_VARIANTS]
    if bad or not names:
        raise UsageError(f"--variants: {bad or 'nothing'} not in {list(PREDICTOR_VARIANTS)}")
    return "predictor", {v: SPEN_VARIANTS[v] for v in names}


def analyse(final: dict[str, dict[str, float]], reference: str, margin: float | None) -> dict[str, Any]:
    """The seed-blocked analysis of final losses ``{arm: {seed: loss}}``: each arm minus ``reference``
    (:func:`stats.compare_arms`) and the overall blocked F test (None with one arm or one seed)."""
    comparisons = stats.compare_arms(final, reference, margin)
    n_seeds = min(len(v) for v in final.values())
    overall = stats.blocked_f_test(final) if len(final) > 1 and n_seeds > 1 else None
    return {"comparisons": {arm: c.as_dict() for arm, c in comparisons.items()}, "overall": overall,
            "statement": statement(comparisons, reference, overall, n_seeds)}


def statement(comparisons: dict[str, stats.Comparison], reference: str, overall: dict | None, seeds: int) -> str:
    """One sentence per arm (:func:`stats.describe`), then the overall test."""
    lines = [stats.describe(c, arm, reference, "nats") for arm, c in comparisons.items()]
    if overall is None:
        lines.append(f"{seeds} seed(s): no seed-blocked F test" if seeds < 2 else "one arm: nothing to compare")
    else:
        lines.append(f"any arm different (seed-blocked F test, {len(comparisons) + 1} arms x {len(overall['seeds'])} "
                     f"seeds): F = {overall['F']:.2f}, p = {overall['p']:.3g}")
    return "; ".join(lines)


def _plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, var) in enumerate(result["variants"].items()):
        runs = list(var["runs"].values())
        tokens = runs[0]["curve"]["val_tokens"]
        mean = [statistics.fmean(r["curve"]["val_loss"][j] for r in runs) for j in range(len(tokens))]
        left.plot(tokens, mean, color=colors[i % len(colors)], marker=".", label=name)
    left.set(xlabel="training tokens", ylabel="validation loss (nats), mean over seeds",
             title=f"{result['axis']} ablation: validation loss")
    left.legend(fontsize=7)
    comps = result["comparisons"]
    names = list(comps)
    for i, name in enumerate(names):
        c = comps[name]
        lo, hi = c["ci95"]
        color = {EQUIVALENT: "tab:green", DIFFERENT: "tab:red"}.get(c["verdict"], "tab:gray")
        if math.isfinite(lo):
            right.plot([lo, hi], [i, i], color=color, lw=3)
        right.plot(c["difference"], i, "o", color=color)
    margin = result["equivalence_margin"]
    if margin:
        right.axvspan(-margin, margin, color="tab:green", alpha=0.12, label=f"equivalence margin ±{margin:g}")
    right.axvline(0, color="black", lw=0.8)
    right.set_yticks(range(len(names)), names, fontsize=8)
    right.set(xlabel=f"final {result.get('scored_on', 'validation')} loss minus {result['reference']} (nats)",
              title=f"paired by seed, 95% intervals ({len(result['seeds'])} seeds)\n"
                    "green: equivalent, red: different, gray: not resolved")
    right.title.set_fontsize(9)
    if margin:
        right.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


def design(config: str | Path, seeds: int, *, variants: Sequence[str] | None, traces: Sequence[str] | None,
            max_steps: int | None, lr: float | Mapping[str, float] | None, lr_grid: Sequence[float] | None,
            workers: int, reference: str | None, margin: float | None, tokenizer: str | Path | None,
            seed: int | None) -> tuple[dict[str, Any], str, dict[str, dict], str]:
    """Every check of an ablation's settings, before anything is written: the YAML's settings, the axis, the arms
    ``{name: SPEN fields}`` and the reference arm; one UsageError line naming the flag otherwise."""
    for name, value in (("--seeds", seeds), ("--workers", workers), ("--max_steps", max_steps)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise UsageError(f"{name} must be a positive integer, got {value!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise UsageError(f"--seed must be a non-negative integer, got {seed!r}")
    if lr is not None and lr_grid is not None:
        raise UsageError("--learning_rate and --lr_grid: give one (a rate, or a grid each arm chooses from)")
    for rate in (lr.values() if isinstance(lr, Mapping) else [lr]) if lr is not None else list(lr_grid or []):
        if isinstance(rate, bool) or not (isinstance(rate, (int, float)) and 0 < rate < math.inf):
            raise UsageError(f"--learning_rate must be a positive number, got {rate!r}")
    if lr_grid is not None and (not lr_grid or len(set(lr_grid)) != len(lr_grid)):
        raise UsageError(f"--lr_grid must list distinct rates, got {list(lr_grid)!r}")
    if margin is not None and not (isinstance(margin, (int, float)) and 0 < margin < math.inf):
        raise UsageError(f"--margin must be a positive number, got {margin!r}")
    if tokenizer is not None and not (Path(tokenizer) / "tokenizer_config.json").is_file():
        raise UsageError(f"--tokenizer {tokenizer}: not a tokenizer folder (no tokenizer_config.json)")
    cfg = read_spen_yaml(Path(config), "the ablation swaps SPEN's predictor or trace")
    axis, chosen = _variants(variants, traces)
    reference = reference or REFERENCE[axis]
    if reference not in chosen:
        raise UsageError(f"--reference {reference!r} is not among the arms {list(chosen)}")
    if isinstance(lr, Mapping) and set(lr) != set(chosen):
        raise UsageError(f"--learning_rate: rates for {sorted(lr)}, but the arms are {list(chosen)}")
    return cfg, axis, chosen, reference


def build_tokenizer(cfg: dict[str, Any], data: list[str], folder: Path) -> Path:
    """The YAML's tokenizer (or a BPE trained on the data), saved once for every run of the ablation."""
    vocab = json.loads((Path(cfg["model_name_or_path"]) / "config.json").read_text())["vocab_size"]
    try:
        tok, _ = corpus.load_tokenizer(cfg["tokenizer_name"], data, cfg["val_every"], vocab, cfg["bpe_train_docs"],
                                           cfg["model_name_or_path"], cfg["test_every"])  # as train.py trains it
    except corpus.DataError as e:
        raise UsageError(f"train.py: {e}") from None
    tok.save_pretrained(folder)
    return folder.resolve()


# ---------------------------------------------------------------------------------------------
# Budgets: the same ablation at several training lengths, the verdict read at the longest
# ---------------------------------------------------------------------------------------------

BUDGET_FOLDER = re.compile(r"steps_([1-9][0-9]*)")  # one budget's ablation inside a budgets folder
BUDGETS_JSON, BUDGETS_PNG = "budgets.json", "budgets.png"
# The settings of the blocks the runs are scored on and of the training stream: the n-gram reference reads them.
SPLIT_SETTINGS = DATA_SETTINGS  # the sweep's: one list of the settings that fix the blocks
# Every ablation of one budgets folder must agree on these (ablation.json keys); only the steps differ.
SHARED_DESIGN = ("axis", "config", "seeds", "reference", "equivalence_margin", "data", "scored_on", "lrs")
LEARNED_TRACES = ("learned", "selective")  # trace kinds whose write rates train (from the fixed rates)
RATES_MOVED = ("|write rate of the final model - write rate of a freshly initialised model of the same config| "
               "over every trace slot, channel and layer (the selective trace: its rate at zero input, the bias; "
               "the input-dependent part is not summarised); max and mean per seed, then over seeds")


def budget_steps(budgets: Sequence[int]) -> list[int]:
    if (not budgets or len(set(budgets)) != len(budgets)
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in budgets)):
        raise UsageError(f"--budgets must list distinct positive step counts, got {list(budgets)!r}")
    return sorted(budgets)


def budgets_command(config: str | Path, seeds: int, out_dir: str | Path, budgets: Sequence[int], *, axis: str,
                    arms: Sequence[str], reference: str, margin: float | None,
                    lr: float | Mapping[str, float] | None, lr_grid: Sequence[float] | None,
                    data: Sequence[str] | None, tokenizer: str | Path | None = None, seed: int | None = None,
                    workers: int = 1) -> str:
    """The ``python -m eval.ablation --budgets`` line that reproduces a budgets folder (a flag left at its
    default is left out)."""
    args: list[str] = ["--config", str(config), "--seeds", str(seeds)]
    if seed is not None:
        args += ["--seed", str(seed)]
    args += ["--trace" if axis == "trace" else "--variants", ",".join(arms), "--reference", reference]
    if margin is not None:
        args += ["--margin", f"{margin!r}"]
    if isinstance(lr, Mapping):
        args += ["--learning_rate", ",".join(f"{arm}={float(rate)!r}" for arm, rate in lr.items())]
    elif lr is not None:
        args += ["--learning_rate", f"{float(lr)!r}"]
    if lr_grid:
        args += ["--lr_grid", ",".join(f"{float(rate)!r}" for rate in lr_grid)]
    args += ["--budgets", ",".join(str(b) for b in sorted(budgets))]
    if data:
        args += ["--data", *map(str, data)]
    if tokenizer is not None:
        args += ["--tokenizer", str(tokenizer)]
    if workers != 1:
        args += ["--workers", str(workers)]
    return f"python -m eval.ablation {shlex.join([*args, '--output_dir', str(out_dir)])}"


def _summary(results: dict[int, dict[str, Any]], root: Path, settings: dict[str, Any], tokenizer: Path,
             command: str, seconds: float | None) -> dict[str, Any]:
    """budgets.json's content from each budget's ablation.json (``results``, by steps) in ``root/steps_<N>``."""
    steps = sorted(results)
    longest = results[steps[-1]]
    ref, scored_on = longest["reference"], longest.get("scored_on", "validation")
    ngram = kneser_ney(settings, tokenizer, longest["tokens"], scored_on)
    bigram_loss = math.log(ngram["bigram"])
    params = {arm: {"total": var["parameters"], "non_embedding": var["non_embedding_parameters"]}
              for arm, var in longest["variants"].items()}
    budgets = []
    for n in steps:
        r = results[n]
        final = r["final_test_loss"] if scored_on == "test" else r["final_val_loss"]
        mean = {arm: statistics.fmean(losses.values()) for arm, losses in final.items()}
        entry = {"max_steps": n, "tokens": r["tokens"], "folder": f"steps_{n}", "final_loss": final,
                 "mean_loss": mean, "comparisons": r["comparisons"], "overall": r["overall"],
                 "statement": r["statement"], "reference_loss": mean[ref],
                 "reference_below_bigram": verdicts.ngram_gate({ref: mean[ref]}, bigram_loss).holds}
        moved = {arm: m for arm, var in r["variants"].items()
                 if (m := _arm_rates_moved(root / f"steps_{n}", var)) is not None}
        if moved:
            entry["rates_moved"] = moved
        budgets.append(entry)
    summary = {
        "tool": TOOL, "kind": "budgets", "axis": longest["axis"], "command": command, "config": longest["config"],
        "reference": ref, "equivalence_margin": longest["equivalence_margin"], "seeds": longest["seeds"],
        "lr_grid": longest["lr_grid"], "rates": longest.get("rates"), "lrs": longest["lrs"], "scored_on": scored_on,
        "eval_tokens": longest["test_tokens"] if scored_on == "test" else ngram["eval_tokens"],
        "parameters": params,
        "parameter_difference": {arm: p["non_embedding"] - params[ref]["non_embedding"] for arm, p in params.items()},
        "ngram": ngram, "bigram_loss": bigram_loss, "budgets": budgets, "longest": steps[-1], "seconds": seconds,
    }
    if any("rates_moved" in b for b in budgets):
        summary["rates_moved_measure"] = RATES_MOVED
    return summary


def _arm_rates_moved(folder: Path, var: dict[str, Any]) -> dict[str, Any] | None:
    """How far a learned or selective trace arm's write rates moved in training (:data:`RATES_MOVED`), from each
    seed's final model in ``folder``; None for a trace whose rates are fixed or a run without its final model."""
    if var["fields"].get("trace") not in LEARNED_TRACES:
        return None
    finals = {seed: folder / run["run_dir"] / "final" for seed, run in var["runs"].items()}
    if not all((f / "config.json").is_file() for f in finals.values()):
        return None
    per_seed = {seed: rates_moved(final) for seed, final in finals.items()}
    return {"max": max(m["max"] for m in per_seed.values()),
            "mean": statistics.fmean(m["mean"] for m in per_seed.values()), "per_seed": per_seed}


def rates_moved(final: str | Path) -> dict[str, float]:
    """Max and mean |trained - initial| trace write rate of a SPEN checkpoint, over every slot, channel and layer.

    The initial rates are those of a freshly initialised model of the same config (``SPENPreTrainedModel``'s
    init writes them from ``trace_rates``, whatever the seed); a selective trace is read at zero input."""
    config = AutoConfig.from_pretrained(final)
    with torch.random.fork_rng():  # the fresh model's random weights are not read; keep the caller's stream
        fresh = AutoModelForCausalLM.from_config(config)
    trained = load_causal_lm(final, dtype=None)  # quiet; weights that do not fit their config.json: one line
    zero = torch.zeros(1, 1, config.hidden_size)
    with torch.no_grad():
        moved = torch.cat([(a.write_rates(zero) - b.write_rates(zero)).abs().flatten()
                           for a, b in zip((m for m in trained.modules() if isinstance(m, SPENTraces)),
                                           (m for m in fresh.modules() if isinstance(m, SPENTraces)), strict=True)])
    return {"max": float(moved.max()), "mean": float(moved.mean())}


def _plot_budgets(summary: dict[str, Any], path: Path) -> None:
    """Each arm minus the reference against training tokens (95% intervals, the equivalence band), and the
    reference's loss against tokens with the Kneser-Ney bigram line."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    budgets, ref, margin = summary["budgets"], summary["reference"], summary["equivalence_margin"]
    tokens = [b["tokens"] for b in budgets]
    arms = list(budgets[-1]["comparisons"])
    for i, arm in enumerate(arms):
        color = colors[i % len(colors)]
        shift = 1.04 ** (i - (len(arms) - 1) / 2)  # side by side at each budget, so the intervals do not overlap
        x = [t * shift for t in tokens]
        comps = [b["comparisons"][arm] for b in budgets]
        left.plot(x, [c["difference"] for c in comps], marker="o", color=color, label=arm)
        for xi, c in zip(x, comps, strict=True):
            lo, hi = c["ci95"]
            if math.isfinite(lo) and math.isfinite(hi):
                left.plot([xi, xi], [lo, hi], color=color, lw=2)
    if margin:
        left.axhspan(-margin, margin, color="tab:green", alpha=0.12, label=f"equivalence margin ±{margin:g}")
    left.axhline(0, color="black", lw=0.8)
    for ax in (left, right):  # a tick at each budget
        ax.set_xscale("log")
        ax.set_xticks(tokens, [f"{b['max_steps']} steps\n{b['tokens']:,}" for b in budgets], fontsize=7)
        ax.minorticks_off()
    left.set(xlabel="training tokens", ylabel=f"final {summary['scored_on']} loss minus {ref} (nats)",
             title=f"{summary['axis']} ablation: each arm minus {ref}, paired by seed, 95% intervals "
                   f"({len(summary['seeds'])} seeds)")
    left.title.set_fontsize(9)
    left.legend(fontsize=7)
    for b in budgets:
        seeds = list(b["final_loss"][ref].values())
        right.plot([b["tokens"]] * len(seeds), seeds, ".", color="tab:gray")
    right.plot(tokens, [b["reference_loss"] for b in budgets], marker="o", color="tab:blue",
               label=f"{ref} (mean over seeds; dots: seeds)")
    right.axhline(summary["bigram_loss"], color="tab:red", ls="--",
                  label=f"Kneser-Ney bigram (perplexity {summary['ngram']['bigram']:.1f})")
    right.set(xlabel="training tokens", ylabel=f"final {summary['scored_on']} loss (nats)",
              title=f"the reference arm against the Kneser-Ney bigram (the gate, read at {summary['longest']} steps: "
                    f"{'passes' if budgets[-1]['reference_below_bigram'] else 'fails'})")
    right.title.set_fontsize(9)
    right.legend(fontsize=7)
    fig.tight_layout()
    save(fig, path)


# ---------------------------------------------------------------------------------------------
# --summarize: budgets.json and budgets.png again from a budgets folder's ablations
# ---------------------------------------------------------------------------------------------


def summarize_budgets(folder: str | Path) -> dict[str, Any]:
    """budgets.json and budgets.png of ``folder`` rebuilt from its ``steps_<N>/ablation.json`` (no training).

    ``folder`` is either this tool's own budgets output (it carries eval.ablation's marker), or a folder whose
    every child is a ``steps_<N>`` ablation output of this tool (folders moved in by hand), beside at most this
    tool's own budgets.json and budgets.png. The ablations must agree on their design (:data:`SHARED_DESIGN`:
    only the steps differ), and each folder's name must match its steps. Only budgets.json and budgets.png are
    written (atomically). Returns budgets.json's content; bad input raises UsageError naming the file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"--summarize {folder}: no such folder")
    found = {}
    for child in sorted(folder.iterdir()):
        m = BUDGET_FOLDER.fullmatch(child.name)
        if m and child.is_dir():
            found[int(m.group(1))] = child
    if not found:
        raise UsageError(f"--summarize {folder}: neither a sweep folder nor a folder of steps_<N> ablations (the "
                         "earlier output of this command)")
    _check_budgets_folder(folder, found.values())
    results: dict[int, dict[str, Any]] = {}
    for n, child in sorted(found.items()):
        if output_owner(child) != TOOL:
            raise UsageError(f"{child}: not an output of {TOOL} (no marker {MARKER} naming it)")
        path = child / "ablation.json"
        r = read_json(path, "ablation.json", f"{child.name} is not a finished ablation")
        if isinstance(r, dict):
            r.setdefault("scored_on", "validation")  # written before the test blocks were scored
        missing = [k for k in ("max_steps", "tokens", "variants", "comparisons", "overall", "statement",
                               "final_val_loss", "lr_grid", *SHARED_DESIGN) if not isinstance(r, dict) or k not in r]
        if missing:
            raise UsageError(f"{path}: not an ablation.json of {TOOL} (no {', '.join(missing)})")
        if r["max_steps"] != n:
            raise UsageError(f"{path}: max_steps {r['max_steps']}, but its folder is {child.name}")
        results[n] = r
    longest_n = max(results)
    longest, longest_path = results[longest_n], found[longest_n] / "ablation.json"
    for n, r in results.items():
        for key in (*SHARED_DESIGN, "variants"):
            mine, theirs = r[key], longest[key]
            if key == "variants":
                mine, theirs = list(mine), list(theirs)
            if key == "lrs":
                same = set(mine) == set(theirs) and all(math.isclose(mine[a], theirs[a], rel_tol=1e-9) for a in mine)
            else:
                same = mine == theirs
            if not same:
                raise UsageError(f"{found[n] / 'ablation.json'}: {'arms' if key == 'variants' else key} {mine!r} "
                                 f"differs from {longest_path}'s {theirs!r}")
    # One tokenizer for every budget (each folder keeps its copy, or built it from the same YAML).
    tokenizers = {n: child / "tokenizer" / "tokenizer.json" for n, child in found.items()
                  if (child / "tokenizer" / "tokenizer.json").is_file()}
    texts = {n: path.read_bytes() for n, path in tokenizers.items()}
    for n, text in texts.items():
        if text != texts[max(texts)]:
            raise UsageError(f"{tokenizers[n]}: differs from {tokenizers[max(texts)]} (every budget reads one "
                             "tokenizer)")
    top = found[longest_n]
    settings = _recorded_settings(top, longest)
    seconds = [r.get("seconds") for r in results.values()]
    total = round(sum(seconds), 1) if all(isinstance(s, (int, float)) for s in seconds) else None
    lrs = longest["lrs"]
    command = budgets_command(longest["config"], len(longest["seeds"]), folder, list(results), axis=longest["axis"],
                              arms=list(longest["variants"]), reference=longest["reference"],
                              margin=longest["equivalence_margin"],
                              lr=None if longest["lr_grid"] else (next(iter(lrs.values()))
                                                                  if len(set(lrs.values())) == 1 else lrs),
                              lr_grid=longest["lr_grid"], data=longest["data"], seed=longest["seeds"][0])
    with atomic_files(folder, (BUDGETS_JSON, BUDGETS_PNG)) as scratch:  # the scratch holds a rebuilt tokenizer too
        tokenizer = top / "tokenizer"
        if not (tokenizer / "tokenizer_config.json").is_file():  # rebuilt as the runs built it, from the YAML
            model = str(top / "configs" / longest["reference"])
            tokenizer = build_tokenizer({**settings, "model_name_or_path": model}, list(settings["data"]),
                                        scratch / "tokenizer")
        summary = _summary(results, folder, settings, tokenizer, command, total)
        write_json(scratch / BUDGETS_JSON, summary)
        _plot_budgets(summary, scratch / BUDGETS_PNG)
    return summary


def _check_budgets_folder(folder: Path, steps_folders: Any) -> None:
    """Refuse to write into ``folder`` unless it is this tool's own (see :func:`summarize_budgets`)."""
    summary = folder / BUDGETS_JSON
    ours = False
    if summary.exists():
        try:
            recorded = json.loads(summary.read_text(encoding="utf-8"))
            ours = recorded.get("tool") == TOOL and recorded.get("kind") == "budgets"
        except (OSError, UnicodeDecodeError, ValueError, AttributeError):
            ours = False
        if not ours:
            raise UsageError(f"{summary}: not a budgets.json of {TOOL}; nothing was written (it is never replaced)")
    if output_owner(folder) == TOOL:
        return
    allowed = {p.name for p in steps_folders} | ({BUDGETS_JSON, BUDGETS_PNG} if ours else set())
    for child in sorted(folder.iterdir()):
        if child.name not in allowed:
            raise UsageError(f"{child}: {folder} holds more than steps_<N> ablation folders and this tool's "
                             f"budgets.json/budgets.png; nothing was written")


def _recorded_settings(folder: Path, result: dict[str, Any]) -> dict[str, Any]:
    """The YAML settings a budget's runs read (:data:`SPLIT_SETTINGS`): from the folder's own copy of the
    reference arm's train.yaml, else from the YAML ablation.json names; the data ablation.json records."""
    arm_yaml = folder / "configs" / result["reference"] / "train.yaml"
    try:
        cfg = read_yaml_file(arm_yaml)[0] if arm_yaml.is_file() else None
    except YAMLFileError as e:
        raise UsageError(f"not a readable train.py YAML: {e}") from None
    if not isinstance(cfg, dict) or any(k not in cfg for k in SPLIT_SETTINGS):
        try:
            cfg = train_config.read_yaml(result["config"])
        except train_config.ConfigError as e:
            raise UsageError(f"{folder / 'ablation.json'}: its config {e}") from None
    return {**{k: cfg[k] for k in SPLIT_SETTINGS}, "data": result["data"]}


# ---------------------------------------------------------------------------------------------
# The command line, as an alias of the sweep
# ---------------------------------------------------------------------------------------------

