"""eval.ablation on a tiny config: every file and field, both axes, the seed-blocked verdicts, bad input."""

from __future__ import annotations

import json
import math
import re
import shlex

import pytest

import train_config
from ema_boundary.io import MARKER
from eval.ablation import analyse, main, run_ablation
from modeling_spen.variants import SPEN_VARIANTS
from tests.eval_testkit import REPO, write_micro_config

COMPARISON_KEYS = {"difference", "ci95", "equivalence_margin", "verdict", "p_difference", "p_equivalence",
                   "detectable", "seeds"}


def _settings_of(command: str) -> dict:
    """The settings train.py reads from a recorded command line."""
    argv = shlex.split(command)
    assert argv[:2] == ["python", "train.py"], command
    return train_config.read_yaml(*_yaml_and_flags(argv[2:]))


def _yaml_and_flags(argv: list[str]) -> tuple[str, dict]:
    args = train_config.parse_args(argv)
    return args.config, {k: getattr(args, k) for k in train_config.FLAG_OVERRIDES}


def test_predictor_ablation_writes_every_file_and_field(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    result = run_ablation(config, 2, out, variants=["none", "linear", "softmax_attention-sequence"], max_steps=2,
                          lr=1e-3, margin=0.05)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "ablation.json", "configs", "logs", "loss_curves.png",
                                                     "runs", "tokenizer"]
    saved = json.loads((out / "ablation.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert ".tmp-" not in (out / "ablation.json").read_text()
    assert saved["axis"] == "predictor" and saved["seeds"] == [7, 8] and saved["max_steps"] == 2
    assert saved["lr"] == 1e-3 and saved["reference"] == "linear" and saved["equivalence_margin"] == 0.05
    assert "seed-blocked" in saved["design"] and saved["tokens"] == 2 * 4 * 32
    assert set(saved["final_val_loss"]) == {"none", "linear", "softmax_attention-sequence"}
    for name, var in saved["variants"].items():
        assert var["fields"] == SPEN_VARIANTS[name]
        assert var["parameters"] > 0 and var["tokens_per_parameter"] == pytest.approx(256 / var["parameters"])
        assert 0 < var["non_embedding_parameters"] < var["parameters"]
        model = json.loads((out / "configs" / name / "config.json").read_text())
        assert {k: model[k] for k in var["fields"]} == var["fields"]
        for seed, run in var["runs"].items():
            assert math.isfinite(run["final_val_loss"]) and run["curve"]["val_step"][-1] == 2
            run_dir = out / run["run_dir"]
            assert (run_dir / "final" / "config.json").is_file() and not (run_dir / "checkpoints").exists()
            trained = json.loads((run_dir / "final" / "config.json").read_text())
            assert trained["predictor"] == var["fields"]["predictor"]
            assert saved["final_val_loss"][name][seed] == run["final_val_loss"]
            # The recorded command is the executed one: it reads the settings the run saved.
            # (It ran inside the temporary folder that became `out`.)
            ran = json.loads(re.sub(r"\.abl\.tmp-[^/]+", "abl", (run_dir / "train_config.json").read_text()))
            again = _settings_of(run["command"])
            keys = ("model_name_or_path", "learning_rate", "seed", "max_steps", "data", "tokenizer_name")
            assert {k: again[k] for k in keys} == {k: ran[k] for k in keys}
            assert again["output_dir"] == str(run_dir)
    # Same data and tokenizer for every run.
    tokenizers = {(out / r["run_dir"] / "tokenizer" / "tokenizer.json").read_text()
                  for v in saved["variants"].values() for r in v["runs"].values()}
    assert len(tokenizers) == 1
    # Every arm against the reference, seed-blocked, with the declared margin; the overall F test.
    assert set(saved["comparisons"]) == {"none", "softmax_attention-sequence"}
    for c in saved["comparisons"].values():
        assert COMPARISON_KEYS <= set(c) and c["equivalence_margin"] == 0.05 and c["seeds"] == ["7", "8"]
        assert c["verdict"] in ("equivalent", "different", "not resolved")
    assert saved["overall"]["df"] == [2, 2] and 0 <= saved["overall"]["p"] <= 1
    assert "seed-blocked F test" in saved["statement"] and "ANOVA" not in saved["statement"]


def test_trace_ablation_in_two_processes(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    result = run_ablation(config, 1, tmp_path / "abl", traces=["linear", "linear-selective"], max_steps=1, workers=2)
    assert result["axis"] == "trace" and list(result["variants"]) == ["linear", "linear-selective"]
    assert result["reference"] == "linear"
    model = json.loads((tmp_path / "abl" / "configs" / "linear-selective" / "config.json").read_text())
    assert model["trace"] == "selective" and model["predictor"] == "linear"  # the variant's fields, all of them
    # One seed: nothing can be tested.
    assert result["comparisons"]["linear-selective"]["verdict"] == "not resolved" and result["overall"] is None
    assert (tmp_path / "abl" / "logs" / "linear-selective_seed_7.log").is_file()


def test_each_arm_chooses_its_own_rate_from_the_grid(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    result = run_ablation(config, 2, out, traces=["linear", "linear-selective"], max_steps=1, lr_grid=[1e-3, 3e-2])
    assert result["lr_grid"] == [1e-3, 3e-2]
    for arm, rates in result["rates"].items():
        grid = {float(r): loss for r, loss in rates["grid"].items()}
        assert rates["chosen"] == min(grid, key=grid.get) and rates["edge"]  # a 2-point grid: always at an edge
        var = result["variants"][arm]
        assert var["lr"] == rates["chosen"] and result["lrs"][arm] == rates["chosen"]
        # the first seed is the grid's run at the chosen rate; the second trained at that rate too
        assert var["runs"]["7"]["run_dir"] == f"runs/{arm}/lr_{rates['chosen']:g}/seed_7"
        assert var["runs"]["7"]["final_val_loss"] == grid[rates["chosen"]]
        assert _settings_of(var["runs"]["8"]["command"])["learning_rate"] == rates["chosen"]
        for rate in grid:  # every trial of the grid is kept
            assert (out / "runs" / arm / f"lr_{rate:g}" / "seed_7" / "final" / "config.json").is_file()
    assert result["lr"] == result["rates"]["linear"]["chosen"]


def test_arms_at_their_own_given_rates(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    result = run_ablation(config, 1, tmp_path / "abl", traces=["linear", "linear-selective"], max_steps=1,
                          lr={"linear": 1e-3, "linear-selective": 2e-3})
    assert result["lrs"] == {"linear": 1e-3, "linear-selective": 2e-3} and result["lr"] == 1e-3
    command = result["variants"]["linear-selective"]["runs"]["7"]["command"]
    assert _settings_of(command)["learning_rate"] == 2e-3


def test_verdicts_follow_the_equivalence_test():
    seeds = {s: 4.0 + 0.05 * s for s in range(5)}
    # Identical arms: the 90% interval is the point 0, inside any margin: equivalent.
    same = analyse({"ref": seeds, "b": dict(seeds)}, "ref", 0.02)
    assert same["comparisons"]["b"]["verdict"] == "equivalent"
    assert "indistinguishable within ±0.02" in same["statement"]
    # No margin declared: never equivalent, whatever the data.
    assert analyse({"ref": seeds, "b": dict(seeds)}, "ref", None)["comparisons"]["b"]["verdict"] != "equivalent"
    # A known shift of 0.1 nats with seed noise: different, lower.
    noise = [0.004, -0.003, 0.001, -0.002, 0.0]
    shifted = {s: v - 0.1 + noise[s] for s, v in seeds.items()}
    diff = analyse({"ref": seeds, "b": shifted}, "ref", 0.02)["comparisons"]["b"]
    assert diff["verdict"] == "different" and diff["difference"] == pytest.approx(-0.1, abs=0.005)
    assert diff["ci95"][0] < -0.1 < diff["ci95"][1]
    # Noisy, two seeds: neither shown different nor within the margin.
    noisy = analyse({"ref": {0: 4.0, 1: 4.1}, "b": {0: 4.05, 1: 4.02}}, "ref", 0.02)
    assert noisy["comparisons"]["b"]["verdict"] == "not resolved"
    assert "not resolved at this budget" in noisy["statement"] and "indistinguishable" not in noisy["statement"]


@pytest.mark.parametrize("argv, flag", [
    (["--config", "no/such.yaml"], "--config"),
    (["--config", "{micro}", "--variants", "none,quadratic"], "--variants"),
    (["--config", "{micro}", "--trace", "linear", "fancy"], "--trace"),
    (["--config", "{micro}", "--seeds", "0"], "--seeds"),
    (["--config", "{gpt2}"], "--config"),
    (["--config", "{micro}", "--lr", "-1"], "--learning_rate"),
    (["--config", "{micro}", "--learning_rate", "0"], "--learning_rate"),
    (["--config", "{micro}", "--seed", "-1"], "--seed"),
    (["--config", "{micro}", "--lr_grid", "1e-3,fast"], "--lr_grid"),
    (["--config", "{micro}", "--lr_grid", "1e-3,1e-3"], "--lr_grid"),
    (["--config", "{micro}", "--lr_grid", "1e-3", "--learning_rate", "1e-3"], "--lr_grid"),
    (["--config", "{micro}", "--learning_rate", "linear=1e-3"], "--learning_rate"),
    (["--config", "{micro}", "--max_steps", "0"], "--max_steps"),
    (["--config", "{micro}", "--margin", "0"], "--margin"),
    (["--config", "{micro}", "--reference", "quadratic"], "--reference"),
    (["--config", "{micro}", "--workers", "0"], "--workers"),
    (["--config", "{micro}", "--tokenizer", "no/such/folder"], "--tokenizer"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, argv, flag):
    micro = write_micro_config(tmp_path / "micro.yaml")
    gpt2 = write_micro_config(tmp_path / "gpt2.yaml", model_config=str(REPO / "hub_configs" / "gpt2-tiny"))
    argv = [a.format(micro=micro, gpt2=gpt2) for a in argv]
    out = tmp_path / "abl"
    assert main([*argv, "--output_dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err
    assert not out.exists()
