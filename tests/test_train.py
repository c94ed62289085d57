"""train.py end to end on tiny configs (CPU): loss falls, checkpoints, final/ reloads and generates."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
import train
import train_config
from ema_boundary import corpus, packing
from ema_boundary.io import MARKER
from ema_boundary.params import ParameterCounts
from tests.train_testkit import ROOT, metrics, run_cmd, tokenizer_dir, write_config


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_help_documents_every_flag_and_setting(capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--config", "--output_dir", "--overwrite_output_dir", "--data", "--tokenizer_name", "--max_steps",
                 "--learning_rate", "--per_device_train_batch_size", "--seed", "--resume_from_checkpoint",
                 "--report_to", "--log_level"):
        assert flag in text
    for key in train_config.SETTINGS:
        assert f"  --{key} " in text


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt2-tiny", "spen-tiny"])
def test_loss_falls_checkpoint_and_final_reloads(tmp_path, model):
    cfg = write_config(tmp_path / "train.yaml", model_name_or_path=str(ROOT / "hub_configs" / model), max_steps=24,
                       save_steps=12, eval_steps=24)
    out = train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")])

    log = metrics(out)
    assert [m["step"] for m in log] == list(range(1, 25))
    assert all({"loss", "lr", "tokens"} <= m.keys() for m in log)
    first, last = log[0]["loss"], sum(m["loss"] for m in log[-4:]) / 4
    assert first == pytest.approx(6.93, abs=0.1)  # ln(1024): a uniform guess
    assert last < first - 0.5, (first, last)
    assert log[-1]["tokens"] == 24 * 8 * 64
    assert log[-1]["val_ppl"] == pytest.approx(2.718281828 ** log[-1]["val_loss"], rel=1e-6)

    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_12", "step_24"]
    state = json.loads((out / "checkpoints/step_24/data_state.json").read_text())
    assert state["step"] == 24 and state["pos"] == log[-1]["data_pos"]

    card = (out / "final/README.md").read_text()
    assert f"tokens seen: {24 * 8 * 64:,}" in card and "perplexity" in card and "train.py --config" in card
    # The card's python block, as written, in a fresh process elsewhere, with nothing of the project importable
    # and no terminal to answer a trust prompt: it loads the folder and generates.
    code = re.findall(r"```python\n(.*?)```", card, re.S)
    # It names the folder relative to where it was trained from (here tmp_path), never by a path of this machine.
    assert len(code) == 1 and 'path = "out/final"' in code[0] and str(tmp_path) not in code[0]
    check_generated = '\nassert output.shape[1] == inputs["input_ids"].shape[1] + 20, output.shape\n'
    check = subprocess.run([sys.executable, "-c", code[0] + check_generated], cwd=tmp_path, stdin=subprocess.DEVNULL,
                           timeout=300, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1",
                                "TRANSFORMERS_VERBOSITY": "info"})
    assert check.returncode == 0, check.stderr[-3000:]
    assert "Do you wish to run the custom code" not in check.stdout + check.stderr
    assert check.stdout.startswith("The for statement")


def test_model_card_metadata_is_what_the_hub_reads(tmp_path):
    from huggingface_hub import ModelCard

    cfg = train_config.read_yaml(write_config(tmp_path / "train.yaml",
                                              model_name_or_path=str(ROOT / "hub_configs/spen-tiny")))
    spen = AutoConfig.from_pretrained(ROOT / "hub_configs/spen-tiny")
    counts = ParameterCounts(total=200_000, embedding=50_000)
    card = train.model_card(cfg, spen, counts, 16, [2, 100, 7], 400, 4.5, "train.py --config x", "bpe", "my-run",
                            "/somewhere/final")
    data = ModelCard(str(card)).data.to_dict()  # parsed back as the hub parses it
    assert data["license"] == "apache-2.0" and data["language"] == "en" and data["library_name"] == "transformers"
    assert data["pipeline_tag"] == "text-generation" and "spen" in data["tags"] and "datasets" not in data
    (index,) = data["model-index"]
    assert index["name"] == "my-run"
    metrics = {m["type"]: m["value"] for m in index["results"][0]["metrics"]}
    assert metrics == {"loss": 4.5, "perplexity": round(math.exp(4.5), 4)}
    text = str(card)
    assert "200,000 parameters (150,000 non-embedding)" in text
    assert "- epochs: 2.25 (passes over the 400 training documents, in corpus order)" in (
        str(train.model_card(cfg | {"shuffle": False}, spen, counts, 16, [2, 100, 7], 400, 4.5, "x", "bpe", "my-run",
                             "/somewhere/final")))
    # Shuffled local data: the position counts blocks of the epoch, not documents.
    blocks = str(train.model_card(cfg, spen, counts, 16, [2, 100, 0], 400, 4.5, "x", "bpe", "my-run", "/f",
                                  epoch_blocks=800))
    assert "- epochs: 2.12 (passes over the 400 training documents, as 800 blocks shuffled each epoch)" in blocks
    assert "tokens seen: 8,192 (16 steps x 8 sequences x 64 tokens), 0.041 per parameter" in text
    assert 'path = "/somewhere/final"' in text and text.count("trust_remote_code=True") == 2

    c4 = ModelCard(str(train.model_card(cfg | {"data": ["c4"]}, spen, counts, 16, [0, 900, 7], 0, 4.5, "train.py",
                                        "gpt2", "me/spen", "me/spen"))).data.to_dict()
    assert c4["datasets"] == ["allenai/c4"] and c4["model-index"][0]["results"][0]["dataset"]["type"] == "allenai/c4"
    gpt2 = AutoConfig.from_pretrained(ROOT / "hub_configs/gpt2-tiny")
    local = str(train.model_card(cfg | {"data": ["notes.txt"]}, gpt2, counts, 1, [0, 0, 0], 9, 1.0, "train.py", "bpe",
                                 "x", "/x/final"))
    assert "language" not in ModelCard(local).data.to_dict() and "trust_remote_code" not in local


@pytest.mark.parametrize("spen, gpt2", [("spen-130m", "gpt2-small"), ("spen-tiny", "gpt2-tiny")])
def test_shipped_configs_load_and_differ_only_in_the_model(spen, gpt2, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfgs = [train_config.load_config(train_config.parse_args(["--config", f"hub_configs/{name}/train.yaml"]))
            for name in (spen, gpt2)]
    assert [cfg.pop("model_name_or_path") for cfg in cfgs] == [f"hub_configs/{spen}", f"hub_configs/{gpt2}"]
    for cfg in cfgs:
        cfg.pop("output_dir")
    assert cfgs[0] == cfgs[1]  # same data, tokenizer, batch, schedule: a fair comparison


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt2-tiny", "spen-tiny"])
def test_bf16_mixed_precision_runs(tmp_path, model):
    # CPU autocast stands in for the GPU here: the same Accelerate flag and code path, not the same kernels.
    cfg = write_config(tmp_path / "train.yaml", model_name_or_path=str(ROOT / "hub_configs" / model),
                       mixed_precision="bf16", max_steps=3, save_steps=3, eval_steps=3, tokenizer_name=tokenizer_dir())
    log = metrics(train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")]))
    assert all(math.isfinite(m["loss"]) for m in log) and math.isfinite(log[-1]["val_loss"])
    assert log[0]["loss"] == pytest.approx(6.93, abs=0.1)


def test_shipped_model_config_resolves_from_any_working_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = Path(train_config.resolve_model_config("hub_configs/spen-tiny"))
    assert resolved.is_absolute() and (resolved / "config.json").is_file()
    assert train_config.resolve_model_config("no/such/folder") == "no/such/folder"  # left for the one-line error


@pytest.mark.slow
def test_spen_trains_its_predictor_and_gpt2_is_unaffected(tmp_path):
    """SPEN's objective is CE + weight * P: its prediction loss falls; validation stays the next-token loss."""
    spen = write_config(tmp_path / "spen.yaml", model_name_or_path=str(ROOT / "hub_configs/spen-tiny"), max_steps=30,
                        save_steps=30, eval_steps=30, tokenizer_name=tokenizer_dir())
    log = metrics(train.main(["--config", str(spen), "--output_dir", str(tmp_path / "spen")]))
    weight = json.loads((ROOT / "hub_configs/spen-tiny/config.json").read_text()).get("prediction_loss_weight", 1.0)
    assert weight > 0
    first, last = log[0]["prediction_loss"], sum(m["prediction_loss"] for m in log[-5:]) / 5
    assert last < 0.9 * first, (first, last)
    for m in log:
        assert m["objective"] == pytest.approx(m["loss"] + weight * m["prediction_loss"], rel=1e-6)
    assert log[0]["loss"] == pytest.approx(6.93, abs=0.1)  # the next-token loss alone, not the objective

    # Validation is the next-token loss of the saved model, with no prediction term.
    final = tmp_path / "spen" / "final"
    model = AutoModelForCausalLM.from_pretrained(final, trust_remote_code=True).eval()
    cfg = train_config.read_yaml(spen)
    val = packing.validation_blocks(cfg["data"], cfg["val_every"], AutoTokenizer.from_pretrained(final),
                                       cfg["block_size"], cfg["max_eval_samples"])
    with torch.no_grad():
        assert train.lm_loss(model, val).item() == pytest.approx(log[-1]["val_loss"], abs=1e-4)

    gpt2 = write_config(tmp_path / "gpt2.yaml", max_steps=3, save_steps=3, eval_steps=3, tokenizer_name=tokenizer_dir())
    log = metrics(train.main(["--config", str(gpt2), "--output_dir", str(tmp_path / "gpt2")]))
    assert not any("prediction_loss" in m or "objective" in m for m in log)


@pytest.mark.slow
def test_console_to_a_file_is_log_lines_then_one_summary(tmp_path):
    # Output to pipes, as to a log file: progress as lines, the libraries' noise gone, one summary line at the end.
    cfg = write_config(tmp_path / "train.yaml", max_steps=4, warmup_steps=6, logging_steps=2, eval_steps=4,
                       save_steps=2, tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    run = run_cmd([sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out)])
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"train\.py: gpt2-tiny \(initialised from scratch\), [\d,]+ parameters \([\d,]+ "
                        r"non-embedding\); 4 steps x 8 sequences x 64 tokens; cpu, 1 process, gradient accumulation 2, "
                        rf"mixed precision no; output {out}",
                        lines[0]), lines[0]
    assert [ln.split(":")[0] for ln in lines[1:-1]] == ["step 2/4", "step 4/4", "step 4/4"]
    assert re.fullmatch(r"step 2/4: loss [\d.]+, learning rate [\d.e+-]+, [\d,]+ tokens/s", lines[1])
    log = metrics(out)
    assert lines[3] == f"step 4/4: validation loss {log[-1]['val_loss']:.4f}, perplexity {log[-1]['val_ppl']:.2f}"
    assert re.fullmatch(rf"train\.py: done in 0:\d\d:\d\d: 4 steps, 2,048 tokens; validation loss "
                        rf"{log[-1]['val_loss']:.4f}, perplexity {log[-1]['val_ppl']:.2f}; model in {out}/final",
                        lines[-1]), lines[-1]
    # stderr: the one warning this run deserves; no tied-weights note, no process-count line, no progress bars.
    assert run.stderr == ("train.py: warning: warmup_steps 6 >= max_steps 4: the learning rate rises for the whole "
                          "run and never reaches its peak or decays\n")

    quiet = run_cmd([sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(tmp_path / "quiet"),
                     "--warmup_steps", "1", "--log_level", "warning"])
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-3000:]
    assert len(quiet.stdout.splitlines()) == 1 and quiet.stdout.startswith("train.py: done in ")


@pytest.mark.slow
def test_an_earlier_run_resumes_or_is_replaced_and_user_files_stay(tmp_path, capsys):
    cfg = write_config(tmp_path / "train.yaml", max_steps=4, save_steps=2, eval_steps=4,
                       tokenizer_name=tokenizer_dir())
    out = tmp_path / "out"
    argv = ["--config", str(cfg), "--output_dir", str(out)]
    train.main(argv)
    marker = json.loads((out / MARKER).read_text())
    assert marker["tool"] == "train.py" and marker["command"] == ["train.py", *argv]
    (out / "notes.txt").write_text("mine")

    # The same command with more steps: the run continues from its newest checkpoint (as transformers' scripts do).
    capsys.readouterr()
    train.main([*argv, "--max_steps", "6"])
    assert f"resumed from {out}/checkpoints/step_4 at step 4" in capsys.readouterr().out
    assert [m["step"] for m in metrics(out)] == list(range(1, 7))

    # --overwrite_output_dir starts over: the earlier run's files go, the user's stay.
    train.main([*argv, "--max_steps", "2", "--overwrite_output_dir"])
    assert [m["step"] for m in metrics(out)] == [1, 2]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_2"]
    assert (out / "notes.txt").read_text() == "mine"

    # ... even when the earlier run read other data (a resumption would be refused): it is replaced, not checked.
    train.main([*argv, "--max_steps", "2", "--overwrite_output_dir", "--val_every", "7"])
    assert json.loads((out / "train_config.json").read_text())["val_every"] == 7


def test_push_check_and_output_check_come_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = write_config(tmp_path / "train.yaml", max_steps=2)
    for folder in (".", ".."):
        assert train.cli(["--config", str(cfg), "--output_dir", folder]) == 2
        err = capsys.readouterr().err
        assert err == (f"train.py: error: {folder}: is the working folder or one of its parents; choose a new "
                       "--output_dir\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.yaml"]


@pytest.mark.slow
def test_a_test_split_is_held_out_of_training_and_scores_the_final_model(tmp_path):
    from eval.runs import read_metrics, read_test

    cfg = write_config(tmp_path / "train.yaml", max_steps=4, eval_steps=4, save_steps=4, test_every=3,
                       max_test_samples=6, tokenizer_name=tokenizer_dir())
    out = train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")])
    log = metrics(out)
    assert [m["step"] for m in log if "test_loss" in m] == [4]  # once, on the final model, beside val_loss
    test = read_test(out / "metrics.jsonl")
    assert test["test_tokens"] == 6 * 64 and test["test_documents"] >= 1
    assert read_metrics(out / "metrics.jsonl")["val_loss"] == [log[-1]["val_loss"]]  # readers see what they saw
    # The score is the final model's loss on the first 6 blocks of the corpus's test split.
    tok = AutoTokenizer.from_pretrained(out / "final")
    blocks = packing.test_blocks(["embedded"], 10, tok, 64, 6, test_every=3)
    model = AutoModelForCausalLM.from_pretrained(out / "final").eval()
    with torch.no_grad():
        expected = train.lm_loss(model, blocks, "none").view(6, -1).mean(1).mean().item()
    assert test["test_loss"] == pytest.approx(expected, rel=1e-5)
    assert "test loss" in (out / "final" / "README.md").read_text()
    # Training read the three-way split's training stream (the first test document is the corpus's second), not
    # the two-way one: the logged fingerprint of step 1's rows is that of its first 8 blocks.
    def fingerprint(test_every: int) -> int:
        stream = packing.training_blocks(["embedded"], 10, tok, 64, seed=1337, test_every=test_every)
        return _crc(torch.stack([b["input_ids"] for b in itertools.islice(stream, 8)]))

    assert log[0]["batch_crc32"] == fingerprint(3) != fingerprint(0)


def _crc(rows: torch.Tensor, micro: int = 4) -> int:
    """train.py's batch_crc32 of one step's rows (fed in micro-batches of ``micro``)."""
    crc = 0
    for part in rows.split(micro):
        crc = zlib.crc32(part.numpy().tobytes(), crc)
    return crc


@pytest.mark.slow
def test_training_reads_shuffled_blocks_in_an_order_of_the_seed(tmp_path):
    # Two steps of 8 blocks: the rows are blocks of the corpus from all over it, in the order the seed draws.
    cfg = write_config(tmp_path / "train.yaml", max_steps=2, eval_steps=2, save_steps=2, max_eval_samples=2,
                       tokenizer_name=tokenizer_dir())
    tok = AutoTokenizer.from_pretrained(tokenizer_dir())
    tokens = packing.SplitTokens(["embedded"], "train", 10, tok)
    ids = tokens.ids
    starts = {tuple(ids[i * 64: i * 64 + 65].tolist()): i for i in range((len(ids) - 1) // 64)}
    logs = {}
    for seed in (1, 2):
        logs[seed] = metrics(train.main(["--config", str(cfg), "--seed", str(seed), "--output_dir",
                                         str(tmp_path / f"seed{seed}")]))
        stream = iter(packing.training_blocks(["embedded"], 10, tok, 64, seed=seed, tokens=tokens))
        steps = [torch.stack([next(stream)["input_ids"] for _ in range(8)]) for _ in range(2)]
        assert [m["batch_crc32"] for m in logs[seed]] == [_crc(rows) for rows in steps]
        where = [starts[tuple(row.tolist())] for rows in steps for row in rows]  # each block's place in the corpus
        assert all(abs(b - a) > 1 for a, b in itertools.pairwise(where)), where  # no two neighbours in a row
        assert logs[seed][-1]["data_pos"] == [0, 16, 0]  # 16 blocks of epoch 0 read
    assert logs[1][0]["batch_crc32"] != logs[2][0]["batch_crc32"]  # another seed, another order
    # With shuffle false the blocks are the corpus's first ones, in order.
    plain = metrics(train.main(["--config", str(cfg), "--shuffle", "false", "--output_dir", str(tmp_path / "plain")]))
    assert plain[0]["batch_crc32"] == _crc(torch.stack([ids[i * 64: i * 64 + 65].long() for i in range(8)]))


@pytest.mark.slow
def test_a_run_with_a_test_split_resumes_to_the_same_test_score(tmp_path):
    import shutil

    from eval.runs import read_test

    cfg = write_config(tmp_path / "train.yaml", max_steps=8, eval_steps=8, save_steps=4, test_every=3,
                       max_test_samples=4, tokenizer_name=tokenizer_dir())
    out = train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")])
    first = read_test(out / "metrics.jsonl")
    shutil.rmtree(out / "checkpoints" / "step_8")  # as if killed before the last checkpoint: resume at step 4
    train.main(["--config", str(cfg), "--output_dir", str(out)])
    assert [m["step"] for m in metrics(out)] == list(range(1, 9))
    assert read_test(out / "metrics.jsonl")["test_loss"] == pytest.approx(first["test_loss"], abs=1e-6)


def test_a_training_fraction_trains_on_its_documents_and_records_the_distinct_tokens(tmp_path):
    from eval.reference import train_reference
    from eval.runs import read_seen, read_test

    cfg = write_config(tmp_path / "train.yaml", max_steps=3, eval_steps=3, save_steps=3, test_every=3,
                       max_test_samples=4, max_eval_samples=2, tokenizer_name=tokenizer_dir(), train_fraction=0.125)
    out = train.main(["--config", str(cfg), "--output_dir", str(tmp_path / "out")])
    tok = AutoTokenizer.from_pretrained(tokenizer_dir())
    tokens = packing.SplitTokens(["embedded"], "train", 10, tok, 3, train_fraction=0.125)
    split = (len(tokens.ids) - 1) // 64 * 64
    everything = (len(packing.SplitTokens(["embedded"], "train", 10, tok, 3).ids) - 1) // 64 * 64
    assert 0.1 < split / everything < 0.16  # 1/8 of the characters, as whole documents
    log = metrics(out)
    assert log[-1]["train_split_tokens"] == split and log[-1]["distinct_train_tokens"] == 3 * 8 * 64
    assert read_seen(out / "metrics.jsonl") == {"train_split_tokens": split, "distinct_train_tokens": 3 * 8 * 64}
    # Step 1 read the subset's blocks in the seed's order, not the whole split's.
    def fingerprint(fraction: float) -> int:
        stream = packing.training_blocks(["embedded"], 10, tok, 64, seed=1337, test_every=3, train_fraction=fraction)
        return _crc(torch.stack([b["input_ids"] for b in itertools.islice(stream, 8)]))

    assert log[0]["batch_crc32"] == fingerprint(0.125) != fingerprint(1.0)
    # The test blocks are the whole corpus's, as at train_fraction 1; the card counts the documents trained on.
    test_blocks, test_docs = packing.split_blocks(["embedded"], "test", 10, tok, 64, 4, 3)
    assert read_test(out / "metrics.jsonl")["test_documents"] == test_docs and len(test_blocks) == 4
    subset = sum(1 for _ in corpus.train_documents(["embedded"], 10, 3, 0.125))
    assert f"passes over the {subset:,} training documents" in (out / "final" / "README.md").read_text()
    # The plain reference loop reads the same subset and records it the same way.
    settings = train_config.read_yaml(cfg, {"output_dir": str(tmp_path / "ref"), "max_steps": 2})
    final = train_reference(settings)
    assert final["train_split_tokens"] == split and final["distinct_train_tokens"] == 2 * 8 * 64
    assert read_seen(tmp_path / "ref" / "metrics.jsonl") == {"train_split_tokens": split,
                                                             "distinct_train_tokens": 2 * 8 * 64}
