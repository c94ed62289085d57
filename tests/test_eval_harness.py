"""lm-eval on SPEN checkpoints saved by train.py: CLI end to end, padded batches, eval.compare."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.eval_testkit import DOCS, REPO, write_local_task, write_micro_config

OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    import train

    tmp = tmp_path_factory.mktemp("spen")
    out = train.main(["--config", str(write_micro_config(tmp / "micro.yaml")), "--output_dir", str(tmp / "run")])
    return out / "final"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> Path:
    return write_local_task(tmp_path_factory.mktemp("tasks"))


def project_total_nll(final: Path, docs: list[str]) -> float:
    """The project's own computation: train.lm_loss summed over [prefix] + document tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import train

    tok = AutoTokenizer.from_pretrained(final)
    model = AutoModelForCausalLM.from_pretrained(final, trust_remote_code=True).eval()
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id  # as lm-eval's HFLM
    total = 0.0
    with torch.no_grad():
        for doc in docs:
            ids = [prefix, *tok.encode(doc, add_special_tokens=False)]
            assert len(ids) <= model.config.max_position_embeddings
            total += train.lm_loss(model, torch.tensor([ids]), reduction="sum").item()
    return total


@pytest.mark.slow
def test_lm_eval_cli_perplexity_matches_project(checkpoint, tasks, tmp_path):
    """Acceptance: the unchanged lm-eval CLI on a train.py checkpoint = the project's perplexity (1%)."""
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf",
           "--model_args", f"pretrained={checkpoint},trust_remote_code=True",
           "--tasks", "local_ppl", "--include_path", str(tasks), "--batch_size", "2",
           "--output_path", str(tmp_path / "out")]
    run = subprocess.run(cmd, env=OFFLINE, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    [path] = (tmp_path / "out").rglob("results_*.json")
    got = json.loads(path.read_text())["results"]["local_ppl"]
    nll = project_total_nll(checkpoint, DOCS)
    words = sum(len(re.split(r"\s+", d)) for d in DOCS)  # lm-eval's word count
    n_bytes = sum(len(d.encode()) for d in DOCS)
    assert math.isfinite(got["word_perplexity,none"])
    assert got["word_perplexity,none"] == pytest.approx(math.exp(nll / words), rel=0.01)
    assert got["byte_perplexity,none"] == pytest.approx(math.exp(nll / n_bytes), rel=0.01)
    assert got["bits_per_byte,none"] == pytest.approx(nll / n_bytes / math.log(2), rel=0.01)


def test_padded_batches_score_like_batch_size_one(checkpoint):
    """loglikelihood (right padding), loglikelihood_rolling and generate_until (left padding + mask):
    batches of 4 mixed-length requests give what one request at a time gives."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(checkpoint), trust_remote_code=True, batch_size=1, device="cpu")
    # Split points give contexts of different lengths; "" makes lm-eval condition on the prefix token only.
    ll = [Instance("loglikelihood", {}, (d[:k], d[k:]), i)
          for i, (d, k) in enumerate(zip(DOCS, [10, 30, 5, 40, 0], strict=True))]
    rolling = [Instance("loglikelihood_rolling", {}, (d,), i) for i, d in enumerate(DOCS)]
    gen = [Instance("generate_until", {}, (d[:n], {"until": ["\n\n"], "max_gen_toks": 8, "do_sample": False}), i)
           for i, (d, n) in enumerate(zip(DOCS[:4], [12, 40, 3, 25], strict=True))]

    def run(batch_size: int):
        lm.batch_size_per_gpu = batch_size
        return lm.loglikelihood(ll), lm.loglikelihood_rolling(rolling), lm.generate_until(gen)

    (ll1, roll1, gen1), (ll4, roll4, gen4) = run(1), run(4)
    assert [g for _, g in ll1] == [g for _, g in ll4]  # greedy flags
    assert [s for s, _ in ll1] == pytest.approx([s for s, _ in ll4], abs=1e-4)
    assert roll1 == pytest.approx(roll4, abs=1e-4)
    assert all(math.isfinite(s) for s, _ in ll1) and all(math.isfinite(s) for s in roll1)
    assert gen1 == gen4


@pytest.mark.slow
def test_compare_runs_models_and_skips_missing_one(checkpoint, tasks, tmp_path, capsys):
    from ema_boundary.io import MARKER, output_owner
    from eval.compare import compare, main

    out = tmp_path / "cmp"
    result = compare([str(checkpoint), "no-such-org/no-such-model"], ["local_ppl"], out,
                     include_path=[tasks], batch_size=2)
    err = [ln for ln in capsys.readouterr().err.splitlines() if "no-such-org" in ln]
    assert len(err) == 1 and "not available" in err[0]
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "compare.png", "results.json", "table.md"]
    assert output_owner(out) == "eval.compare"
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(result))
    ok = saved["models"][str(checkpoint)]
    assert ok["status"] == "ok" and math.isfinite(ok["metrics"]["local_ppl"]["word_perplexity"])
    assert saved["models"]["no-such-org/no-such-model"]["status"] == "missing"
    table = (out / "table.md").read_text()
    assert "| local_ppl | word_perplexity |" in table and "not run" in table

    # Bad input: one line naming the flag, exit 2, nothing written.
    bad = tmp_path / "bad"
    assert main(["--models", str(checkpoint), "--tasks", "no_such_task", "--out", str(bad)]) == 2
    msg = capsys.readouterr().err.strip().splitlines()
    assert len(msg) == 1 and "--tasks" in msg[0] and "no_such_task" in msg[0]
    with pytest.raises(SystemExit) as e:
        main(["--models", str(checkpoint), "--tasks", "local_ppl", "--out", str(bad), "--batch_size", "0"])
    assert e.value.code == 2 and "--batch_size" in capsys.readouterr().err
    assert not bad.exists()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((checkpoint / "config.json").read_text())  # no weights
    assert main(["--model_name_or_path", str(broken), "--tasks", "local_ppl", "--output_dir", str(bad)]) == 2
    assert f"--model_name_or_path {broken}: no weights" in capsys.readouterr().err and not bad.exists()

    # The same output again: only with --overwrite_output_dir (the transformers spellings, a comma list of tasks).
    argv = ["--model_name_or_path", str(checkpoint), "--tasks", "local_ppl,local_ppl", "--output_dir", str(out),
            "--include_path", str(tasks), "--batch_size", "2", "--seed", "3"]
    assert main(argv) == 2 and "pass --overwrite_output_dir" in capsys.readouterr().err
    assert main([*argv, "--overwrite_output_dir"]) == 0
    again = json.loads((out / "results.json").read_text())
    assert again["models"][str(checkpoint)]["metrics"] == ok["metrics"]  # perplexity does not depend on the seed
    assert again["tasks"] == ["local_ppl", "local_ppl"] and again["settings"]["seed"] == 3


@pytest.mark.slow
def test_cli_is_runnable_from_repo_root():
    """`python -m eval.compare --help` works from the repository root (the documented invocation)."""
    run = subprocess.run([sys.executable, "-m", "eval.compare", "--help"], cwd=REPO, env=OFFLINE,
                         capture_output=True, text=True, timeout=120)
    help_text = " ".join(run.stdout.split())
    assert run.returncode == 0 and "--model_name_or_path" in help_text and "--output_dir" in help_text
    assert "(default: 8)" in help_text
