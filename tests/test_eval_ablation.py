"""eval.ablation on a tiny config: the command as an alias of the sweep (every arm's model, the seed-blocked
comparisons, both axes, the rate each arm trains at); --summarize of the folders it wrote before (docs/ablation);
bad input."""

from __future__ import annotations

import json
import math
import shlex
import shutil

import pytest
import yaml

import train_config
from ema_boundary.io import MARKER
from eval.ablation import analyse
from eval.sweep.alias import ablation_main as main
from modeling_spen.variants import SPEN_VARIANTS
from tests.eval_testkit import REPO, write_micro_config

COMPARISON_KEYS = {"difference", "ci95", "equivalence_margin", "verdict", "p_difference", "p_equivalence",
                   "detectable", "seeds"}


def _run_settings(out, run: dict) -> dict:
    """The settings train.py read for a sweep run (its recorded command: ``python -m train --config RUN/train.yaml``,
    from the sweep folder)."""
    argv = shlex.split(run["command"])
    assert argv[:4] == ["python", "-m", "train", "--config"], run["command"]
    return yaml.safe_load((out / argv[4]).read_text())


@pytest.mark.slow
def test_predictor_ablation_trains_every_arm_and_compares_them_paired(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    arms = ["none", "linear", "softmax_attention-sequence"]
    assert main(["--config", str(config), "--variants", ",".join(arms), "--seeds", "2", "--max_steps", "2",
                 "--learning_rate", "1e-3", "--margin", "0.05", "--output_dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["name"] == "ablation-predictor" and set(results["arms"]) == set(arms)
    # One tokenizer for every run: the sweep's.
    assert (out / "shared" / "tokenizer" / "tokenizer.json").is_file()
    for name, a in results["arms"].items():
        assert a["choices"]["7"]["chosen"] == 1e-3
        seeds = a["budgets"]["2"]
        assert set(seeds) == {"7", "8"}  # the same seeds in every arm: paired
        for seed, run in seeds.items():
            assert math.isfinite(run["score"]) and run["tokens"] == 2 * 4 * 32 and run["steps"] == 2
            assert 0 < run["parameters"]["non_embedding"] < run["parameters"]["total"]
            # Only the variant's fields differ from the YAML's model: the model trained is the arm's.
            model = json.loads((out / run["run"] / "model" / "config.json").read_text())
            assert {k: model[k] for k in SPEN_VARIANTS[name]} == SPEN_VARIANTS[name]
            trained = json.loads((out / run["run"] / "train" / "final" / "config.json").read_text())
            assert trained["predictor"] == SPEN_VARIANTS[name]["predictor"]
            settings = _run_settings(out, run)
            assert (settings["learning_rate"], settings["seed"], settings["max_steps"]) == (1e-3, int(seed), 2)
    # Every arm against the reference, seed-blocked, with the declared margin; the overall F test.
    analysis = results["analysis"]
    assert analysis["reference"] == "linear" and analysis["equivalence_margin"] == 0.05
    budget = analysis["budgets"]["2"]
    assert set(budget["comparisons"]) == {"none", "softmax_attention-sequence"}
    for c in budget["comparisons"].values():
        assert COMPARISON_KEYS <= set(c) and c["equivalence_margin"] == 0.05 and c["seeds"] == ["7", "8"]
        assert c["verdict"] in ("equivalent", "different", "not resolved")
    assert budget["f_test"]["df"] == [2, 2] and 0 <= budget["f_test"]["p"] <= 1
    # The same comparisons as eval.ablation's own analysis of the scores (the report's ablation stage reads that).
    scores = {arm: {s: r["score"] for s, r in a["budgets"]["2"].items()} for arm, a in results["arms"].items()}
    mine = analyse(scores, "linear", 0.05)["comparisons"]
    assert json.dumps(mine, sort_keys=True) == json.dumps(budget["comparisons"], sort_keys=True)


@pytest.mark.slow
def test_trace_ablation_in_two_processes(tmp_path):
    config = write_micro_config(tmp_path / "micro.yaml")
    out = tmp_path / "abl"
    assert main(["--config", str(config), "--trace", "linear,linear-selective", "--seeds", "1", "--max_steps", "1",
                 "--workers", "2", "--output_dir", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["name"] == "ablation-trace" and list(results["arms"]) == ["linear", "linear-selective"]
    assert results["analysis"]["reference"] == "linear"
    run = results["arms"]["linear-selective"]["budgets"]["1"]["7"]
    model = json.loads((out / run["run"] / "model" / "config.json").read_text())
    assert model["trace"] == "selective" and model["predictor"] == "linear"  # the variant's fields, all of them
    assert (out / run["run"] / "log.txt").is_file()
    # One seed: nothing can be compared.
    assert "comparisons" not in results["analysis"]["budgets"]["1"]


def test_a_grid_lets_each_arm_choose_its_own_rate_by_the_sweeps_rule(tmp_path, monkeypatch):
    # The rule itself (the first seed at the longest budget, one rate beyond an edge, the shorter budgets at the
    # longest's choice) is the runner's: tests/test_sweep.py.
    config = write_micro_config(tmp_path / "micro.yaml")
    plan = _plan_of(["--config", str(config), "--trace", "linear,linear-selective", "--seeds", "2",
                     "--lr_grid", "1e-3,3e-2", "--budgets", "2,1", "--output_dir", str(tmp_path / "out")], monkeypatch)
    assert plan.rate.lr_grid == (1e-3, 3e-2) and plan.rate.choose == "first_seed" and plan.rate.extend
    assert plan.rate.max_extensions == 1 and all(plan.grid_of(a) == (1e-3, 3e-2) for a in plan.arms)
    assert plan.budgets == (1, 2) and plan.seeds == (7, 8)


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


GRID = [1e-3, 3e-3]  # a choice at an edge trains one rate beyond it: 3.3e-4 or 9e-3


def _old_budgets_folder(sweep, out, config) -> None:
    """The sweep's runs laid out as this command wrote a ``--budgets`` folder before it became an alias of the sweep
    (the committed docs/ablation, which --summarize still reads): ``out/steps_<N>/`` each with the tool's marker,
    ablation.json, ``configs/<arm>/config.json``, ``runs/<arm>/seed_<s>/final`` and the tokenizer every run read."""
    results = json.loads((sweep / "results.json").read_text())
    cfg = train_config.read_yaml(config)
    marker = json.dumps({"tool": "eval.ablation"})
    out.mkdir()
    (out / MARKER).write_text(marker)
    arms = list(results["arms"])
    choices = {arm: a["choices"]["7"] for arm, a in results["arms"].items()}
    budgets = sorted(int(n) for n in results["arms"][arms[0]]["budgets"])
    for n in budgets:
        folder = out / f"steps_{n}"
        folder.mkdir()
        (folder / MARKER).write_text(marker)
        shutil.copytree(sweep / "shared" / "tokenizer", folder / "tokenizer")
        variants, seconds = {}, 0.0
        for arm in arms:
            seeds = results["arms"][arm]["budgets"][str(n)]
            (folder / "configs" / arm).mkdir(parents=True)
            shutil.copy(sweep / seeds["7"]["run"] / "model" / "config.json", folder / "configs" / arm / "config.json")
            runs = {}
            for seed, r in seeds.items():
                shutil.copytree(sweep / r["run"] / "train" / "final", folder / "runs" / arm / f"seed_{seed}" / "final")
                runs[seed] = {"final_val_loss": r["val_loss"], "run_dir": f"runs/{arm}/seed_{seed}"}
                seconds += r["seconds"]
            counts = seeds["7"]["parameters"]
            variants[arm] = {"fields": SPEN_VARIANTS[arm], "lr": seeds["7"]["lr"], "parameters": counts["total"],
                             "non_embedding_parameters": counts["non_embedding"], "runs": runs}
        final = {arm: {seed: r["final_val_loss"] for seed, r in v["runs"].items()} for arm, v in variants.items()}
        result = {"axis": "trace", "config": str(config), "max_steps": n,
                  "tokens": n * cfg["total_train_batch_size"] * cfg["block_size"],
                  "lr_grid": GRID if n == budgets[-1] else None,
                  "lrs": {arm: c["chosen"] for arm, c in choices.items()},
                  "seeds": [7, 8], "data": [cfg["data"]] if isinstance(cfg["data"], str) else list(cfg["data"]),
                  "reference": "linear", "equivalence_margin": 0.02, "scored_on": "validation", "variants": variants,
                  "final_val_loss": final, "seconds": round(seconds, 1), **analyse(final, "linear", 0.02)}
        if n == budgets[-1]:
            result["rates"] = {arm: {"chosen": c["chosen"], "grid": c["tried"], "edge": not c["interior"]}
                               for arm, c in choices.items()}
        (folder / "ablation.json").write_text(json.dumps(result))


@pytest.fixture(scope="module")
def budgets_run(tmp_path_factory):
    """2 budgets (given longest first: the order given does not matter) x 2 arms x 2 seeds, each arm choosing its
    rate from a 2-point grid at the longest budget, run by the command (a sweep), then laid out as the folder this
    command wrote before (:func:`_old_budgets_folder`) and summarised: one run shared by the tests below."""
    tmp = tmp_path_factory.mktemp("budgets")
    config = write_micro_config(tmp / "micro.yaml")
    sweep, out = tmp / "sweep", tmp / "D"
    assert main(["--config", str(config), "--trace", "linear,linear-learned", "--seeds", "2", "--budgets", "2,1",
                 "--lr_grid", ",".join(map(str, GRID)), "--output_dir", str(sweep)]) == 0
    _old_budgets_folder(sweep, out, config)
    assert main(["--summarize", str(out)]) == 0
    return config, out, sweep


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.slow
def test_the_shorter_budget_trains_at_the_rate_the_longest_chose(budgets_run):
    _, _, sweep = budgets_run
    results = json.loads((sweep / "results.json").read_text())
    assert results["complete"] and results["name"] == "ablation-trace"
    for arm, a in results["arms"].items():
        choice = a["choices"]["7"]
        tried = {float(r): loss for r, loss in choice["tried"].items()}
        assert choice["chosen"] == min(tried, key=tried.get) and set(GRID) <= set(tried)
        for steps in ("1", "2"):
            for seed, run in a["budgets"][steps].items():
                settings = _run_settings(sweep, run)
                assert (settings["learning_rate"], settings["max_steps"]) == (choice["chosen"], int(steps)), arm
                assert run["lr"] == choice["chosen"] and settings["seed"] == int(seed)


@pytest.mark.slow
def test_summarize_writes_the_summary_of_every_budget(budgets_run):
    config, out, _ = budgets_run
    assert _files(out) == sorted([MARKER, "budgets.json", "budgets.png", "steps_1", "steps_2"])
    summary = json.loads((out / "budgets.json").read_text())
    assert set(summary) == BUDGETS_KEYS
    assert summary["tool"] == "eval.ablation" and summary["kind"] == "budgets" and summary["axis"] == "trace"
    assert summary["reference"] == "linear" and summary["seeds"] == [7, 8] and summary["lr_grid"] == GRID
    assert summary["longest"] == 2 and [b["max_steps"] for b in summary["budgets"]] == [1, 2]
    ablations = {n: json.loads((out / f"steps_{n}" / "ablation.json").read_text()) for n in (1, 2)}
    longest = ablations[2]
    assert summary["rates"] == longest["rates"] and summary["lrs"] == longest["lrs"] == ablations[1]["lrs"]
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
    assert summary["seconds"] == pytest.approx(sum(a["seconds"] for a in ablations.values()), abs=0.11)
    argv = shlex.split(summary["command"])
    assert argv[:3] == ["python", "-m", "eval.ablation"] and argv[argv.index("--budgets") + 1] == "1,2"
    assert argv[argv.index("--output_dir") + 1] == str(out) and argv[argv.index("--config") + 1] == str(config)


@pytest.mark.slow
def test_the_verdict_is_the_longest_budgets(budgets_run):
    _, out, _ = budgets_run
    summary = json.loads((out / "budgets.json").read_text())
    verdict = next(b for b in summary["budgets"] if b["max_steps"] == summary["longest"])
    assert summary["budgets"][-1] is not None and verdict == summary["budgets"][-1]  # ascending: the longest last
    longest = json.loads((out / "steps_2" / "ablation.json").read_text())
    shorter = json.loads((out / "steps_1" / "ablation.json").read_text())
    assert longest["comparisons"] != shorter["comparisons"]  # so reading the wrong budget would show
    assert verdict["comparisons"] == longest["comparisons"] and verdict["statement"] == longest["statement"]


def _without(summary: dict, *keys: str) -> dict:
    return {k: v for k, v in summary.items() if k not in keys}


@pytest.mark.slow
def test_summarize_rebuilds_the_summary_from_the_folders(budgets_run, tmp_path, capsys):
    config, out, _ = budgets_run
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
    assert argv[argv.index("--budgets") + 1] == "1,2" and argv[argv.index("--lr_grid") + 1] == "0.001,0.003"
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


@pytest.mark.slow
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
    _, out, _ = budgets_run
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


@pytest.mark.slow
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
