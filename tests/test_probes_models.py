"""eval.probes.models: a folder, a hub name or a config, checked before any work; errors name the path, not a flag;
the one loader (load_causal_lm) refuses weights that do not fit their config.json."""

import re
import shutil
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, ViTConfig

from eval.probes.models import ModelError, build_on_meta, load_causal_lm, resolve_config, resolve_model, split_name


def _gpt2(folder: Path) -> Path:
    GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=32, vocab_size=64)).save_pretrained(folder)
    return folder


def test_a_checkpoint_folder_is_checked_and_counted(tmp_path: Path) -> None:
    final = _gpt2(tmp_path / "my-run" / "final")
    spec = resolve_model(str(final))
    assert (spec.name, spec.source, spec.location, spec.model_type) == ("my-run", "folder", str(final), "gpt2")
    model = GPT2LMHeadModel.from_pretrained(final)
    assert spec.parameters == sum(p.numel() for p in model.parameters())
    embeddings = model.transformer.wte.weight.numel() + model.transformer.wpe.weight.numel()  # the head is tied
    assert spec.non_embedding_parameters == spec.parameters - embeddings
    assert spec.identity_skip is None and spec.describe()["non_embedding_parameters"] == spec.non_embedding_parameters
    assert resolve_model(f"mine={final}").name == "mine"


def test_a_config_is_an_architecture_only(tmp_path: Path) -> None:
    folder = _gpt2(tmp_path / "arch")
    for where, name in ((folder, "arch"), (folder / "config.json", "arch")):
        spec = resolve_config(str(where))
        assert spec.source == "config" and spec.name == name and "no trained weights" in spec.identity_skip
    loose = tmp_path / "tiny.json"
    GPT2Config(n_embd=8, n_layer=1, n_head=2).to_json_file(loose)
    assert resolve_config(str(loose)).name == "tiny"


def test_errors_name_the_path_and_leave_the_flag_to_the_caller(tmp_path: Path) -> None:
    cases = {
        str(tmp_path / "missing"): "no such folder",
        "someone/not-cached-anywhere": "not a local folder and not available from the hub",
    }
    for where, problem in cases.items():
        with pytest.raises(ModelError) as err:
            resolve_model(where)
        assert err.value.where == where and err.value.problem.startswith(problem)
        assert str(err.value).startswith(f"{where}: ") and "--" not in str(err.value).split(":")[0]
    weightless = tmp_path / "weightless"
    GPT2Config().save_pretrained(weightless)
    with pytest.raises(ModelError, match="weightless: no weights"):
        resolve_model(str(weightless))
    vit = tmp_path / "vit.json"
    ViTConfig().to_json_file(vit)
    with pytest.raises(ModelError, match="model_type 'vit' is not a causal language model"):
        resolve_config(str(vit))
    with pytest.raises(ModelError, match="give NAME=PATH_OR_NAME"):
        split_name("=nothing")
    assert split_name(f"a={tmp_path}") == ("a", str(tmp_path)) and split_name(str(tmp_path)) == (None, str(tmp_path))


def test_build_on_meta_allocates_nothing() -> None:
    model = build_on_meta(GPT2Config(n_embd=64, n_layer=2, n_head=2), "gpt2-config")
    assert all(p.device.type == "meta" for p in model.parameters())


def test_load_causal_lm_loads_a_sound_folder_quietly(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    from transformers.utils import logging

    final = _gpt2(tmp_path / "final")
    capfd.readouterr()
    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    model = load_causal_lm(final)
    assert capfd.readouterr().err == ""  # no load report, no progress bar
    assert (logging.get_verbosity(), logging.is_progress_bar_enabled()) == (verbosity, bars)  # restored
    saved = GPT2LMHeadModel.from_pretrained(final)
    assert not model.training and model.transformer.wte.weight.dtype == torch.float32
    assert torch.equal(model.transformer.wte.weight, saved.transformer.wte.weight)
    assert model.lm_head.weight is model.transformer.wte.weight  # the tied head is not "missing"
    assert all(p.device.type == "meta" for p in load_causal_lm(final, device_map="meta").parameters())


def test_weights_that_do_not_fit_their_config_are_refused_naming_the_folder(tmp_path: Path) -> None:
    from tests.test_modeling import tiny_model

    gpt2 = _gpt2(tmp_path / "gpt2")
    foreign = tmp_path / "foreign"  # the case: SPEN weights under a GPT-2 config.json
    tiny_model(vocab_size=64).save_pretrained(foreign)
    shutil.copy(gpt2 / "config.json", foreign / "config.json")
    wide = tmp_path / "wide"  # every name fits, no shape does
    GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, n_positions=32, vocab_size=64)).save_pretrained(wide)
    shutil.copy(gpt2 / "config.json", wide / "config.json")
    for folder, problem in ((foreign, r"missing \(.*\); \d+ unexpected \(model\.h\.0\."),
                            (wide, r"16 of another shape \(transformer\.h\.0\.attn\.c_attn\.bias: \(96,\) saved, "
                                   r"\(48,\) built\)")):
        for load in (load_causal_lm, resolve_model):  # resolve_model: before any work, no tensor read
            with pytest.raises(ModelError) as err:
                load(str(folder))
            message = str(err.value)
            assert message.startswith(f"{folder}: the weights do not fit its config.json (model_type 'gpt2'): ")
            assert re.search(problem, message) and "\n" not in message, message


def test_a_torn_weights_file_is_named(tmp_path: Path) -> None:
    final = _gpt2(tmp_path / "final")
    sharded = tmp_path / "sharded"  # two shards, the second lost
    GPT2LMHeadModel.from_pretrained(final).save_pretrained(sharded, max_shard_size="4KB")
    (lost := sorted(sharded.glob("model-*.safetensors"))[-1]).unlink()
    pickled = tmp_path / "pickled"  # a pytorch_model.bin cut in half: read only by from_pretrained itself
    pickled.mkdir()
    shutil.copy(final / "config.json", pickled / "config.json")
    torch.save(GPT2LMHeadModel.from_pretrained(final).state_dict(), pickled / "pytorch_model.bin")
    weights = final / "model.safetensors"
    for file in (weights, pickled / "pytorch_model.bin"):
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    for folder, file in ((final, weights), (sharded, lost), (pickled, pickled / "pytorch_model.bin")):
        for load in (load_causal_lm, resolve_model):
            with pytest.raises(ModelError, match=f"^{re.escape(str(file))}: unreadable weights"):
                load(str(folder))
    with pytest.raises(ModelError, match="no such folder"):
        load_causal_lm(tmp_path / "nowhere")
