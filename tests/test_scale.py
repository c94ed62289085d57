"""eval.scale: the ladder's fair pairs, its plan check, and a tiny ladder end to end."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from ema_boundary.corpus import split_of
from ema_boundary.io import MARKER
from eval.report.ladder import ladder_block, read_ladder
from eval.report.plan import PlanError
from eval.scale import (
    HEAD_SIZE,
    MATCH_TOLERANCE,
    ScalePlan,
    fair_pair,
    load_plan,
    main,
    mean_loss,
    parameter_counts,
    train_has_test_split,
)

REPO = Path(__file__).resolve().parents[1]
CPU_PLAN = REPO / "hub_configs" / "report" / "scale.yaml"
GPU_PLAN = REPO / "hub_configs" / "report" / "scale-gpu.yaml"


def _meta_counts(config: dict) -> dict[str, int]:
    """ema_boundary.params' counts of the model a config.json dict defines, built on the meta device."""
    from transformers import AutoConfig, AutoModelForCausalLM

    import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
    from ema_boundary.params import parameter_counts as counted

    config = dict(config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(config.pop("model_type"), **config))
    return counted(model).as_dict()


@pytest.mark.parametrize(("width", "layers", "vocab", "block"), [(16, 1, 1024, 16), (48, 2, 1024, 128),
                                                                 (64, 2, 1024, 128), (96, 3, 500, 64)])
def test_the_formulas_count_what_the_models_hold(width, layers, vocab, block):
    for arch, config in fair_pair(width, layers, vocab, block).items():
        assert parameter_counts(arch, width, layers, vocab, block) == _meta_counts(config), arch


def test_the_pair_follows_the_fair_recipe():
    pair = fair_pair(96, 3, 1024, 128)
    spen, gpt2 = pair["spen"], pair["gpt2"]
    assert spen["initializer_range"] == gpt2["initializer_range"] == pytest.approx(1 / math.sqrt(96))
    assert gpt2["n_positions"] == 128 and spen["max_position_embeddings"] == 128
    assert gpt2["n_embd"] // gpt2["n_head"] >= HEAD_SIZE
    a, b = (parameter_counts(x, 96, 3, 1024, 128)["non_embedding"] for x in ("spen", "gpt2"))
    assert abs(a - b) <= MATCH_TOLERANCE * a
    # The headline pair of issue 20 is the ladder's recipe at width 64 (hub_configs/{spen,gpt2}-f64).
    for arch in ("spen", "gpt2"):
        committed = json.loads((REPO / "hub_configs" / f"{arch}-f64" / "config.json").read_text())
        assert fair_pair(64, 2, 1024, 128)[arch] == committed


def test_the_cpu_ladder_is_declared_as_the_issue_asks():
    plan = ScalePlan.load(CPU_PLAN)
    assert len(plan.sizes) >= 4
    assert plan.sizes[0].width in (48, 64) and plan.sizes[0].layers == 2  # from the headline fair pair up
    assert plan.sizes[-1].seeds >= 3
    assert all(2 <= len(s.lr_grid) <= 3 for s in plan.sizes)
    assert plan.test_every > 0 and plan.corpus == "embedded"


def test_the_gpu_ladder_reaches_30m_non_embedding_parameters():
    plan = ScalePlan.load(GPU_PLAN)
    largest = plan.sizes[-1]
    pair = fair_pair(largest.width, largest.layers, plan.vocab_size, plan.schedule.block_size)
    for arch, config in pair.items():
        counts = _meta_counts(config)  # the model itself, not only the formula
        assert counts["non_embedding"] >= 30_000_000, arch
        assert counts == plan.counts(largest)[arch]
    assert len(plan.sizes) >= 4 and largest.seeds >= 3


def test_reading_a_plan_imports_no_torch():
    code = ("import sys; from eval.scale import ScalePlan; ScalePlan.load(sys.argv[1]); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code, str(CPU_PLAN)], check=True, cwd=REPO,
                   env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def _size(name: str, width: int, **kw) -> dict:
    return {"name": name, "width": width, "layers": 1, "max_steps": 2, "lr_grid": [1e-2], **kw}


GOOD = {"name": "t", "sizes": [_size("a", 16), _size("b", 32)]}


@pytest.mark.parametrize(("change", "line", "words"), [
    (lambda p: p["sizes"][1].update(width=40), 10, "sizes.width must be a positive multiple of 16"),
    (lambda p: p["sizes"][0].update(lr_grid=[1e-2, 2.0]), 9, "sizes.lr_grid must be a rate in (0, 1)"),
    (lambda p: p["sizes"][1].pop("lr_grid"), 9, "sizes needs lr_grid"),
    (lambda p: p["sizes"][0].update(depth=3), 9, "sizes.depth is not a field"),
    (lambda p: p["sizes"][1].update(width=16), 9, "must be larger than the size before it"),
    (lambda p: p["sizes"][1].update(name="a"), 9, "'a' names two sizes"),
    (lambda p: p.update(sizes=p["sizes"][:1]), 2, "sizes must be a list of at least two sizes"),
    (lambda p: p.update(workers=0), 15, "workers must be positive"),
    (lambda p: p.update(schedule={"block_size": "long"}), 16, "schedule.block_size must be int"),
    (lambda p: p.update(corpus="/nonexistent.txt"), 15, "corpus '/nonexistent.txt': not embedded or c4"),
    (lambda p: p.update(steps=3), 15, "steps is not a field"),
    (lambda p: p.update(extend_grid=True), 7, "sizes.lr_grid has one rate: extend_grid needs two or more"),
    (lambda p: p.update(extend_factor=0.5), 15, "extend_factor must be a factor above 1"),
])
def test_a_bad_plan_is_one_line_naming_its_yaml_line(tmp_path, change, line, words):
    plan = json.loads(json.dumps(GOOD))
    change(plan)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    with pytest.raises(PlanError) as err:
        ScalePlan.load(path)
    message = str(err.value)
    assert "\n" not in message and words in message
    assert message.startswith(f"{path}:{line}: "), (message, path.read_text())


def test_the_grid_extends_beyond_an_edge_by_the_declared_rule(tmp_path):
    path = tmp_path / "plan.yaml"
    two = {**GOOD, "sizes": [{**s, "lr_grid": [0.01, 0.02]} for s in GOOD["sizes"]]}
    path.write_text(yaml.safe_dump({**two, "extend_grid": True, "max_extensions": 2}))
    plan = ScalePlan.load(path)
    assert plan.next_rate({0.01: 5.0, 0.02: 4.0}, added=0) == pytest.approx(0.04)  # the grid's own ratio, up
    assert plan.next_rate({0.01: 4.0, 0.03: 5.0}, added=0) == pytest.approx(0.01 / 3, rel=1e-5)  # down, to 6 digits
    assert plan.next_rate({0.01: 5.0, 0.02: 4.0, 0.04: 4.5}, added=1) is None  # interior: chosen
    assert plan.next_rate({0.01: 5.0, 0.02: 4.5, 0.04: 4.0}, added=2) is None  # the cap
    assert plan.next_rate({0.3: 5.0, 0.6: 4.0}, added=0) is None  # a rate must stay below 1
    path.write_text(yaml.safe_dump({**two, "extend_grid": True, "extend_factor": 3.0}))
    assert ScalePlan.load(path).next_rate({0.01: 5.0, 0.02: 4.0}, added=0) == pytest.approx(0.06)
    off = tmp_path / "off.yaml"
    off.write_text(yaml.safe_dump(two))
    assert ScalePlan.load(off).next_rate({0.01: 5.0, 0.02: 4.0}, added=0) is None  # no rule declared: no extension


def test_the_command_refuses_a_bad_plan_in_one_line(tmp_path, capsys):
    path = tmp_path / "plan.yaml"
    path.write_text("sizes: [1, 2]\n")
    assert main(["--plan", str(path), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{path}:1: sizes must be a mapping" in err
    assert not (tmp_path / "out").exists()
    from eval.report.cli import main as ema_boundary

    assert ema_boundary(["scale", "--plan", str(tmp_path / "missing.yaml")]) == 2
    assert "no such file" in capsys.readouterr().err
    # A corpus too small for a train, a validation and a test document is refused before any work.
    (tmp_path / "small.txt").write_text("one\n\ntwo\n")
    path.write_text(yaml.safe_dump({**GOOD, "corpus": str(tmp_path / "small.txt")}))
    assert main(["--plan", str(path), "--output_dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "do not give a train, a validation and a test document" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.yaml", "small.txt"]
    # A ladder given to the report is not read as a report plan: one line says which command runs it.
    assert ema_boundary(["report", "--plan", str(CPU_PLAN), "--output_dir", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"run it with: ema-boundary scale --plan {CPU_PLAN}" in err


# ---------------------------------------------------------------------------------------------
# A tiny ladder, end to end
# ---------------------------------------------------------------------------------------------


def _tiny_plan(tmp_path: Path) -> Path:
    """Two tiny sizes on a generated corpus: a two-rate grid at the first, two seeds at the second."""
    rng = random.Random(0)
    words = "the a cat dog sat on mat ran far near big small red blue tree house river stone light dark".split()
    docs = [" ".join(rng.choice(words) for _ in range(rng.randint(40, 90))) + "." for _ in range(60)]
    (tmp_path / "corpus.txt").write_text("\n\n".join(docs) + "\n")
    plan = {"name": "tiny", "corpus": str(tmp_path / "corpus.txt"), "vocab_size": 1024, "test_every": 3,
            "test_blocks": None, "workers": 1, "extend_grid": True, "max_extensions": 1,
            "schedule": {"block_size": 16, "batch_size": 4, "warmup_steps": 1, "eval_blocks": 2, "evaluations": 1},
            "sizes": [_size("w16", 16, max_steps=3, lr_grid=[1e-2, 3e-2]),
                      _size("w32", 32, max_steps=4, lr_grid=[3e-2, 6e-2], seeds=2)]}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def test_a_tiny_ladder_runs_end_to_end(tmp_path, capsys):
    plan_path, out = _tiny_plan(tmp_path), tmp_path / "ladder"
    assert main(["--plan", str(plan_path), "--output_dir", str(out)]) == 0
    assert "w32: SPEN" in capsys.readouterr().out  # progress lines
    report = json.loads((out / "report.json").read_text())
    assert (out / "gap.png").read_bytes()[:4] == b"\x89PNG" and (out / MARKER).is_file()
    assert report["scored_on"] == ("test" if train_has_test_split() else "validation")
    held_out = 3 if report["scored_on"] == "test" else 0  # the plan's test_every, when train.py keeps it out
    assert report["eval_documents"] == sum(split_of(i, 10, held_out) == report["scored_on"] for i in range(60))
    plan = load_plan(plan_path)
    assert [s["name"] for s in report["sizes"]] == ["w16", "w32"]
    for size, declared in zip(report["sizes"], plan.sizes, strict=True):
        assert size["train_tokens"] == declared.max_steps * 4 * 16
        for arch, a in size["architectures"].items():
            assert a["parameters"] == plan.counts(declared)[arch]
            assert a["tokens_per_parameter"]["non_embedding"] == size["train_tokens"] / a["parameters"]["non_embedding"]
            assert a["lr_grid"][f"{a['lr']:g}"] == min(a["lr_grid"].values())  # chosen on validation
            # The grid extended once beyond the edge where the declared grid's best lay, and only then.
            first = {lr: a["lr_grid"][f"{lr:g}"] for lr in declared.lr_grid}
            best = min(first, key=first.__getitem__)
            ratio = max(first) / min(first)  # the grid's own ratio (two rates each here)
            beyond = {max(first): best * ratio, min(first): best / ratio}.get(best)
            assert a["lr_extensions"] == ([] if beyond is None else [pytest.approx(beyond)])
            assert len(a["lr_grid"]) == len(declared.lr_grid) + len(a["lr_extensions"])
            assert len(a["seeds"]) == declared.seeds
            assert a["below_bigram"] == all(x["loss"] < size["bigram_loss"] for x in a["seeds"].values())
        spen, gpt2 = (size["architectures"][a]["seeds"] for a in ("spen", "gpt2"))
        assert size["gap"]["per_seed"] == pytest.approx([spen[k]["loss"] - gpt2[k]["loss"] for k in spen])
        assert (size["gap"]["ci95"] is None) == (declared.seeds == 1)
        assert size["bigram_loss"] == pytest.approx(math.log(size["ngram"]["bigram"]))
    assert report["paper"]["gap"] == pytest.approx(math.log(260 / 33))
    index = (out / "index.md").read_text()
    assert "| w32 | SPEN (EMA traces) |" in index and "gap.png" in index
    # The report reads a committed ladder through eval.report.ladder: what the runner writes is what it accepts.
    block = ladder_block(read_ladder(out / "report.json"), "ladder/report.json")
    assert [s["gate"] for s in block["sizes"]] == [s["gate"] for s in report["sizes"]]
    assert block["sizes"][1]["gap"] == report["sizes"][1]["gap"]
    # mean_loss is train.py's validation loss: on train.py's own validation blocks it gives the logged number.
    from transformers import AutoTokenizer

    from ema_boundary.corpus import validation_blocks

    tok = AutoTokenizer.from_pretrained(out / "work" / "tokenizer")
    blocks = validation_blocks([str(tmp_path / "corpus.txt")], 10, tok, 16, 2)
    for arch in ("spen", "gpt2"):
        a = report["sizes"][1]["architectures"][arch]
        run = out / "work" / "runs" / "w32" / arch / f"lr_{a['lr']:g}" / "seed_1"
        assert mean_loss(run / "final", blocks) == pytest.approx(a["seeds"]["1"]["val_loss"], abs=1e-5)


def test_a_folder_that_is_not_the_ladders_is_refused(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(GOOD))
    assert main(["--plan", str(plan), "--output_dir", str(out), "--overwrite_output_dir"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not an output of eval.scale" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and (out / "notes.txt").read_text() == "mine"


def test_a_killed_ladder_resumes_reusing_its_finished_runs(tmp_path, capsys):
    plan_path, first = _tiny_plan(tmp_path), tmp_path / "first"
    assert main(["--plan", str(plan_path), "--output_dir", str(first)]) == 0
    before = json.loads((first / "report.json").read_text())
    # What a killed attempt at `again` leaves: its folder beside the target, one run without its final model.
    attempt = tmp_path / ".again.tmp-killed"
    shutil.copytree(first / "work", attempt / "work")
    cut = "w32/gpt2/lr_{:g}/seed_1".format(before["sizes"][1]["architectures"]["gpt2"]["lr"])
    shutil.rmtree(attempt / "work" / "runs" / cut / "final")
    capsys.readouterr()
    assert main(["--plan", str(plan_path), "--output_dir", str(tmp_path / "again"),
                 "--resume_from", str(attempt)]) == 0
    after = json.loads((tmp_path / "again" / "report.json").read_text())
    assert not attempt.exists() and after["resumed_from"] == str(attempt)
    assert cut not in after["reused_runs"] and len(after["reused_runs"]) == len(_run_names(before)) - 1
    for b, a in zip(before["sizes"], after["sizes"], strict=True):  # the same runs, the same numbers
        assert a["gap"] == b["gap"] and a["bigram_loss"] == b["bigram_loss"]


def _run_names(report: dict) -> list[str]:
    return [f"{s['name']}/{arch}/lr_{lr}/seed_{seed}" for s in report["sizes"]
            for arch, a in s["architectures"].items() for lr in a["lr_grid"] for seed in a["seeds"]
            if seed == "0" or lr == f"{a['lr']:g}"]


def test_resuming_refuses_another_folder_or_another_plan(tmp_path, capsys):
    plan_path = _tiny_plan(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    assert main(["--plan", str(plan_path), "--output_dir", str(tmp_path / "out"), "--resume_from", str(mine)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--resume_from" in err and "not an earlier attempt" in err
    # An attempt made with another plan: its configs differ, the resumption stops and keeps the folder.
    attempt = tmp_path / "out.failed"
    (attempt / "work" / "tokenizer").mkdir(parents=True)
    (attempt / "work" / "tokenizer" / "tokenizer.json").write_text("{}")
    (attempt / "work" / "configs" / "w16" / "spen").mkdir(parents=True)
    (attempt / "work" / "configs" / "w16" / "spen" / "config.json").write_text("{}\n")
    assert main(["--plan", str(plan_path), "--output_dir", str(tmp_path / "out"), "--resume_from", str(attempt)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "wrote another config here" in err
    assert (attempt / "work" / "configs" / "w16" / "spen" / "config.json").read_text() == "{}\n"
    assert not (tmp_path / "out").exists()
