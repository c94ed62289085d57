"""train.py --push_to_hub / --hub_model_id: the flags, the repo id rule, the hub checked before training, a
failed final upload, what is uploaded.

Nothing reaches the hub: tests/conftest.py sets HF_HUB_OFFLINE=1, and where the hub must answer, huggingface_hub's
HfApi is replaced by a fake that accepts the token and copies the folder it is asked to upload.
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
import training.hub
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
    return write_config(tmp_path / "train.yaml", model_name_or_path=SPEN_TINY, max_steps=2, warmup_steps=1,
                        save_steps=2, eval_steps=2, tokenizer_name=tokenizer_dir())


class FakeHfApi:
    """HfApi's two calls that train.py makes, recorded; the upload copies the folder as it is at that moment."""

    calls: list[tuple[str, dict]] = []
    uploaded: Path | None = None

    def whoami(self):
        FakeHfApi.calls.append(("whoami", {}))
        return {"name": "tester"}

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
    assert f"{EXIT_PUSH_FAILED} trained and final/ saved" in text and f"{EXIT_BAD_INPUT} bad command line" in text


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


@pytest.mark.slow
def test_offline_hub_fails_in_one_line_before_training(tmp_path):
    # The real command and the real huggingface_hub, offline: the check before training fails fast, nothing is written.
    cfg = _two_step_config(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "train.py", "--config", str(cfg), "--output_dir", str(out), "--push_to_hub",
         "--hub_model_id", "someone/spen-offline"],
        cwd=ROOT, env={**ENV, "HF_HUB_OFFLINE": "1", "HF_TOKEN": "hf_not_a_token"}, capture_output=True, text=True,
        timeout=600)
    assert result.returncode == EXIT_BAD_INPUT, result.stderr[-3000:]
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.startswith("train.py: error: --push_to_hub: the hub refused someone/spen-offline: ")
    assert "offline mode is enabled" in result.stderr and "nothing was trained" in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_failed_final_upload_is_one_line_and_final_stays_complete(tmp_path, monkeypatch, capsys):
    class UploadFails(FakeHfApi):
        def upload_folder(self, **kwargs):
            raise ConnectionError("connection reset by peer\nmore detail")

    cfg = _two_step_config(tmp_path)
    out = tmp_path / "out"
    FakeHfApi.calls = []
    monkeypatch.setattr(training.hub, "HfApi", UploadFails)
    assert train.cli(["--config", str(cfg), "--output_dir", str(out), "--push_to_hub", "--hub_model_id", "me/x"]) == 3
    err = capsys.readouterr().err
    assert err == (f"train.py: error: pushing {out}/final to the hub as me/x failed: connection reset by peer "
                   f"(final/ is complete; retry with: hf upload me/x {out}/final)\n")
    assert EXPECTED_FILES <= {p.name for p in (out / "final").iterdir()}
    assert not list(out.glob(".final.tmp-*"))


@pytest.mark.slow
def test_uploaded_folder_is_complete_and_loads_in_a_fresh_process(tmp_path, monkeypatch):
    cfg = _two_step_config(tmp_path)
    out = tmp_path / "spen-push-test"
    FakeHfApi.calls, FakeHfApi.uploaded = [], tmp_path / "uploaded"
    monkeypatch.setattr(training.hub, "HfApi", FakeHfApi)
    assert train.cli(["--config", str(cfg), "--output_dir", str(out), "--push_to_hub"]) == 0

    # The hub is asked first (token, repository); the repo id is the output folder's name; the whole, finished
    # final/ is uploaded.
    assert [call for call, _ in FakeHfApi.calls] == ["whoami", "create_repo", "create_repo", "upload_folder"]
    (_, _), (_, create), (_, _), (_, upload) = FakeHfApi.calls
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
                 f"train.py --config {cfg} --output_dir {out} --push_to_hub", "trust_remote_code=True",
                 'path = "tester/spen-push-test"'):
        assert fact in card, fact
    epochs = r"- epochs: [\d.]+ \(passes over the [\d,]+ training documents, as [\d,]+ blocks shuffled each epoch\)"
    assert re.search(epochs, card), card

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


@pytest.mark.slow
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
        import training.hub
        from huggingface_hub import RepoUrl

        class Api:
            def whoami(self):
                self._log("whoami")
                return {{"name": "tester"}}
            def _log(self, call, **kwargs):
                with open({str(log)!r}, "a") as f:
                    f.write(json.dumps({{"call": call, "rank": os.environ["RANK"], **kwargs}}) + "\\n")
            def create_repo(self, repo_id, **kwargs):
                self._log("create_repo", repo_id=repo_id)
                return RepoUrl("https://huggingface.co/" + (repo_id if "/" in repo_id else "tester/" + repo_id))
            def upload_folder(self, repo_id, folder_path, **kwargs):
                self._log("upload_folder", complete=os.path.isfile(os.path.join(folder_path, "model.safetensors")))

        training.hub.HfApi = Api
        sys.exit(train.cli())
    """))
    torchrun = shutil.which("torchrun") or f"{sys.executable} -m torch.distributed.run"
    result = run_cmd([*torchrun.split(), "--standalone", "--nproc_per_node", "2", str(launcher), "--config",
                      str(cfg), "--output_dir", str(tmp_path / "two"), "--push_to_hub"])
    assert result.returncode == 0, result.stderr[-4000:]
    assert "MULTI_CPU x 2 processes" in result.stdout + result.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [{"call": "whoami", "rank": "0"}, {"call": "create_repo", "rank": "0", "repo_id": "two"},
                     {"call": "create_repo", "rank": "0", "repo_id": "tester/two"},
                     {"call": "upload_folder", "rank": "0", "complete": True}]
