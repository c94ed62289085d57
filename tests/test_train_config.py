"""train_config: the YAML + flags of a run, checked apart from the training loop."""

from __future__ import annotations

import re

import pytest

import train_config
from ema_boundary import corpus
from tests.train_testkit import ROOT


def _yaml(tmp_path, text: str):
    path = tmp_path / "train.yaml"
    path.write_text(f"model_config: {ROOT}/hub_configs/spen-tiny\n" + text)
    return path


def test_defaults_yaml_then_flags(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, "lr: 3e-4\nmax_steps: 7\n"), {"max_steps": 9, "seed": None})
    assert cfg["lr"] == 3e-4 and isinstance(cfg["lr"], float)  # YAML 1.1 reads 3e-4 as a string
    assert cfg["max_steps"] == 9  # the flag wins; a flag left unset (None) does not
    assert cfg["seed"] == train_config.SETTINGS["seed"][0]
    assert cfg["data"] == ["embedded"] and cfg["output_dir"] == "outputs/spen-tiny"


def test_data_may_list_several_files(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, "data: [a.txt, b.jsonl]\n"))
    assert cfg["data"] == ["a.txt", "b.jsonl"]


@pytest.mark.parametrize("text, message", [
    ("data: [1, 2]\n", ":2: data must be str"),
    ("data: [embedded, c4]\n", "cannot be mixed"),
    ("max_steps: many\n", ":2: max_steps must be int"),
    ("learning_rate: 0.1\n", ":2: unknown setting 'learning_rate'"),
    ("lr: [0.1\n", "invalid YAML"),
    ("lr: -0.001\n", ":2: lr must be a positive number, got -0.001"),
    ("block_size: 0\n", ":2: block_size must be a positive integer"),
    ("betas: [0.9, 1.5]\n", ":2: betas must be two numbers in [0, 1)"),
    ("mixed_precision: fp8\n", ":2: mixed_precision must be one of 'no', 'bf16', 'fp16'"),
    ("min_lr_ratio: 2.0\n", ":2: min_lr_ratio must be a number in [0, 1]"),
])
def test_bad_settings_are_config_errors_naming_the_line(tmp_path, text: str, message: str) -> None:
    with pytest.raises(train_config.ConfigError, match=re.escape(message)) as err:
        train_config.read_yaml(_yaml(tmp_path, text))
    assert not isinstance(err.value, corpus.DataError)  # a setting is not a data problem
    assert "\n" not in str(err.value)


def test_a_bad_flag_is_named_as_the_flag(tmp_path) -> None:
    with pytest.raises(train_config.ConfigError, match=r"^--max_steps: max_steps must be a positive integer, got 0$"):
        train_config.read_yaml(_yaml(tmp_path, "max_steps: 10\n"), {"max_steps": 0})


def test_resume_refuses_another_data_stream(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, ""))
    out = tmp_path / "run"
    out.mkdir()
    (out / "train_config.json").write_text(__import__("json").dumps({**cfg, "val_every": 3}))
    with pytest.raises(train_config.ConfigError, match="the run to resume used another val_every"):
        train_config.check_resume(None, out, cfg)
    assert train_config.check_resume(None, tmp_path / "fresh", cfg) == (tmp_path / "fresh", None)


def test_lr_flag_overrides_and_is_checked(tmp_path):
    path = _yaml(tmp_path, "lr: 3e-4\n")
    assert train_config.read_yaml(path, {"lr": 1e-2})["lr"] == 1e-2
    with pytest.raises(train_config.ConfigError, match="^--lr: lr must be a positive number"):
        train_config.read_yaml(path, {"lr": -1.0})
    with pytest.raises(train_config.ConfigError, match=r":2: lr must be a positive number"):
        train_config.read_yaml(_yaml(tmp_path, "lr: 0\n"))
