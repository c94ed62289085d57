"""eval.depth: the depth-dilution measurement responds to what the stream keeps; the command and its bad input."""

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from eval.depth import depth_dilution, ridge_r2, token_accuracy
from eval.sweep.alias import depth_main as main
from modeling_spen import SPENForCausalLM
from modeling_spen.modeling_spen import ResidualProjection
from tests.test_modeling import tiny_config

REPO = Path(__file__).resolve().parents[1]


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


# ---------------------------------------------------------------------------------------------
# The experiment: paired rows, the claim's verdict, the gate, and the command end to end
# ---------------------------------------------------------------------------------------------

from eval.depth import (  # noqa: E402  (the experiment's API, after the measurement's tests)
    MIN_SEEDS,
    NOT_TESTABLE,
    claim_verdict,
    gate_record,
    paired_row,
    run_scalars,
)


def _seeds(values) -> dict[str, float]:
    return {str(i): float(v) for i, v in enumerate(values)}


def test_paired_rows_decide_from_the_interval_and_need_five_seeds() -> None:
    add = _seeds([0.50, 0.52, 0.48, 0.51, 0.49])
    higher = paired_row(_seeds([0.60, 0.63, 0.57, 0.60, 0.60]), add, 0.02, bounded=True)
    assert higher["verdict"] == "attention higher" and higher["difference"] == pytest.approx(0.10)
    assert higher["add"] == pytest.approx(0.50) and higher["seeds"] == ["0", "1", "2", "3", "4"]
    lower = paired_row(_seeds([0.40, 0.41, 0.39, 0.42, 0.38]), add, 0.02, bounded=True)
    assert lower["verdict"] == "add higher" and lower["ci95"][1] < 0
    same = paired_row(_seeds([0.501, 0.519, 0.481, 0.511, 0.489]), add, 0.02, bounded=True)
    assert same["verdict"] == "equivalent" and "inside ±0.02" in same["reason"]
    wide = paired_row(_seeds([0.9, 0.1, 0.9, 0.1, 0.5]), add, 0.02, bounded=True)
    assert wide["verdict"] == "not resolved" and -1.0 <= wide["ci95"][0] and wide["ci95"][1] <= 1.0
    # The same large difference on four seeds is not a verdict.
    four = {k: v for k, v in add.items() if k != "4"}
    assert paired_row({k: v + 0.1 for k, v in four.items()}, four, 0.02, True)["verdict"] == "not resolved"
    assert MIN_SEEDS == 5
    # An unbounded quantity keeps its t interval; bounded ones are clipped to the range of a difference of fractions.
    spread = _seeds([0.0, 1.0, 0.0, 1.0, 1.0])
    assert paired_row(spread, _seeds([1.0, 0.0, 1.0, 0.0, 0.0]), None, bounded=False)["ci95"][0] < -1.0
    assert paired_row(spread, _seeds([1.0, 0.0, 1.0, 0.0, 0.0]), None, bounded=True)["ci95"][0] == -1.0


def _row(verdict: str) -> dict:
    return {"verdict": verdict, "reason": f"({verdict})"}


@pytest.mark.parametrize("acc, growth, loss, expected", [
    ("add higher", "add higher", "add higher", "refuted"),
    ("equivalent", "add higher", "add higher", "refuted"),
    ("not resolved", "add higher", "add higher", "not resolved at this budget"),
    ("attention higher", "add higher", "add higher", "met"),
    ("attention higher", "add higher", "not resolved", "partly met"),
    ("attention higher", "not resolved", "add higher", "partly met"),
    ("attention higher", "add higher", "attention higher", "partly met"),
])
def test_claim_verdict_follows_the_rule(acc: str, growth: str, loss: str, expected: str) -> None:
    table = {"token_accuracy": _row(acc), "log_rms_growth": _row(growth), "val_loss": _row(loss)}
    out = claim_verdict(table, {"holds": True})
    assert out["verdict"] == expected and out["conclusion"] == expected and out["reason"]
    # Behind a failed competence gate the same measurements are not testable; the rule's verdict is kept.
    failed = claim_verdict(table, {"holds": False})
    assert failed["verdict"] == expected and failed["conclusion"] == NOT_TESTABLE


def test_gate_record_is_the_bigram_line() -> None:
    ngram = {"bigram": math.exp(4.0)}
    assert gate_record({"add": 3.9, "attention": 3.95}, ngram)["holds"] is True
    gate = gate_record({"add": 3.9, "attention": 4.1}, ngram)
    assert gate["holds"] is False and "4.100 nats" in gate["numbers"] and gate["bigram_loss"] == pytest.approx(4.0)


def test_run_scalars_clip_shares_and_take_the_growth() -> None:
    measured = {"rms": [0.5, 1.0, 2.0], "recovered": {"embedding_r2": -0.2, "token_accuracy": 0.7,
                                                       "token_chance": 0.1, "blocks": [0.4, -0.1, 1.0]}}
    s = run_scalars(measured)
    assert s["embedding_share"] == 0.0 and s["block_share"] == [0.4, 0.0, 1.0]
    assert s["earlier_share"] == pytest.approx(0.2) and s["rms_growth"] == pytest.approx(4.0)


def _local_corpus(path) -> str:
    # Generated text (no third-party text): 300 paragraphs of pseudo-words from a fixed generator.
    g = torch.Generator().manual_seed(0)
    words = ["".join(chr(97 + int(c)) for c in torch.randint(0, 26, (int(n),), generator=g))
             for n in torch.randint(2, 7, (200,), generator=g)]
    paragraphs = [" ".join(words[int(i)] for i in torch.randint(0, 200, (40,), generator=g)) for _ in range(300)]
    path.write_text("\n\n".join(paragraphs) + "\n")
    return str(path)


def _deep_micro_yaml(tmp_path) -> str:
    import yaml

    from tests.eval_testkit import MICRO_TRAIN

    model = tmp_path / "model"
    model.mkdir()
    config = json.loads((REPO / "hub_configs" / "spen-depth8" / "config.json").read_text())
    config.update(num_hidden_layers=3, hidden_size=16, intermediate_size=32, vocab_size=512)
    (model / "config.json").write_text(json.dumps(config))
    path = tmp_path / "micro.yaml"
    path.write_text(yaml.safe_dump({**MICRO_TRAIN, "model_name_or_path": str(model),
                                    "data": _local_corpus(tmp_path / "corpus.txt")}))
    return str(path)


def test_the_experiment_runs_as_a_sweep_of_both_arms_with_the_same_seeds(tmp_path) -> None:
    out = tmp_path / "depth"
    argv = ["--config", _deep_micro_yaml(tmp_path), "--seeds", "2", "--max_steps", "2", "--num_sequences", "6",
            "--seq_len", "16", "--output_dir", str(out)]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["name"] == "depth" and results["analysis"]["kind"] == "depth"
    models = {}
    for residual in ("add", "attention"):
        seeds = results["arms"][residual]["budgets"]["2"]
        assert set(seeds) == {"7", "8"}  # the same seeds in both arms: paired
        for seed, run in seeds.items():
            folder = out / run["run"]
            models[residual, seed] = json.loads((folder / "model" / "config.json").read_text())
            assert len(run["depth"]["rms"]) == 4 and len(run["depth"]["recovered"]["blocks"]) == 3
            assert run["depth"]["probe"] == {"num_sequences": 6, "seq_len": 16, "ridge": 1e-3}
            assert math.isfinite(run["score"])  # the micro YAML holds no test split: its validation loss
    # Both arms differ only in the residual; every run read the sweep's one tokenizer.
    add, att = models["add", "7"], models["attention", "7"]
    assert (add.pop("residual"), att.pop("residual")) == ("add", "attention") and add == att
    assert (out / "shared" / "tokenizer" / "tokenizer.json").is_file()
    analysis = results["analysis"]
    table = analysis["table"]
    assert set(table) == {"token_accuracy", "embedding_share", "earlier_share", "log_rms_growth", "val_loss",
                          "block_share"}
    assert len(table["block_share"]) == 3 and table["token_accuracy"]["seeds"] == ["7", "8"]
    # Two seeds: every row and the claim are "not resolved"; the gate's numbers are there either way.
    assert {row["verdict"] for row in [*table.values()][:5]} == {"not resolved"}
    assert analysis["verdict"] == "not resolved at this budget"
    assert analysis["gate"]["holds"] is False and analysis["conclusion"] == NOT_TESTABLE
    assert main(argv) == 2  # a sweep folder is continued (--resume_from), never started over
    assert main(["--resume_from", str(out)]) == 0


def test_the_shipped_pair_through_the_command_is_the_committed_sweeps(tmp_path, monkeypatch) -> None:
    import eval.sweep.alias as alias
    from eval.sweep.plan import load_plan
    from eval.sweep.trainers import model_config

    seen = {}
    monkeypatch.setattr(alias, "run", lambda p, args, command, plan=None: seen.update(plan=plan) or 0)
    assert main(["--config", "hub_configs/spen-depth8/train.yaml", "--seeds", "5", "--seed", "0", "--max_steps",
                 "2000", "--workers", "2", "--output_dir", str(tmp_path / "o")]) == 0
    plan, committed = seen["plan"], load_plan("hub_configs/sweeps/depth.yaml")
    assert (plan.seeds, plan.budgets, plan.workers, plan.analysis) == (committed.seeds, committed.budgets, 2, "depth")
    for arm in ("add", "attention"):
        mine, theirs = plan.config_of(plan.arm(arm)), committed.config_of(committed.arm(arm))
        assert model_config(mine["model"], arm) == model_config(theirs["model"], arm)
        assert mine["measure"] == theirs["measure"] == ["depth"]
    # The same reading, but for the arms only the committed sweep has (its plain reference, the sum at equal CPU).
    extra_arms = {"plain_reference", "reference_margin", "equal_cpu"}
    shared = {k: v for k, v in committed.settings.items() if k not in extra_arms}
    assert {k: plan.settings[k] for k in shared} == shared


@pytest.mark.parametrize("extra, match", [
    (["--residuals", "add"], "--residuals must name both"),
    (["--val_loss_margin", "2"], "--val_loss_margin"),
    (["--model_name_or_path", "x"], "not allowed with argument"),
    (["--learning_rate", "-1"], "--learning_rate"),
    (["--overwrite_output_dir"], "--overwrite_output_dir no longer applies"),
])
def test_experiment_bad_input_is_one_line_and_status_2(tmp_path, capsys, extra, match) -> None:
    argv = ["--config", _deep_micro_yaml(tmp_path), "--output_dir", str(tmp_path / "o"), *extra]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and match in err, err
    assert not (tmp_path / "o").exists()


def experiment_result(gain: float = 0.1, loss_gap: float = -0.1, val_loss: float = 3.5, seeds: int = 5) -> dict:
    """A depth.json as the report's depth stage writes it, from made-up per-seed measurements in which
    attention recovers ``gain`` more token identity and changes the loss by ``loss_gap`` (for the report's tests)."""
    from eval.depth import CLAIM, CLAIM_RULE, DESIGN, MARGINS, RESIDUALS, paired_table

    runs: dict = {}
    for residual in RESIDUALS:
        on = residual == "attention"
        runs[residual] = {}
        for s in range(seeds):
            wobble = 0.004 * (-1) ** s  # seed-to-seed spread of the differences
            shares = [0.9 - 0.1 * i + (0.05 if on else 0.0) + wobble for i in range(4)]
            rms = [0.1 * (1 + (0.1 if on else 1.0) * i) for i in range(5)]
            runs[residual][str(s)] = {
                "token_accuracy": 0.5 + 0.01 * s + (gain + wobble if on else 0.0), "token_chance": 0.1,
                "embedding_share": 0.8, "block_share": shares, "earlier_share": sum(shares[:-1]) / 3,
                "rms_growth": rms[-1] / rms[0] * (1 + wobble), "rms": rms,
                "val_loss": val_loss + 0.01 * s + (loss_gap + wobble if on else 0.0),
                "command": f"python train.py --seed {s}"}
    ngram = {"unigram": math.exp(6.0), "bigram": math.exp(4.0), "trigram": math.exp(3.8), "train_tokens": 1000,
             "eval_tokens": 100}
    table = paired_table(runs)
    gate = gate_record({r: sum(x["val_loss"] for x in runs[r].values()) / seeds for r in RESIDUALS}, ngram)
    return {"claim": CLAIM, "rule": CLAIM_RULE, "design": DESIGN, "config": "hub_configs/spen-depth8/train.yaml",
            "model_config": "hub_configs/spen-depth8", "num_layers": 4, "hidden_size": 32,
            "residuals": list(RESIDUALS), "reference": "add", "seeds": list(range(seeds)), "max_steps": 100,
            "tokens": 204_800, "lr": 3e-3, "margins": dict(MARGINS), "min_seeds": MIN_SEEDS,
            "probe": {"num_sequences": 64, "seq_len": 128, "ridge": 1e-3, "inputs": "validation blocks"},
            "parameters": {"add": 100_000, "attention": 100_200}, "ngram": ngram, "gate": gate, "table": table,
            **claim_verdict(table, gate), "runs": runs, "command": "python -m eval.depth --config x"}


def test_the_made_up_experiment_comes_out_as_made() -> None:
    met = experiment_result()
    assert met["verdict"] == "met" and met["conclusion"] == "met" and met["gate"]["holds"] is True
    assert met["table"]["log_rms_growth"]["verdict"] == "add higher"
    assert experiment_result(gain=-0.1)["verdict"] == "refuted"
    assert experiment_result(val_loss=4.5)["conclusion"] == NOT_TESTABLE


def test_the_shipped_deep_narrow_pair_differs_only_in_the_residual() -> None:
    import train_config
    from modeling_spen import SPENConfig

    yamls = {r: train_config.read_yaml(REPO / "hub_configs" / name / "train.yaml")
             for r, name in (("add", "spen-depth8"), ("attention", "spen-depth8-attention"))}
    configs = {r: json.loads((REPO / y["model_name_or_path"] / "config.json").read_text()) for r, y in yamls.items()}
    drop = ("model_name_or_path", "output_dir")
    assert {k: v for k, v in yamls["add"].items() if k not in drop} == \
        {k: v for k, v in yamls["attention"].items() if k not in drop}
    assert {r: c.pop("residual") for r, c in configs.items()} == {"add": "add", "attention": "attention"}
    assert configs["add"] == configs["attention"] and configs["add"]["num_hidden_layers"] >= 8
    # The parameter counts the YAMLs' comments state.
    counts = {}
    for r, c in configs.items():
        fields = {k: v for k, v in c.items() if k not in ("model_type", "architectures")}
        with torch.device("meta"):
            model = SPENForCausalLM(SPENConfig(**fields, residual=r))
        counts[r] = sum(p.numel() for p in model.parameters())
    assert counts == {"add": 166_720, "attention": 167_264}
