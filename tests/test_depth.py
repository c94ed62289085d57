"""eval.depth: the depth-dilution measurement responds to what the stream keeps; the command and its bad input."""

import json

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from eval.depth import depth_dilution, main, ridge_r2, token_accuracy
from modeling_spen import SPENForCausalLM
from modeling_spen.modeling_spen import ResidualProjection
from tests.test_modeling import tiny_config


def deep_model(residual: str = "add", seed: int = 0, **overrides) -> SPENForCausalLM:
    torch.manual_seed(seed)
    return SPENForCausalLM(tiny_config(num_hidden_layers=8, residual=residual, **overrides)).eval()


def _ids(n: int = 40, t: int = 24, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 61, (n, t), generator=torch.Generator().manual_seed(seed))


def test_probes_recover_a_linear_copy_and_not_noise() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 30, 8, generator=g)
    assert ridge_r2(x, x @ torch.randn(8, 5, generator=g)) > 0.999
    assert ridge_r2(x, torch.randn(20, 30, 5, generator=g)) < 0.05
    tokens = torch.randint(0, 10, (20, 30), generator=g)
    acc = token_accuracy(torch.nn.functional.one_hot(tokens, 10).float(), tokens)
    assert acc["accuracy"] == 1.0 and 0.0 < acc["chance"] < 0.3


@pytest.mark.parametrize("residual", ["add", "attention"])
def test_a_model_whose_blocks_write_nothing_keeps_the_embedding(residual: str) -> None:
    # Every block writes zero: the final stream is the embedding (add) or a fixed multiple of it
    # (attention over the embedding and zero outputs), and the probe recovers it fully.
    model = deep_model(residual)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, ResidualProjection):
                module.weight.zero_()
                module.bias.zero_()
    ids = _ids()
    r = depth_dilution(model, ids)
    assert r["num_layers"] == 8 and r["residual"] == residual and len(r["rms"]) == 9
    assert r["recovered"]["embedding_r2"] > 0.999 and r["recovered"]["token_accuracy"] == 1.0
    emb_rms = model.model.wte(ids).pow(2).mean().sqrt().item()
    assert r["rms"][0] == pytest.approx(emb_rms, rel=1e-5)
    if residual == "add":
        assert r["rms"] == pytest.approx([emb_rms] * 9, rel=1e-5)


def test_a_loud_last_block_dilutes_the_embedding_under_residual_add() -> None:
    ids = _ids()
    model = deep_model("add")
    quiet = depth_dilution(model, ids)
    with torch.no_grad():
        model.model.h[-1].ffn.down.weight.mul_(300.0)
    loud = depth_dilution(model, ids)
    assert loud["rms"][-1] > 2 * quiet["rms"][-1] and loud["rms"][:-1] == pytest.approx(quiet["rms"][:-1])
    assert loud["recovered"]["embedding_r2"] < quiet["recovered"]["embedding_r2"] - 0.1
    # The loud block is what the stream now holds.
    assert loud["recovered"]["blocks"][-1] > 0.9 > quiet["recovered"]["blocks"][-1]
    assert len(quiet["recovered"]["blocks"]) == 8


def test_attention_residual_can_select_the_embedding_past_a_loud_block() -> None:
    # The same loud last block, but the final pseudo-query points at the embedding's keys: selection in depth
    # restores what the sum diluted. A shared offset on channel 0 gives every token's embedding key one
    # common direction (keys are RMS-normalised) for the query to point at.
    ids = _ids()
    model = deep_model("attention")
    with torch.no_grad():
        model.model.wte.weight[:, 0] += 0.1
        model.model.h[-1].ffn.down.weight.mul_(300.0)
        diluted = depth_dilution(model, ids)["recovered"]["embedding_r2"]
        model.model.final_input.query[0] = 50.0
    selected = depth_dilution(model, ids)["recovered"]["embedding_r2"]
    assert selected > 0.95 and selected > diluted + 0.1


def test_non_spen_model_rejected() -> None:
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=61, n_positions=32))
    with pytest.raises(ValueError, match="measures SPEN models"):
        depth_dilution(gpt2, _ids())


def test_command_writes_json_and_figure_for_two_models(tmp_path, capsys) -> None:
    for residual in ("add", "attention"):
        deep_model(residual).save_pretrained(tmp_path / residual)
    out = tmp_path / "out"
    argv = ["--model_name_or_path", str(tmp_path / "add"), str(tmp_path / "attention"),
            "--output_dir", str(out), "--num_sequences", "10", "--seq_len", "16"]
    assert main(argv) == 0
    results = json.loads((out / "depth.json").read_text())
    assert set(results) == {"add", "attention"}
    assert results["attention"]["residual"] == "attention" and results["add"]["inputs"] == "random token ids"
    assert (out / "depth.png").stat().st_size > 1000
    assert sorted(p.name for p in out.iterdir()) == [".ema-boundary-output.json", "depth.json", "depth.png"]
    assert main(argv) == 2  # its own earlier output is replaced only when asked
    assert main([*argv, "--overwrite_output_dir"]) == 0


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--model_name_or_path", "/nonexistent/m", "--output_dir", "{tmp}/o"], "no such folder"),
        (["--model_name_or_path", "{tmp}", "--output_dir", "{tmp}/o"], "no config.json"),
        (["--model_name_or_path", "{tmp}/gpt2", "--output_dir", "{tmp}/o"], "measures SPEN models"),
        (["--model_name_or_path", "{tmp}/add", "--output_dir", "{tmp}/o", "--num_sequences", "1"], "--num_sequences"),
        (["--model_name_or_path", "{tmp}/add", "--output_dir", "{tmp}/o", "--seq_len", "0"], "--seq_len"),
        (["--output_dir", "{tmp}/o"], "--model_name_or_path"),
        (["--model_name_or_path", "{tmp}/add", "{tmp}/add/", "--output_dir", "{tmp}/o"], "given twice"),
        (["--model_name_or_path", "{tmp}/add", "--output_dir", "{tmp}/add/config.json"], "not a folder"),
    ],
)
def test_bad_input_is_one_line_and_status_2(tmp_path, capsys, argv, match) -> None:
    deep_model("add").save_pretrained(tmp_path / "add")
    GPT2LMHeadModel(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=61, n_positions=32)).save_pretrained(
        tmp_path / "gpt2")
    capsys.readouterr()  # the saves' progress bars
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and match in err, err
    assert not (tmp_path / "o").exists()


def test_a_folder_with_a_tokenizer_is_probed_on_text(tmp_path) -> None:
    from eval.depth import probe_ids
    from tests.test_generation import _tiny_tokenizer

    _tiny_tokenizer().save_pretrained(tmp_path)
    ids, what = probe_ids(str(tmp_path), 61, num_sequences=4, seq_len=8, seed=0)
    assert what.startswith("text") and ids.shape == (4, 8) and int(ids.max()) < 61
    random_ids, what = probe_ids(str(tmp_path / "none"), 61, num_sequences=4, seq_len=8, seed=0)
    assert what == "random token ids" and random_ids.shape == (4, 8)


def test_models_are_named_by_their_shortest_distinct_path_tails() -> None:
    from eval.depth import _short_names

    assert _short_names(["/r/add/final", "/r/attention/final"]) == ["add/final", "attention/final"]
    assert _short_names(["/r/a", "/r/b"]) == ["a", "b"]
