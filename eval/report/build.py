"""The driver: every stage in order, then report.json, index.md and the figures, built atomically."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ema_boundary.io import atomic_dir, write_json
from eval.report import stages
from eval.report.assemble import assemble
from eval.report.plan import Plan
from eval.report.render import figures, write_index

STAGES = ("tokenizer", "language_model", "ngram", "ablations", "content_probes", "structure", "writing")


def build_report(out: Path, plan: Plan, command: str) -> dict[str, Any]:
    """Run every stage of ``plan`` and write ``out`` (replaced atomically). Returns the report.json content.

    The structure stage runs in a child process beside the content stages (both are CPU-bound and independent).
    Intermediate outputs (datasets, checkpoints, logs) stay under ``out/work``.
    """
    import torch

    started = time.time()
    if plan.scale == "tiny":
        # Tiny models: one thread beats two (synchronisation costs more than the matmuls save).
        torch.set_num_threads(1)
    bar = tqdm(total=len(STAGES), desc="boundary report", unit="stage", disable=None)
    stage_seconds: dict[str, float] = {}
    clock = time.time()

    def lap(name: str, next_stage: str = "") -> None:
        nonlocal clock
        stage_seconds[name] = time.time() - clock
        clock = time.time()
        bar.update()
        bar.set_postfix_str(next_stage)

    with atomic_dir(out) as tmp:
        work = tmp / "work"
        work.mkdir()
        bar.set_postfix_str("grammar corpus; SPCN starts in the background")
        structure = stages.start_structure(work, plan)
        try:
            tokenizer = stages.build_tokenizer(work, plan)
            lap("tokenizer", "headline pair: learning-rate grid and seeds")
            lm = stages.language_model(work, plan, tokenizer)
            lap("language_model", "n-gram reference")
            spen_tokens = lm["architectures"]["spen"]["train_tokens"]
            ngram = stages.ngram_reference(plan, tokenizer, spen_tokens)
            regime = stages.regime(lm, ngram)
            lap("ngram", "reader and trace ablations")
            spen_lr = lm["architectures"]["spen"]["lr"]
            pred = stages.ablation(work, plan, "predictor", spen_lr, tokenizer)
            traces = stages.ablation(work, plan, "trace", spen_lr, tokenizer)
            lap("ablations", "content probes: identity at lag, the recall map")
            seed0 = str(lm["seeds"][0])
            checkpoints = {name: Path(lm["architectures"][w]["runs"][seed0]["final_dir"])
                           for name, w in (("SPEN-ema", "spen"), ("GPT-2 arch", "gpt2"))}
            for t in ("learned", "selective"):
                if t in traces["variants"]:
                    run_dir = traces["variants"][t]["runs"][str(traces["seeds"][0])]["run_dir"]
                    checkpoints[f"SPEN-{t} (ablation)"] = Path(traces["folder"]) / run_dir / "final"
            probes = stages.content_probes(work, plan, checkpoints)
            lap("content_probes", "waiting for the structure stage")
            structure_result = structure.result()
        except BaseException:
            structure.stop()  # an error above: do not leave the child running
            raise
        lap("structure", "writing report")
        report = assemble(plan, structure_result, lm, ngram, regime, pred, traces, probes, command,
                          time.time() - started)
        report["environment"]["stage_seconds"] = stage_seconds
        # Paths inside the report name the final folder, not the temporary one.
        report = json.loads(json.dumps(report).replace(str(tmp), str(out)))
        report["figures"] = figures(report, work, tmp / "figures")
        write_json(tmp / "report.json", report)
        write_index(report, report["figures"], tmp / "index.md")
        lap("writing")
    bar.close()
    return report
