"""The report's stages, each run in-process through one of the project's own entry points.

Every stage builds the argument list of a command line, executes exactly that list, and records
``shlex.join`` of it: the "reproduce" lines of ``report.json`` are what ran, so they cannot drift.
Outputs stay under ``WORK`` (``OUT/work`` in the finished report): datasets, checkpoints, results.
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ema_boundary.cli import UsageError
from eval.report.plan import CORPORA, Plan
from modeling_spen.configuration_spen import TRACES

REPO = Path(__file__).resolve().parents[2]
GRAMMAR = ("python", "-m", "grammar_probe")
ABLATION = ("python", "-m", "eval.ablation")
TRAIN = ("python", "train.py")
PROBES = ("python", "-m", "eval.content_probes")


def run_entry_point(prog: Sequence[str], main: Callable[[list[str]], object], argv: Sequence[object]) -> str:
    """Run ``main(argv)`` in this process and return the command line that reproduces it.

    A non-zero exit status (the CLIs' convention for bad input) stops the report with its command.
    """
    args = [str(a) for a in argv]
    status = main(args)
    command = shlex.join([*prog, *args])
    if isinstance(status, int) and not isinstance(status, bool) and status != 0:
        raise UsageError(f"stage failed (exit status {status}): {command}")
    return command


def structure(work: Path, plan: Plan) -> dict[str, Any]:
    """Build the grammar corpus, fit SPCN and the taggers, score them (``python -m grammar_probe``)."""
    from grammar_probe.__main__ import main

    dataset, out = work / "grammar_dataset", work / "grammar_probe"
    commands = [
        run_entry_point(GRAMMAR, main, ["build", "--out", dataset, "--seed", plan.seed,
                                        "--train-size", plan.grammar_train_size]),
        run_entry_point(GRAMMAR, main, ["run", "--dataset", dataset, "--out", out, "--seed", plan.seed,
                                        *(["--quick"] if plan.grammar_quick else [])]),
    ]
    results = json.loads((out / "results.json").read_text())
    results["command"] = commands
    return results


def ablation(work: Path, plan: Plan, axis: str) -> dict[str, Any]:
    """SPEN with every predictor (axis "predictor") or every trace (axis "trace") x seeds (``eval.ablation``)."""
    from eval.ablation import main

    out = work / f"ablation_{axis}"
    argv = ["--config", REPO / plan.spen_yaml, "--seeds", plan.seeds, "--out", out,
            *(["--trace", *TRACES] if axis == "trace" else []),
            "--max_steps", plan.max_steps, "--data", *plan.data]
    command = run_entry_point(ABLATION, main, argv)
    result = json.loads((out / "ablation.json").read_text())
    result["command"], result["folder"] = command, str(out)
    return result


def baseline(work: Path, plan: Plan, seeds: Sequence[int], tokenizer: Path) -> dict[str, Any]:
    """The GPT-2 architecture of equal size: same data, tokenizer, steps and seeds as the SPEN runs."""
    import train
    from eval.ablation import read_metrics
    from train_config import ConfigError
    from train_data import DataError

    runs, commands = {}, []
    for seed in seeds:
        out = work / "baseline_gpt2" / f"seed_{seed}"
        argv = ["--config", REPO / plan.gpt2_yaml, "--output_dir", out, "--seed", seed,
                "--max_steps", plan.max_steps, "--tokenizer", tokenizer, "--data", *plan.data]
        try:
            commands.append(run_entry_point(TRAIN, train.main, argv))
        except (ConfigError, DataError) as e:
            raise UsageError(f"train.py: {e}") from None
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        val_loss = read_metrics(out / "metrics.jsonl")["val_loss"][-1]
        runs[str(seed)] = {"final_val_loss": val_loss, "final_val_ppl": math.exp(val_loss), "run_dir": str(out)}
    return {"runs": runs, "commands": commands}


def probe_text(plan: Plan) -> str:
    """Held-out text for the identity probe: the validation documents of the training runs."""
    import train_config
    import train_data

    val_every = train_config.read_yaml(REPO / plan.spen_yaml)["val_every"]
    text, n = [], 0
    for doc in train_data.documents(plan.data, "validation", val_every):
        text.append(doc["text"])
        n += len(doc["text"])
        if n > 400_000:
            break
    return "\n\n".join(text)


def content_probes(work: Path, plan: Plan, checkpoints: dict[str, Path]) -> dict[str, Any]:
    """Token identity at lag and associative recall on the trained checkpoints (``eval.content_probes``)."""
    from eval.content_probes import main

    if plan.corpus in CORPORA:
        text = work / "probe_text.txt"
        text.write_text(probe_text(plan), encoding="utf-8")
    else:
        text = Path(plan.corpus).resolve()
    out = work / "content_probes"
    argv = ["--models", *[f"{name}={path}" for name, path in checkpoints.items()], "--out", out,
            "--text", text, "--seed", plan.seed, *(["--quick"] if plan.probes_quick else []),
            *(["--recall-steps", plan.recall_steps] if plan.recall_steps is not None else [])]
    command = run_entry_point(PROBES, main, argv)
    result = json.loads((out / "content_probes.json").read_text())
    result["command"] = command
    return result
