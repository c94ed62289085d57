"""eval.ablation on a tiny config: the command as an alias of the sweep; the library the report's stage still calls
(every file and field, both axes, the seed-blocked verdicts); --summarize of its earlier folders; bad input."""

from __future__ import annotations

import json
import math
import re
import shlex
import shutil

import pytest

import train_config
from ema_boundary.io import MARKER
from eval.ablation import analyse, main, run_ablation, run_budgets
from modeling_spen.variants import SPEN_VARIANTS
from tests.eval_testkit import REPO, write_micro_config

COMPARISON_KEYS = {"difference", "ci95", "equivalence_margin", "verdict", "p_difference", "p_equivalence",
                   "detectable", "seeds"}


def _settings_of(command: str) -> dict:
    """The settings train.py reads from a recorded command line."""
    argv = shlex.split(command)
    assert argv[:2] == ["python", "train.py"], command
    return train_config.read_yaml(*_yaml_and_flags(argv[2:]))


def _yaml_and_flags(argv: list[str]) -> tuple[str, dict]:
    args = train_config.parse_args(argv)
    return args.config, {k: getattr(args, k) for k in train_config.FLAG_OVERRIDES}


def test_predictor_ablation_writes_every_file_and_field(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    result = run_ablation(config, 2, out, variants=["none", "linear", "softmax_attention-sequence"], max_steps=2,
                          lr=1e-3, margin=0.05)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "ablation.json", "configs", "logs", "loss_curves.png",
                                                     "runs", "tokenizer"]
    saved = json.loads((out / "ablation.json").read_text())
    assert saved == json.loads(json.dumps(result))
    assert ".tmp-" not in (out / "ablation.json").read_text()
    assert saved["axis"] == "predictor" and saved["seeds"] == [7, 8] and saved["max_steps"] == 2
    assert saved["lr"] == 1e-3 and saved["reference"] == "linear" and saved["equivalence_margin"] == 0.05
    assert "seed-blocked" in saved["design"] and saved["tokens"] == 2 * 4 * 32
    assert set(saved["final_val_loss"]) == {"none", "linear", "softmax_attention-sequence"}
    for name, var in saved["variants"].items():
        assert var["fields"] == SPEN_VARIANTS[name]
        assert var["parameters"] > 0 and var["tokens_per_parameter"] == pytest.approx(256 / var["parameters"])
        assert 0 < var["non_embedding_parameters"] < var["parameters"]
        model = json.loads((out / "configs" / name / "config.json").read_text())
        assert {k: model[k] for k in var["fields"]} == var["fields"]
        for seed, run in var["runs"].items():
            assert math.isfinite(run["final_val_loss"]) and run["curve"]["val_step"][-1] == 2
            run_dir = out / run["run_dir"]
            assert (run_dir / "final" / "config.json").is_file() and not (run_dir / "checkpoints").exists()
            trained = json.loads((run_dir / "final" / "config.json").read_text())
            assert trained["predictor"] == var["fields"]["predictor"]
            assert saved["final_val_loss"][name][seed] == run["final_val_loss"]
            # The recorded command is the executed one: it reads the settings the run saved.
            # (It ran inside the temporary folder that became `out`.)
            ran = json.loads(re.sub(r"\.abl\.tmp-[^/]+", "abl", (run_dir / "train_config.json").read_text()))
            again = _settings_of(run["command"])
            keys = ("model_name_or_path", "learning_rate", "seed", "max_steps", "data", "tokenizer_name")
            assert {k: again[k] for k in keys} == {k: ran[k] for k in keys}
            assert again["output_dir"] == str(run_dir)
    # Same data and tokenizer for every run.
    tokenizers = {(out / r["run_dir"] / "tokenizer" / "tokenizer.json").read_text()
                  for v in saved["variants"].values() for r in v["runs"].values()}
    assert len(tokenizers) == 1
    # Every arm against the reference, seed-blocked, with the declared margin; the overall F test.
    assert set(saved["comparisons"]) == {"none", "softmax_attention-sequence"}
    for c in saved["comparisons"].values():
        assert COMPARISON_KEYS <= set(c) and c["equivalence_margin"] == 0.05 and c["seeds"] == ["7", "8"]
        assert c["verdict"] in ("equivalent", "different", "not resolved")
    assert saved["overall"]["df"] == [2, 2] and 0 <= saved["overall"]["p"] <= 1
    assert "seed-blocked F test" in saved["statement"] and "ANOVA" not in saved["statement"]


def test_trace_ablation_in_two_processes(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    result = run_ablation(config, 1, tmp_path / "abl", traces=["linear", "linear-selective"], max_steps=1, workers=2)
    assert result["axis"] == "trace" and list(result["variants"]) == ["linear", "linear-selective"]
    assert result["reference"] == "linear"
    model = json.loads((tmp_path / "abl" / "configs" / "linear-selective" / "config.json").read_text())
    assert model["trace"] == "selective" and model["predictor"] == "linear"  # the variant's fields, all of them
    # One seed: nothing can be tested.
    assert result["comparisons"]["linear-selective"]["verdict"] == "not resolved" and result["overall"] is None
    assert (tmp_path / "abl" / "logs" / "linear-selective_seed_7.log").is_file()


def test_each_arm_chooses_its_own_rate_from_the_grid(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    result = run_ablation(config, 2, out, traces=["linear", "linear-selective"], max_steps=1, lr_grid=[1e-3, 3e-2])
    assert result["lr_grid"] == [1e-3, 3e-2]
    for arm, rates in result["rates"].items():
        grid = {float(r): loss for r, loss in rates["grid"].items()}
        assert rates["chosen"] == min(grid, key=grid.get) and rates["edge"]  # a 2-point grid: always at an edge
        var = result["variants"][arm]
        assert var["lr"] == rates["chosen"] and result["lrs"][arm] == rates["chosen"]
        # the first seed is the grid's run at the chosen rate; the second trained at that rate too
        assert var["runs"]["7"]["run_dir"] == f"runs/{arm}/lr_{rates['chosen']:g}/seed_7"
        assert var["runs"]["7"]["final_val_loss"] == grid[rates["chosen"]]
        assert _settings_of(var["runs"]["8"]["command"])["learning_rate"] == rates["chosen"]
        for rate in grid:  # every trial of the grid is kept
            assert (out / "runs" / arm / f"lr_{rate:g}" / "seed_7" / "final" / "config.json").is_file()
    assert result["lr"] == result["rates"]["linear"]["chosen"]


def test_arms_at_their_own_given_rates(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    result = run_ablation(config, 1, tmp_path / "abl", traces=["linear", "linear-selective"], max_steps=1,
                          lr={"linear": 1e-3, "linear-selective": 2e-3})
    assert result["lrs"] == {"linear": 1e-3, "linear-selective": 2e-3} and result["lr"] == 1e-3
    command = result["variants"]["linear-selective"]["runs"]["7"]["command"]
    assert _settings_of(command)["learning_rate"] == 2e-3


def test_verdicts_follow_the_equivalence_test():
    seeds = {s: 4.0 + 0.05 * s for s in range(5)}
    # Identical arms: the 90% interval is the point 0, inside any margin: equivalent.
    same = analyse({"ref": seeds, "b": dict(seeds)}, "ref", 0.02)
    assert same["comparisons"]["b"]["verdict"] == "equivalent"
    assert "indistinguishable within ±0.02" in same["statement"]
    # No margin declared: never equivalent, whatever the data.
    assert analyse({"ref": seeds, "b": dict(seeds)}, "ref", None)["comparisons"]["b"]["verdict"] != "equivalent"
    # A known shift of 0.1 nats with seed noise: different, lower.
    noise = [0.004, -0.003, 0.001, -0.002, 0.0]
    shifted = {s: v - 0.1 + noise[s] for s, v in seeds.items()}
    diff = analyse({"ref": seeds, "b": shifted}, "ref", 0.02)["comparisons"]["b"]
    assert diff["verdict"] == "different" and diff["difference"] == pytest.approx(-0.1, abs=0.005)
    assert diff["ci95"][0] < -0.1 < diff["ci95"][1]
    # Noisy, two seeds: neither shown different nor within the margin.
    noisy = analyse({"ref": {0: 4.0, 1: 4.1}, "b": {0: 4.05, 1: 4.02}}, "ref", 0.02)
    assert noisy["comparisons"]["b"]["verdict"] == "not resolved"
    assert "not resolved at this budget" in noisy["statement"] and "indistinguishable" not in noisy["statement"]


@pytest.mark.parametrize("argv, flag", [
    (["--config", "no/such.yaml"], "--config"),
    (["--config", "{micro}", "--variants", "none,quadratic"], "--variants"),
    (["--config", "{micro}", "--trace", "linear", "fancy"], "--trace"),
    (["--config", "{micro}", "--seeds", "0"], "--seeds"),
    (["--config", "{gpt2}"], "--config"),
    (["--config", "{micro}", "--lr", "-1"], "--learning_rate"),
    (["--config", "{micro}", "--learning_rate", "0"], "--learning_rate"),
    (["--config", "{micro}", "--seed", "-1"], "--seed"),
    (["--config", "{micro}", "--lr_grid", "1e-3,fast"], "--lr_grid"),
    (["--config", "{micro}", "--lr_grid", "1e-3,1e-3"], "--lr_grid"),
    (["--config", "{micro}", "--lr_grid", "1e-3", "--learning_rate", "1e-3"], "--lr_grid"),
    (["--config", "{micro}", "--learning_rate", "linear=1e-3"], "--learning_rate"),
    (["--config", "{micro}", "--max_steps", "0"], "--max_steps"),
    (["--config", "{micro}", "--margin", "0"], "--margin"),
    (["--config", "{micro}", "--reference", "quadratic"], "--reference"),
    (["--config", "{micro}", "--workers", "0"], "--workers"),
    (["--config", "{micro}", "--tokenizer", "no/such/folder"], "--tokenizer"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, argv, flag):
    micro = write_micro_config(tmp_path / "micro.yaml")
    gpt2 = write_micro_config(tmp_path / "gpt2.yaml", model_name_or_path=str(REPO / "hub_configs" / "gpt2-tiny"))
    argv = [a.format(micro=micro, gpt2=gpt2) for a in argv]
    out = tmp_path / "abl"
    assert main([*argv, "--output_dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err
    assert not out.exists()


# ---------------------------------------------------------------------------------------------
# --budgets and --summarize
# ---------------------------------------------------------------------------------------------

BUDGETS_KEYS = {"tool", "kind", "axis", "command", "config", "reference", "equivalence_margin", "seeds", "lr_grid",
                "rates", "lrs", "scored_on", "eval_tokens", "parameters", "parameter_difference", "ngram",
                "bigram_loss", "budgets", "longest", "seconds", "rates_moved_measure"}
BUDGET_KEYS = {"max_steps", "tokens", "folder", "final_loss", "mean_loss", "comparisons", "overall", "statement",
               "reference_loss", "reference_below_bigram"}
ABLATION_FILES = ["ablation.json", "configs", "logs", "loss_curves.png", "runs", "tokenizer"]


@pytest.fixture(scope="module")
def budgets_run(tmp_path_factory):
    """2 budgets (given longest first: the order given does not matter) x 2 arms x 2 seeds, each arm choosing its
    rate from a 2-point grid at the longest budget: one run shared by the tests below."""
    tmp = tmp_path_factory.mktemp("budgets")
    config = write_micro_config(tmp / "micro.yaml")
    out = tmp / "D"
    run_budgets(config, 2, out, [2, 1], traces=["linear", "linear-learned"], lr_grid=[1e-3, 3e-2])
    return config, out


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_budgets_write_every_budget_and_the_summary(budgets_run):
    config, out = budgets_run
    assert _files(out) == sorted([MARKER, "budgets.json", "budgets.png", "steps_1", "steps_2"])
    summary = json.loads((out / "budgets.json").read_text())
    assert set(summary) == BUDGETS_KEYS and ".tmp-" not in (out / "budgets.json").read_text()
    assert summary["tool"] == "eval.ablation" and summary["kind"] == "budgets" and summary["axis"] == "trace"
    assert summary["reference"] == "linear" and summary["seeds"] == [7, 8] and summary["lr_grid"] == [1e-3, 3e-2]
    assert summary["longest"] == 2 and [b["max_steps"] for b in summary["budgets"]] == [1, 2]
    ablations = {n: json.loads((out / f"steps_{n}" / "ablation.json").read_text()) for n in (1, 2)}
    for n, result in ablations.items():
        assert _files(out / f"steps_{n}") == sorted([MARKER, *ABLATION_FILES])  # a whole ablation folder each
        assert result["max_steps"] == n and ".tmp-" not in json.dumps(result)
    # The longest chose every arm's rate on the grid; the shorter budget trained each arm at that rate.
    longest, shorter = ablations[2], ablations[1]
    assert summary["rates"] == longest["rates"] and summary["lrs"] == longest["lrs"] == shorter["lrs"]
    assert shorter["lr_grid"] is None and "rates" not in shorter
    for arm, var in shorter["variants"].items():
        for run in var["runs"].values():
            assert _settings_of(run["command"])["learning_rate"] == longest["rates"][arm]["chosen"]
            assert _settings_of(run["command"])["max_steps"] == 1
    # One tokenizer: the same in both budgets' folders and in every run.
    tokenizers = {(out / f"steps_{n}" / r["run_dir"] / "tokenizer" / "tokenizer.json").read_text()
                  for n, a in ablations.items() for v in a["variants"].values() for r in v["runs"].values()}
    tokenizers |= {(out / f"steps_{n}" / "tokenizer" / "tokenizer.json").read_text() for n in (1, 2)}
    assert len(tokenizers) == 1
    # Each budget: its own ablation's numbers; the gate reads the reference arm against the bigram.
    for b in summary["budgets"]:
        result = ablations[b["max_steps"]]
        assert set(b) == BUDGET_KEYS | {"rates_moved"} and b["folder"] == f"steps_{b['max_steps']}"
        assert b["tokens"] == result["tokens"] and b["final_loss"] == result["final_val_loss"]
        assert b["comparisons"] == result["comparisons"] and b["statement"] == result["statement"]
        assert b["reference_loss"] == pytest.approx(sum(b["final_loss"]["linear"].values()) / 2)
        assert b["reference_below_bigram"] == (b["reference_loss"] < summary["bigram_loss"])
        # Only the learned trace's rates can move; after training they have.
        assert set(b["rates_moved"]) == {"linear-learned"}
        moved = b["rates_moved"]["linear-learned"]
        assert set(moved["per_seed"]) == {"7", "8"} and moved["max"] >= moved["mean"] >= 0
    assert summary["budgets"][-1]["rates_moved"]["linear-learned"]["max"] > 0
    # The n-gram lines: on the blocks scored, counted on at most the longest budget's tokens.
    ngram = summary["ngram"]
    assert ngram["split"] == summary["scored_on"] == "validation" and summary["eval_tokens"] == ngram["eval_tokens"]
    assert ngram["train_tokens"] == longest["tokens"] and summary["bigram_loss"] == pytest.approx(
        math.log(ngram["bigram"]))
    assert ngram["unigram"] > ngram["bigram"] > 0
    params = summary["parameters"]
    learned = longest["variants"]["linear-learned"]
    assert params["linear-learned"] == {"total": learned["parameters"],
                                        "non_embedding": learned["non_embedding_parameters"]}
    assert summary["parameter_difference"] == {
        "linear": 0, "linear-learned": params["linear-learned"]["non_embedding"] - params["linear"]["non_embedding"]}
    assert summary["parameter_difference"]["linear-learned"] > 0  # the learned rates are parameters
    assert summary["seconds"] > 0
    argv = shlex.split(summary["command"])
    assert argv[:3] == ["python", "-m", "eval.ablation"] and argv[argv.index("--budgets") + 1] == "1,2"
    assert argv[argv.index("--output_dir") + 1] == str(out) and argv[argv.index("--config") + 1] == str(config)


def test_the_verdict_is_the_longest_budgets(budgets_run):
    _, out = budgets_run
    summary = json.loads((out / "budgets.json").read_text())
    verdict = next(b for b in summary["budgets"] if b["max_steps"] == summary["longest"])
    assert summary["budgets"][-1] is not None and verdict == summary["budgets"][-1]  # ascending: the longest last
    longest = json.loads((out / "steps_2" / "ablation.json").read_text())
    shorter = json.loads((out / "steps_1" / "ablation.json").read_text())
    assert longest["comparisons"] != shorter["comparisons"]  # so reading the wrong budget would show
    assert verdict["comparisons"] == longest["comparisons"] and verdict["statement"] == longest["statement"]


def _without(summary: dict, *keys: str) -> dict:
    return {k: v for k, v in summary.items() if k not in keys}


def test_summarize_rebuilds_the_summary_from_the_folders(budgets_run, tmp_path, capsys):
    config, out = budgets_run
    original = json.loads((out / "budgets.json").read_text())
    # Folders moved in by hand (no marker on the parent), without the longest's tokenizer: it is rebuilt.
    moved = tmp_path / "moved"
    moved.mkdir()
    for n in (1, 2):
        shutil.copytree(out / f"steps_{n}", moved / f"steps_{n}")
    shutil.rmtree(moved / "steps_2" / "tokenizer")
    assert main(["--summarize", str(moved)]) == 0
    assert _files(moved) == ["budgets.json", "budgets.png", "steps_1", "steps_2"]
    rebuilt = json.loads((moved / "budgets.json").read_text())
    assert _without(rebuilt, "command", "seconds") == _without(original, "command", "seconds")
    steps_seconds = [json.loads((out / f"steps_{n}" / "ablation.json").read_text())["seconds"] for n in (1, 2)]
    assert rebuilt["seconds"] == pytest.approx(sum(steps_seconds), abs=0.11)
    argv = shlex.split(rebuilt["command"])
    assert argv[argv.index("--output_dir") + 1] == str(moved) and argv[argv.index("--seed") + 1] == "7"
    assert argv[argv.index("--budgets") + 1] == "1,2" and argv[argv.index("--lr_grid") + 1] == "0.001,0.03"
    # Again over its own summary; and in the tool's own folder.
    assert main(["--summarize", str(moved)]) == 0
    assert _without(json.loads((moved / "budgets.json").read_text()), "command", "seconds") == _without(
        original, "command", "seconds")
    own = tmp_path / "own"
    shutil.copytree(out, own)
    assert main(["--summarize", str(own)]) == 0
    assert _without(json.loads((own / "budgets.json").read_text()), "command", "seconds") == _without(
        original, "command", "seconds")
    assert "wrote" in capsys.readouterr().out


def _steps_copy(out, folder, n, edit=None):
    """steps_n of the shared run, its ablation.json and marker only (enough for the checks), optionally edited."""
    (folder / f"steps_{n}").mkdir(parents=True)
    shutil.copy(out / f"steps_{n}" / MARKER, folder / f"steps_{n}" / MARKER)
    result = json.loads((out / f"steps_{n}" / "ablation.json").read_text())
    (folder / f"steps_{n}" / "ablation.json").write_text(json.dumps(edit(result) if edit else result))


@pytest.mark.parametrize("case, names", [
    ("missing", "D"),
    ("no budgets", "D"),
    ("unreadable", "steps_2/ablation.json"),
    ("not an ablation", "steps_2/ablation.json"),
    ("no marker", "steps_2"),
    ("wrong steps", "steps_1/ablation.json"),
    ("other seeds", "steps_1/ablation.json"),
    ("other reference", "steps_1/ablation.json"),
    ("other arms", "steps_1/ablation.json"),
    ("other config", "steps_1/ablation.json"),
    ("other rates", "steps_1/ablation.json"),
    ("a foreign file", "notes.txt"),
    ("a foreign budgets.json", "budgets.json"),
    ("another tokenizer", "steps_1/tokenizer/tokenizer.json"),
    ("another flag", "--seeds"),
])
def test_summarize_bad_input_one_line_exit_2_nothing_written(budgets_run, tmp_path, capsys, case, names):
    _, out = budgets_run
    folder = tmp_path / "D"
    argv = ["--summarize", str(folder)]
    edits = {"wrong steps": lambda r: {**r, "max_steps": 5}, "other seeds": lambda r: {**r, "seeds": [7, 9]},
             "other reference": lambda r: {**r, "reference": "linear-learned"},
             "other arms": lambda r: {**r, "variants": {"linear": r["variants"]["linear"]}},
             "other config": lambda r: {**r, "config": "elsewhere.yaml"},
             "other rates": lambda r: {**r, "lrs": {arm: 2 * rate for arm, rate in r["lrs"].items()}}}
    if case != "missing":
        folder.mkdir()
    if case not in ("missing", "no budgets"):
        _steps_copy(out, folder, 2)
        _steps_copy(out, folder, 1, edits.get(case))
    if case == "no budgets":
        (folder / "steps_x").mkdir()
    elif case == "unreadable":
        (folder / "steps_2" / "ablation.json").write_text("{not json")
    elif case == "not an ablation":
        (folder / "steps_2" / "ablation.json").write_text(json.dumps({"max_steps": 2}))
    elif case == "no marker":
        (folder / "steps_2" / MARKER).unlink()
    elif case == "a foreign file":
        (folder / "notes.txt").write_text("mine")
    elif case == "a foreign budgets.json":
        (folder / "budgets.json").write_text(json.dumps({"my": "numbers"}))
    elif case == "another flag":
        argv += ["--seeds", "3"]
    elif case == "another tokenizer":
        for n in (1, 2):
            shutil.copytree(out / f"steps_{n}" / "tokenizer", folder / f"steps_{n}" / "tokenizer")
        (folder / "steps_1" / "tokenizer" / "tokenizer.json").write_text("{}")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    texts = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and names.split("/")[-1] in err[0], err
    if "/" in names:
        assert str(folder / names) in err[0], err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written, nothing removed
    assert all(p.read_bytes() == text for p, text in texts.items())


@pytest.mark.parametrize("argv, flag", [
    (["--config", "{micro}", "--budgets", "2,2"], "--budgets"),
    (["--config", "{micro}", "--budgets", "0,2"], "--budgets"),
    (["--config", "{micro}", "--budgets", "1,two"], "--budgets"),
    (["--config", "{micro}", "--budgets", "1,2", "--max_steps", "2"], "--max_steps"),
    (["--config", "{micro}", "--budgets", "1,2", "--trace", "fancy"], "--trace"),
    (["--config", "{micro}", "--budgets", "1,2", "--lr_grid", "1e-3", "--learning_rate", "1e-3"], "--lr_grid"),
    (["--budgets", "1,2"], "--config"),
])
def test_budgets_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, argv, flag):
    micro = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    assert main([*(a.format(micro=micro) for a in argv), "--output_dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err
    assert _files(tmp_path) == ["micro.yaml"]


def test_help_shows_the_defaults(capsys):
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--budgets STEPS" in text and "--summarize DIR" in text
    assert "(default: 5)" in text and "(default: 0.02)" in text


@pytest.mark.parametrize("trace", ["learned", "selective"])
def test_rates_moved_reads_how_far_the_write_rates_moved(tmp_path, trace):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    import modeling_spen  # noqa: F401  registers SPEN with the Auto classes
    from eval.ablation import rates_moved
    from modeling_spen.modeling_spen import SPENTraces

    config = AutoConfig.from_pretrained(REPO / "hub_configs" / "spen-tiny", trace=trace)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(tmp_path / "untrained")
    assert rates_moved(tmp_path / "untrained") == {"max": 0.0, "mean": 0.0}  # they start at the fixed rates
    # One rate of one layer set to 0.5 (logit 0) from 0.02: moved 0.48; every other rate stays.
    traces = [m for m in model.modules() if isinstance(m, SPENTraces)]
    D, S = config.hidden_size, len(config.trace_rates)
    with torch.no_grad():
        if trace == "learned":
            traces[-1].alpha_logit[2, 5] = 0.0
        else:  # the selective rate at zero input is its bias: slot 2, channel 5
            traces[-1].alpha_up.bias[2 * D + 5] = 0.0
    model.save_pretrained(tmp_path / "moved")
    moved = rates_moved(tmp_path / "moved")
    assert moved["max"] == pytest.approx(0.48, abs=1e-6)
    assert moved["mean"] == pytest.approx(0.48 / (S * D * config.num_hidden_layers), rel=1e-4)


# ---------------------------------------------------------------------------------------------
# The command: an alias of the sweep
# ---------------------------------------------------------------------------------------------


def _plan_of(argv: list[str], monkeypatch) -> object:
    """The sweep plan the command builds from ``argv`` (the runner itself not called)."""
    import eval.sweep.alias as alias

    seen = {}
    monkeypatch.setattr(alias, "run", lambda p, args, command, plan=None, summarize=None: seen.update(plan=plan) or 0)
    assert main(argv) == 0
    return seen["plan"]


@pytest.mark.parametrize("axis, arms", [("trace", "linear,linear-learned,linear-selective"),
                                        ("predictor", "linear,linear_attention-state,softmax_attention-state")])
def test_the_committed_recipe_is_the_committed_sweep_plan(tmp_path, monkeypatch, axis, arms):
    from eval.sweep.plan import load_plan

    flag = "--trace" if axis == "trace" else "--variants"
    plan = _plan_of(["--config", "hub_configs/spen-f64/train.yaml", flag, arms, "--seeds", "5", "--seed", "0",
                     "--lr_grid", "3e-3,1e-2,3e-2", "--budgets", "200,700,2000", "--workers", "2",
                     "--output_dir", str(tmp_path / "out")], monkeypatch)
    committed = load_plan(f"hub_configs/sweeps/ablation-{axis}.yaml")
    assert json.dumps(plan.identity()) == json.dumps(committed.identity())
    assert plan.name == committed.name and plan.path == str(tmp_path / "out" / "sweep.yaml")


def test_given_rates_and_files_become_the_plans(tmp_path, monkeypatch):
    micro = write_micro_config(tmp_path / "micro.yaml")
    (tmp_path / "text.txt").write_text("words\n\n" * 50)
    monkeypatch.chdir(tmp_path)  # files given relative to the working folder are named so that a resume finds them
    plan = _plan_of(["--config", "micro.yaml", "--trace", "linear,linear-selective", "--seeds", "2",
                     "--learning_rate", "linear=1e-3,linear-selective=2e-3", "--data", "text.txt", "--max_steps", "4",
                     "--output_dir", "out"], monkeypatch)
    assert [a.name for a in plan.arms] == ["linear", "linear-selective"]
    assert [plan.grid_of(a) for a in plan.arms] == [(1e-3,), (2e-3,)] and not plan.rate.extend
    assert plan.seeds == (7, 8) and plan.budgets == (4,) and plan.score == "validation"  # micro: no test split
    arm = plan.config_of(plan.arms[1])
    assert arm["data"] == [str(tmp_path / "text.txt")] and arm["model"]["variant"] == "linear-selective"
    assert plan.base["max_steps"] == 3 and plan.declared["base"] == str(micro)


def test_the_command_runs_the_sweep_and_continues_it(tmp_path, capsys):
    micro = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    argv = ["--config", str(micro), "--trace", "linear,linear-learned", "--seeds", "2", "--max_steps", "2",
            "--output_dir", str(out)]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["name"] == "ablation-trace" and results["scored_on"] == "validation"
    runs = sorted(str(p.parent.relative_to(out)) for p in out.glob("runs/**/result.json"))
    assert runs == sorted(f"runs/{arm}/lr_0.003/seed_{s}/steps_2" for arm in ("linear", "linear-learned")
                          for s in (7, 8))
    analysis = results["analysis"]["budgets"]["2"]
    assert analysis["comparisons"]["linear-learned"]["seeds"] == ["7", "8"]
    assert set(analysis["arms"]) == {"linear", "linear-learned"} and "gate" in analysis  # the bigram line
    assert (out / "sweep.yaml").is_file() and "python -m eval.ablation" in (out / "sweep.json").read_text()
    # The sweep's own commands: continue (nothing left to train), summarise again.
    assert main(["--resume_from", str(out)]) == 0
    assert main(["--summarize", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["arms"] == results["arms"]
    # A flag that no longer applies: one line, nothing written.
    capsys.readouterr()
    assert main([*argv, "--overwrite_output_dir"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--overwrite_output_dir no longer applies" in err[0] and "--resume_from" in err[0]
    assert main(["--resume_from", str(out), "--seeds", "3"]) == 2
