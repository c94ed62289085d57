"""The conditions each structure claim holds in: every paper row as a function of the labelled training
sentences and of the unseen-word protocol (``python -m grammar_probe arms``).

Two families of arms, each one full ``run`` (all models, all seeds, all test splits) of
:func:`grammar_probe.experiment.run_experiment`:

- **size arms**: the protocol as fixed (:data:`grammar_probe.protocol.PROTOCOL`), with ``sizes`` labelled
  training sentences per seed (default 250, 500, 1000, 2000, 4000);
- **protocol arms**: the 2 x 2 {word dropout on (the protocol's rate), off} x {never-seen words read as
  ``<unk>``, as fresh random codes}, at one size.

The arms run as a sweep of the experiment runner (``hub_configs/sweeps/arms.yaml``: trainer ``arms``, one run per
arm, base seed and size; analysis ``arms``, which reads each run's ``results.json`` through this module). This
module holds what turns those results into ``arms.json``: for every paper row and every arm, SPCN's value with its
interval and verdict, the same measure for the window tagger and the plain EMA (the row's shortcuts) and for the
BiGRU's causal twin where ``results.json`` holds it (the within-A ratio and the accuracy rows: it has no paired
causal GRU minus BiGRU difference), and the row's causal cap; ``conditions`` lists, per row, the arms where the
row is *met*, *refuted*, not resolved or not reachable. ``arms.md`` renders it; one figure per paper row
(``arms_<row>.png``): the measure against the training size (left) and across the protocol 2 x 2 (right).

A folder written before the arms ran as a sweep (``docs/structure/arms_seed21``: ``arms.json`` beside
``arms/<arm>/results.json``) is summarized again, without training, by :func:`summarize_arms`
(``python -m grammar_probe arms --summarize DIR``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path

from ema_boundary import stats
from ema_boundary.figures import pyplot, save
from ema_boundary.io import atomic_files, read_json, write_json, write_text
from grammar_probe.cli import DEFAULT_SIZES
from grammar_probe.experiment import SHORTCUTS

__all__ = ["ARMS_SCHEMA", "ARMS_TOOL", "COMPARED", "DEFAULT_SIZES", "PROTOCOL_ARMS", "ArmsFolderError",
           "conditions_of", "dataset_config", "row_values", "summarize_arms", "summary_of", "write_summary"]

ARMS_TOOL = "grammar_probe arms"  # the output-folder marker's tool name (ema_boundary.io)
PROTOCOL_ARMS: dict[str, dict] = {  # name: changes to the protocol
    "dropout_unk": {},
    "dropout_random_codes": {"unseen": "random_codes"},
    "no_dropout_unk": {"word_dropout": 0.0},
    "no_dropout_random_codes": {"word_dropout": 0.0, "unseen": "random_codes"},
}
ARMS_SCHEMA = "grammar_probe.arms/1"
COMPARED = ("spcn", "plain_ema", "window", "causal_gru")  # the models whose row value each arm records


def _split_accuracy(split: str) -> Callable[[dict, str], dict | None]:
    return lambda results, model: results["splits"].get(split, {}).get(model, {}).get("accuracy")


# Where results.json keeps a paper row's measure for a model that is not among the row's shortcuts.
# The "minus BiGRU" rows are paired differences (same seeds and sentences) that results.json computes for
# SPCN and the shortcuts only: no other model's value is recorded for them.
ROW_MEASURES: dict[str, Callable[[dict, str], dict | None]] = {
    "ratio_within_a": lambda results, model: (results.get("ratios") or {}).get(f"{model}_over_bigru"),
    "transfer_b_accuracy": _split_accuracy("test_transfer_b"),
    "deep_accuracy": _split_accuracy("test_deep"),
}


def _measure(results: dict, row: str, model: str) -> dict | None:
    """``model``'s value of paper row ``row`` with its interval, when results.json holds that very measure:
    the same lookup must give SPCN's value of the row exactly (else it is not the row's measure)."""
    lookup = ROW_MEASURES.get(row)
    if lookup is None or lookup(results, "spcn") != results["paper"][row]["ours"]:
        return None
    return lookup(results, model)


def row_values(results: dict) -> dict:
    """Per paper row: SPCN's value, verdict, the causal cap, and the same measure for the compared models."""
    out = {}
    for name, row in results["paper"].items():
        models = {"spcn": {"value": row["ours"], "verdict": row["verdict"]}}
        models.update({m: row["shortcuts"][m] for m in SHORTCUTS if m in COMPARED})
        for m in COMPARED:
            if m not in models and (value := _measure(results, name, m)) is not None:
                strict = isinstance(row["paper"], str)  # "above": the interval must exclude the target
                models[m] = {"value": value,
                             "verdict": stats.target_verdict(value["ci95"], row["target"], strictly_above=strict)}
        out[name] = {"description": row["description"], "paper": row["paper"], "target": row["target"],
                     "verdict": row["verdict"], "reachable": row.get("reachable", True),
                     "causal_cap": row.get("causal_cap"), "models": models}
    if results.get("ratios"):
        out["ratios"] = {k: v for k, v in results["ratios"].items() if isinstance(v, dict)}
    return out


class ArmsFolderError(ValueError):
    """An arms folder that cannot be summarized: the message is one line naming the file."""


def summarize_arms(folder: str | os.PathLike) -> dict:
    """Rebuild ``arms.json``, ``arms.md`` and the per-row figures of a finished arms folder from its arms'
    ``results.json``, without training, and return the summary. The run's own record in ``arms.json`` (its
    sizes, protocols, seeds, dataset and seconds) is kept as the run wrote it; only what is derived from the
    results (each arm's ``rows``, ``conditions``) is recomputed. Each file is replaced atomically; nothing
    else in the folder is touched."""
    folder = Path(folder)
    path = folder / "arms.json"
    if not folder.is_dir():
        raise ArmsFolderError(f"{folder}: no such folder (an output folder of `python -m grammar_probe arms`)")
    record = read_json(path, "arms.json", "the folder is not an output of `python -m grammar_probe arms`",
                       error=ArmsFolderError)
    if not isinstance(record, dict) or record.get("schema") != ARMS_SCHEMA:
        schema = record.get("schema") if isinstance(record, dict) else None
        raise ArmsFolderError(f"{path}: schema {schema!r}, expected {ARMS_SCHEMA!r}")
    if not isinstance(record.get("arms"), dict) or not record["arms"]:
        raise ArmsFolderError(f"{path}: holds no arms")
    summary = _summarize(folder, record)
    write_summary(folder, summary)
    return summary


def _summarize(folder: Path, record: dict) -> dict:
    """``record`` (the run's facts per arm) with every arm's ``rows`` read from ``arms/<arm>/results.json`` (an arm
    that was the same run as another reads that one's) and the ``conditions`` they give."""
    results = {}
    for name, arm in record["arms"].items():
        path = folder / "arms" / ((arm.get("same_run_as") if isinstance(arm, dict) else None) or name) / "results.json"
        results[name] = (path, read_json(path, "results.json", f"arm {name}'s results", error=ArmsFolderError))
    return summary_of(record, results)


def summary_of(record: dict, results: dict[str, tuple[object, dict]]) -> dict:
    """``record`` (the facts of each arm: axis, value, train_sentences, protocol, seeds, ...) with every arm's
    ``rows`` from its ``results.json`` content (``results``: arm -> (where it was read, content)) and the
    ``conditions`` they give. An arm's results must be of its seeds, training sentences and protocol."""
    arms = {}
    for name, arm in record["arms"].items():
        path, res = results[name]
        if not isinstance(res, dict) or not isinstance(res.get("paper"), dict):
            raise ArmsFolderError(f"{path}: not a `python -m grammar_probe run` results.json (no paper rows)")
        ran = (res.get("seeds"), (res.get("size") or {}).get("train_sentences"), res.get("protocol"))
        if not isinstance(arm, dict) or ran != (arm.get("seeds"), arm.get("train_sentences"), arm.get("protocol")):
            raise ArmsFolderError(f"{path}: its seeds, training sentences or protocol are not arm {name}'s "
                                  f"in arms.json")
        arms[name] = {**arm, "rows": row_values(res)}
    return {**record, "arms": arms, "conditions": conditions_of(arms)}


def write_summary(folder: Path, summary: dict) -> None:
    """Write the figures, ``arms.md`` and ``arms.json`` into ``folder``, each file replaced atomically."""
    with atomic_files(folder) as tmp:
        render_arms_figures(summary, tmp)
    write_text(folder / "arms.md", render_arms_markdown(summary))
    write_json(folder / "arms.json", summary)


def dataset_config(dataset: object) -> dict | None:
    """The corpus the arms ran on, as ``grammar_probe build`` recorded it (its folder and grammar seed)."""
    if not isinstance(dataset, (str, os.PathLike)):
        return None
    ceilings = Path(dataset) / "ceilings.json"
    config = json.loads(ceilings.read_text())["config"] if ceilings.is_file() else None
    return {"path": str(dataset), "config": config}


def conditions_of(arms: dict) -> dict:
    """Per paper row: the arms grouped by the row's verdict there."""
    rows = next(iter(arms.values()))["rows"]
    out = {}
    for row in rows:
        if row == "ratios":
            continue
        by_verdict: dict[str, list[str]] = {}
        for name, arm in arms.items():
            by_verdict.setdefault(arm["rows"][row]["verdict"], []).append(name)
        out[row] = by_verdict
    return out


def _fmt(row: str, value: dict | None) -> str:
    if not value:
        return "—"
    lo, hi = value["ci95"]
    scale, unit = (1, "") if row == "ratio_within_a" else (100, "")
    digits = 3 if row == "ratio_within_a" else 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{scale * value['mean']:.{digits}f}{unit}"
    return f"{scale * value['mean']:.{digits}f} [{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]{unit}"


def render_arms_markdown(summary: dict) -> str:
    """``arms.md``: per paper row, a table of arms (SPCN's value and verdict, the compared models' values)."""
    arms = summary["arms"]
    lines = ["## The conditions each structure claim holds in", "",
             f"{summary['size']['seeds']} seeds per arm; size arms: {', '.join(map(str, summary['sizes']))} labelled "
             f"training sentences per seed with the fixed protocol; protocol arms: the 2 x 2 of word dropout "
             f"(on = {summary['base_protocol']['word_dropout']}, off) and the reading of never-seen words (`<unk>`, "
             f"fresh random codes) at {summary['protocol_size']} sentences. Ratios as ratios, accuracies and "
             f"differences in % / points, mean [95% bootstrap interval]. {summary['seconds'] / 60:.1f} min.", ""]
    first = next(iter(arms.values()))["rows"]
    for row, r in first.items():
        if row == "ratios":
            continue
        # A column only for a model some arm has a value for (never a column of dashes), and a word on why
        # a compared model has none: results.json does not hold the row's measure for it.
        shown = [m for m in COMPARED[1:] if any(m in a["rows"][row]["models"] for a in arms.values())]
        missing = [m for m in COMPARED[1:] if m not in shown]
        cap = any(a["rows"][row].get("causal_cap") for a in arms.values())
        lines += [f"### {r['description']}", "", f"Paper: {r['paper']}. Verdict by arm: " + "; ".join(
            f"{v}: {', '.join(names)}" for v, names in summary["conditions"][row].items()) + ".", ""]
        if missing:
            lines += [f"No column for {', '.join(missing)}: each arm's results.json holds this measure for SPCN "
                      f"and the shortcut models, not for {'it' if len(missing) == 1 else 'them'}.", ""]
        lines += [("| arm | SPCN | verdict | " + "".join(f"{m} | " for m in shown)
                   + ("causal cap |" if cap else "")).rstrip(),
                  "|---|---|---|" + "---|" * (len(shown) + cap)]
        for name, arm in arms.items():
            a = arm["rows"][row]
            cells = [_fmt(row, a["models"][m]["value"]) if m in a["models"] else "—" for m in shown]
            cells += [_fmt(row, a.get("causal_cap"))] if cap else []
            lines.append(f"| {name} | {_fmt(row, a['models']['spcn']['value'])} | {a['verdict']} | "
                         + "".join(f"{c} | " for c in cells).rstrip())
        lines.append("")
    return "\n".join(lines)


def render_arms_figures(summary: dict, out_dir: Path) -> dict[str, Path]:
    """One PNG per paper row: the measure against training size (left), across the protocol 2 x 2 (right)."""
    plt = pyplot()
    arms = summary["arms"]
    size_arms = [a for a in arms.values() if a["axis"] == "train_sentences"]
    protocol_arms = [(n, a) for n, a in arms.items() if a["axis"] == "protocol"]
    paths = {}
    for row, r in next(iter(arms.values()))["rows"].items():
        if row == "ratios":
            continue
        scale = 1 if row == "ratio_within_a" else 100
        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
        for m in COMPARED:
            pts = [(a["value"], a["rows"][row]["models"][m]["value"]) for a in size_arms
                   if m in a["rows"][row]["models"]]
            if pts:
                x = [p[0] for p in pts]
                y = [scale * p[1]["mean"] for p in pts]
                err = [[scale * (p[1]["mean"] - p[1]["ci95"][0]) for p in pts],
                       [scale * (p[1]["ci95"][1] - p[1]["mean"]) for p in pts]]
                left.errorbar(x, y, yerr=err, marker="o", capsize=3, label=m)
        left.axhline(scale * r["target"], color="black", linestyle="--", linewidth=0.8, label="paper / target")
        left.set_xscale("log")
        left.set_xlabel("labelled training sentences per seed")
        left.set_title(r["description"][:70], fontsize=9)
        left.legend(fontsize=7)
        for i, (_, a) in enumerate(protocol_arms):
            v = a["rows"][row]["models"]["spcn"]["value"]
            right.errorbar([i], [scale * v["mean"]], yerr=[[scale * (v["mean"] - v["ci95"][0])],
                                                            [scale * (v["ci95"][1] - v["mean"])]], fmt="o", capsize=3)
        right.axhline(scale * r["target"], color="black", linestyle="--", linewidth=0.8)
        right.set_xticks(range(len(protocol_arms)), [n.replace("protocol_", "").replace("_", "\n", 1)
                                                     for n, _ in protocol_arms], fontsize=7)
        right.set_title("SPCN across the unseen-word protocol", fontsize=9)
        fig.tight_layout()
        paths[row] = out_dir / f"arms_{row}.png"
        save(fig, paths[row])
    return paths
