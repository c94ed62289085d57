"""eval.scale: the ladder's fair pairs, the ladder plans (sweeps), and the old command as an alias of the sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import train_config
from eval.scale import HEAD_SIZE, MATCH_TOLERANCE, PLAN, fair_pair, parameter_counts
from eval.sweep.cli import scale_main as main
from eval.sweep.plan import load_plan
from eval.sweep.trainers import model_config

REPO = Path(__file__).resolve().parents[1]
CPU_PLAN = REPO / "hub_configs" / "sweeps" / "ladder.yaml"
GPU_PLAN = REPO / "hub_configs" / "sweeps" / "ladder-gpu.yaml"


def _meta_counts(config: dict) -> dict[str, int]:
    """ema_boundary.params' counts of the model a config.json dict defines, built on the meta device."""
    from transformers import AutoConfig, AutoModelForCausalLM

    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
    from ema_boundary.params import parameter_counts as counted

    config = dict(config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(config.pop("model_type"), **config))
    return counted(model).as_dict()


@pytest.mark.parametrize(("width", "layers", "vocab", "block"), [(16, 1, 1024, 16), (48, 2, 1024, 128),
                                                                 (64, 2, 1024, 128), (96, 3, 500, 64)])
def test_the_formulas_count_what_the_models_hold(width, layers, vocab, block):
    for arch, config in fair_pair(width, layers, vocab, block).items():
        assert parameter_counts(arch, width, layers, vocab, block) == _meta_counts(config), arch


def test_the_pair_follows_the_fair_recipe():
    pair = fair_pair(96, 3, 1024, 128)
    spen, gpt2 = pair["spen"], pair["gpt2"]
    assert spen["initializer_range"] == gpt2["initializer_range"] == pytest.approx(1 / math.sqrt(96))
    assert gpt2["n_positions"] == 128 and spen["max_position_embeddings"] == 128
    assert gpt2["n_embd"] // gpt2["n_head"] >= HEAD_SIZE
    a, b = (parameter_counts(x, 96, 3, 1024, 128)["non_embedding"] for x in ("spen", "gpt2"))
    assert abs(a - b) <= MATCH_TOLERANCE * a
    # The headline pair of issue 20 is the ladder's recipe at width 64 (hub_configs/{spen,gpt2}-f64).
    for arch in ("spen", "gpt2"):
        committed = json.loads((REPO / "hub_configs" / f"{arch}-f64" / "config.json").read_text())
        assert fair_pair(64, 2, 1024, 128)[arch] == committed


def _sizes(plan) -> dict[str, dict[str, dict]]:
    """``{size: {arch: config.json dict}}`` of a ladder sweep's arms ``<size>/<arch>``."""
    out: dict[str, dict[str, dict]] = {}
    for arm in plan.arms:
        size, arch = arm.name.split("/")
        out.setdefault(size, {})[arch] = model_config(plan.config_of(arm)["model"], arm.name)
    return out


def test_the_cpu_ladder_is_declared_as_the_issues_ask():
    plan = load_plan(CPU_PLAN)
    sizes = _sizes(plan)
    assert len(sizes) >= 4 and plan.trainer == "train" and plan.analysis == "ladder"
    first = next(iter(sizes.values()))
    assert first["spen"]["hidden_size"] in (48, 64) and first["spen"]["num_hidden_layers"] == 2
    largest = list(sizes)[-1]
    assert len(plan.arm(f"{largest}/spen").seeds) >= 3 and len(plan.arm(f"{largest}/gpt2").seeds) >= 3
    for size, archs in sizes.items():
        w, n = archs["spen"]["hidden_size"], archs["spen"]["num_hidden_layers"]
        a, b = (parameter_counts(x, w, n, 1024, 128)["non_embedding"] for x in ("spen", "gpt2"))
        assert abs(a - b) <= MATCH_TOLERANCE * a, size
    # Issue 33: shuffled batches (train.py's default), the plain reference at the deciding size, the trigram gate.
    assert plan.base.get("shuffle", train_config.SETTINGS["shuffle"].default) is True
    reference = plan.config_of(plan.arm(f"{largest}/reference"))
    assert reference["loop"] == "reference" and model_config(reference["model"], "r")["initializer_range"] == 0.02
    assert plan.settings["gate_ngram"] == "trigram" and plan.settings["reference_margin"] <= 0.03
    assert plan.base["test_every"] > 0 and plan.score == "test"
    assert plan.rate.extend and all(2 <= len(plan.grid_of(a)) <= 3 for a in plan.arms if "reference" not in a.name)


def test_the_gpu_ladder_reaches_30m_non_embedding_parameters():
    plan = load_plan(GPU_PLAN)
    sizes = _sizes(plan)
    largest = list(sizes)[-1]
    for arch in ("spen", "gpt2"):
        counts = _meta_counts(sizes[largest][arch])  # the model itself, not only the formula
        assert counts["non_embedding"] >= 30_000_000, arch
    assert len(plan.arm(f"{largest}/spen").seeds) >= 3
    assert plan.base["data"] == "c4" and plan.base["shuffle"] is True and plan.base["shuffle_buffer"] > 0


def test_the_old_command_is_an_alias_of_the_sweep(tmp_path, capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert PLAN in out and "--resume_from" in out and "--launcher" in out
    assert main(["--summarize", str(tmp_path)]) == 2
    assert "not a sweep folder" in capsys.readouterr().err
    # The default plan is the ladder's; a folder of the user's is never taken.
    (tmp_path / "mine.txt").write_text("the user's")
    assert main(["--output_dir", str(tmp_path)]) == 2
    assert "is not an output of" in capsys.readouterr().err and (tmp_path / "mine.txt").read_text() == "the user's"


@pytest.mark.parametrize("size", ["w192", "w128-4000"])
def test_the_ladder_measures_where_the_gap_lives_with_the_command_it_recorded(size: str, tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # eval.gap's measure of a size's pair, called with the sweep folder's paths and no change of working folder:
    # the command it records is the committed one (docs/sweeps/ladder/gap/<size>/gap.json), word for word.
    from eval.scale import analysis
    from eval.sweep.plan import plan_from_text
    from eval.sweep.runner import Sweep

    committed = REPO / "docs" / "sweeps" / "ladder"
    plan = plan_from_text((committed / "sweep.yaml").read_text(), str(committed / "sweep.yaml"))
    results = json.loads((committed / "results.json").read_text())
    folder = tmp_path / "ladder"
    for arm in (f"{size}/spen", f"{size}/gpt2"):
        budgets = results["arms"][arm]["budgets"]
        for r in budgets[max(budgets, key=int)].values():
            (folder / r["run"] / "train" / "final").mkdir(parents=True)
    calls = []

    def measure(args, command, root):
        calls.append((args, command, root, Path.cwd()))
        return {"command": command}

    monkeypatch.setattr(analysis.gap, "measure", measure)
    here = Path.cwd()
    out = analysis.gap_at(plan, results, folder, Sweep(plan, folder), size, f"{size}/spen", f"{size}/gpt2")
    expected = json.loads((committed / "gap" / size / "gap.json").read_text())["command"]
    (args, command, root, cwd), = calls
    assert out == {"command": expected} and command == expected
    assert root == folder and cwd == here == Path.cwd()  # the paths are the folder's; the working folder stays
    assert args.output_dir == f"gap/{size}" and args.model_name_or_path[0].startswith(f"runs/{size}/gpt2/")
