"""eval.probes.experiment: any causal LM in (a GPT-2 folder with its tokenizer, a GPT-2 config, a Mamba config
and folder, a SPEN folder), through the command line; the JSON schema; the settings, checked once."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, MambaConfig, MambaForCausalLM

from eval.probes.__main__ import main
from eval.probes.experiment import ProbeInputError, ProbeSettings, cap_steps, run_content_probes
from eval.probes.models import resolve_model
from eval.recall import RecallRecipe, RecallTask
from tests.test_generation import _tiny_tokenizer
from tests.test_modeling import tiny_model

PNG = b"\x89PNG\r\n\x1a\n"
# The smallest recall run that goes through every piece: 1 and 2 pairs, 3 steps, one rate.
TINY_RECALL = ["--max_steps", "3", "--recall_pairs", "1,2", "--learning_rate", "1e-3"]


def _text(tmp_path: Path, words: int = 1600) -> Path:
    vocab = "the cat sat on a mat and dog ran to big red house".split()
    g = torch.Generator().manual_seed(4)
    path = tmp_path / "probe.txt"
    path.write_text(" ".join(vocab[i] for i in torch.randint(0, len(vocab), (words,), generator=g).tolist()))
    return path


def _save(model: torch.nn.Module, folder: Path, tokenizer: bool = True) -> Path:
    model.save_pretrained(folder)
    if tokenizer:
        _tiny_tokenizer().save_pretrained(folder)
    return folder


def _gpt2_config(**overrides) -> GPT2Config:
    return GPT2Config(**{**dict(n_embd=16, n_layer=2, n_head=2, n_positions=128, vocab_size=len(_tiny_tokenizer()),
                                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), **overrides})


def _mamba_config() -> MambaConfig:
    return MambaConfig(vocab_size=len(_tiny_tokenizer()), hidden_size=16, num_hidden_layers=2, state_size=4)


def _run(tmp_path: Path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "out"
    assert main([*args, "--quick", "--text", str(_text(tmp_path)), "--output_dir", str(out), "--overwrite_output_dir",
                 *TINY_RECALL]) == 0
    data = json.loads((out / "content_probes.json").read_text())
    return data, (out / "content_probes.md").read_text()


def test_a_gpt2_folder_a_gpt2_config_and_a_spen_folder(tmp_path: Path) -> None:
    torch.manual_seed(0)
    gpt2 = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "gpt2-ckpt")
    spen = _save(tiny_model(vocab_size=len(_tiny_tokenizer())), tmp_path / "spen-ckpt")
    bare = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "no-tokenizer", tokenizer=False)
    config = tmp_path / "arch.json"
    _gpt2_config().to_json_file(config)
    # The old spellings --model (repeated) and --models are aliases of --model_name_or_path.
    data, md = _run(tmp_path, "--model_name_or_path", str(gpt2), f"spen={spen}", "--models", f"bare={bare}",
                    "--config", f"gpt2-arch={config}")

    models = data["models"]
    assert list(models) == ["gpt2-ckpt", "spen", "bare", "gpt2-arch"]
    assert [models[n]["source"] for n in models] == ["folder", "folder", "folder", "config"]
    assert [models[n]["model_type"] for n in models] == ["gpt2", "spen", "gpt2", "gpt2"]
    reference = GPT2LMHeadModel(_gpt2_config())
    assert models["gpt2-ckpt"]["parameters"] == sum(p.numel() for p in reference.parameters())
    embedding = reference.transformer.wte.weight.numel() + reference.transformer.wpe.weight.numel()  # head tied
    assert models["gpt2-ckpt"]["non_embedding_parameters"] == models["gpt2-ckpt"]["parameters"] - embedding
    assert models["spen"]["spen"] == {"predictor": "linear", "predictor_scope": "sequence", "trace": "ema"}
    # Identity needs trained weights and a tokenizer: the two complete folders only, each with a reason otherwise.
    assert sorted(data["identity_at_lag"]) == ["gpt2-ckpt", "spen"]
    assert "no tokenizer" in models["bare"]["identity_at_lag"]
    assert "no trained weights" in models["gpt2-arch"]["identity_at_lag"]
    # Recall: a fresh model of every architecture, the same recipe.
    assert list(data["recall"]) == ["gpt2-ckpt", "spen", "bare", "gpt2-arch"]
    assert data["recall"]["gpt2-ckpt"]["accuracy"] == data["recall"]["bare"]["accuracy"]  # same config, same seed
    assert data["positive_control"] == "gpt2-ckpt"
    assert "- skipped (no tokenizer" in md and "`bare`" in md and "| `spen` | state scope, fixed-rate traces |" in md
    for png in ("identity_at_lag.png", "recall.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == PNG


def test_the_json_schema(tmp_path: Path) -> None:
    gpt2 = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "gpt2")
    data, _ = _run(tmp_path, "--model", str(gpt2), "--seed", "3")
    identity = data["identity_at_lag"]["gpt2"]
    assert set(identity) == {"lags", "layers", "best", "chance"}
    assert identity["lags"] == list(range(1, 33)) and len(identity["best"]) == len(identity["chance"]) == 32
    assert sorted(identity["layers"]) == ["0", "1", "2"]
    recall = data["recall"]["gpt2"]
    assert set(recall) >= {"pairs", "accuracy", "interval", "steps", "max_steps", "best_lr", "chance", "seeds",
                           "seconds", "parameters", "write_rule", "state_numbers"}
    assert recall["pairs"] == [1, 2] and set(recall["accuracy"]) == {"1", "2"}  # pair count string -> fraction
    assert all(0.0 <= a <= 1.0 for a in recall["accuracy"].values())
    assert recall["max_steps"] == 3 and 1 <= recall["steps"] <= 3 and recall["best_lr"] == 1e-3
    assert recall["chance"] == 1 / 64 and set(recall["seeds"]["3"]["sweep"]) == {"0.001"}
    assert recall["write_rule"] == "attention" and recall["state_numbers"] == 2 * 16 * 6  # K and V, 6 tokens
    assert all(0 <= lo <= recall["accuracy"][n] <= hi <= 1 for n, (lo, hi) in recall["interval"].items())
    settings = data["recall_settings"]
    assert settings["task"] == {"vocab_size": 128, "pairs": [1, 2]} and settings["seed"] == 3
    assert settings["seeds"] == [3] and "per seed" in settings["rate_selection"]
    assert data["recall_escape"]["comparisons"] == {} and data["recall_escape"]["verdict"] is None
    expected = cap_steps(replace(RecallRecipe.quick(), lrs=(1e-3,)), 3)
    assert settings["recipe"] == json.loads(json.dumps(asdict(expected)))
    assert data["models"]["gpt2"] == {**data["models"]["gpt2"], "source": "folder", "model_type": "gpt2",
                                      "identity_at_lag": "ran", "recall": "ran"}
    assert data["identity_settings"] == {"max_lag": 32, "seq_len": 96, "num_sequences": 32, "num_classes": 32}


def test_mamba_config_and_folder(tmp_path: Path) -> None:
    # Mamba: no position ids (no random offsets), hidden states as a tuple, its slow CPU path: tiny sizes.
    torch.manual_seed(0)
    folder = _save(MambaForCausalLM(_mamba_config()), tmp_path / "mamba-ckpt")
    config = tmp_path / "mamba-arch"
    config.mkdir()
    _mamba_config().save_pretrained(config)
    data, md = _run(tmp_path, "--model", str(folder), "--config", str(config))
    assert data["models"]["mamba-arch"]["source"] == "config" and data["models"]["mamba-ckpt"]["model_type"] == "mamba"
    assert sorted(data["identity_at_lag"]["mamba-ckpt"]["layers"]) == ["0", "1", "2"]
    assert data["recall"]["mamba-ckpt"]["parameters"] == data["recall"]["mamba-arch"]["parameters"]
    assert data["positive_control"] is None and "No positive control in this run" in md
    assert "| `mamba-arch` | other architecture |" in md


def test_recall_only_for_some_models_and_identity_off(tmp_path: Path) -> None:
    a = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "a")
    b = _save(tiny_model(vocab_size=len(_tiny_tokenizer())), tmp_path / "b")
    data, _ = _run(tmp_path, "--model", str(a), "--model", str(b), "--recall_models", "b")
    assert list(data["recall"]) == ["b"] and sorted(data["identity_at_lag"]) == ["a", "b"]
    assert data["models"]["a"]["recall"] == "not asked for" and data["positive_control"] is None
    data, _ = _run(tmp_path, "--model", str(a), "--no_identity", "--control", "a")
    assert data["identity_at_lag"] == {} and data["models"]["a"]["identity_at_lag"] == "not asked for"
    assert data["positive_control"] == "a"
    data, md = _run(tmp_path, "--model", str(a), "--no_recall")
    assert data["recall"] == {} and data["recall_settings"] is None and "Not run on any model." in md


def test_quick_preset_is_the_recipe_phase_one_intended() -> None:
    quick = ProbeSettings.quick()
    assert quick.task == RecallTask(pairs=(2, 4, 8)) and quick.recipe == RecallRecipe.quick()
    assert ProbeSettings().task == RecallTask() and ProbeSettings().recipe == RecallRecipe()
    assert quick.recall_steps == RecallRecipe.quick().steps  # what the report's plan reads
    capped = cap_steps(RecallRecipe(), 20)
    assert capped.steps == 20 and capped.warmup_steps == 19 and capped.lrs == RecallRecipe().lrs


def test_settings_are_checked_once_naming_the_field() -> None:
    for fields, message in [({"max_lag": 0}, "ProbeSettings.max_lag must be a positive integer, got 0"),
                            ({"seq_len": 1}, "ProbeSettings.seq_len must be at least 2"),
                            ({"num_classes": True}, "ProbeSettings.num_classes must be a positive integer"),
                            ({"seed": -1}, "ProbeSettings.seed must be a non-negative integer"),
                            ({"recipe": "fast"}, "ProbeSettings.recipe must be an eval.recall.RecallRecipe")]:
        with pytest.raises(ProbeInputError, match=message) as err:
            ProbeSettings(**fields)
        assert err.value.field == next(iter(fields))
    for options, field in [({"recall_pairs": [80]}, "recall_pairs"), ({"recall_lrs": [2.0]}, "recall_lrs"),
                           ({"recall_steps": 0}, "recall_steps")]:
        with pytest.raises(ProbeInputError) as err:
            ProbeSettings.make(**options)
        assert err.value.field == field
    made = ProbeSettings.make(quick=True, seed=4, recall_pairs=[1, 2], recall_lrs=[3e-3], recall_steps=50)
    assert made.seed == 4 and made.task.pairs == (1, 2) and made.recipe.lrs == (3e-3,) and made.recall_steps == 50
    assert made.max_lag == ProbeSettings.quick().max_lag


def test_the_output_folder_is_the_tools_own(tmp_path: Path) -> None:
    gpt2 = resolve_model(str(_save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "gpt2")))
    text = _text(tmp_path).read_text()
    settings = ProbeSettings.quick()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("mine")
    with pytest.raises(Exception, match="is not an output of eval.probes"):
        run_content_probes([gpt2], text, foreign, settings, recall=False)
    assert (foreign / "precious.txt").read_text() == "mine" and len(list(foreign.iterdir())) == 1
    out = tmp_path / "out"
    first = run_content_probes([gpt2], text, out, settings, recall=False)
    with pytest.raises(Exception, match="pass --overwrite_output_dir"):
        run_content_probes([gpt2], text, out, settings, recall=False)
    again = run_content_probes([gpt2], text, out, settings, recall=False, overwrite=True)
    assert again["identity_at_lag"] == first["identity_at_lag"]  # deterministic


def test_identity_reads_no_position_past_a_models_table(tmp_path: Path) -> None:
    # The fair pairs learn exactly block_size positions; the probe's sequences are cut to fit, lags with them.
    short = resolve_model(str(_save(GPT2LMHeadModel(_gpt2_config(n_positions=24)), tmp_path / "short")))
    long = resolve_model(str(_save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "long")))
    settings = ProbeSettings.quick()
    result = run_content_probes({"short": short.location, "long": long.location}, _text(tmp_path).read_text(),
                                tmp_path / "out", settings, recall=False)
    assert result["models"]["short"]["identity_seq_len"] == 24
    assert result["models"]["long"]["identity_seq_len"] == settings.seq_len
    assert max(result["identity_at_lag"]["short"]["lags"]) == 23
    assert max(result["identity_at_lag"]["long"]["lags"]) == settings.identity_dict()["max_lag"]


@pytest.mark.slow
def test_the_map_over_seeds_and_rates_with_its_escape_row(tmp_path: Path) -> None:
    """--recall_seeds and a rate grid reach every arm; the escape comparison pairs the selective state with
    the fixed bank by seed (three seeds: fewer than a verdict needs, so "not resolved")."""
    out = tmp_path / "map"
    assert main(["--default_map", "--no_identity", "--recall_models", "linear-ema16,linear-selective_ssm",
                 "--recall_seeds", "0,1", "2", "--learning_rate", "1e-3,3e-3", "--max_steps", "2",
                 "--recall_pairs", "1,2", "--output_dir", str(out)]) == 0
    data = json.loads((out / "content_probes.json").read_text())
    assert data["recall_settings"]["seeds"] == [0, 1, 2] and data["recall_settings"]["recipe"]["lrs"] == [1e-3, 3e-3]
    for r in data["recall"].values():
        assert set(r["seeds"]) == {"0", "1", "2"} and all(set(s["sweep"]) == {"0.001", "0.003"}
                                                          for s in r["seeds"].values())
        assert r["interval_method"].startswith("percentile bootstrap")
    assert data["recall"]["linear-ema16"]["state_numbers"] == 16 * 64  # the map is at width 64
    assert data["recall"]["linear-selective_ssm"]["state_numbers"] == (16 + 3) * 64
    escape = data["recall_escape"]
    assert escape["headline"] == "16" and list(escape["comparisons"]) == ["16"]
    c = escape["comparisons"]["16"]
    assert c["seeds"] == [0, 1, 2] and c["pairs"] == 2 and escape["verdict"] == "not resolved"
    assert (out / "recall_state.png").read_bytes()[:8] == PNG
    md = (out / "content_probes.md").read_text()
    assert "The claim row reads N = 16: **not resolved**" in md
