"""train.py end to end on tiny configs (CPU): loss falls, checkpoints, final/ reloads and generates."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import train
import train_config
from ema_boundary import corpus
from tests.train_testkit import ROOT, metrics, run_python, tokenizer_dir, write_config


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_help_documents_every_flag_and_setting(capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--config", "--output_dir", "--data", "--tokenizer", "--max_steps", "--seed",
                 "--resume_from_checkpoint", "--report_to"):
        assert flag in text
    for key in train_config.SETTINGS:
        assert f"  {key} " in text


@pytest.mark.parametrize("model", ["gpt2-tiny", "spen-tiny"])
def test_loss_falls_checkpoint_and_final_reloads(tmp_path, model):
    cfg = write_config(tmp_path / "train.yaml", model_config=str(ROOT / "hub_configs" / model), max_steps=24,
                       save_every=12, eval_every=24)
    out = train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")])

    log = metrics(out)
    assert [m["step"] for m in log] == list(range(1, 25))
    assert all({"loss", "lr", "tokens"} <= m.keys() for m in log)
    first, last = log[0]["loss"], sum(m["loss"] for m in log[-4:]) / 4
    assert first == pytest.approx(6.93, abs=0.1)  # ln(1024): a uniform guess
    assert last < first - 0.5, (first, last)
    assert log[-1]["tokens"] == 24 * 8 * 64
    assert log[-1]["val_ppl"] == pytest.approx(2.718281828 ** log[-1]["val_loss"], rel=1e-6)

    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_12", "step_24"]
    state = json.loads((out / "checkpoints/step_24/data_state.json").read_text())
    assert state["step"] == 24 and state["pos"] == log[-1]["data_pos"]

    card = (out / "final/README.md").read_text()
    assert f"tokens seen: {24 * 8 * 64:,}" in card and "perplexity" in card and "train.py --config" in card
    # A fresh process that never imported modeling_spen: the saved folder must stand on its own.
    check = run_python(
        "import sys, torch; from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)\n"
        "t = AutoTokenizer.from_pretrained(sys.argv[1])\n"
        "ids = t('The for statement', return_tensors='pt').input_ids\n"
        "g = m.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=t.eos_token_id)\n"
        "assert g.shape[1] > ids.shape[1], g.shape\n"
        "print('GENERATED', repr(t.decode(g[0])))\n", str(out / "final"))
    assert check.returncode == 0, check.stderr[-3000:]
    assert "GENERATED" in check.stdout


@pytest.mark.parametrize("spen, gpt2", [("spen-130m", "gpt2-small"), ("spen-tiny", "gpt2-tiny")])
def test_shipped_configs_load_and_differ_only_in_the_model(spen, gpt2, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfgs = [train_config.load_config(train_config.parse_args(["--config", f"hub_configs/{name}/train.yaml"]))
            for name in (spen, gpt2)]
    assert [cfg.pop("model_config") for cfg in cfgs] == [f"hub_configs/{spen}", f"hub_configs/{gpt2}"]
    for cfg in cfgs:
        cfg.pop("output_dir")
    assert cfgs[0] == cfgs[1]  # same data, tokenizer, batch, schedule: a fair comparison


@pytest.mark.parametrize("model", ["gpt2-tiny", "spen-tiny"])
def test_bf16_mixed_precision_runs(tmp_path, model):
    # CPU autocast stands in for the GPU here: the same Accelerate flag and code path, not the same kernels.
    cfg = write_config(tmp_path / "train.yaml", model_config=str(ROOT / "hub_configs" / model),
                       mixed_precision="bf16", max_steps=3, save_every=3, eval_every=3, tokenizer=tokenizer_dir())
    log = metrics(train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")]))
    assert all(math.isfinite(m["loss"]) for m in log) and math.isfinite(log[-1]["val_loss"])
    assert log[0]["loss"] == pytest.approx(6.93, abs=0.1)


def test_shipped_model_config_resolves_from_any_working_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = Path(train_config.resolve_model_config("hub_configs/spen-tiny"))
    assert resolved.is_absolute() and (resolved / "config.json").is_file()
    assert train_config.resolve_model_config("no/such/folder") == "no/such/folder"  # left for the one-line error


def test_spen_trains_its_predictor_and_gpt2_is_unaffected(tmp_path):
    """SPEN's objective is CE + weight * P: its prediction loss falls; validation stays the next-token loss."""
    spen = write_config(tmp_path / "spen.yaml", model_config=str(ROOT / "hub_configs/spen-tiny"), max_steps=30,
                        save_every=30, eval_every=30, tokenizer=tokenizer_dir())
    log = metrics(train.main(["--config", str(spen), "--output_dir", str(tmp_path / "spen")]))
    weight = json.loads((ROOT / "hub_configs/spen-tiny/config.json").read_text()).get("prediction_loss_weight", 1.0)
    assert weight > 0
    first, last = log[0]["prediction_loss"], sum(m["prediction_loss"] for m in log[-5:]) / 5
    assert last < 0.9 * first, (first, last)
    for m in log:
        assert m["objective"] == pytest.approx(m["loss"] + weight * m["prediction_loss"], rel=1e-6)
    assert log[0]["loss"] == pytest.approx(6.93, abs=0.1)  # the next-token loss alone, not the objective

    # Validation is the next-token loss of the saved model, with no prediction term.
    final = tmp_path / "spen" / "final"
    model = AutoModelForCausalLM.from_pretrained(final, trust_remote_code=True).eval()
    cfg = train_config.read_yaml(spen)
    val = corpus.validation_blocks(cfg["data"], cfg["val_every"], AutoTokenizer.from_pretrained(final),
                                       cfg["block_size"], cfg["eval_blocks"])
    with torch.no_grad():
        assert train.lm_loss(model, val).item() == pytest.approx(log[-1]["val_loss"], abs=1e-4)

    gpt2 = write_config(tmp_path / "gpt2.yaml", max_steps=3, save_every=3, eval_every=3, tokenizer=tokenizer_dir())
    log = metrics(train.main(["--config", str(gpt2), "--output_dir", str(tmp_path / "gpt2")]))
    assert not any("prediction_loss" in m or "objective" in m for m in log)
