"""The driver: every stage in order, then report.json, index.md and the figures, built atomically."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ema_boundary.io import atomic_dir, write_json
from eval.report import stages
from eval.report.assemble import assemble, linear_checkpoint
from eval.report.plan import Plan
from eval.report.render import figures, write_index


def build_report(out: Path, plan: Plan, command: str) -> dict[str, Any]:
    """Run every stage of ``plan`` and write ``out`` (replaced atomically). Returns the report.json content.

    Intermediate outputs (datasets, checkpoints) stay under ``out/work``.
    """
    import torch

    started = time.time()
    if plan.scale == "tiny":
        # Tiny models: one thread beats two (synchronisation costs more than the matmuls save).
        torch.set_num_threads(1)
    bar = tqdm(total=5, desc="boundary report", unit="stage", disable=None)
    stage_seconds: dict[str, float] = {}
    clock = time.time()

    def lap(name: str) -> None:
        nonlocal clock
        stage_seconds[name] = time.time() - clock
        clock = time.time()
        bar.update()

    with atomic_dir(out) as tmp:
        work = tmp / "work"
        work.mkdir()
        bar.set_postfix_str("structure: grammar, SPCN, BiGRU")
        structure = stages.structure(work, plan)
        lap("structure")
        bar.set_postfix_str("predictor and trace ablations")
        pred, traces = stages.ablation(work, plan, "predictor"), stages.ablation(work, plan, "trace")
        lap("ablations")
        bar.set_postfix_str("GPT-2-architecture baseline")
        tokenizer = linear_checkpoint(pred).parent / "tokenizer"  # every SPEN run's tokenizer
        baseline = stages.baseline(work, plan, pred["seeds"], tokenizer)
        lap("baseline")
        bar.set_postfix_str("content probes")
        first_seed = str(pred["seeds"][0])
        checkpoints = {f"SPEN-{t}": Path(traces["folder"]) / v["runs"][first_seed]["run_dir"] / "final"
                       for t, v in traces["variants"].items()}
        checkpoints["GPT-2 arch"] = Path(baseline["runs"][first_seed]["run_dir"]) / "final"
        probes = stages.content_probes(work, plan, checkpoints)
        lap("content_probes")
        bar.set_postfix_str("writing report")
        report = assemble(structure, pred, traces, baseline, probes, command, time.time() - started)
        report["environment"]["stage_seconds"] = stage_seconds
        # Paths inside the report name the final folder, not the temporary one.
        report = json.loads(json.dumps(report).replace(str(tmp), str(out)))
        report["figures"] = figures(report, work, tmp / "figures")
        write_json(tmp / "report.json", report)
        write_index(report, report["figures"], tmp / "index.md")
        lap("writing")
    bar.close()
    return report
