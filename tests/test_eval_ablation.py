"""eval.ablation on a tiny config: every file and field, both axes, bad input."""

from __future__ import annotations

import json
import math

import pytest

from eval.ablation import PREDICTOR_VARIANTS, main, run_ablation
from tests.eval_testkit import REPO, write_micro_config


def test_predictor_ablation_writes_every_file_and_field(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    result = run_ablation(config, 2, out, variants=["linear", "softmax_attention-sequence"], max_steps=2)
    assert sorted(p.name for p in out.iterdir()) == ["ablation.json", "configs", "loss_curves.png", "runs"]
    saved = json.loads((out / "ablation.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert saved["axis"] == "predictor" and saved["seeds"] == [7, 8] and saved["max_steps"] == 2
    assert set(saved["final_val_loss"]) == {"linear", "softmax_attention-sequence"}
    for name, var in saved["variants"].items():
        assert var["fields"] == PREDICTOR_VARIANTS[name]
        model = json.loads((out / "configs" / name / "config.json").read_text())
        assert {k: model[k] for k in var["fields"]} == var["fields"]
        for seed, run in var["runs"].items():
            assert math.isfinite(run["final_val_loss"]) and run["curve"]["val_step"][-1] == 2
            run_dir = out / run["run_dir"]
            assert (run_dir / "final" / "config.json").is_file() and not (run_dir / "checkpoints").exists()
            trained = json.loads((run_dir / "final" / "config.json").read_text())
            assert trained["predictor"] == var["fields"]["predictor"]
            assert saved["final_val_loss"][name][seed] == run["final_val_loss"]
    # Same data and tokenizer for every run: every run after the first loads the first one's tokenizer.
    tokenizers = {(out / r["run_dir"] / "tokenizer" / "tokenizer.json").read_text()
                  for v in saved["variants"].values() for r in v["runs"].values()}
    assert len(tokenizers) == 1
    spread = saved["spread"]
    for key in ("across_variants_range", "across_seeds_range", "across_variants_std", "across_seeds_std", "anova_f"):
        assert math.isfinite(spread[key]) and spread[key] >= 0
    assert 0 <= spread["anova_p"] <= 1
    assert spread["within_seed_spread"] == (spread["anova_f"] <= 1)
    assert "predictors" in saved["statement"] and "ANOVA" in saved["statement"]


def test_trace_ablation(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    result = run_ablation(config, 1, tmp_path / "abl", traces=["ema", "selective"], max_steps=1)
    assert result["axis"] == "trace" and list(result["variants"]) == ["ema", "selective"]
    model = json.loads((tmp_path / "abl" / "configs" / "selective" / "config.json").read_text())
    assert model["trace"] == "selective" and model["predictor"] == "linear"  # the config's predictor stays
    assert result["spread"]["across_seeds_range"] == 0.0 and result["spread"]["within_seed_spread"] is None


@pytest.mark.parametrize("argv, flag", [
    (["--config", "no/such.yaml"], "--config"),
    (["--config", "{micro}", "--variants", "quadratic"], "--variants"),
    (["--config", "{micro}", "--trace", "ema", "fancy"], "--trace"),
    (["--config", "{micro}", "--seeds", "0"], "--seeds"),
    (["--config", "{gpt2}"], "--config"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, argv, flag):
    micro = write_micro_config(tmp_path / "micro.yaml")
    gpt2 = write_micro_config(tmp_path / "gpt2.yaml", model_config=str(REPO / "hub_configs" / "gpt2-tiny"))
    argv = [a.format(micro=micro, gpt2=gpt2) for a in argv]
    out = tmp_path / "abl"
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err
    assert not out.exists()
