"""Lay the committed grammar_probe arms (docs/structure/arms_seed21, written before the arms ran as a sweep) out as
a sweep of the experiment runner, without training: issue 32's one result contract for the last committed result
that had its own reader.

    python docs/notes/migrate_arms.py [--source docs/structure/arms_seed21] [--output_dir docs/sweeps/arms]
    python docs/notes/compare_reports.py docs/structure/arms_seed21/arms.json docs/sweeps/arms/arms.json

The sweep plan is ``hub_configs/sweeps/arms.yaml`` (the design the old command ran). The runner opens the folder
and declares every run as it would (``run.json``); each run's ``result.json`` is what the runner's ``arms`` trainer
returns (:class:`eval.sweep.trainers.ArmsTrainer`), computed from that arm's ``results.json`` of the old folder,
which stays where it is and is named as the run's experiment (nothing is copied or moved). The runner's summary
then writes ``results.json`` and, through its ``arms`` analysis, ``arms.json``: the second command compares it
with the old one, number for number. An existing ``--output_dir`` is refused (nothing a user made is overwritten).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ema_boundary.io import read_json, write_json
from eval.plans import REPO, in_repo
from eval.sweep.paths import RESULT_JSON
from eval.sweep.plan import load_plan
from eval.sweep.runner import Sweep, open_folder, relative, summarize
from grammar_probe.arms import row_values

PLAN = "hub_configs/sweeps/arms.yaml"


def old_arm(plan, arm_name: str, steps: int, record: dict) -> str:
    """The old folder's arm of one run of the plan: a size arm's budget, or the protocol cell its arm ran."""
    size_arm = plan.settings.get("size_arm", "size")
    if arm_name == size_arm:
        return f"size_{steps}"
    cell = next(c for c, a in plan.settings["protocol_arms"].items() if a == arm_name)
    name = f"protocol_{cell}"
    return record["arms"][name].get("same_run_as") or name


def migrate(source: Path, folder: Path) -> dict:
    record = read_json(source / "arms.json", "arms.json", "a `python -m grammar_probe arms` folder")
    plan = load_plan(PLAN)  # as the repository names it (recorded in sweep.yaml); main runs from the root
    command = f"python docs/notes/migrate_arms.py --source {relative(source)} --output_dir {relative(folder)}"
    open_folder(plan, folder, command, resume=False)
    sweep = Sweep(plan, folder)
    for arm in plan.arms:
        for steps in plan.budgets_of(arm):
            for seed in plan.seeds_of(arm):
                for lr in plan.grid_of(arm):
                    rid = sweep.declare(arm, lr, seed, steps)
                    name = old_arm(plan, arm.name, steps, record)
                    results = read_json(source / "arms" / name / "results.json", "results.json", f"arm {name}")
                    if results["seed"] != seed or results["size"]["train_sentences"] != steps:
                        raise SystemExit(f"{source / 'arms' / name}: seed {results['seed']}, "
                                         f"{results['size']['train_sentences']} sentences; the plan's run {rid} "
                                         f"is seed {seed} at {steps}")
                    write_json(folder / rid / RESULT_JSON, {
                        "rows": row_values(results), "seeds": results["seeds"],
                        "train_sentences": results["size"]["train_sentences"], "protocol": results["protocol"],
                        "size": results["size"], "train_subsets_disjoint": results["train_subsets_disjoint"],
                        # relative to the sweep folder, as the runner's own runs name theirs
                        "experiment": os.path.relpath(source / "arms" / name, folder), "seconds": results["seconds"],
                        "migrated_from": relative(source / "arms" / name)})
    return summarize(folder, plan)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--source", default="docs/structure/arms_seed21", help="the old arms folder")
    parser.add_argument("--output_dir", default="docs/sweeps/arms", help="the new sweep folder (must not exist)")
    args = parser.parse_args(argv)
    os.chdir(REPO)
    source, folder = in_repo(args.source), in_repo(args.output_dir)
    if folder.exists():
        parser.error(f"--output_dir {args.output_dir}: exists (nothing is overwritten)")
    results = migrate(source, folder)
    runs = sum(len(seeds) for a in results["arms"].values() for seeds in a["budgets"].values())
    print(f"wrote {relative(folder)}: {runs} runs, complete: {results['complete']}; compare with "
          f"python docs/notes/compare_reports.py {args.source}/arms.json {args.output_dir}/arms.json")
    return 0 if results["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
