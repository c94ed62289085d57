"""Run several models on the same lm-eval tasks and tabulate them (the harness's Python API, model "hf").

    python -m eval.compare --models outputs/spen-tiny/final outputs/gpt2-tiny/final gpt2 \\
        --tasks pydoc_val grammar_roles --out outputs/compare

A model is a local folder (a SPEN checkpoint, a GPT-2 folder, train.py's final/) or a hub name. Tasks
are looked up in eval/tasks (plus --include_path) and in the harness's own registry. Writes

- ``results.json``: per model, the metrics of every task (and group), or why the model did not run;
- ``table.md``: one row per task and metric, one column per model;
- ``compare.png``: one bar chart per task (its main metric), one bar per model.

A model that cannot be found (offline and not in the local cache, or a folder without config.json) is
reported in one line and the other models still run; so is a model that fails during evaluation. Exit
status: 0 when every model that was found ran (and at least one did), 1 otherwise, 2 for bad arguments
(nothing written).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ema_boundary.cli import EXIT_USAGE, UsageError, UsageParser, looks_like_path, positive_int
from ema_boundary.figures import pyplot
from ema_boundary.io import OutputError, atomic_dir, check_output_dir, write_json

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
# The metric plotted for a task: the first of these it reports. Bits per byte first: tokenizer-independent
# like word perplexity, but on a linear scale that stays readable when perplexities differ by 10^3.
MAIN_METRICS = ("bits_per_byte", "acc", "exact_match", "word_perplexity", "byte_perplexity")
LOG_SCALE = {"word_perplexity", "byte_perplexity", "perplexity"}


class ModelNotFound(Exception):
    """The model is neither a model folder nor resolvable on the hub (or its cache)."""


def resolve_model(name: str) -> str:
    """A loadable path or hub id for `name`, or ModelNotFound with a one-line reason."""
    path = Path(name)
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"{name}: folder has no config.json (not a save_pretrained model)")
        return str(path.resolve())
    from transformers import AutoConfig

    try:  # offline, this succeeds only from the local cache; it fails fast either way
        AutoConfig.from_pretrained(name, trust_remote_code=True)
    except Exception as e:  # OSError, ValueError, hub and network errors: all mean "cannot get it"
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelNotFound(f"{name}: not a local folder and not available from the hub ({reason[:160]})") from None
    return name


def _task_manager(tasks: Sequence[str], include_path: Sequence[str | Path]):
    """A TaskManager for `tasks` (with the built-in registry too if one is not in our folders).

    Indexing the harness's own thousands of task YAMLs takes seconds to minutes on a busy CPU, so the
    project's folders are tried alone first and the built-in registry only when a task is not there.
    """
    from lm_eval.tasks import TaskManager

    paths = [str(p) for p in [TASKS_DIR, *include_path]]
    for defaults in (False, True):
        manager = TaskManager(include_path=paths, include_defaults=defaults)
        if all(t in manager.all_tasks for t in tasks):
            return manager
    return manager


def _metrics(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{task: {metric: value}} from lm-eval's `results` ("metric,filter" keys), stderr and aliases dropped."""
    out: dict[str, dict[str, float]] = {}
    for task, values in results.items():
        row = {}
        for key, value in values.items():
            metric, _, _filter = key.partition(",")
            # sample_len is a group's bookkeeping, not a score
            if metric in ("alias", "sample_len") or metric.endswith("_stderr") or not isinstance(value, (int, float)):
                continue
            row[metric] = float(value)
        out[task] = row
    return out


def _main_metric(metrics: dict[str, float]) -> str | None:
    return next((m for m in MAIN_METRICS if m in metrics), next(iter(metrics), None))


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:,.2f}" if abs(v) >= 100 else f"{v:.4f}"


def _table(result: dict[str, Any]) -> str:
    models = list(result["models"])
    ran = {m: r for m, r in result["models"].items() if r["status"] == "ok"}
    rows: list[tuple[str, str]] = []
    for r in ran.values():
        for task, metrics in r["metrics"].items():
            rows += [(task, m) for m in metrics if (task, m) not in rows]
    lines = ["| task | metric | " + " | ".join(f"`{m}`" for m in models) + " |",
             "|---|---|" + "---:|" * len(models)]
    for task, metric in sorted(rows):
        cells = [_fmt(ran[m]["metrics"].get(task, {}).get(metric)) if m in ran else "not run" for m in models]
        lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    notes = [f"- `{m}`: not run: {r['error']}" for m, r in result["models"].items() if r["status"] != "ok"]
    settings = result["settings"]
    header = (f"lm-eval {result['lm_eval_version']}, batch size {settings['batch_size']}, "
              f"limit {settings['limit']}, num_fewshot {settings['num_fewshot']}\n\n")
    return header + "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _plot(result: dict[str, Any], path: Path) -> None:
    plt = pyplot()
    ran = {m: r for m, r in result["models"].items() if r["status"] == "ok"}
    tasks = sorted({t for r in ran.values() for t in r["metrics"]})
    fig, axes = plt.subplots(1, max(1, len(tasks)), figsize=(3.2 * max(1, len(tasks)) + 1, 3.8), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, task in zip(axes[0], tasks, strict=False):
        metric = _main_metric(next(r["metrics"][task] for r in ran.values() if task in r["metrics"]))
        names = [m for m in ran if metric in ran[m]["metrics"].get(task, {})]
        values = [ran[m]["metrics"][task][metric] for m in names]
        ax.bar(range(len(names)), values, color=[colors[list(ran).index(m) % len(colors)] for m in names])
        ax.set_xticks(range(len(names)), [Path(m).name if Path(m).name != "final" else Path(m).parent.name
                                          for m in names], rotation=25, ha="right", fontsize=8)
        if metric in LOG_SCALE and all(v > 0 for v in values):
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0, top=max([*values, 0.0]) * 1.15 or 1.0)  # all-zero accuracies: a visible 0..1 axis
        ax.set_title(f"{task}\n{metric}", fontsize=9)
    if not tasks:
        axes[0][0].text(0.5, 0.5, "no model ran", ha="center", va="center")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def compare(models: Sequence[str], tasks: Sequence[str], out_dir: str | Path, *, batch_size: int | str = 8,
            limit: int | float | None = None, num_fewshot: int | None = None, device: str | None = None,
            include_path: Sequence[str | Path] = (), model_args: str = "") -> dict[str, Any]:
    """Evaluate every model on `tasks` with lm-eval's simple_evaluate; write results.json, table.md,
    compare.png into `out_dir` (replaced atomically) and return the content of results.json.

    A model that cannot be found is recorded with status "missing" and its reason; the others still run.
    Unknown tasks or an empty model list raise UsageError before anything is written.
    `model_args` is appended to every model's arguments (e.g. "dtype=bfloat16").
    """
    from importlib.metadata import version

    import lm_eval
    import torch

    if not models:
        raise UsageError("--models: give at least one model")
    if not tasks:
        raise UsageError("--tasks: give at least one task")
    for p in include_path:
        if not Path(p).is_dir():
            raise UsageError(f"--include_path {p}: no such folder")
    for name in models:  # a local folder that is missing or is not a model is a typo, not a skipped model
        path = Path(name)
        if path.exists() and not (path / "config.json").is_file():
            raise UsageError(f"--models {name}: not a save_pretrained folder (no config.json)")
        if not path.exists() and looks_like_path(name):
            raise UsageError(f"--models {name}: no such folder")
    try:
        check_output_dir(out_dir)
    except OutputError as e:
        raise UsageError(f"--out {e}") from None
    manager = _task_manager(tasks, include_path)
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        raise UsageError(f"--tasks: unknown task(s) {', '.join(unknown)} (see eval/tasks or `lm_eval ls tasks`)")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    result: dict[str, Any] = {
        "lm_eval_version": version("lm_eval"), "tasks": list(tasks),
        "settings": {"batch_size": batch_size, "limit": limit, "num_fewshot": num_fewshot, "device": device,
                     "model_args": model_args},
        "models": {},
    }
    for name in tqdm(list(dict.fromkeys(models)), desc="models", unit="model"):
        try:
            pretrained = resolve_model(name)
        except ModelNotFound as e:
            print(f"eval.compare: skipping {e}", file=sys.stderr)
            result["models"][name] = {"status": "missing", "error": str(e)}
            continue
        args = f"pretrained={pretrained},trust_remote_code=True" + (f",{model_args}" if model_args else "")
        try:
            out = lm_eval.simple_evaluate(model="hf", model_args=args, tasks=list(tasks), task_manager=manager,
                                          batch_size=batch_size, limit=limit, num_fewshot=num_fewshot,
                                          device=device, log_samples=False)
        except Exception as e:  # one broken model must not cost the others' results; the table says why
            reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            print(f"eval.compare: {name} failed: {reason}", file=sys.stderr)
            result["models"][name] = {"status": "failed", "pretrained": pretrained, "error": reason}
            continue
        result["models"][name] = {
            "status": "ok", "pretrained": pretrained, "metrics": _metrics(out["results"]),
            "n_samples": {t: n.get("effective") for t, n in out.get("n-samples", {}).items()},
            "versions": {t: v for t, v in out.get("versions", {}).items()},
        }
    with atomic_dir(Path(out_dir)) as tmp:
        write_json(tmp / "results.json", result)
        (tmp / "table.md").write_text(_table(result))
        _plot(result, tmp / "compare.png")
    return result


def _batch_size(value: str) -> int | str:
    # lm-eval's "auto" probes the largest batch that fits; otherwise a positive integer.
    return value if value == "auto" or value.startswith("auto:") else positive_int(value)


def _limit(value: str) -> int | float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value!r}")
    return v if v < 1 else int(v)  # lm-eval: < 1 is a fraction of each task, else a count


def main(argv: Sequence[str] | None = None) -> int:
    p = UsageParser(prog="python -m eval.compare", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", required=True, metavar="MODEL", help="model folders or hub names")
    p.add_argument("--tasks", nargs="+", required=True, metavar="TASK", help="lm-eval task or group names")
    p.add_argument("--out", required=True, help="output folder (replaced atomically)")
    p.add_argument("--batch_size", type=_batch_size, default=8, help="int or 'auto' (default 8)")
    p.add_argument("--limit", type=_limit, help="documents per task: a count, or a fraction if < 1")
    p.add_argument("--num_fewshot", type=int, help="few-shot examples (default: each task's own)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--include_path", nargs="+", default=[], help="more task folders, after eval/tasks")
    p.add_argument("--model_args", default="", help="extra hf model arguments, e.g. dtype=bfloat16")
    args = p.parse_args(argv)
    try:
        result = compare(args.models, args.tasks, args.out, batch_size=args.batch_size, limit=args.limit,
                         num_fewshot=args.num_fewshot, device=args.device, include_path=args.include_path,
                         model_args=args.model_args)
    except UsageError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print((Path(args.out) / "table.md").read_text())
    status = [r["status"] for r in result["models"].values()]
    print(f"{status.count('ok')}/{len(status)} models ran; wrote {args.out}/results.json, table.md, compare.png")
    # A model that is not there (offline) is reported, not fatal; one that broke is.
    return 0 if "ok" in status and "failed" not in status else 1


if __name__ == "__main__":
    sys.exit(main())
