"""`ema-boundary report` end to end on a tiny plan and a generated corpus: the report matches its JSON Schema,
every field the issue names is present and finite, the verdicts come from the statistics, each stage's recorded
command reproduces it (the training stages are sweeps on the runner: also tests/test_report_stages.py), the PNGs
are readable, bad input is one line, a failed run keeps its logs."""

import json
import math
import random
from pathlib import Path

import pytest

from ema_boundary.cli import main
from eval.report.plan import REPO, Plan
from eval.report.schema import SCHEMA_VERSION, migrate, validate

REQUIRED = [
    "structure.paper.ratio_within_a.verdict",
    "structure.paper.transfer_b_accuracy.ours.ci95",
    "structure.splits.test_within_a.spcn.accuracy.ci95",
    "structure.ceilings",
    "content.regime.parameters",
    "content.regime.train_tokens",
    "content.regime.tokens_per_parameter",
    "content.regime.val_tokens",
    "content.ngram.unigram",
    "content.ngram.bigram",
    "content.ngram.trigram",
    "content.curves.spen",
    "content.curves.gpt2_arch",
    "content.comparison.difference",
    "content.comparison.ci95",
    "content.comparison.equivalence_margin",
    "content.comparison.verdict",
    "content.learning_rate.spen.grid",
    "content.learning_rate.spen.rates_tried",
    "content.learning_rate.gpt2_arch.grid_rule",
    "content.test_loss.spen.ci95",
    "content.regime.test_tokens",
    "content.regime.test_documents",
    "content.parameter_counts.gpt2_arch.non_embedding",
    "content.regime.by_architecture.spen.tokens_per_non_embedding_parameter",
    "gap.contrasts",
    "gap.command",
    "content.val_loss.spen.ci95",
    "content.train_loss.gpt2_arch.ci95",
    "content.perplexity_ratio",
    "ablation.comparisons.none.difference",
    "ablation.comparisons.none.ci95",
    "ablation.comparisons.none.equivalence_margin",
    "ablation.comparisons.none.verdict",
    "ablation.overall.p",
    "traces.comparisons.linear-selective.verdict",
    "probes.recall.gpt2.steps",
    "probes.recall.gpt2.accuracy",
    "probes.recall.linear.accuracy",
    "probes.identity_at_lag",
    "probes.positive_control",
    "claims",
    "plan.declared",
    "environment.seconds",
    "machine.cpu",  # the record of the machine: CPU, threads, commit, versions (ema_boundary.machine)
    "machine.torch_threads",
    "machine.versions.lm-eval",
    "command",
    "structure.command",
    "content.command",
    "ablation.command",
    "traces.command",
    "probes.command",
]

TINY_PLAN = """\
name: test
workers: 1
grammar: {train_size: 200, quick: true, seeds: 2, train_sentences: 80, eval_sentences: 40, validation_size: 40,
          test_size: 40, ceiling_sentences: 300, window_sentences: 300, workers: 1}
language_model: {rate: {lr_grid: [1.0e-3, 3.0e-3], extend: true, max_extensions: 1, digits: 3}, seeds: [0, 1],
                 max_steps: 3, equivalence_margin: 0.05}
ablation: {seeds: [0, 1], max_steps: 2, predictors: [none, linear], traces: [linear, linear-selective]}
recall: {models: [gpt2, linear], max_steps: 3, lr_grid: [1.0e-3], pairs: [1, 2], quick: true}
"""


def _get(obj: dict, dotted: str):
    for part in dotted.split("."):
        obj = obj[part]
    return obj


def _numbers(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _numbers(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _numbers(v)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield obj


def _corpus(path: Path) -> Path:
    """Made-up words in made-up documents: enough text for a tokenizer and the validation split."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 6))) for _ in range(300)]
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(60, 150))) + "." for _ in range(300)]
    path.write_text("\n\n".join(docs))
    return path


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    plan = tmp / "plan.yaml"
    plan.write_text(TINY_PLAN)
    out = tmp / "out"
    assert main(["report", "--plan", str(plan), "--corpus", str(_corpus(tmp / "corpus.txt")), "--output_dir",
                 str(out)]) == 0
    return out


@pytest.mark.slow
def test_the_report_matches_its_schema(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    validate(report)
    assert report["schema"] == SCHEMA_VERSION
    for block in ("identity_at_lag", "recall", "recall_control", "probe_command", "paper_claims"):
        assert block not in report  # each block once, under probes / claims
    with pytest.raises(ValueError, match="recall"):
        validate({**report, "recall": report["probes"]["recall"]})


def test_the_committed_report_matches_the_schema() -> None:
    validate(json.loads((REPO / "docs/report/report.json").read_text()))


@pytest.mark.slow
def test_migrate_moves_the_duplicated_blocks_and_keeps_every_number(report_dir: Path) -> None:
    new = json.loads((report_dir / "report.json").read_text())
    old = {k: v for k, v in new.items() if k not in ("schema", "claims")}
    old["probes"] = {k: v for k, v in new["probes"].items() if k != "command"}
    old |= {"probe_command": new["probes"]["command"], "recall_control": new["probes"]["positive_control"],
            "recall": new["probes"]["recall"], "paper_claims": [],
            "identity_at_lag": {n: {"lags": r["lags"], "accuracy": r["best"], "chance": r["chance"]}
                                for n, r in new["probes"]["identity_at_lag"].items()}}
    migrated = migrate(old)
    validate(migrated)
    assert migrated == new
    assert migrate(new) is new


@pytest.mark.slow
def test_every_field_present_and_finite(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    for key in REQUIRED:
        value = _get(report, key)
        assert value is not None and value != {}, key
    numbers = list(_numbers({k: report[k] for k in ("content", "probes")}))
    assert numbers and all(math.isfinite(x) for x in numbers if x is not None)
    regime = report["content"]["regime"]
    assert regime["train_tokens"] == 3 * 16 * 128  # max_steps x batch x block of the fair pair's YAMLs
    assert regime["tokens_per_parameter"] == pytest.approx(regime["train_tokens"] / regime["parameters"])
    assert regime["epochs"] is not None and regime["epochs"] > 0  # a finite corpus: its epochs are known
    # Each architecture's rate is one of the declared grid, the one with the lowest validation loss.
    for name, lr in report["content"]["learning_rate"].items():
        losses = {float(k): v["final_val_loss"] for k, v in lr["grid"].items()}
        assert lr["chosen"] == min(losses, key=losses.get), name
    for name in ("SPEN-ema", "GPT-2 arch", "SPEN-selective (ablation)"):
        curve = report["probes"]["identity_at_lag"][name]
        assert len(curve["best"]) == len(curve["lags"])
    assert report["probes"]["recall"]["gpt2"]["steps"] <= 3
    assert (report_dir / ".ema-boundary-output.json").is_file()  # the folder is marked as this tool's output


@pytest.mark.slow
def test_rates_chosen_on_validation_and_every_seed_scored_on_test(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    c = report["content"]
    assert c["scored_on"] == "test" and c["ngram"]["split"] == "test"
    # The n-gram lines read the very blocks the runs were scored on.
    assert c["ngram"]["val_targets"] == c["regime"]["test_tokens"] > 0 and c["regime"]["test_documents"] > 0
    assert c["comparison"]["what"].startswith("SPEN minus GPT-2 architecture, final test loss")
    for name in ("spen", "gpt2_arch"):
        assert c["perplexity"][name] == pytest.approx(math.exp(c["test_loss"][name]["mean"]))
        lr = c["learning_rate"][name]
        losses = {float(k): v["final_val_loss"] for k, v in lr["grid"].items()}
        declared = [1e-3, 3e-3]
        # The plan's rule: an edge choice adds the next rate beyond that edge (one at most here), then re-chooses.
        added = [r for r in losses if r not in declared]
        assert len(added) <= 1 and lr["rates_tried"] == sorted(losses)
        best_of_declared = min(declared, key=losses.get)
        if added:
            assert added[0] == pytest.approx(best_of_declared * 3 if best_of_declared == 3e-3 else 1e-3 / 3, rel=1e-2)
        else:  # never happens with two declared rates: one is always an edge
            pytest.fail(f"{name}: no rate added beyond the edge of a two-rate grid")
        assert lr["interior"] == (min(losses, key=losses.get) not in (min(losses), max(losses)))
        assert lr["grid_rule"].startswith("interior" if lr["interior"] else "edge: the cap of 1")
        counts = c["parameter_counts"][name]
        assert counts["total"] == counts["embedding"] + counts["non_embedding"] == c["parameters"][name]
    index = (report_dir / "index.md").read_text()
    assert f"{c['regime']['test_tokens']:,} test tokens from {c['regime']['test_documents']} other documents" in index
    assert "### Where the gap lives" in index and "SPEN's deficit is larger on AR hits" in index


@pytest.mark.slow
def test_the_gap_stage_is_reproduced_by_its_command(report_dir: Path, tmp_path: Path) -> None:
    import shlex

    from eval.gap import main as gap_main
    from eval.report.paths import DEFAULT_OUTPUT

    gap = json.loads((report_dir / "report.json").read_text())["gap"]
    assert gap["text"]["split"] == "test" and gap["models"]["b"]["label"] == "spen"
    assert len(gap["models"]["a"]["locations"]) == 2  # both seeds, paired
    assert sum(g["tokens"] for g in gap["groups"]) == gap["text"]["tokens"]
    written = json.loads((report_dir / "work" / "gap" / "gap.json").read_text())  # the command's own output
    assert written["contrasts"] == gap["contrasts"] and written["text"] == gap["text"]
    # Recorded paths are relative to the output folder as a clone names it (eval.report.paths): here, report_dir.
    assert str(report_dir) not in gap["command"]
    argv = [a.replace(DEFAULT_OUTPUT, str(report_dir)) for a in shlex.split(gap["command"])[3:]]
    out = argv.index("--output_dir")
    argv[out + 1] = str(tmp_path / "again")
    assert gap_main(argv) == 0
    again = json.loads((tmp_path / "again" / "gap.json").read_text())
    assert again["contrasts"]["ar_hit - first"]["value"] == pytest.approx(gap["contrasts"]["ar_hit - first"]["value"])
    assert again["text"]["tokens"] == gap["text"]["tokens"]


@pytest.mark.slow
def test_the_training_stages_are_sweeps_reproduced_by_their_command(report_dir: Path, tmp_path: Path) -> None:
    # The headline pair and the ablations ran on the experiment runner into work/: its layout, its records naming
    # the final folder (not the temporary one it was built in), and a command that reproduces the numbers.
    import shlex

    from eval.report.paths import DEFAULT_OUTPUT
    from eval.sweep.cli import main as sweep_main

    report = json.loads((report_dir / "report.json").read_text())
    for name in ("language_model", "ablation_predictor", "ablation_trace"):
        folder = report_dir / "work" / name
        assert (folder / "results.json").is_file() and (folder / "runs").is_dir()
        assert not any(".tmp-" in (folder / f).read_text() for f in ("sweep.yaml", "sweep.json", "results.json"))
    argv = [a.replace(DEFAULT_OUTPUT, str(report_dir)).replace("NEW_DIR", str(tmp_path / "again"))
            for a in shlex.split(report["ablation"]["command"])]
    assert argv[:2] == ["ema-boundary", "sweep"] and sweep_main(argv[2:]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    steps = str(report["ablation"]["regime"]["steps"])
    scores = {arm: {s: r["score"] for s, r in a["budgets"][steps].items()} for arm, a in again["arms"].items()}
    assert scores == report["ablation"]["final_loss_per_seed"]


@pytest.mark.slow
def test_verdicts_follow_the_statistics(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    for section in ("ablation", "traces"):
        for arm, c in report[section]["comparisons"].items():
            lo, hi = c["ci95"]
            assert lo <= c["difference"] <= hi, arm
            # "equivalent" only from a passing equivalence test against the declared margin.
            assert (c["verdict"] == "equivalent") == (c["p_equivalence"] is not None and c["p_equivalence"] < 0.05)
    c = report["content"]["comparison"]
    assert c["equivalence_margin"] == 0.05  # the plan's, not a default
    index = (report_dir / "index.md").read_text()
    if c["verdict"] != "equivalent":
        assert "indistinguishable" not in index.split("## Content")[1].split("## Content probes")[0]


@pytest.mark.slow
def test_figures_are_readable_pngs(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    assert {"learning_curves", "ablation_predictor", "ablation_trace", "identity_at_lag", "recall",
            "structure_by_kind", "ceilings"} <= set(report["figures"])
    import matplotlib.image

    for rel in report["figures"].values():
        image = matplotlib.image.imread(report_dir / rel)
        assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50


@pytest.mark.slow
def test_index_states_the_regime_and_the_papers_numbers(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    index = (report_dir / "index.md").read_text()
    assert f"{report['content']['perplexity_ratio']:.2f}x" in index
    assert "tokens per parameter" in index and "trigram" in index
    assert "260 vs 33" in index and "61.8 %" in index
    for rel in report["figures"].values():
        assert f"]({rel})" in index
    assert ".tmp-" not in (report_dir / "report.json").read_text()


@pytest.mark.parametrize("case", ["missing corpus", "binary corpus", "out is a file", "bad plan", "no plan"])
def test_bad_arguments_give_one_line_and_write_nothing(tmp_path: Path, capsys, case: str) -> None:
    binary = tmp_path / "corpus.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    bad_plan = tmp_path / "bad.yaml"
    bad_plan.write_text("ablation: {seeds: [-1]}\n")
    out = tmp_path / "o"
    argv, expected = {
        "missing corpus": (["--corpus", str(tmp_path / "missing.txt")], "--corpus"),
        "binary corpus": (["--corpus", str(binary)], "not text"),
        "out is a file": (["--output_dir", str(a_file)], "--output_dir"),
        "bad plan": (["--plan", str(bad_plan)], "ablation.seeds must be a non-negative integer"),
        "no plan": (["--plan", str(tmp_path / "none.yaml")], "--plan"),
    }[case]
    argv = ["report", *argv, *([] if "--output_dir" in argv else ["--output_dir", str(out)])]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_readme_results_are_the_committed_reports() -> None:
    # The README's results block is generated from docs/report/report.json (`ema-boundary readme`): a number
    # typed into the README by hand, or a report committed without regenerating the block, fails here.
    from eval.report.render import README_BEGIN, README_END, readme_results

    report = json.loads((REPO / "docs/report/report.json").read_text())
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(README_BEGIN): readme.index(README_END) + len(README_END)]
    assert block == readme_results(report)


@pytest.mark.slow
def test_readme_command_rewrites_only_the_block(tmp_path: Path, report_dir: Path) -> None:
    readme = tmp_path / "README.md"
    from eval.report.render import README_BEGIN, README_END

    readme.write_text(f"intro\n\n{README_BEGIN}\nold\n{README_END}\n\noutro\n")
    assert main(["readme", "--report", str(report_dir / "report.json"), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n\n") and text.endswith("\n\noutro\n") and "old" not in text
    assert "| claim | paper | ours [95% interval] | verdict | details |" in text  # the one-screen table
    (tmp_path / "plain.md").write_text("no block\n")
    assert main(["readme", "--report", str(report_dir / "report.json"), "--readme", str(tmp_path / "plain.md")]) == 2


@pytest.mark.slow
def test_render_rewrites_index_from_report_json(tmp_path: Path, report_dir: Path, capsys) -> None:
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(report_dir, folder, ignore=shutil.ignore_patterns("work"))
    before = (folder / "index.md").read_text()
    (folder / "index.md").write_text("stale")
    assert main(["render", str(folder)]) == 0
    assert (folder / "index.md").read_text() == before  # the renderer reads report.json alone
    capsys.readouterr()
    assert main(["render", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no report.json" in err and len(err.splitlines()) == 1



def test_render_refuses_another_tools_report_json(tmp_path: Path, capsys) -> None:
    """eval.scale writes a report.json too (docs/scale): render names it in one line, not a KeyError."""
    folder = tmp_path / "scale"
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps({"tool": "eval.scale", "sizes": []}))
    assert main(["render", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a boundary report" in err and "eval.scale" in err and len(err.splitlines()) == 1
    assert not (folder / "index.md").exists()

def _plain(value):
    """A call's argument as its command line spells it (paths and numbers as text, lists as lists)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, (Path, int, float)) and not isinstance(value, bool) else value


def _tiny_plan(tmp: Path) -> Plan:
    (tmp / "plan.yaml").write_text(TINY_PLAN)
    return Plan.load(tmp / "plan.yaml", corpus=str(_corpus(tmp / "corpus.txt")))


def test_the_probe_stage_records_the_command_of_its_call(tmp_path: Path, monkeypatch) -> None:
    import shlex

    import eval.probes.__main__ as probes_cli
    from eval.report import stages

    calls: list[tuple] = []

    def record(models, text, out_dir, settings=None, **kwargs):
        calls.append(([m.name for m in models], out_dir, settings, kwargs))
        return {}

    monkeypatch.setattr(stages, "run_content_probes", record)
    monkeypatch.setattr(probes_cli, "run_content_probes", record)
    plan = _tiny_plan(tmp_path)
    result = stages.content_probes(tmp_path, plan, {})
    prog, *argv = shlex.split(result["command"])[2:]
    assert prog == "eval.probes" and probes_cli.main(argv) == 0
    (names, out, settings, kwargs), (names2, out2, settings2, kwargs2) = calls
    assert names == names2 and str(out) == str(out2) and settings == settings2
    assert settings.recipe.lrs == plan.recall.lr_grid and settings.task.pairs == plan.recall.pairs
    for key in ("identity", "workers", "control"):
        assert kwargs[key] == kwargs2[key], key
    assert list(kwargs["recall"]) == list(kwargs2["recall"]) == list(plan.recall.models)


def test_a_failed_run_keeps_its_logs_and_names_them(tmp_path: Path, monkeypatch, capsys) -> None:
    from eval.report import stages

    def broken(work: Path, plan) -> Path:
        raise RuntimeError("the tokenizer stage broke")

    monkeypatch.setattr(stages, "build_tokenizer", broken)
    out = tmp_path / "out"
    (tmp_path / "plan.yaml").write_text(TINY_PLAN)
    status = main(["report", "--plan", str(tmp_path / "plan.yaml"), "--corpus", str(_corpus(tmp_path / "c.txt")),
                   "--output_dir", str(out)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ": error: " in ln]  # besides the progress lines
    assert status == 1 and len(err) == 1, err
    kept = tmp_path / "out.failed"
    assert "the tokenizer stage broke" in err[0] and str(kept) in err[0]
    assert not out.exists()
    assert "RuntimeError: the tokenizer stage broke" in (kept / "logs" / "error.log").read_text()
    assert (kept / "work" / "logs" / "grammar_probe.log").is_file()  # the stages' own logs are kept too


def test_progress_is_log_lines_when_the_output_is_a_file() -> None:
    import io

    from eval.report.build import Progress

    stream = io.StringIO()
    progress = Progress(stream)
    progress.start("tokenizer")
    progress.done("tokenizer")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert "started: tokenizer" in lines[0] and "finished: tokenizer in " in lines[1]
    assert set(progress.seconds) == {"tokenizer"}


@pytest.mark.slow
def test_render_upgrade_rewrites_the_claims_from_the_table(tmp_path: Path) -> None:
    from eval.report.claim_rows import evaluate

    folder = tmp_path / "committed"
    folder.mkdir()
    report = json.loads((REPO / "docs/report/report.json").read_text())
    stale = [{**row, "verdict": "met", "explanations": []} for row in report["claims"]]
    (folder / "report.json").write_text(json.dumps({**report, "claims": stale}))
    assert main(["render", str(folder), "--upgrade"]) == 0
    upgraded = json.loads((folder / "report.json").read_text())
    validate(upgraded)
    assert upgraded["claims"] == evaluate(upgraded) != stale
    assert "not testable in this regime" in (folder / "index.md").read_text()


def test_a_plan_gives_budgets_or_max_steps(tmp_path: Path) -> None:
    from eval.report.plan import PlanError

    (tmp_path / "plan.yaml").write_text("ablation:\n  max_steps: 10\n  budgets: [5, 10]\n")
    with pytest.raises(PlanError, match="ablation.budgets and ablation.max_steps: give one"):
        Plan.load(tmp_path / "plan.yaml")


def _alias_plan(main, argv: list[str], monkeypatch):
    """The sweep plan a ``python -m eval.ablation|eval.depth`` line declares (both are aliases of the sweep since
    issue 32; the runner itself not called)."""
    import eval.sweep.alias as alias

    seen = {}
    monkeypatch.setattr(alias, "run", lambda p, args, command, plan=None, summarize=None: seen.update(plan=plan) or 0)
    assert main(argv) == 0
    return seen["plan"]


@pytest.mark.slow
def test_the_depth_stage_is_the_commands_sweep_and_writes_depth_json(tmp_path: Path, monkeypatch) -> None:
    # The plan's depth section runs on the experiment runner (work/depth): the sweep `python -m eval.depth --config`
    # declares for the same values, read back into the depth.json the report reads (depth_block), with its figure and
    # the command that reproduces the sweep's numbers.
    import shlex

    import train_config
    from eval.ablation import build_tokenizer
    from eval.report import stages
    from eval.report.assemble import DEPTH_KEYS, DEPTH_RUN_KEYS, depth_block
    from eval.sweep.alias import depth_main
    from eval.sweep.cli import main as sweep_main
    from eval.sweep.plan import load_plan
    from eval.sweep.trainers import model_config
    from tests.test_depth import _deep_micro_yaml

    (tmp_path / "none").mkdir()
    plan = _tiny_plan(tmp_path / "none")
    assert plan.depth is None and stages.depth(tmp_path, plan, tmp_path / "tokenizer") is None  # not in the plan
    config = _deep_micro_yaml(tmp_path)  # 3 blocks of width 16 on tmp_path/corpus.txt
    (tmp_path / "depth.yaml").write_text(TINY_PLAN + f"depth:\n  config: {config}\n  seeds: [7, 8]\n  max_steps: 2\n"
                                         "  loss_margin: 0.05\n")
    plan = Plan.load(tmp_path / "depth.yaml", corpus=str(tmp_path / "corpus.txt"))
    tokenizer = build_tokenizer(train_config.read_yaml(config), plan.data, tmp_path / "tokenizer")
    work = tmp_path / "work"
    work.mkdir()
    result = stages.depth(work, plan, tokenizer)
    folder = work / "depth"
    assert result["folder"] == str(folder) and (folder / "results.json").is_file()
    written = json.loads((folder / "depth.json").read_text())
    assert json.dumps(written, sort_keys=True) == json.dumps(result, sort_keys=True)
    assert (folder / "depth.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # depth.json's shape: what the report reads of it, every run of both arms, paired by seed.
    block = depth_block(result)
    assert set(DEPTH_KEYS) <= set(block) and set(block["runs"]) == {"add", "attention"}
    for by_seed in block["runs"].values():
        assert set(by_seed) == {"7", "8"} and all(set(r) == set(DEPTH_RUN_KEYS) for r in by_seed.values())
    assert result["seeds"] == [7, 8] and result["max_steps"] == 2 and result["num_layers"] == 3
    assert result["margins"] == {"token_accuracy": 0.02, "earlier_share": 0.02, "val_loss": 0.05}
    assert result["tokens"] == 2 * 4 * 32 and result["table"]["token_accuracy"]["seeds"] == ["7", "8"]
    assert result["gate"]["bigram_loss"] == pytest.approx(math.log(result["ngram"]["bigram"]))
    assert result["verdict"] == "not resolved at this budget"  # two seeds decide nothing
    # The sweep is the one the command line declares for the same values (the stage adds one validation at the end
    # of each run and reads the loss on validation).
    sweep = load_plan(str(folder / "sweep.yaml"))
    line = _alias_plan(depth_main, ["--config", config, "--seeds", "2", "--max_steps", "2", "--data", *plan.data,
                               "--val_loss_margin", "0.05", "--output_dir", str(tmp_path / "o")], monkeypatch)
    assert [a.name for a in sweep.arms] == [a.name for a in line.arms] == ["add", "attention"]
    assert (sweep.seeds, sweep.budgets, sweep.rate, sweep.analysis, sweep.settings, sweep.score) == (
        line.seeds, line.budgets, line.rate, line.analysis, line.settings, "validation")
    for arm in ("add", "attention"):
        mine, theirs = sweep.config_of(sweep.arm(arm)), line.config_of(line.arm(arm))
        assert model_config(mine["model"], arm) == model_config(theirs["model"], arm)
        assert (mine["measure"], mine["depth"], mine["data"]) == (theirs["measure"], theirs["depth"], theirs["data"])
    # The recorded command reproduces the sweep's numbers.
    argv = [a.replace("NEW_DIR", str(tmp_path / "again")) for a in shlex.split(result["command"])]
    assert argv[:2] == ["ema-boundary", "sweep"] and sweep_main(argv[2:]) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    for residual, by_seed in result["runs"].items():
        for seed, run in by_seed.items():
            r = again["arms"][residual]["budgets"]["2"][seed]
            assert (r["val_loss"], r["depth"]["recovered"]["token_accuracy"]) == (run["val_loss"],
                                                                                run["token_accuracy"])


def test_the_escape_routes_section_shows_both_maps_with_their_verdicts(tmp_path: Path) -> None:
    from eval.report.assemble import depth_block
    from eval.report.claim_rows import evaluate
    from eval.report.render import write_index
    from tests.test_depth import experiment_result

    report = json.loads((REPO / "docs/report/report.json").read_text())
    report["claims"] = evaluate(report)  # today's table: the depth rows read the committed depth sweep
    write_index(report, report["figures"], tmp_path / "sweep.md")
    assert "Read on the committed sweep `docs/sweeps/depth`" in (tmp_path / "sweep.md").read_text()
    (report.get("sweeps") or {}).pop("depth", None)
    report["claims"] = evaluate(report)
    write_index(report, report["figures"], tmp_path / "without.md")
    without = (tmp_path / "without.md").read_text()
    assert "## Escape routes: selection in time and in depth" in without
    assert "Not run in this plan" in without and "**not run**" in without
    report["depth"] = depth_block({**experiment_result(), "folder": "x"})
    report["claims"] = evaluate(report)
    validate(report)
    write_index(report, {**report["figures"], "depth": "figures/depth.png"}, tmp_path / "index.md")
    text = (tmp_path / "index.md").read_text()
    section = text[text.index("## Escape routes"):]
    assert "### In time: this run's recall map on two axes" in section and "### In depth" in section
    assert "| token identity at the last layer (held-out accuracy) | 52.0% | 62.1% | +10.1 [" in section
    assert "majority token 10.0%" in section and "add 5.0x, attention 1.4x" in section
    assert "Competence gate (the loss part): holds" in section and "![depth](figures/depth.png)" in section
    assert "*Selection over depth recovers what the residual sum dilutes*: **met**" in section
    assert "| verdict | **met** |" in section.split('<a id="claim-depth_selection_recovers"></a>')[1]
    with pytest.raises(ValueError, match="depth"):
        validate({**report, "depth": {**report["depth"], "verdict": "probably"}})
    rows = [{**row, "verdict": "maybe"} for row in report["depth"]["table"]["block_share"]]
    with pytest.raises(ValueError, match=r"depth\.table\.block_share\.\d\.verdict: .maybe. is not one of"):
        validate({**report, "depth": {**report["depth"], "table": {**report["depth"]["table"], "block_share": rows}}})
    assert "| the embedding (token vector), share recovered (R², clipped) | 80.0% | 80.0% |" in section
    # A recall map whose models carry their two axes: one line per write rule, the models by state numbers.
    axes_keys = ("write_rule", "state_numbers")
    recall = report["probes"]["recall"] = {name: {k: v for k, v in r.items() if k not in axes_keys}
                                           for name, r in report["probes"]["recall"].items()}
    for name, rule, state in (("linear", "fixed", 192), ("linear-learned", "learned_lti", 192),
                              ("gpt2", "attention", 12_288)):
        recall[name] = {**recall[name], "write_rule": rule, "state_numbers": state}
    write_index(report, report["figures"], tmp_path / "axes.md")
    axes = (tmp_path / "axes.md").read_text()
    assert "| fixed (EMA rates) | `linear` (192): " in axes
    assert "| attention over tokens | `gpt2` (12,288): " in axes
    assert "input-gated diagonal |" not in axes.split("### In time")[1].split("### In depth")[0]  # no such arm
