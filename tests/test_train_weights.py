"""--model_name_or_path loads a folder's weights (as run_clm), --config_name takes a config alone."""

from __future__ import annotations

import json
import shutil

import pytest

import train
import train_config
from eval.report.paths import absolute_paths
from tests.train_testkit import ROOT, metrics, tokenizer_dir, write_config


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run of 24 steps: its final/ holds weights, config and tokenizer."""
    tmp = tmp_path_factory.mktemp("weights")
    cfg = write_config(tmp / "train.yaml", max_steps=24, save_steps=24, eval_steps=24, learning_rate=1e-2,
                       tokenizer_name=tokenizer_dir())
    out = train.main(["--config", str(cfg), "--output_dir", str(tmp / "first")])
    return cfg, out


@pytest.mark.slow
def test_model_name_or_path_continues_from_the_folders_weights(trained, tmp_path, capsys):
    _, first = trained
    before = metrics(first)
    capsys.readouterr()
    # One step at a negligible rate: the model scored at the end is the folder's own.
    again = write_config(tmp_path / "again.yaml", max_steps=1, learning_rate=1e-12, eval_steps=1)  # no tokenizer
    out = train.main(["--config", str(again), "--model_name_or_path", str(first / "final"),
                      "--output_dir", str(tmp_path / "continued")])
    printed = capsys.readouterr().out
    after = metrics(out)
    assert f"(from the weights of {first / 'final'})" in printed
    assert after[0]["val_loss"] == pytest.approx(before[-1]["val_loss"], abs=1e-4)
    # The first logged loss is the trained model's, far below a fresh initialisation's (about ln 1024 = 6.9).
    assert after[0]["loss"] < before[0]["loss"] - 0.5
    assert after[0]["loss"] == pytest.approx(before[-1]["loss"], abs=0.3)
    # Its tokenizer is the folder's (the weights' token ids), recorded; the card says where it started.
    assert json.loads((out / "train_config.json").read_text())["tokenizer_name"] == str(first / "final")
    card = (out / "final/README.md").read_text()
    assert "trained from the weights of `first`" in card
    # Its snippet loads the folder by a path that means something on another machine, not this one's.
    snippet = card.split("```python\n")[1].split("```")[0]
    assert 'path = "continued/final"' in snippet and not absolute_paths(snippet)


@pytest.mark.slow
def test_config_name_trains_the_config_alone(trained, tmp_path, capsys):
    cfg, first = trained
    before = metrics(first)
    out = train.main(["--config", str(cfg), "--config_name", str(first / "final"), "--max_steps", "1",
                      "--output_dir", str(tmp_path / "scratch")])
    assert "(initialised from scratch)" in capsys.readouterr().out
    # The same config, seed and data: the first step of the first run, exactly.
    assert metrics(out)[0]["loss"] == pytest.approx(before[0]["loss"], abs=1e-5)
    assert "trained from scratch" in (out / "final/README.md").read_text()


@pytest.mark.slow
def test_model_and_config_name_given_together(trained, tmp_path):
    _, first = trained
    final = str(first / "final")
    both = tmp_path / "both.yaml"
    both.write_text(f"model_name_or_path: {final}\nconfig_name: {ROOT}/hub_configs/gpt2-tiny\n")
    with pytest.raises(train_config.ConfigError, match=r"both.yaml:2: config_name trains a config from scratch "
                                                       "and model_name_or_path continues from a folder's weights"):
        train_config.read_yaml(both)
    # A flag wins over the YAML, either way round.
    cfg = train_config.read_yaml(write_config(tmp_path / "a.yaml"), {"config_name": final})
    assert train_config.pretrained_weights(cfg) is None and cfg["model_name_or_path"] == final
    cfg = train_config.read_yaml(tmp_path / "a.yaml", {"model_name_or_path": final})
    assert train_config.pretrained_weights(cfg) == first / "final"
    assert cfg["output_dir"] == "outputs/first-continued"  # never the run it continues from
    # A hub_configs folder holds a config alone: trained from scratch, as before.
    assert train_config.pretrained_weights(train_config.read_yaml(tmp_path / "a.yaml")) is None


@pytest.mark.slow
def test_weights_without_their_tokenizer_or_under_seeds_are_refused(trained, tmp_path, capsys):
    _, first = trained
    bare = tmp_path / "bare"
    shutil.copytree(first / "final", bare)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).unlink(missing_ok=True)
    with pytest.raises(train_config.ConfigError, match="bare has weights but no tokenizer; pass --tokenizer_name"):
        train_config.read_yaml(None, {"model_name_or_path": str(bare)})
    assert train.cli(["--model_name_or_path", str(first / "final"), "--seeds", "0,1",
                      "--output_dir", str(tmp_path / "ens")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train.py: error: --seeds trains each seed from scratch") and "\n" not in err
    assert not (tmp_path / "ens").exists()
    # Weights that do not fit their config.json (here one layer more than saved): one line, nothing written.
    misfit = tmp_path / "misfit"
    shutil.copytree(first / "final", misfit)
    config = json.loads((misfit / "config.json").read_text())
    (misfit / "config.json").write_text(json.dumps({**config, "n_layer": config["n_layer"] + 1}))
    assert train.cli(["--config", str(write_config(tmp_path / "m.yaml")), "--model_name_or_path", str(misfit),
                      "--output_dir", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"train.py: error: --model_name_or_path {misfit}: the weights do not fit its config.json: ")
    assert " missing (e.g. transformer.h." in err and "\n" not in err and not (tmp_path / "m").exists()
    # A run folder instead of its final/: named in one line.
    with pytest.raises(train_config.ConfigError, match=r"first/config.json: no such file \(its model is in final/\)"):
        train_config.read_yaml(None, {"model_name_or_path": str(first)})
