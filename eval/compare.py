"""Run several models on the same lm-eval tasks and tabulate them (the harness's Python API, model "hf").

    python -m eval.compare --model_name_or_path outputs/spen-tiny/final outputs/gpt2-tiny/final gpt2 \\
        --tasks pydoc_val,grammar_roles --output_dir outputs/compare

    python -m eval.compare --model_name_or_path spen=outputs/spen-tiny/final gpt2=outputs/gpt2-tiny/final \
        --text my.txt --output_dir outputs/compare-mine      # your own text: bits per byte, word perplexity

A model is a local folder (a SPEN checkpoint, a GPT-2 folder, train.py's final/) or a hub name, optionally
labelled ``NAME=FOLDER`` (the label names its column and bar). Tasks are looked up in eval/tasks (plus
--include_path) and in the harness's own registry; ``--text FILE`` adds a perplexity task on a file of yours
(.txt, .jsonl, .parquet, or ``embedded``), cut into documents and held out as train.py does (its validation
documents by default, as eval.gap and eval.probes read --text). Writes

- ``results.json``: per model, the metrics of every task (and group), or why the model did not run;
- ``table.md``: one row per task and metric, one column per model;
- ``compare.png``: one bar chart per task (its main metric), one bar per model.

Models are checked before any evaluation (``eval.probes.models.resolve_model``): a local folder that is
missing, has no config.json, has unreadable weights or weights that do not fit its config.json (missing,
unexpected or resized tensors, matched on the meta device) is bad input; a hub name that cannot be reached
(offline and not in the local cache) is reported in one line and the other models still run; so is a model
that fails during evaluation. Exit status: 0 when every model that was found ran (and at least one did), 1
otherwise, 2 for bad arguments (nothing written).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm.auto import tqdm

from ema_boundary.figures import pyplot
from ema_boundary.io import atomic_dir, check_output_dir, write_json, write_jsonl
from ema_boundary.usage import (
    EXIT_USAGE,
    UsageError,
    UsageParser,
    add_output_dir,
    comma_list,
    first_line,
    flatten,
    looks_like_path,
    non_negative_int,
    positive_int,
)

if TYPE_CHECKING:
    from eval.probes.models import ModelError

TOOL = "eval.compare"  # whose output folder this is (ema_boundary.io's marker)
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
# The metric plotted for a task: the first of these it reports. Bits per byte first: tokenizer-independent
# like word perplexity, but on a linear scale that stays readable when perplexities differ by 10^3.
MAIN_METRICS = ("bits_per_byte", "acc", "exact_match", "word_perplexity", "byte_perplexity")
LOG_SCALE = {"word_perplexity", "byte_perplexity", "perplexity"}


def _task_manager(tasks: Sequence[str], include_path: Sequence[str | Path]):
    """A TaskManager for `tasks` (with the built-in registry too if one is not in our folders).

    Indexing the harness's own thousands of task YAMLs takes seconds to minutes on a busy CPU, so the
    project's folders are tried alone first and the built-in registry only when a task is not there.
    """
    from lm_eval.tasks import TaskManager  # deferred: lm_eval takes seconds to import; --help answers without it

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


def _pretrained(names: Sequence[str]) -> dict[str, str | ModelError]:
    """Each model's loadable path or hub id, or why a hub name cannot be had (recorded, not fatal), by its label:
    NAME of ``NAME=FOLDER_OR_HUB_NAME``, else the model as given. A local folder that is missing or broken is a
    typo or a damaged checkpoint, and two models of one label are ambiguous: UsageError, before any work."""
    # deferred: the models' module imports transformers and modeling_spen (seconds); --help answers without them
    from eval.probes.models import ModelError, resolve_model, split_name

    found: dict[str, str | ModelError] = {}
    for name in names:
        try:
            label = split_name(name)[0] or name
        except ModelError as e:
            raise UsageError(f"--model_name_or_path {e}") from None
        if label in found:
            raise UsageError(f"--model_name_or_path: two models are labelled {label!r}; give each its own NAME=")
        try:
            spec = resolve_model(name, trust_remote_code=True)
        except ModelError as e:
            if Path(name).exists() or looks_like_path(name) or "=" in name:
                raise UsageError(f"--model_name_or_path {e}") from None
            found[label] = e
            continue
        found[label] = str(Path(spec.location).resolve()) if spec.source == "folder" else spec.location
    return found


def text_task(text: str, folder: Path, split: str = "validation", val_every: int = 10,
              test_every: int = 0) -> tuple[str, dict[str, Any]]:
    """``--text``: the documents of ``text`` (a local file or ``embedded``) as a perplexity task in ``folder`` (its
    JSON lines and a YAML including eval/tasks' perplexity template); returns the task's name and what results.json
    records of it. The documents are train.py's: cut by :func:`ema_boundary.corpus.file_documents`, held out by
    ``val_every`` and ``test_every``, ``split`` one of validation, test, train or all."""
    from ema_boundary import corpus  # deferred: datasets and transformers; --help answers without them

    try:
        if text not in corpus.EMBEDDED_SOURCES and not Path(text).is_file():
            raise corpus.DataError(f"{text}: no such file (or give 'embedded')")
        corpus.check_data([text], val_every, test_every)
        if split == "all":
            docs = (corpus.embedded_documents(text) if text in corpus.EMBEDDED_SOURCES
                    else list(corpus.file_documents(Path(text))))
        else:
            docs = [ex["text"] for ex in corpus.documents([text], split, val_every, test_every)]
    except corpus.DataError as e:
        raise UsageError(f"--text {first_line(e)}") from None
    if not docs:
        raise UsageError(f"--text {text}: no document in its {split} split (val_every {val_every}, test_every "
                         f"{test_every})")
    name = "text_" + (re.sub(r"\W+", "_", Path(text).stem).strip("_") or "file")
    write_jsonl(folder / f"{name}.jsonl", [{"text": d} for d in docs])
    (folder / f"{name}.yaml").write_text(json.dumps({  # JSON is YAML: no quoting rules to get wrong
        "include": str(TASKS_DIR / "perplexity" / "_perplexity_template.yaml"), "task": name,
        "dataset_path": "json", "dataset_kwargs": {"data_files": {"validation": str(folder / f"{name}.jsonl")}}}))
    return name, {"task": name, "file": text, "split": split, "val_every": val_every, "test_every": test_every,
                  "documents": len(docs), "characters": sum(map(len, docs))}


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
    text = result.get("text")
    about = (f"; task {text['task']}: {text['file']}, {text['split']} documents ({text['documents']:,}, "
             f"{text['characters']:,} characters; val_every {text['val_every']}, test_every {text['test_every']})"
             if text else "")
    header = (f"lm-eval {result['lm_eval_version']}, batch size {settings['batch_size']}, "
              f"limit {settings['limit']}, num_fewshot {settings['num_fewshot']}{about}\n\n")
    return header + "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _short(label: str) -> str:
    """A model's bar label: a NAME= label as given, a folder by its name (train.py's final/ by its run's)."""
    if "/" not in label:
        return label
    return Path(label).name if Path(label).name != "final" else Path(label).parent.name


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
        ax.set_xticks(range(len(names)), [_short(m) for m in names], rotation=25, ha="right", fontsize=8)
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
            include_path: Sequence[str | Path] = (), model_args: str = "", seed: int | None = None,
            overwrite: bool = False, text: str | None = None, split: str = "validation", val_every: int = 10,
            test_every: int = 0) -> dict[str, Any]:
    """Evaluate every model on `tasks` (and on the perplexity task of `text`, :func:`text_task`, when given) with
    lm-eval's simple_evaluate; write results.json, table.md, compare.png into `out_dir` (replaced atomically) and
    return the content of results.json.

    A hub model that cannot be found is recorded with status "missing" and its reason; the others still run.
    Unknown tasks, a broken local model folder, an output folder that is not this tool's (or is its earlier
    output without ``overwrite``) or an empty model list raise UsageError before anything is written.
    `model_args` is appended to every model's arguments (e.g. "dtype=bfloat16"); `seed`, when given, seeds
    lm-eval's python, numpy, torch and few-shot generators (None: lm-eval's defaults).
    """
    if not models:
        raise UsageError("--model_name_or_path: give at least one model")
    if not tasks and text is None:
        raise UsageError("--tasks: give at least one task, or --text FILE")
    for p in include_path:
        if not Path(p).is_dir():
            raise UsageError(f"--include_path {p}: no such folder")
    check_output_dir(out_dir, tool=TOOL, overwrite=overwrite)
    pretrained_of = _pretrained(list(dict.fromkeys(models)))
    with tempfile.TemporaryDirectory(prefix="eval_compare_text_") as scratch:
        text_record = None
        if text is not None:  # the task lives while the models run on it
            name, text_record = text_task(text, Path(scratch), split, val_every, test_every)
            tasks, include_path = [*tasks, name], [*include_path, scratch]
        return _evaluate(pretrained_of, list(tasks), out_dir, text_record, batch_size=batch_size, limit=limit,
                         num_fewshot=num_fewshot, device=device, include_path=include_path, model_args=model_args,
                         seed=seed, overwrite=overwrite)


def _evaluate(pretrained_of: dict[str, str | ModelError], tasks: list[str], out_dir: str | Path,
              text: dict[str, Any] | None, *, batch_size: int | str, limit: int | float | None,
              num_fewshot: int | None, device: str | None, include_path: Sequence[str | Path], model_args: str,
              seed: int | None, overwrite: bool) -> dict[str, Any]:
    """compare() once its models are found and its tasks are on disk."""
    import lm_eval  # deferred: as in _task_manager

    from eval.probes.models import ModelError  # deferred: as in _pretrained

    manager = _task_manager(tasks, include_path)
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        raise UsageError(f"--tasks: unknown task(s) {', '.join(unknown)} (see eval/tasks or `lm_eval ls tasks`)")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    result: dict[str, Any] = {
        "lm_eval_version": version("lm_eval"), "tasks": list(tasks),
        "settings": {"batch_size": batch_size, "limit": limit, "num_fewshot": num_fewshot, "device": device,
                     "model_args": model_args, "seed": seed},
        "models": {},
    }
    if text is not None:
        result["text"] = text
    seeds = {} if seed is None else {"random_seed": seed, "numpy_random_seed": seed, "torch_random_seed": seed,
                                     "fewshot_random_seed": seed}
    for name, pretrained in tqdm(pretrained_of.items(), desc="models", unit="model"):
        if isinstance(pretrained, ModelError):
            print(f"eval.compare: skipping {pretrained}", file=sys.stderr)
            result["models"][name] = {"status": "missing", "error": str(pretrained)}
            continue
        args = f"pretrained={pretrained},trust_remote_code=True" + (f",{model_args}" if model_args else "")
        try:
            out = lm_eval.simple_evaluate(model="hf", model_args=args, tasks=list(tasks), task_manager=manager,
                                          batch_size=batch_size, limit=limit, num_fewshot=num_fewshot,
                                          device=device, log_samples=False, **seeds)
        except SystemExit as e:  # a task's data file not written yet (eval/tasks/perplexity/local_data.py)
            raise UsageError(f"--tasks: {e}") from None
        except Exception as e:  # one broken model must not cost the others' results; the table says why
            reason = f"{type(e).__name__}: {first_line(e)}"
            print(f"eval.compare: {name} failed: {reason}", file=sys.stderr)
            result["models"][name] = {"status": "failed", "pretrained": pretrained, "error": reason}
            continue
        result["models"][name] = {
            "status": "ok", "pretrained": pretrained, "metrics": _metrics(out["results"]),
            "n_samples": {t: n.get("effective") for t, n in out.get("n-samples", {}).items()},
            "versions": {t: v for t, v in out.get("versions", {}).items()},
        }
    with atomic_dir(Path(out_dir), tool=TOOL, overwrite=overwrite) as tmp:
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
    p = UsageParser(prog="python -m eval.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--model_name_or_path", "--models", "--model", dest="models", nargs="+", action="extend",
                   required=True, metavar="[NAME=]MODEL",
                   help="model folders or hub names; NAME= labels a model's column and bar")
    p.add_argument("--tasks", type=comma_list, nargs="+", default=[], metavar="TASK",
                   help="lm-eval task or group names, comma or space separated (default: none; give --tasks, "
                        "--text or both)")
    p.add_argument("--text", metavar="FILE|embedded",
                   help="your own text as a perplexity task (bits per byte, byte and word perplexity): a .txt "
                        "(paragraphs), .jsonl or .parquet file, or 'embedded', cut into documents as train.py cuts "
                        "it (default: none)")
    p.add_argument("--split", choices=("validation", "test", "train", "all"), default="validation",
                   help="which documents of --text: train.py's validation ones (every --val_every-th), its test "
                        "ones (with --test_every), its training ones, or all (default: validation)")
    p.add_argument("--val_every", type=positive_int, default=10, help="as train.py's val_every (default: 10)")
    p.add_argument("--test_every", type=non_negative_int, default=0,
                   help="as train.py's test_every (default: 0, no test split)")
    add_output_dir(p, "output folder (results.json, table.md, compare.png)")
    p.add_argument("--batch_size", type=_batch_size, default=8, help="int or 'auto'")
    p.add_argument("--limit", type=_limit, help="documents per task: a count, or a fraction if < 1 (default: all)")
    p.add_argument("--num_fewshot", type=int, help="few-shot examples (default: each task's own)")
    p.add_argument("--seed", type=int, help="seed of lm-eval's python, numpy, torch and few-shot generators "
                                            "(default: lm-eval's, 0 and 1234)")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    p.add_argument("--include_path", nargs="+", default=[], help="more task folders, after eval/tasks")
    p.add_argument("--model_args", default="", help="extra hf model arguments, e.g. dtype=bfloat16")
    args = p.parse_args(argv)
    try:
        result = compare(args.models, flatten(args.tasks) or [], args.output_dir, batch_size=args.batch_size,
                         limit=args.limit, num_fewshot=args.num_fewshot, device=args.device,
                         include_path=args.include_path, model_args=args.model_args, seed=args.seed,
                         overwrite=args.overwrite_output_dir, text=args.text, split=args.split,
                         val_every=args.val_every, test_every=args.test_every)
    except UsageError as e:
        print(f"{p.prog}: error: {first_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    print((Path(args.output_dir) / "table.md").read_text())
    status = [r["status"] for r in result["models"].values()]
    print(f"{status.count('ok')}/{len(status)} models ran; wrote {args.output_dir}/results.json, table.md, "
          "compare.png")
    # A model that is not there (offline) is reported, not fatal; one that broke is.
    return 0 if "ok" in status and "failed" not in status else 1


if __name__ == "__main__":
    sys.exit(main())
