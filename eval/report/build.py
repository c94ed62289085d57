"""The driver: every stage in order, then report.json, index.md and the figures, built atomically."""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ema_boundary.io import atomic_dir, write_json
from eval.report import stages
from eval.report.assemble import assemble
from eval.report.figures import figures
from eval.report.plan import Plan
from eval.report.render import write_index
from modeling_spen.variants import SPEN_VARIANTS

TOOL = "ema-boundary report"  # whose output folder this is (ema_boundary.io's marker)
STAGES = ("tokenizer", "language_model", "ngram", "gap", "ablations", "content_probes", "depth", "structure",
          "writing")
ERROR_LOG = "logs/error.log"  # a failed report's traceback, inside the folder kept as OUT.failed


class Progress:
    """Where the report is: a bar on a terminal, log lines (stage started, finished with its elapsed time) when
    the output goes to a file, so that a log shows what ran and for how long."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.lines = not (hasattr(self.stream, "isatty") and self.stream.isatty())
        self.bar = tqdm(total=len(STAGES), desc="boundary report", unit="stage", disable=self.lines or None,
                        file=self.stream)
        self.seconds: dict[str, float] = {}
        self.started = self.clock = time.time()

    def log(self, message: str) -> None:
        if self.lines:
            stamp = time.strftime("%H:%M:%S")
            print(f"[{stamp}] {TOOL}: {message} ({(time.time() - self.started) / 60:.1f} min in)", file=self.stream,
                  flush=True)

    def start(self, what: str) -> None:
        self.bar.set_postfix_str(what)
        self.log(f"started: {what}")

    def done(self, stage: str) -> None:
        self.seconds[stage] = time.time() - self.clock
        self.clock = time.time()
        self.bar.update()
        self.log(f"finished: {stage} in {self.seconds[stage]:.1f} s")

    def close(self) -> None:
        self.bar.close()


def build_report(out: Path, plan: Plan, command: str, overwrite: bool = False) -> dict[str, Any]:
    """Run every stage of ``plan`` and write ``out`` (atomically, with this tool's marker). Returns the report.json
    content.

    ``out`` must be new, empty or an earlier report (then only with ``overwrite``). The structure stage runs in a
    child process beside the content stages (both are CPU-bound and independent). Intermediate outputs
    (datasets, checkpoints, logs) stay under ``out/work``. A failed run keeps its folder as ``OUT.failed`` with
    every stage's logs and the traceback in ``logs/error.log``; the exception's ``kept_at`` names it.
    """
    if plan.scale == "tiny":
        # Tiny models: one thread beats two (synchronisation costs more than the matmuls save).
        torch.set_num_threads(1)
    progress = Progress()
    with atomic_dir(out, tool=TOOL, overwrite=overwrite, keep_on_error=True) as tmp:
        try:
            report = _run(tmp, out, plan, command, progress)
        except Exception:
            log = tmp / ERROR_LOG
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc())
            raise
        finally:
            progress.close()
    return report


def _run(tmp: Path, out: Path, plan: Plan, command: str, progress: Progress) -> dict[str, Any]:
    work = tmp / "work"
    work.mkdir()
    progress.start("grammar corpus and SPCN, in the background")
    structure = stages.start_structure(work, plan)
    try:
        progress.start("tokenizer")
        tokenizer = stages.build_tokenizer(work, plan)
        progress.done("tokenizer")
        progress.start("headline pair: learning-rate grid and seeds")
        lm = stages.language_model(work, plan, tokenizer)
        progress.done("language_model")
        progress.start("n-gram reference")
        spen_tokens = lm["architectures"]["spen"]["train_tokens"]
        ngram = stages.ngram_reference(plan, tokenizer, spen_tokens, lm["scored_on"])
        regime = stages.regime(lm, ngram)
        progress.done("ngram")
        progress.start("where the gap lives (eval.gap)")
        gap = stages.gap(work, plan, lm, tokenizer)
        progress.done("gap")
        progress.start("reader and trace ablations")
        spen_lr = lm["architectures"]["spen"]["lr"]
        pred = stages.ablation(work, plan, "predictor", spen_lr, tokenizer)
        traces = stages.ablation(work, plan, "trace", spen_lr, tokenizer)
        progress.done("ablations")
        progress.start("content probes: identity at lag, the recall map")
        probes = stages.content_probes(work, plan, _checkpoints(lm, traces))
        progress.done("content_probes")
        progress.start("depth: residual sum vs attention residuals" if plan.depth else "depth: not in the plan")
        depth = stages.depth(work, plan, tokenizer)
        progress.done("depth")
        progress.start("waiting for the structure stage")
        structure_result = structure.result()
    except BaseException:
        structure.stop()  # an error above: do not leave the child running
        raise
    progress.done("structure")
    progress.start("writing the report")
    report = assemble(plan, structure_result, lm, ngram, regime, pred, traces, probes, command,
                      time.time() - progress.started, depth=depth, gap=gap)
    report["environment"]["stage_seconds"] = progress.seconds
    # Paths inside the report name the final folder, not the temporary one; so do the stages' sweep records.
    report = json.loads(json.dumps(report).replace(str(tmp), str(out)))
    _final_paths(work, tmp, out)
    report["figures"] = figures(report, work, tmp / "figures")
    write_json(tmp / "report.json", report)
    write_index(report, report["figures"], tmp / "index.md")
    progress.done("writing")
    return report


SWEEP_RECORDS = ("sweep.yaml", "sweep.json", "results.json", "results.md")  # what names its sweep folder's path


def _final_paths(work: Path, tmp: Path, out: Path) -> None:
    """The stages' sweep folders (``work/*/``) record their own path (absolute, or relative to the repository) in
    these files: written while the report is built under ``tmp``, they name ``out`` once it is renamed (the two are
    siblings, so the folder's name is what changes)."""
    for folder in work.iterdir():
        for name in SWEEP_RECORDS:
            if (path := folder / name).is_file():
                path.write_text(path.read_text().replace(tmp.name, out.name))


def _checkpoints(lm: dict[str, Any], traces: dict[str, Any]) -> dict[str, Path]:
    """The trained models identity at lag reads: the headline pair's first seed, and the trace ablation's
    non-reference arms (first seed), named by their trace."""
    seed0 = str(lm["seeds"][0])
    checkpoints = {name: Path(lm["architectures"][w]["runs"][seed0]["final_dir"])
                   for name, w in (("SPEN-ema", "spen"), ("GPT-2 arch", "gpt2"))}
    for arm, variant in traces["variants"].items():
        trace = SPEN_VARIANTS.get(arm, {}).get("trace", arm)
        if arm != traces["reference"] and trace != "ema":
            run_dir = variant["runs"][str(traces["seeds"][0])]["run_dir"]
            checkpoints[f"SPEN-{trace} (ablation)"] = Path(traces["folder"]) / run_dir / "final"
    return checkpoints
