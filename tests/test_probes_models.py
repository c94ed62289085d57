"""eval.probes.models: a folder, a hub name or a config, checked before any work; errors name the path, not a flag."""

from pathlib import Path

import pytest
from transformers import GPT2Config, GPT2LMHeadModel, ViTConfig

from eval.probes.models import ModelError, build_on_meta, resolve_config, resolve_model, split_name


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
