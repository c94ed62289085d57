"""Content probes: the identity probe on inputs where the answer is known; any causal LM in (a GPT-2
folder with its tokenizer, a GPT-2 config, a Mamba config and folder, a SPEN folder); the JSON schema;
the renderers; bad input (one line naming it, exit 2, nothing written)."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, MambaConfig, MambaForCausalLM, ViTConfig

import eval.content_probes as cp
from eval.content_probes import (
    ProbeSettings,
    fit_lag_probes,
    identity_at_lag,
    main,
    reader_kind,
    recall_verdict,
    render_content_probes_figures,
    render_content_probes_markdown,
)
from eval.recall import RecallRecipe, RecallTask
from tests.test_generation import _tiny_tokenizer
from tests.test_modeling import tiny_model

PNG = b"\x89PNG\r\n\x1a\n"
# The smallest recall run that goes through every piece: 1 and 2 pairs, 3 steps, one rate.
TINY_RECALL = ["--recall-steps", "3", "--recall-pairs", "1", "2", "--recall-lrs", "1e-3"]


def F_one_hot(x: torch.Tensor, n: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(x, n).float()


# ---------------------------------------------------------------------------------------------
# Identity at lag on known answers
# ---------------------------------------------------------------------------------------------


def test_identity_recoverable_exactly_at_the_lag_the_model_copies() -> None:
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 8, (40, 50), generator=g)
    feats = F_one_hot(torch.roll(tokens, 1, dims=1), 8)  # holds exactly the token at t - 1
    res = fit_lag_probes(feats, tokens, lags=[1, 2, 5], num_classes=8)
    assert res["accuracy"][0] > 0.99  # the copied token
    assert res["accuracy"][1] < 0.3 and res["accuracy"][2] < 0.3  # i.i.d. tokens: nothing to read
    assert all(0.1 < c < 0.2 for c in res["chance"])  # 8 equiprobable classes


def test_blurred_state_loses_identity_with_lag() -> None:
    # An EMA of one-hot tokens: recent tokens are recoverable, distant ones fade toward chance.
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 8, (60, 80), generator=g)
    onehot = F_one_hot(tokens, 8)
    h, out = torch.zeros(60, 8), []
    for t in range(80):
        h = 0.5 * h + 0.5 * onehot[:, t]
        out.append(h.clone())
    res = fit_lag_probes(torch.stack(out, 1), tokens, lags=[0, 1, 8], num_classes=8)
    assert res["accuracy"][0] > 0.95
    assert res["accuracy"][0] > res["accuracy"][1] > res["accuracy"][2]
    assert res["accuracy"][2] < 0.3


def test_fit_lag_probes_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="disagree"):
        fit_lag_probes(torch.zeros(2, 5, 3), torch.zeros(2, 4, dtype=torch.long), [1])
    with pytest.raises(ValueError, match="largest lag"):
        fit_lag_probes(torch.zeros(2, 5, 3), torch.zeros(2, 5, dtype=torch.long), [5])


def test_identity_at_lag_on_a_model_covers_every_layer() -> None:
    ids = torch.randint(0, 61, (10, 24), generator=torch.Generator().manual_seed(2))
    res = identity_at_lag(tiny_model(), ids, max_lag=4, num_classes=8)
    assert res["lags"] == [1, 2, 3, 4]
    assert sorted(res["layers"]) == ["0", "1", "2"]  # embeddings + 2 blocks
    assert len(res["best"]) == 4 and all(0.0 <= a <= 1.0 for a in res["best"])


def test_hidden_states_stacked_in_one_tensor_are_split_per_layer() -> None:
    class Stacked(torch.nn.Module):  # an architecture that returns (layers, B, T, D)
        def forward(self, input_ids, **kwargs):
            x = F_one_hot(input_ids, 5)
            return type("Out", (), {"hidden_states": torch.stack([x, 2 * x, 3 * x])})()

    states = cp.hidden_states(Stacked(), torch.zeros(3, 4, dtype=torch.long), batch_size=2)
    assert len(states) == 3 and states[2].shape == (3, 4, 5) and torch.equal(states[2], 3 * states[0])

    class Nothing(torch.nn.Module):
        def forward(self, input_ids, **kwargs):
            return type("Out", (), {"hidden_states": None})()

    with pytest.raises(cp.ProbeInputError, match="Nothing returns no hidden_states"):
        cp.hidden_states(Nothing(), torch.zeros(1, 4, dtype=torch.long))


# ---------------------------------------------------------------------------------------------
# Any model in
# ---------------------------------------------------------------------------------------------


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
    assert main([*args, "--quick", "--text", str(_text(tmp_path)), "--out", str(out), *TINY_RECALL]) == 0
    data = json.loads((out / "content_probes.json").read_text())
    return data, (out / "content_probes.md").read_text()


def test_a_gpt2_folder_a_gpt2_config_and_a_spen_folder(tmp_path: Path) -> None:
    torch.manual_seed(0)
    gpt2 = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "gpt2-ckpt")
    spen = _save(tiny_model(vocab_size=len(_tiny_tokenizer())), tmp_path / "spen-ckpt")
    bare = _save(GPT2LMHeadModel(_gpt2_config()), tmp_path / "no-tokenizer", tokenizer=False)
    config = tmp_path / "arch.json"
    _gpt2_config().to_json_file(config)
    data, md = _run(tmp_path, "--model", str(gpt2), "--model", f"spen={spen}", "--models", f"bare={bare}",
                    "--config", f"gpt2-arch={config}")

    models = data["models"]
    assert list(models) == ["gpt2-ckpt", "spen", "bare", "gpt2-arch"]
    assert [models[n]["source"] for n in models] == ["folder", "folder", "folder", "config"]
    assert [models[n]["model_type"] for n in models] == ["gpt2", "spen", "gpt2", "gpt2"]
    assert models["gpt2-ckpt"]["parameters"] == sum(p.numel() for p in GPT2LMHeadModel(_gpt2_config()).parameters())
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
    assert set(recall) >= {"pairs", "accuracy", "steps", "max_steps", "best_lr", "chance", "sweep", "seconds",
                           "parameters"}
    assert recall["pairs"] == [1, 2] and set(recall["accuracy"]) == {"1", "2"}  # pair count string -> fraction
    assert all(0.0 <= a <= 1.0 for a in recall["accuracy"].values())
    assert recall["max_steps"] == 3 and 1 <= recall["steps"] <= 3 and recall["best_lr"] == 1e-3
    assert recall["chance"] == 1 / 64 and set(recall["sweep"]) == {"0.001"}
    settings = data["recall_settings"]
    assert settings["task"] == {"vocab_size": 128, "pairs": [1, 2]} and settings["seed"] == 3
    expected = cp.cap_steps(replace(RecallRecipe.quick(), lrs=(1e-3,)), 3)
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
    data, _ = _run(tmp_path, "--model", str(a), "--model", str(b), "--recall-models", "b")
    assert list(data["recall"]) == ["b"] and sorted(data["identity_at_lag"]) == ["a", "b"]
    assert data["models"]["a"]["recall"] == "not asked for" and data["positive_control"] is None
    data, _ = _run(tmp_path, "--model", str(a), "--no-identity", "--control", "a")
    assert data["identity_at_lag"] == {} and data["models"]["a"]["identity_at_lag"] == "not asked for"
    assert data["positive_control"] == "a"
    data, md = _run(tmp_path, "--model", str(a), "--no-recall")
    assert data["recall"] == {} and data["recall_settings"] is None and "Not run on any model." in md


def test_quick_preset_is_the_recipe_phase_one_intended() -> None:
    quick = ProbeSettings.quick()
    assert quick.task == RecallTask(pairs=(2, 4, 8)) and quick.recipe == RecallRecipe.quick()
    assert ProbeSettings().task == RecallTask() and ProbeSettings().recipe == RecallRecipe()
    assert quick.recall_steps == RecallRecipe.quick().steps  # what the report's plan reads
    capped = cp.cap_steps(RecallRecipe(), 20)
    assert capped.steps == 20 and capped.warmup_steps == 19 and capped.lrs == RecallRecipe().lrs
    assert not hasattr(cp, "associative_recall") and not hasattr(cp, "RecallTask")  # one recall: eval.recall's


# ---------------------------------------------------------------------------------------------
# Renderers
# ---------------------------------------------------------------------------------------------


def _spen(predictor: str, scope: str, trace: str) -> dict:
    return {"source": "config", "model_type": "spen", "parameters": 1,
            "spen": {"predictor": predictor, "predictor_scope": scope, "trace": trace}}


def _results(control_at_16: float = 1.0) -> dict:
    def recall(acc: list[float], steps: int = 2000) -> dict:
        return {"pairs": [2, 4, 8, 16], "accuracy": dict(zip(["2", "4", "8", "16"], acc, strict=True)),
                "steps": steps, "max_steps": 2000, "best_lr": 1e-3, "chance": 1 / 64, "sweep": {}, "seconds": 9.0,
                "parameters": 100_000}

    return {
        "models": {"gpt2": {"source": "config", "model_type": "gpt2", "parameters": 1},
                   "spen-linear": _spen("linear", "sequence", "ema"),
                   "spen-softmax-seq": _spen("softmax_attention", "sequence", "ema"),
                   "ckpt": {**_spen("linear", "state", "selective"), "source": "folder"}},
        "identity_settings": {"max_lag": 64, "seq_len": 192, "num_sequences": 48, "num_classes": 32},
        "identity_at_lag": {"ckpt": {"lags": list(range(1, 65)), "layers": {},
                                     "best": [0.9 - 0.01 * k for k in range(64)], "chance": [0.05] * 64}},
        "recall": {"spen-linear": recall([0.65, 0.3, 0.12, 0.07]), "gpt2": recall([1.0, 1.0, 1.0, control_at_16], 980),
                   "spen-softmax-seq": recall([0.99, 0.99, 0.98, 0.97], 1500), "ckpt": recall([0.99, 0.5, 0.1, 0.05])},
        "recall_settings": {"task": {"vocab_size": 128, "pairs": [2, 4, 8, 16]},
                            "recipe": {**RecallRecipe().__dict__, "lrs": [1e-3, 3e-3, 1e-2]}, "seed": 13,
                            "chance": 1 / 64},
        "positive_control": "gpt2",
        "seed": 13,
    }


def test_markdown_of_a_map_whose_control_passes() -> None:
    md = render_content_probes_markdown(_results())
    assert md.startswith("### Token identity at lag")
    assert "| model | k=1 | k=2 | k=4 | k=8 | k=16 | k=32 | k=64 | chance |" in md
    assert "| `ckpt` | 90.0% | 89.0% | 87.0% | 83.0% | 75.0% | 59.0% | 27.0% | 5.0% |" in md
    assert "### Associative recall (MQAR): the map" in md
    rows = [line for line in md.splitlines() if line.startswith("| `")][1:]
    assert rows[0].startswith("| `gpt2` | attention over tokens (positive control) |")  # the control first
    assert "| 100.0% | 100.0% | 100.0% | 100.0% | 980 (stopped early) | 0.001 |" in rows[0]
    assert ("| `spen-linear` | state scope, fixed-rate traces | 100,000 | 65.0% | 30.0% | 12.0% | 7.0% | 2,000 (max)"
            in md)
    assert "| chance (a uniform guess among the values) | | | 1.6% | 1.6% | 1.6% | 1.6% |" in md
    assert "| copying a context value, keys ignored | | | 50.0% | 25.0% | 12.5% | 6.2% |" in md
    assert "**Positive control:** `gpt2` reaches 100.0% at 16 pairs" in md
    assert "too short" not in md
    assert "u_t = (h_t − (1 − a) h_{t−1}) / a" in md and "data-processing argument" in md
    assert "- state scope, fixed-rate traces: `spen-linear` partly (best 65.0% at 2 pairs, copying 50.0%)." in md
    assert "- sequence scope, fixed-rate traces: `spen-softmax-seq` recovers content (≥ 95% at 16 pairs)." in md
    assert "- input-dependent (selective) traces: `ckpt` recovers up to 2 pairs." in md
    assert "rests on one seed (seed 13)" in md and "verdict (one seed)" in md


def test_markdown_says_the_run_is_too_short_when_the_control_fails() -> None:
    md = render_content_probes_markdown(_results(control_at_16=0.40))
    assert "**The positive control `gpt2` did not reach 95% at 16 pairs (40.0%" in md
    assert "too short to say anything" in md and "not backed by a positive control that passed" in md
    no_control = _results()
    del no_control["recall"]["gpt2"], no_control["models"]["gpt2"]
    no_control["positive_control"] = None
    assert "**No positive control in this run**" in render_content_probes_markdown(no_control)


def test_markdown_of_a_quick_map_is_a_smoke_test() -> None:
    results = _results()
    for r in results["recall"].values():
        r["accuracy"].pop("16")
    md = render_content_probes_markdown(results)
    assert "`gpt2` reaches 100.0% at 8 pairs" in md and "a smoke test" in md and "16 pairs" in md
    assert "not backed by a positive control that passed" in md  # 8 pairs is not the bar


def test_verdicts_and_kinds() -> None:
    def r(*acc: float) -> dict:
        return {"accuracy": {str(n): a for n, a in zip((2, 4, 8, 16), acc, strict=True)}}

    assert recall_verdict(r(1, 1, 0.99, 0.95)).startswith("recovers content")
    assert recall_verdict(r(1, 0.96, 0.5, 0.1)) == "recovers up to 4 pairs"
    assert recall_verdict(r(0.55, 0.3, 0.25, 0.07)).startswith("partly (best 25.0% at 8 pairs")
    assert recall_verdict(r(0.5, 0.25, 0.13, 0.06)) == "no lookup beyond copying"
    assert reader_kind({"model_type": "gpt2"}) == "control" and reader_kind({"model_type": "mamba"}) == "other"
    assert reader_kind(_spen("linear", "sequence", "ema")) == "state"  # a linear reader sees the state, whatever scope
    assert reader_kind(_spen("softmax_attention", "state", "learned")) == "state"
    assert reader_kind(_spen("linear_attention", "sequence", "ema")) == "sequence"
    assert reader_kind(_spen("none", "state", "selective")) == "selective"


def test_figures(tmp_path: Path) -> None:
    paths = render_content_probes_figures(_results(), tmp_path / "figs")
    assert set(paths) == {"identity_at_lag", "recall"}
    assert all(p.read_bytes()[:8] == PNG for p in paths.values())
    recall_only = {**_results(), "identity_at_lag": {}}
    assert set(render_content_probes_figures(recall_only, tmp_path / "figs2")) == {"recall"}


# ---------------------------------------------------------------------------------------------
# Bad input: one line naming it, exit status 2, nothing written
# ---------------------------------------------------------------------------------------------


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
        "missing folder": (["--model", str(tmp_path / "nope")], f"--model {tmp_path / 'nope'}: no such folder"),
        "missing config": (["--config", str(tmp_path / "nope.json")], "nope.json: no such file or folder"),
        "config.json not JSON": (["--model", str(not_json)], "notjson/config.json: not valid JSON"),
        "--config not JSON": (["--config", str(not_json)], "notjson/config.json: not valid JSON"),
        "truncated safetensors": (["--model", str(truncated)], "truncated/model.safetensors: unreadable weights"),
        "not a causal LM": (["--config", str(vit)], "model_type 'vit' is not a causal language model"),
        "hub name offline": (["--model", "someone/not-cached-anywhere"],
                             "--model someone/not-cached-anywhere: not a local folder and not available from the hub"),
        "folder without weights": (["--model", str(no_weights)], "noweights: no weights"),
        "a file as --model": (["--model", str(a_file)], "afile: a file, not a checkpoint folder"),
        "no model": ([], "no model: give --model"),
        "same name twice": (["--model", f"x={gpt2}", "--model", f"x={gpt2}"], "model name 'x' given twice"),
        "unknown recall model": (["--model", str(gpt2), "--recall-models", "other"], "--recall-models other: no such"),
        "bad rate": (["--model", str(gpt2), "--recall-lrs", "2"], "--recall-lrs: '2' is not a rate in (0, 1)"),
        "bad steps": (["--model", str(gpt2), "--recall-steps", "0"], "--recall-steps: must be a positive integer"),
        "too many pairs": (["--model", str(gpt2), "--recall-pairs", "80"],
                           "--recall-pairs: RecallTask.pairs: 80 pairs"),
        "missing text": (["--model", str(gpt2), "--text", str(tmp_path / "none.txt")], "--text"),
        "text too short": (["--model", str(gpt2), "--text", str(a_file)], "probe text too short"),
        "output is a file": (["--model", str(gpt2), "--out", str(a_file)], "afile: exists and is not a folder"),
    }


def test_bad_inputs_are_one_line_exit_2_and_nothing_written(tmp_path: Path, capsys) -> None:
    cases = _bad_inputs(tmp_path)
    capsys.readouterr()  # the fixtures' own save_pretrained progress
    for case, (args, message) in cases.items():
        out = tmp_path / "out"
        argv = [*args, *([] if "--out" in args else ["--out", str(out)])]
        assert main(argv) == 2, case
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("python -m eval.content_probes: error: "), (case, err)
        assert message in err, (case, err)
        assert not out.exists(), case
