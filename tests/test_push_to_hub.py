"""train.py --push_to_hub / --hub_model_id: the flags, the repo id rule, an offline push, what is uploaded.

Nothing reaches the hub: tests/conftest.py sets HF_HUB_OFFLINE=1, and where a push must succeed
huggingface_hub's HfApi is replaced by a fake that copies the folder it is asked to upload.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import modeling_spen  # noqa: F401  (registers SPEN with the Auto classes)
import train
import train_config
from tests.train_testkit import ENV, ROOT, run_cmd, tokenizer_dir, write_config
from train_config import EXIT_BAD_INPUT, EXIT_PUSH_FAILED

SPEN_TINY = str(ROOT / "hub_configs/spen-tiny")
# Files a pushed SPEN folder needs to stand alone: weights, config, every module of the modeling code, tokenizer, card.
EXPECTED_FILES = {"model.safetensors", "config.json", "configuration_spen.py", "modeling_spen.py", "predictors.py",
                  "traces.py", "traces_fixed.py", "traces_chunk.py", "traces_triton.py", "tokenizer.json",
                  "tokenizer_config.json", "README.md"}


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _two_step_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "train.yaml", model_config=SPEN_TINY, max_steps=2, save_every=2, eval_every=2,
                        tokenizer=tokenizer_dir())


class FakeHfApi:
    """HfApi's two calls that train.py makes, recorded; the upload copies the folder as it is at that moment."""

    calls: list[tuple[str, dict]] = []
    uploaded: Path | None = None

    def create_repo(self, repo_id: str, **kwargs):
        FakeHfApi.calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        from huggingface_hub import RepoUrl

        full = repo_id if "/" in repo_id else f"tester/{repo_id}"
        return RepoUrl(f"https://huggingface.co/{full}")

    def upload_folder(self, **kwargs):
        FakeHfApi.calls.append(("upload_folder", kwargs))
        shutil.copytree(kwargs["folder_path"], FakeHfApi.uploaded)


def test_help_lists_the_push_flags_and_exit_statuses(capsys):
    with pytest.raises(SystemExit) as e:
        train.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "--push_to_hub" in text and "--hub_model_id" in text
    assert f"{EXIT_PUSH_FAILED} trained and" in text and f"{EXIT_BAD_INPUT} bad settings" in text


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--hub_model_id", "me/spen"], "--hub_model_id 'me/spen' needs --push_to_hub"),
        (["--push_to_hub", "--hub_model_id", "a/b/c"], "--hub_model_id: Repo id must be in the form"),
        (["--push_to_hub", "--hub_model_id", "my model"], "--hub_model_id: Repo id must use alphanumeric chars"),
        (["--push_to_hub", "--hub_model_id", ""], "--hub_model_id: Repo id must use alphanumeric chars"),
        (["--push_to_hub", "--hub_model_id", "me/x--y"], "--hub_model_id: Cannot have -- or .."),
        (["--push_to_hub", "--output_dir", "{tmp}/my run"],
         "--push_to_hub: the output folder's name is not a repo id, pass --hub_model_id"),
    ],
)
def test_bad_hub_settings_are_one_line_before_training(tmp_path, capsys, flags, expected):
    cfg = _two_step_config(tmp_path)
    flags = [f.format(tmp=tmp_path) for f in flags]
    out = ["--output_dir", str(tmp_path / "out")] if "--output_dir" not in flags else []
    assert train.cli(["--config", str(cfg), *out, *flags]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"train.py: error: {expected}"), err
    assert not (tmp_path / "out").exists() and not (tmp_path / "my run").exists()


def test_repo_id_defaults_to_the_output_folder_name():
    args = train_config.parse_args(["--config", "x.yaml", "--push_to_hub"])
    assert train_config.hub_repo_id(args, Path("outputs/spen-tiny")) == "spen-tiny"
    args = train_config.parse_args(["--config", "x.yaml", "--push_to_hub", "--hub_model_id", "org/spen-130m"])
    assert train_config.hub_repo_id(args, Path("outputs/spen-tiny")) == "org/spen-130m"
    assert train_config.hub_repo_id(train_config.parse_args(["--config", "x.yaml"]), Path("out")) is None


def test_model_card_epochs_and_c4_header(tmp_path):
    cfg = train_config.read_yaml(write_config(tmp_path / "train.yaml", model_config=SPEN_TINY))
    spen = train.AutoConfig.from_pretrained(SPEN_TINY)
    card = train.model_card(cfg, spen, 200_000, 16, [2, 100, 7], 400, 4.5, "train.py --config x", "bpe")
    assert "- epochs: 2.25 (passes over the 400 training documents)" in card
    assert "tokens seen: 8,192 (16 steps x 8 sequences x 64 tokens), 0.041 per parameter" in card
    assert "datasets:" not in card and "trust_remote_code=True" in card
    c4 = train.model_card(cfg | {"data": ["c4"]}, spen, 200_000, 16, [0, 900, 7], 0, 4.5, "train.py", "gpt2")
    assert "- epochs: under one (streamed)" in c4 and "datasets: [allenai/c4]\n---" in c4
    gpt2 = train.AutoConfig.from_pretrained(ROOT / "hub_configs/gpt2-tiny")
    assert "trust_remote_code" not in train.model_card(cfg, gpt2, 1, 1, [0, 0, 0], 9, 1.0, "train.py", "bpe")


def test_offline_push_fails_in_one_line_after_final_is_complete(tmp_path):
    # The real command and the real huggingface_hub, offline: the push must fail fast, not hang.
    cfg = _two_step_config(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out), "--push_to_hub",
         "--hub_model_id", "someone/spen-offline"],
        cwd=ROOT, env={**ENV, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=600)
    assert result.returncode == EXIT_PUSH_FAILED, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert errors == [result.stderr.splitlines()[-1]] and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = errors[0]
    assert line.startswith(f"train.py: error: pushing {out}/final to the hub as someone/spen-offline failed: ")
    assert "offline mode is enabled" in line and f"hf upload someone/spen-offline {out}/final" in line
    assert EXPECTED_FILES <= {p.name for p in (out / "final").iterdir()}
    assert not list(out.glob(".final.tmp-*"))


def test_uploaded_folder_is_complete_and_loads_in_a_fresh_process(tmp_path, monkeypatch):
    cfg = _two_step_config(tmp_path)
    out = tmp_path / "spen-push-test"
    FakeHfApi.calls, FakeHfApi.uploaded = [], tmp_path / "uploaded"
    monkeypatch.setattr(train, "HfApi", FakeHfApi)
    assert train.cli(["--config", str(cfg), "--output_dir", str(out), "--push_to_hub"]) == 0

    # The repo id is the output folder's name; the whole, finished final/ is uploaded.
    (_, create), (_, upload) = FakeHfApi.calls
    assert create == {"repo_id": "spen-push-test", "exist_ok": True}
    assert upload["repo_id"] == "tester/spen-push-test" and Path(upload["folder_path"]) == out / "final"
    assert upload["commit_message"].startswith("train.py: 2 steps, validation loss ")
    up = FakeHfApi.uploaded
    files = {p.name for p in up.iterdir()}
    assert EXPECTED_FILES <= files, EXPECTED_FILES - files
    config = json.loads((up / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_spen.SPENForCausalLM"
    assert config["auto_map"]["AutoConfig"] == "configuration_spen.SPENConfig"

    card = (up / "README.md").read_text()
    header = card.split("---")[1]
    assert "library_name: transformers" in header and "pipeline_tag: text-generation" in header
    val_loss = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])["val_loss"]
    n_params = sum(p.numel() for p in train.AutoModelForCausalLM.from_config(
        train.AutoConfig.from_pretrained(SPEN_TINY)).parameters())
    for fact in ("data: embedded corpus", f"{n_params:,} parameters", "tokens seen: 1,024 (2 steps x 8 sequences",
                 f"{1024 / n_params:.3g} per parameter", f"final validation loss: {val_loss:.4f}",
                 f"train.py --config {cfg} --output_dir {out} --push_to_hub", "trust_remote_code=True"):
        assert fact in card, fact
    assert re.search(r"- epochs: [\d.]+ \(passes over the [\d,]+ training documents\)", card), card

    # Self-contained: a process outside the repository, with nothing of the project importable, loads and generates.
    script = textwrap.dedent("""
        import sys
        from transformers import AutoModelForCausalLM, AutoTokenizer
        model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)
        tok = AutoTokenizer.from_pretrained(sys.argv[1])
        assert "modeling_spen" not in sys.modules and type(model).__module__.startswith("transformers_modules")
        ids = tok("The for statement", return_tensors="pt").input_ids
        g = model.generate(ids, max_new_tokens=6, do_sample=False, pad_token_id=tok.eos_token_id)
        assert g.shape[1] == ids.shape[1] + 6, g.shape
        print("GENERATED", repr(tok.decode(g[0])))
    """)
    check = subprocess.run([sys.executable, "-c", script, str(up)], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": "", "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    assert "GENERATED" in check.stdout


@pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs torch.distributed with gloo")
def test_two_processes_push_once_from_the_main_process(tmp_path):
    # torchrun starts train.py's cli() in each process; HfApi is faked in both and logs which rank called it.
    cfg = _two_step_config(tmp_path)
    log = tmp_path / "calls.jsonl"
    launcher = tmp_path / "launch.py"
    launcher.write_text(textwrap.dedent(f"""
        import json, os, shutil, sys
        sys.path.insert(0, {str(ROOT)!r})
        import train
        from huggingface_hub import RepoUrl

        class Api:
            def _log(self, call, **kwargs):
                with open({str(log)!r}, "a") as f:
                    f.write(json.dumps({{"call": call, "rank": os.environ["RANK"], **kwargs}}) + "\\n")
            def create_repo(self, repo_id, **kwargs):
                self._log("create_repo", repo_id=repo_id)
                return RepoUrl("https://huggingface.co/tester/" + repo_id)
            def upload_folder(self, repo_id, folder_path, **kwargs):
                self._log("upload_folder", complete=os.path.isfile(os.path.join(folder_path, "model.safetensors")))

        train.HfApi = Api
        sys.exit(train.cli())
    """))
    torchrun = shutil.which("torchrun") or f"{sys.executable} -m torch.distributed.run"
    result = run_cmd([*torchrun.split(), "--standalone", "--nproc_per_node", "2", str(launcher), "--config",
                      str(cfg), "--output_dir", str(tmp_path / "two"), "--push_to_hub"])
    assert result.returncode == 0, result.stderr[-4000:]
    assert "MULTI_CPU x 2 processes" in result.stdout + result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [{"call": "create_repo", "rank": "0", "repo_id": "two"},
                     {"call": "upload_folder", "rank": "0", "complete": True}]
