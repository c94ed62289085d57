"""train_config: the YAML + flags of a run, the output folder's rules and checkpoint discovery, apart from the loop."""

from __future__ import annotations

import json
import os
import re

import pytest

import train_config
from ema_boundary import corpus
from ema_boundary.io import MARKER
from tests.train_testkit import ROOT
from training.checkpoint import checkpoint_files, checkpoint_problem, find_checkpoint


def _yaml(tmp_path, text: str):
    path = tmp_path / "train.yaml"
    path.write_text(f"model_name_or_path: {ROOT}/hub_configs/spen-tiny\n" + text)
    return path


def _flags(*argv: str) -> dict:
    return train_config.overrides(train_config.parse_args(list(argv)))


def test_defaults_yaml_then_flags(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, "learning_rate: 3e-4\nmax_steps: 7\n"), {"max_steps": 9, "seed": None})
    assert cfg["learning_rate"] == 3e-4 and isinstance(cfg["learning_rate"], float)  # YAML 1.1: 3e-4 is a string
    assert cfg["max_steps"] == 9  # the flag wins; a flag left unset (None) does not
    assert cfg["seed"] == train_config.SETTINGS["seed"].default
    assert cfg["data"] == ["embedded"] and cfg["output_dir"] == "outputs/spen-tiny"


def test_every_setting_is_a_flag_of_the_same_name(tmp_path) -> None:
    values = {"model_name_or_path": str(ROOT / "hub_configs/gpt2-tiny"), "data": ["a.txt", "b.txt"],
              "tokenizer_name": "gpt2", "output_dir": "o", "learning_rate": 0.5, "mixed_precision": "bf16",
              "report_to": "wandb", "torch_compile": True, "gradient_accumulation_steps": 3, "max_test_samples": 7,
              "config_name": "c", "run_name": "r"}
    for key, setting in train_config.SETTINGS.items():
        value = values.get(key, setting.default)
        if isinstance(value, float) and key not in values:
            value = value / 2 if value else 0.5
        elif isinstance(value, int) and not isinstance(value, bool):
            value += 1
        argv = [f"--{key}", *(value if isinstance(value, list) else [str(value)])]
        assert _flags(*argv)[key] == value, key


@pytest.mark.parametrize("argv, key, value", [
    (["--lr", "0.01"], "learning_rate", 0.01),
    (["--max-steps", "3"], "max_steps", 3),
    (["--micro_batch_size", "2"], "per_device_train_batch_size", 2),
    (["--batch_size", "64"], "total_train_batch_size", 64),
    (["--tokenizer", "gpt2"], "tokenizer_name", "gpt2"),
    (["--model_config", "x"], "model_name_or_path", "x"),
    (["--grad_clip", "0.5"], "max_grad_norm", 0.5),
    (["--save-steps", "7"], "save_steps", 7),
    (["--torch_compile"], "torch_compile", True),
    (["--torch_compile", "false"], "torch_compile", False),
])
def test_older_spellings_are_aliases(argv, key, value) -> None:
    assert _flags(*argv)[key] == value


@pytest.mark.parametrize("text, message", [
    ("lr: 1.0e-3\n", ":2: lr is an older flag spelling; a YAML names the setting learning_rate"),
    ("model_config: x\n", ":2: model_config is an older flag spelling; a YAML names the setting model_name_or_path"),
    ("eval_every: 4\n", ":2: eval_every is an older flag spelling; a YAML names the setting eval_steps"),
    ("betas: [0.8, 0.9]\n", ":2: betas is an older spelling; a YAML names adam_beta1 and adam_beta2"),
])
def test_a_yaml_names_each_setting_once(tmp_path, text: str, message: str) -> None:
    # Issue 32: one name per setting in a YAML; the older spellings stay flags only (test_older_spellings_are_aliases).
    with pytest.raises(train_config.ConfigError, match=re.escape(message)):
        train_config.read_yaml(_yaml(tmp_path, text))


def test_every_committed_train_yaml_names_its_settings_by_their_names() -> None:
    from ema_boundary.yamlio import read_yaml_file

    paths = [*ROOT.glob("hub_configs/*/train.yaml"), *ROOT.glob("docs/**/train.yaml")]
    assert any("hub_configs" in str(p) for p in paths) and any("docs" in str(p) for p in paths)
    for path in paths:
        assert set(read_yaml_file(path)[0]) <= set(train_config.SETTINGS), path
    for path in ROOT.glob("hub_configs/*/train.yaml"):  # they name their model folder from the repository
        assert train_config.read_yaml(path)["model_name_or_path"], path


def test_data_may_list_several_files(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, "data: [a.txt, b.jsonl]\n"))
    assert cfg["data"] == ["a.txt", "b.jsonl"]


def test_flags_alone_describe_a_run() -> None:
    cfg = train_config.load_config(train_config.parse_args(["--model_name_or_path", "hub_configs/gpt2-tiny",
                                                            "--max_steps", "4"]))
    assert cfg["max_steps"] == 4 and (ROOT / "hub_configs/gpt2-tiny").samefile(cfg["model_name_or_path"])
    with pytest.raises(train_config.ConfigError, match="^the command line: model_name_or_path is missing"):
        train_config.load_config(train_config.parse_args(["--max_steps", "4"]))


@pytest.mark.parametrize("text, message", [
    ("data: [1, 2]\n", ":2: data must be str"),
    ("data: [embedded, c4]\n", "cannot be mixed"),
    ("max_steps: many\n", ":2: max_steps must be int"),
    ("learning_rat: 0.1\n", ":2: unknown setting 'learning_rat'"),
    ("learning_rate: [0.1\n", "invalid YAML"),
    ("learning_rate: -0.001\n", ":2: learning_rate must be a positive number, got -0.001"),
    ("learning_rate: 0\n", ":2: learning_rate must be a positive number"),
    ("lr: 0.1\nlearning_rate: 0.2\n", ":2: lr is an older flag spelling"),
    ("lr: 0.1\nmax_steps: 2\nlr: 3e+3\n", ":4: lr is written twice (lines 2 and 4); keep one"),
    ("block_size: 0\n", ":2: block_size must be a positive integer"),
    ("adam_beta1: 1.5\n", ":2: adam_beta1 must be a number in [0, 1), got 1.5"),
    ("adam_beta2: 1.0\n", ":2: adam_beta2 must be a number in [0, 1)"),
    ("mixed_precision: fp8\n", ":2: mixed_precision must be one of 'no', 'bf16', 'fp16'"),
    ("min_lr_ratio: 2.0\n", ":2: min_lr_ratio must be a number in [0, 1]"),
    ("torch_compile: 1\n", ":2: torch_compile must be bool"),
    ("gradient_accumulation_steps: 0\n", ":2: gradient_accumulation_steps must be a positive integer"),
    ("test_every: -1\n", ":2: test_every must be a non-negative integer (0: no test split), got -1"),
    ("test_every: 0.5\n", ":2: test_every must be int"),
    ("max_test_samples: 0\n", ":2: max_test_samples must be a positive integer"),
    ("train_fraction: 0\n", ":2: train_fraction must be a number in (0, 1], got 0.0"),
    ("train_fraction: 1.5\n", ":2: train_fraction must be a number in (0, 1], got 1.5"),
    ("train_fraction: half\n", ":2: train_fraction must be float"),
    ("data: c4\ntrain_fraction: 0.5\n", ":3: train_fraction 0.5 needs local or embedded data (streamed C4"),
])
def test_bad_settings_are_config_errors_naming_the_line(tmp_path, text: str, message: str) -> None:
    with pytest.raises(train_config.ConfigError, match=re.escape(message)) as err:
        train_config.read_yaml(_yaml(tmp_path, text))
    assert not isinstance(err.value, corpus.DataError)  # a setting is not a data problem
    assert "\n" not in str(err.value)


def test_a_bad_flag_is_named_as_the_flag(tmp_path) -> None:
    with pytest.raises(train_config.ConfigError, match=r"^--max_steps: max_steps must be a positive integer, got 0$"):
        train_config.read_yaml(_yaml(tmp_path, "max_steps: 10\n"), {"max_steps": 0})
    path = _yaml(tmp_path, "learning_rate: 3e-4\n")
    assert train_config.read_yaml(path, _flags("--lr", "1e-2"))["learning_rate"] == 1e-2
    with pytest.raises(train_config.ConfigError, match="^--learning_rate: learning_rate must be a positive number"):
        train_config.read_yaml(path, _flags("--learning_rate", "-1"))


def test_a_bad_command_line_exits_2_in_one_line(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        train_config.parse_args(["--max_steps", "many"])
    assert e.value.code == train_config.EXIT_BAD_INPUT == 2
    assert capsys.readouterr().err == "train.py: error: argument --max_steps: invalid int value: 'many'\n"
    with pytest.raises(SystemExit):
        train_config.parse_args(["--lr", "fast"])
    assert capsys.readouterr().err == "train.py: error: argument --learning_rate: invalid float value: 'fast'\n"


@pytest.mark.parametrize("yaml_text, flags, processes, total, accum", [
    ("total_train_batch_size: 32\nper_device_train_batch_size: 8\n", (), 1, 32, 4),  # the recipe's total
    ("total_train_batch_size: 32\nper_device_train_batch_size: 8\n", (), 2, 32, 2),  # the same on 2 processes
    ("total_train_batch_size: 32\nper_device_train_batch_size: 8\n", ("--gradient_accumulation_steps", "2"), 1,
     16, 2),  # a flag fixes the accumulation: the total follows
    ("gradient_accumulation_steps: 2\nper_device_train_batch_size: 8\n", (), 3, 48, 2),
    ("gradient_accumulation_steps: 2\nper_device_train_batch_size: 8\n", ("--total_train_batch_size", "32"), 1,
     32, 4),  # a flag fixes the total: the accumulation follows
    ("total_train_batch_size: 16\ngradient_accumulation_steps: 2\nper_device_train_batch_size: 8\n", (), 1, 16, 2),
])
def test_batch_total_and_accumulation(tmp_path, yaml_text, flags, processes, total, accum) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, yaml_text), _flags(*flags))
    assert train_config.resolve_batch(cfg, processes) == accum
    assert cfg["total_train_batch_size"] == total and cfg["gradient_accumulation_steps"] == accum


@pytest.mark.parametrize("yaml_text, processes, message", [
    ("total_train_batch_size: 16\ngradient_accumulation_steps: 4\nper_device_train_batch_size: 8\n", 1,
     "total_train_batch_size 16 is not per_device_train_batch_size 8 x gradient_accumulation_steps 4 x 1 processes"),
    ("total_train_batch_size: 20\nper_device_train_batch_size: 8\n", 1,
     "total_train_batch_size 20 is not a multiple of per_device_train_batch_size 8 x 1 processes"),
])
def test_batch_that_does_not_add_up_is_refused(tmp_path, yaml_text, processes, message) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, yaml_text))
    with pytest.raises(train_config.ConfigError, match=re.escape(message)):
        train_config.resolve_batch(cfg, processes)


def _checkpoint(out, step: int, **state):
    ckpt = out / "checkpoints" / f"step_{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "data_state.json").write_text(json.dumps({"step": step, "pos": [0, 0, 0], **state}))
    return ckpt


def test_resume_checks_every_setting_against_the_checkpoint(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, ""))
    out = tmp_path / "run"
    ckpt = _checkpoint(out, 4, config={**cfg, "changes": []})
    assert train_config.check_resume(ckpt, out, cfg) == (out, {**cfg, "changes": []})
    # Without a checkpoint nothing was trained: an earlier attempt's settings bind nothing.
    (out / "train_config.json").write_text(json.dumps({**cfg, "val_every": 3}))
    assert train_config.check_resume(None, out, cfg) == (out, None)
    # What the run trains on or how it learns: refused, naming the setting and both values.
    for key, value in (("val_every", 3), ("learning_rate", 0.1), ("warmup_steps", 7), ("seed", 1), ("shuffle", False),
                       ("weight_decay", 0.0), ("tokenizer_name", "gpt2")):
        with pytest.raises(train_config.ConfigError) as e:
            train_config.check_resume(ckpt, out, {**cfg, key: value})
        assert str(e.value).startswith(f"{ckpt}: the run to resume used another {key} ({train_config._shown(cfg[key])} "
                                       f"in the checkpoint, {value} now)"), str(e.value)
    # What changes how the run is watched or saved, or when it ends: accepted, recorded with its step.
    _, saved = train_config.check_resume(ckpt, out, {**cfg, "max_steps": 9, "eval_steps": 2, "output_dir": "elsewhere"})
    assert saved["changes"] == [{"step": 4, "setting": "max_steps", "from": cfg["max_steps"], "to": 9},
                                {"step": 4, "setting": "eval_steps", "from": cfg["eval_steps"], "to": 2}]
    # A later resume keeps the earlier changes (those before its checkpoint's step).
    later = _checkpoint(out, 6, config={**cfg, "max_steps": 9, "eval_steps": 2, "changes": saved["changes"] + [
        {"step": 7, "setting": "eval_steps", "from": 2, "to": 3}]})  # step 7: after the checkpoint, redone
    assert train_config.check_resume(later, out, {**cfg, "max_steps": 9})[1]["changes"] == saved["changes"] + [
        {"step": 6, "setting": "eval_steps", "from": 2, "to": cfg["eval_steps"]}]


def test_resume_of_a_checkpoint_without_its_settings_checks_the_data_stream(tmp_path) -> None:
    cfg = train_config.read_yaml(_yaml(tmp_path, ""))
    out = tmp_path / "run"
    ckpt = _checkpoint(out, 3)  # saved before checkpoints kept their settings: the run's train_config.json
    (out / "train_config.json").write_text(json.dumps({**cfg, "val_every": 3}))
    with pytest.raises(train_config.ConfigError, match="the run to resume used another val_every"):
        train_config.check_resume(ckpt, out, cfg)
    # A run saved under the older names is read under the current ones.
    old = {"model_config": cfg["model_name_or_path"], "data": cfg["data"], "block_size": cfg["block_size"],
           "batch_size": cfg["total_train_batch_size"], "val_every": cfg["val_every"], "lr": 1.0}
    (out / "train_config.json").write_text(json.dumps({**old, "seed": cfg["seed"]}))
    # A run saved before the shuffle setting read its data in order: resumed only unshuffled.
    with pytest.raises(train_config.ConfigError, match="the run to resume used another shuffle"):
        train_config.check_resume(ckpt, out, cfg)
    assert train_config.check_resume(ckpt, out, {**cfg, "shuffle": False})[1]["learning_rate"] == 1.0
    # A test split changes the training stream; a run saved before test_every existed had none.
    with pytest.raises(train_config.ConfigError, match="the run to resume used another test_every"):
        train_config.check_resume(ckpt, out, {**cfg, "shuffle": False, "test_every": 3})
    (out / "train_config.json").write_text(json.dumps({**cfg, "test_every": 3}))
    assert train_config.check_resume(ckpt, out, {**cfg, "test_every": 3})[1]["test_every"] == 3


def test_a_damaged_checkpoint_is_named_and_the_one_before_it_used(tmp_path) -> None:
    out = tmp_path / "run"
    for step in (3, 6):
        ckpt = _checkpoint(out, step)
        (ckpt / "model.safetensors").write_bytes(b"x" * 100)
        state = json.loads((ckpt / "data_state.json").read_text())
        (ckpt / "data_state.json").write_text(json.dumps({**state, "files": checkpoint_files(ckpt)}))
    newest = out / "checkpoints/step_6"
    assert checkpoint_problem(newest) is None
    (newest / "model.safetensors").write_bytes(b"x" * 50)  # truncated
    warnings: list[str] = []
    assert find_checkpoint(out, "latest", True, False, warn=warnings.append) == out / "checkpoints/step_3"
    assert warnings == [f"train.py: warning: {newest}: cannot resume from it (model.safetensors has 50 bytes, the "
                        "checkpoint wrote 100); trying the checkpoint before it"]
    with pytest.raises(train_config.ConfigError, match=f"^{newest}: cannot resume from this checkpoint: "
                                                       "model.safetensors has 50 bytes"):
        find_checkpoint(out, str(newest), True, False)
    (newest / "model.safetensors").write_bytes(b"y" * 100)  # the same size, other bytes
    assert checkpoint_problem(newest) == "model.safetensors does not match its SHA-256 checksum"
    (out / "checkpoints/step_3/model.safetensors").unlink()
    with pytest.raises(train_config.ConfigError, match=f"^{out}: no checkpoint of it can be resumed"):
        find_checkpoint(out, "latest", True, False)
    # A checkpoint saved before checksums: its safetensors files must open.
    old = _checkpoint(tmp_path / "old", 2)
    (old / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}")
    assert "model.safetensors does not load" in checkpoint_problem(old)


def test_a_torn_last_metrics_line_is_dropped_with_a_warning(tmp_path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    assert train_config.kept_metrics(out, 3) is None
    lines = [json.dumps({"step": s, "loss": 1.0}) for s in (1, 2, 3, 4)]
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 5, "lo')
    warnings: list[str] = []
    assert train_config.kept_metrics(out, 3, warnings.append) == "".join(ln + "\n" for ln in lines[:3])
    assert warnings == [f"train.py: warning: {out}/metrics.jsonl:5: dropped its last line, torn by an interrupted "
                        "write"]
    (out / "metrics.jsonl").write_text(lines[0] + "\nxx\n" + lines[1] + "\n")  # damage before the end: refused
    with pytest.raises(train_config.ConfigError, match=f"^{out}/metrics.jsonl:2: not a metrics record"):
        train_config.kept_metrics(out, 3)


def _run_folder(out, marker: bool = True, step: int | None = 3):
    out.mkdir(parents=True)
    (out / "train_config.json").write_text("{}")
    if marker:
        (out / MARKER).write_text(json.dumps({"tool": "train.py"}))
    if step is not None:
        (out / "checkpoints" / f"step_{step}").mkdir(parents=True)
        (out / "checkpoints" / f"step_{step}" / "data_state.json").write_text("{}")
    return out


def test_output_folder_rules(tmp_path, monkeypatch) -> None:
    assert train_config.check_output(tmp_path / "new", overwrite=False) is False
    (tmp_path / "empty").mkdir()
    assert train_config.check_output(tmp_path / "empty", overwrite=False) is False
    assert train_config.check_output(_run_folder(tmp_path / "own"), overwrite=False) is True
    assert train_config.check_output(_run_folder(tmp_path / "legacy", marker=False), overwrite=False) is True

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(train_config.ConfigError, match=f"^{foreign}: exists, is not empty and is not an output "
                                                           "of train.py"):
            train_config.check_output(foreign, overwrite)
    other = tmp_path / "other"
    other.mkdir()
    (other / MARKER).write_text(json.dumps({"tool": "grammar_probe build"}))
    with pytest.raises(train_config.ConfigError, match="holds an output of grammar_probe build, not of train.py"):
        train_config.check_output(other, True)

    monkeypatch.chdir(tmp_path / "own")
    for where in (".", "..", str(ROOT)):
        with pytest.raises(train_config.ConfigError, match="is the working folder or one of its parents|is a "
                                                           "repository root"):
            train_config.check_output(train_config.Path(where), True)
    assert (foreign / "precious.txt").read_text() == "mine"


def test_checkpoint_discovery(tmp_path) -> None:
    own = _run_folder(tmp_path / "own", step=3)
    (own / "checkpoints" / ".tmp_step_6").mkdir()  # a save that did not finish does not count
    assert find_checkpoint(own, None, True, False) == own / "checkpoints/step_3"  # resumes by itself
    assert find_checkpoint(own, "latest", True, False) == own / "checkpoints/step_3"
    assert find_checkpoint(own, None, True, True) is None  # --overwrite_output_dir: starts over
    with pytest.raises(train_config.ConfigError, match="--overwrite_output_dir starts over and "
                                                       "--resume_from_checkpoint continues; pass one"):
        find_checkpoint(own, "latest", True, True)
    with pytest.raises(train_config.ConfigError, match="not a complete checkpoint"):
        find_checkpoint(own, str(own / "checkpoints/.tmp_step_6"), True, False)

    finished = _run_folder(tmp_path / "finished", step=None)
    (finished / "final").mkdir()
    with pytest.raises(train_config.ConfigError, match="holds a finished train.py run without checkpoints; pass "
                                                       "--overwrite_output_dir"):
        find_checkpoint(finished, None, True, False)
    assert find_checkpoint(tmp_path / "new", None, False, False) is None


def test_clear_run_removes_only_what_train_py_writes(tmp_path) -> None:
    out = _run_folder(tmp_path / "own")
    for name in ("final", "tokenizer"):
        (out / name).mkdir()
    (out / "metrics.jsonl").write_text("")
    (out / "notes.txt").write_text("mine")
    os.symlink(tmp_path, out / "link")
    train_config.clear_run(out)
    assert sorted(p.name for p in out.iterdir()) == ["link", "notes.txt"]


def test_help_shows_every_setting_with_its_default_and_no_internals(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        train_config.parse_args(["--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for key, setting in train_config.SETTINGS.items():
        shown = "unset" if setting.default is None else str(setting.default)
        assert re.search(rf"--{key} .*?\(default: {re.escape(shown)}\)", text), key
    for flag in ("--config", "--output_dir", "--overwrite_output_dir", "--resume_from_checkpoint", "--push_to_hub",
                 "--hub_model_id", "--log_level", "--learning_rate", "--per_device_train_batch_size"):
        assert flag in text
    assert "Exit status: 0 done; 2 bad command line" in text and "130 interrupted" in text
    for internal in ("train_config", "SETTINGS", "docs/notes", "issue", "(default: None)"):
        assert internal not in text, internal
