"""`ema-boundary report` end to end on a tiny plan and a generated corpus: every field the issue names is
present and finite, the verdicts come from the statistics, the PNGs are readable, bad input is one line."""

import json
import math
import random
from pathlib import Path

import pytest

from eval.report import main
from eval.report.plan import PLANS, REPO, Plan, PlanError

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
    "content.val_loss.spen.ci95",
    "content.train_loss.gpt2_arch.ci95",
    "content.perplexity_ratio",
    "ablation.comparisons.none.difference",
    "ablation.comparisons.none.ci95",
    "ablation.comparisons.none.equivalence_margin",
    "ablation.comparisons.none.verdict",
    "ablation.overall.p",
    "traces.comparisons.selective.verdict",
    "recall.gpt2.steps",
    "recall.gpt2.accuracy",
    "recall.spen-linear.accuracy",
    "identity_at_lag",
    "paper_claims",
    "plan.declared",
    "environment.seconds",
    "command",
    "structure.command",
    "content.command",
    "ablation.command",
    "traces.command",
    "probe_command",
]

TINY_PLAN = """\
name: test
workers: 1
grammar: {train_size: 200, quick: true, seeds: 2, train_sentences: 80, eval_sentences: 40, validation_size: 40,
          test_size: 40, ceiling_sentences: 300, window_sentences: 300, workers: 1}
language_model: {lr_grid: [1.0e-3, 3.0e-3], seeds: 2, max_steps: 3, equivalence_margin: 0.05}
ablation: {seeds: 2, max_steps: 2, predictors: [none, linear], traces: [ema, selective]}
recall: {models: [gpt2, spen-linear], steps: 3, lrs: [1.0e-3], pairs: [1, 2], quick: true}
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
    assert main(["report", "--plan", str(plan), "--corpus", str(_corpus(tmp / "corpus.txt")), "--out", str(out)]) == 0
    return out


def test_every_field_present_and_finite(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    for key in REQUIRED:
        value = _get(report, key)
        assert value is not None and value != {}, key
    numbers = list(_numbers({k: report[k] for k in ("content", "recall", "identity_at_lag")}))
    assert numbers and all(math.isfinite(x) for x in numbers if x is not None)
    regime = report["content"]["regime"]
    assert regime["train_tokens"] == 3 * 16 * 128  # max_steps x batch x block of the w32 YAMLs
    assert regime["tokens_per_parameter"] == pytest.approx(regime["train_tokens"] / regime["parameters"])
    assert regime["epochs"] is not None and regime["epochs"] > 0  # a finite corpus: its epochs are known
    # Each architecture's rate is one of the declared grid, the one with the lowest validation loss.
    for name, lr in report["content"]["learning_rate"].items():
        losses = {float(k): v["final_val_loss"] for k, v in lr["grid"].items()}
        assert lr["chosen"] == min(losses, key=losses.get), name
    for name in ("SPEN-ema", "GPT-2 arch", "SPEN-selective (ablation)"):
        curve = report["identity_at_lag"][name]
        assert len(curve["accuracy"]) == len(curve["lags"])
    assert report["recall"]["gpt2"]["steps"] <= 3


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


def test_figures_are_readable_pngs(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    assert {"learning_curves", "ablation_predictor", "ablation_trace", "identity_at_lag", "recall",
            "structure_by_kind", "ceilings"} <= set(report["figures"])
    import matplotlib.image

    for rel in report["figures"].values():
        image = matplotlib.image.imread(report_dir / rel)
        assert image.ndim == 3 and image.shape[0] > 50 and image.shape[1] > 50


def test_index_states_the_regime_and_the_papers_numbers(report_dir: Path) -> None:
    report = json.loads((report_dir / "report.json").read_text())
    index = (report_dir / "index.md").read_text()
    assert f"{report['content']['perplexity_ratio']:.2f}x" in index
    assert "tokens per parameter" in index and "trigram" in index
    assert "260 vs 33" in index and "61.8 %" in index
    for rel in report["figures"].values():
        assert f"]({rel})" in index
    assert ".tmp-" not in (report_dir / "report.json").read_text()


def test_shipped_plans_load() -> None:
    for path in set(PLANS.values()):
        plan = Plan.load(REPO / path)
        assert plan.language_model.lr_grid and plan.ablation.seeds >= 2
    default = Plan.load(REPO / PLANS["tiny", False])
    assert default.ablation.seeds >= 5 and default.language_model.seeds >= 5
    assert len(default.language_model.lr_grid) >= 3
    capped = Plan.make(max_steps=7)
    assert capped.language_model.max_steps == 7 and capped.recall.steps == 7


@pytest.mark.parametrize("text,message", [
    ("language_model: {lr_grid: []}\n", "language_model.lr_grid must be a non-empty list"),
    ("ablation: {seeds: 0}\n", "ablation.seeds must be positive"),
    ("ablation: {predictors: [linear, bogus]}\n", "ablation.predictors: unknown arm 'bogus'"),
    ("recall: {stepz: 3}\n", "unknown field recall.stepz"),
    ("language_model: {spen: nowhere.yaml}\n", "language_model.spen: no such train.py YAML"),
    ("workers: two\n", "workers must be int"),
    ("[1, 2]\n", "a mapping of sections"),
])
def test_bad_plans_name_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    with pytest.raises(PlanError, match=message.replace("[", r"\[")):
        Plan.load(path)


@pytest.mark.parametrize("case", ["missing corpus", "binary corpus", "out is a file", "bad plan", "no plan"])
def test_bad_arguments_give_one_line_and_write_nothing(tmp_path: Path, capsys, case: str) -> None:
    binary = tmp_path / "corpus.bin"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    bad_plan = tmp_path / "bad.yaml"
    bad_plan.write_text("ablation: {seeds: -1}\n")
    out = tmp_path / "o"
    argv, expected = {
        "missing corpus": (["--corpus", str(tmp_path / "missing.txt")], "--corpus"),
        "binary corpus": (["--corpus", str(binary)], "not text"),
        "out is a file": (["--out", str(a_file)], "--out"),
        "bad plan": (["--plan", str(bad_plan)], "ablation.seeds must be positive"),
        "no plan": (["--plan", str(tmp_path / "none.yaml")], "--plan"),
    }[case]
    argv = ["report", *argv, *([] if "--out" in argv else ["--out", str(out)])]
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


def test_readme_command_rewrites_only_the_block(tmp_path: Path, report_dir: Path) -> None:
    readme = tmp_path / "README.md"
    from eval.report.render import README_BEGIN, README_END

    readme.write_text(f"intro\n\n{README_BEGIN}\nold\n{README_END}\n\noutro\n")
    assert main(["readme", "--report", str(report_dir / "report.json"), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n\n") and text.endswith("\n\noutro\n") and "old" not in text
    assert "tokens per parameter" in text or "per parameter" in text
    (tmp_path / "plain.md").write_text("no block\n")
    assert main(["readme", "--report", str(report_dir / "report.json"), "--readme", str(tmp_path / "plain.md")]) == 2


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
