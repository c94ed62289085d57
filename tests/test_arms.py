"""The arms: every paper row across training sizes and the unseen-word protocol 2 x 2, run as a sweep of the
experiment runner (tiny sizes); the command line as the committed plan; the committed arms folder (written before
the arms ran as a sweep) summarized again through the command."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from eval.sweep import grammar_arms
from grammar_probe.__main__ import main
from grammar_probe.arms import PROTOCOL_ARMS, ArmsFolderError, render_arms_markdown, row_values, summarize_arms
from grammar_probe.protocol import RunSize
from grammar_probe.spcn import SPCNConfig

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "docs" / "structure" / "arms_seed21"
TINY = SPCNConfig(input_dim=64, input_active=4, level_sizes=(32, 32), level_active=(4, 4), epochs=1, batch_size=64)
TINY_RUN = RunSize(seeds=2, train_sentences=40, spcn_epochs=1, gru_epochs=2, probe_epochs=2, window_epochs=1,
                   eval_sentences=15, validation_sentences=15)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "grammar"
    assert main(["build", "--output_dir", str(out), "--seed", "2", "--train_size", "200", "--validation_size", "15",
                 "--test_size", "15", "--ceiling_sentences", "60", "--window_sentences", "600"]) == 0
    return out


def tiny_plan(corpus: Path, path: Path) -> Path:
    """hub_configs/sweeps/arms.yaml at tiny sizes: 20 and 40 sentences, the protocol 2 x 2 at 40."""
    plan = yaml.safe_load((REPO / "hub_configs/sweeps/arms.yaml").read_text())
    plan["base"].update(dataset=str(corpus), splits=["test_within_a", "test_novel_words"],
                        size={k: v for k, v in dataclasses.asdict(TINY_RUN).items() if k != "train_sentences"},
                        spcn=json.loads(json.dumps(dataclasses.asdict(TINY))))
    plan.update(seeds=[0], budgets=[20, 40])
    for arm in plan["arms"].values():
        if "budgets" in arm:
            arm["budgets"] = [40]
    plan["settings"]["protocol_size"] = 40
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def arms_dir(corpus, tmp_path_factory) -> Path:
    from eval.sweep.cli import main as sweep

    tmp = tmp_path_factory.mktemp("arms")
    assert sweep([str(tiny_plan(corpus, tmp / "arms.yaml")), "--output_dir", str(tmp / "out")]) == 0
    return tmp / "out"


def _experiment(folder: Path, arm: str, sentences: int) -> dict:
    """The results.json of the sweep's run of ``arm`` at ``sentences`` (base seed 0)."""
    run = json.loads((folder / "results.json").read_text())["arms"][arm]["budgets"][str(sentences)]["0"]
    return json.loads((folder / run["experiment"] / "results.json").read_text())


@pytest.mark.slow
def test_arms_cover_sizes_and_the_protocol_2x2(arms_dir):
    summary = json.loads((arms_dir / "arms.json").read_text())
    assert summary["schema"] == "grammar_probe.arms/1" and summary["sizes"] == [20, 40]
    assert list(summary["arms"]) == ["size_20", "size_40", *(f"protocol_{p}" for p in PROTOCOL_ARMS)]
    protocols = {(a["protocol"]["word_dropout"], a["protocol"]["unseen"]) for n, a in summary["arms"].items()
                 if n.startswith("protocol_")}
    assert protocols == {(0.15, "unk"), (0.15, "random_codes"), (0.0, "unk"), (0.0, "random_codes")}
    assert {a["train_sentences"] for n, a in summary["arms"].items() if n.startswith("protocol_")} == {40}
    assert summary["protocol_arms"] == PROTOCOL_ARMS
    # the protocol arm at a size arm's size and protocol is that arm's run, not a second one
    assert summary["arms"]["protocol_dropout_unk"]["same_run_as"] == "size_40"
    assert summary["arms"]["protocol_dropout_unk"]["rows"] == summary["arms"]["size_40"]["rows"]
    assert summary["arms"]["protocol_no_dropout_unk"]["same_run_as"] is None
    for arm in summary["arms"].values():
        assert set(arm["rows"]) >= {"ratio_within_a", "novel_structural_spcn_minus_bigru"}
        assert arm["seeds"] == [0, 1]
    for by_verdict in summary["conditions"].values():  # every arm is placed under exactly one verdict
        assert sorted(n for names in by_verdict.values() for n in names) == sorted(summary["arms"])
    results = json.loads((arms_dir / "results.json").read_text())
    assert results["complete"] and results["analysis"]["arms"] == summary["arms"]
    assert len(list(arms_dir.glob("runs/*/*/seed_0/steps_*/result.json"))) == 5  # 2 sizes + 3 protocol cells


@pytest.mark.slow
def test_arms_write_report_figures_and_each_runs_results(arms_dir):
    from eval.report.committed import read_sweep, sweep_block

    names = {p.name for p in arms_dir.iterdir()}
    assert {"arms.json", "arms.md", "arms_ratio_within_a.png", "arms_novel_structural_spcn_minus_bigru.png",
            "results.json", "results.md", "sweep.yaml"} <= names
    assert "### SPCN probe accuracy / BiGRU accuracy" in (arms_dir / "arms.md").read_text()
    assert _experiment(arms_dir, "size", 20)["size"]["train_sentences"] == 20
    # the report reads the sweep as it reads the committed one (committed: arms): its structure conditions only
    analysis = sweep_block(read_sweep(arms_dir, "arms"), "arms", "outputs/arms")["analysis"]
    block = analysis["conditions"]
    assert set(analysis) == {"kind", "complete", "conditions"} and block["source"] == "outputs/arms"
    assert block["sizes"] == [20, 40] and block["rows"] and block["seeds"] == 2


@pytest.mark.slow
def test_protocol_arms_change_what_the_models_read(arms_dir):
    res = _experiment(arms_dir, "dropout_random_codes", 40)
    assert res["protocol"]["unseen"] == "random_codes" and res["protocol"]["word_dropout"] == 0.15
    assert all(log["unk_rate_train"] == 0 for log in _experiment(arms_dir, "no_dropout_unk", 40)["logs"])
    assert all(log["unk_rate_train"] > 0 for log in _experiment(arms_dir, "size", 40)["logs"])


@pytest.mark.slow
def test_arms_fill_the_causal_gru_column_from_each_runs_results(arms_dir):
    summary = json.loads((arms_dir / "arms.json").read_text())
    sweep_arm = {f"protocol_{cell}": arm for cell, arm in json.loads((arms_dir / "results.json").read_text())[
        "plan"]["declared"]["settings"]["protocol_arms"].items()}
    for name, arm in summary["arms"].items():
        res = _experiment(arms_dir, sweep_arm.get(name, "size"), arm["train_sentences"])
        assert arm["rows"]["ratio_within_a"]["models"]["causal_gru"]["value"] == res["ratios"]["causal_gru_over_bigru"]
        assert "causal_gru" not in arm["rows"]["novel_structural_spcn_minus_bigru"]["models"]
    assert "| plain_ema | window | causal_gru | causal cap |" in (arms_dir / "arms.md").read_text()


def _parse(argv: list[str]):
    from ema_boundary.usage import UsageParser
    from grammar_probe.cli import add_run_options

    p = UsageParser(prog="arms")
    add_run_options(p, arms=True)
    return p.parse_args(argv)


def test_the_command_line_is_the_committed_plan(corpus, tmp_path):
    from eval.sweep.plan import load_plan

    plan = grammar_arms.arms_plan(_parse(["--dataset", str(corpus), "--output_dir", str(tmp_path / "o"), "--seed",
                                          "21", "--workers", "2"]))
    committed = load_plan(grammar_arms.PLAN)
    mine, theirs = plan.identity(), committed.identity()
    assert mine["base"].pop("dataset") == str(corpus) and theirs["base"].pop("dataset") == "data/grammar_seed21"
    assert json.dumps(mine) == json.dumps(theirs) and plan.workers == committed.workers == 2
    # a protocol size that no size arm runs: the fixed protocol's cell is an arm of its own
    other = grammar_arms.arms_plan(_parse(["--dataset", str(corpus), "--output_dir", "o", "--sizes", "20", "40",
                                           "--protocol_size", "30"]))
    assert other.settings["protocol_arms"]["dropout_unk"] == "dropout_unk" and other.arm("dropout_unk").budgets == (30,)


@pytest.mark.parametrize("argv, words", [
    (["--dataset", "{corpus}", "--output_dir", "{out}", "--overwrite_output_dir"], "no longer applies"),
    (["--dataset", "{tmp}", "--output_dir", "{out}"], "not a folder of `python -m grammar_probe build`"),
    (["--output_dir", "{out}"], "--dataset is required"),
    (["--summarize", "{tmp}", "--dataset", "{corpus}"], "give no --dataset"),
    (["--summarize", "{tmp}"], "arms.json: no such file"),
    (["--dataset", "{corpus}", "--output_dir", "{out}", "--word_dropout", "1.5"], "--word_dropout must be in"),
])
def test_bad_command_lines_are_one_line_and_write_nothing(corpus, tmp_path, capsys, argv, words):
    out = tmp_path / "out"
    argv = [a.format(corpus=corpus, out=out, tmp=tmp_path) for a in argv]
    assert grammar_arms.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not out.exists()


def test_the_trainer_refuses_what_the_experiment_does_not_read(corpus, tmp_path):
    from ema_boundary.usage import UsageError
    from eval.sweep.plan import load_plan
    from eval.sweep.trainers import TRAINERS

    for patch, words in (({"size": {"train_sentences": 5}}, "the budgets are the training sentences"),
                         ({"lr": 0.1}, "lr is not an arms setting"), ({"protocol": {"unk": "?"}}, "protocol.unk")):
        raw = yaml.safe_load(tiny_plan(corpus, tmp_path / "p.yaml").read_text())
        raw["base"].update(patch)
        (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
        with pytest.raises(UsageError, match=words):
            TRAINERS["arms"].check(load_plan(tmp_path / "p.yaml"))
    raw["rate"] = {"lr_grid": [1e-3, 1e-2]}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(UsageError, match="one rate"):
        TRAINERS["arms"].check(load_plan(tmp_path / "p.yaml"))


@pytest.mark.slow
def test_the_committed_folder_is_summarized_again_through_the_command(tmp_path):
    # docs/structure/arms_seed21 was written before the arms ran as a sweep: `grammar_probe arms --summarize` (the
    # command runs as a child process) rebuilds its arms.json, arms.md and figures from arms/*/results.json.
    copy = tmp_path / "arms"
    shutil.copytree(COMMITTED, copy)
    summary = json.loads((copy / "arms.json").read_text())
    record = {**summary, "arms": {n: {k: v for k, v in a.items() if k != "rows"} for n, a in summary["arms"].items()}}
    del record["conditions"]
    (copy / "arms.json").write_text(json.dumps(record))
    for png in copy.glob("arms_*.png"):
        png.unlink()
    (copy / "arms.md").unlink()
    (copy / "notes.txt").write_text("mine")

    assert main(["arms", "--summarize", str(copy)]) == 0
    assert json.loads((copy / "arms.json").read_text()) == summary
    assert (copy / "arms.md").read_text() == (COMMITTED / "arms.md").read_text()
    assert {p.name for p in copy.glob("arms_*.png")} == {p.name for p in COMMITTED.glob("arms_*.png")}
    assert (copy / "notes.txt").read_text() == "mine"
    assert not [p for p in copy.iterdir() if ".tmp-" in p.name or p.name.startswith(".atomic-files-")]

    before = (copy / "arms.json").read_text()
    results = copy / "arms" / "size_250" / "results.json"
    res = json.loads(results.read_text())
    results.write_text(json.dumps({**res, "seeds": [7, 8]}))  # another run's results under this arm
    with pytest.raises(ArmsFolderError, match="size_250/results.json: its seeds"):
        summarize_arms(copy)
    results.unlink()
    with pytest.raises(ArmsFolderError, match="size_250/results.json: no such file"):
        summarize_arms(copy)
    assert (copy / "arms.json").read_text() == before


def _value(mean: float) -> dict:
    return {"mean": mean, "ci95": [mean - 0.01, mean + 0.01]}


def _results(spcn_ratio: float = 0.9) -> dict:
    """A results.json with two paper rows: a ratio (whose causal GRU value lives under ``ratios``) and a
    paired "minus BiGRU" difference (computed for SPCN and the shortcuts only)."""
    shortcuts = {m: {"value": _value(0.5), "verdict": "refuted"} for m in ("majority_word", "window", "plain_ema",
                                                                         "spcn_frozen")}
    row = {"paper": 0.96, "target": 0.96, "verdict": "refuted", "reachable": True, "causal_cap": _value(0.99),
           "shortcuts": shortcuts}
    return {"paper": {"ratio_within_a": {**row, "description": "ratio", "ours": _value(spcn_ratio)},
                      "novel_structural_spcn_minus_bigru": {**row, "description": "novel", "paper": "above",
                                                            "target": 0.0, "ours": _value(-0.3)}},
            "ratios": {"spcn_over_bigru": _value(spcn_ratio), "causal_gru_over_bigru": _value(0.97)}}


def test_the_causal_gru_value_is_the_rows_own_measure_from_results_json():
    rows = row_values(_results())
    assert rows["ratio_within_a"]["models"]["causal_gru"] == {"value": _value(0.97), "verdict": "met"}
    assert "causal_gru" not in rows["novel_structural_spcn_minus_bigru"]["models"]  # no paired difference for it
    # a lookup that does not give SPCN's value of the row is not the row's measure: nothing is recorded
    stale = _results()
    stale["ratios"]["spcn_over_bigru"] = _value(0.8)
    assert "causal_gru" not in row_values(stale)["ratio_within_a"]["models"]


def test_arms_md_prints_no_column_that_is_empty_in_every_row():
    rows = row_values(_results())
    arm = {"rows": rows}
    summary = {"size": {"seeds": 2}, "sizes": [20], "base_protocol": {"word_dropout": 0.15}, "protocol_size": 20,
               "seconds": 60.0, "arms": {"size_20": arm},
               "conditions": {r: {"refuted": ["size_20"]} for r in rows if r != "ratios"}}
    md = render_arms_markdown(summary)
    ratio, novel = md.split("### novel")
    assert "| arm | SPCN | verdict | plain_ema | window | causal_gru | causal cap |" in ratio
    assert "| 0.970 [0.960, 0.980] |" in ratio  # a ratio, printed as the row's SPCN value is
    assert "| arm | SPCN | verdict | plain_ema | window | causal cap |" in novel
    assert "No column for causal_gru" in novel
    assert "—" not in md
