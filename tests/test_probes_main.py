"""python -m eval.probes: bad input is one line naming the flag and the file, exit status 2, nothing written;
the old module name is an alias."""

from pathlib import Path

from transformers import GPT2LMHeadModel, ViTConfig

from eval.probes.__main__ import main
from tests.test_probes_experiment import _gpt2_config, _save


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    gpt2 = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "good")
    truncated = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "truncated")
    weights = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    not_json = tmp_path / "notjson"
    not_json.mkdir()
    (not_json / "config.json").write_text("{model_type: gpt2,")
    vit = tmp_path / "vit.json"
    ViTConfig().to_json_file(vit)
    no_weights = tmp_path / "noweights"
    _gpt2_config().save_pretrained(no_weights)
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    return {
        "missing folder": (["--model", str(tmp_path / "nope")],
                           f"--model_name_or_path {tmp_path / 'nope'}: no such folder"),
        "missing config": (["--config", str(tmp_path / "nope.json")], "nope.json: no such file or folder"),
        "config.json not JSON": (["--model", str(not_json)], "notjson/config.json: not valid JSON"),
        "--config not JSON": (["--config", str(not_json)], "notjson/config.json: not valid JSON"),
        "truncated safetensors": (["--model", str(truncated)], "truncated/model.safetensors: unreadable weights"),
        "not a causal LM": (["--config", str(vit)], "model_type 'vit' is not a causal language model"),
        "hub name offline": (["--model", "someone/not-cached-anywhere"],
                             "--model_name_or_path someone/not-cached-anywhere: not a local folder and not "
                             "available from the hub"),
        "folder without weights": (["--model", str(no_weights)], "noweights: no weights"),
        "a file as --model": (["--model", str(a_file)], "afile: a file, not a checkpoint folder"),
        "no model": ([], "no model: give --model_name_or_path"),
        "same name twice": (["--model", f"x={gpt2}", "--model", f"x={gpt2}"], "model name 'x' given twice"),
        "unknown recall model": (["--model", str(gpt2), "--recall_models", "other"], "--recall_models: other: no such"),
        "bad rate": (["--model", str(gpt2), "--learning_rate", "1e-3,2"], "--learning_rate/--recall_lrs/--recall-lrs: "
                     "'2' is not a rate in (0, 1)"),
        "bad steps": (["--model", str(gpt2), "--max_steps", "0"],
                      "--max_steps/--recall_steps/--recall-steps: must be a positive integer"),
        "bad seed": (["--model", str(gpt2), "--recall_seeds", "0,-1"],
                     "--recall_seeds/--recall-seeds: '-1' is not a seed"),
        "seed twice": (["--model", str(gpt2), "--recall_seeds", "0,1", "1"],
                       "--recall_seeds: ProbeSettings.recall_seeds must be distinct"),
        "too many pairs": (["--model", str(gpt2), "--recall_pairs", "80"],
                           "--recall_pairs: RecallTask.pairs: 80 pairs"),
        "missing text": (["--model", str(gpt2), "--text", str(tmp_path / "none.txt")], "--text"),
        "text too short": (["--model", str(gpt2), "--text", str(a_file)], "good: the probe text is too short"),
        "output is a file": (["--model", str(gpt2), "--output_dir", str(a_file)], "afile: exists and is not a folder"),
        "not a device": (["--model", str(gpt2), "--device", "gpu0"], "--device: device 'gpu0' is not a torch device"),
        "no such CUDA device": (["--model", str(gpt2), "--device", "cuda:7"], "--device: device 'cuda:7': this "
                                "machine has no such CUDA device"),
        "output is the working folder": (["--model", str(gpt2), "--output_dir", "."], "is the working folder"),
    }


def test_bad_inputs_are_one_line_exit_2_and_nothing_written(tmp_path: Path, capsys) -> None:
    cases = _bad_inputs(tmp_path)
    capsys.readouterr()  # the fixtures' own save_pretrained progress
    for case, (args, message) in cases.items():
        out = tmp_path / "out"
        argv = [*args, *([] if "--output_dir" in args else ["--output_dir", str(out)])]
        assert main(argv) == 2, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("python -m eval.probes: error: "), (case, err)
        assert message in err, (case, err)
        assert not out.exists(), case


def test_help_shows_the_defaults_and_the_transformers_flags(capsys) -> None:
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--model_name_or_path", "--output_dir", "--overwrite_output_dir", "--max_steps", "--learning_rate",
                 "--seed", "--recall_seeds", "(default: 0)", "(default: 1)"):
        assert flag in text, flag
