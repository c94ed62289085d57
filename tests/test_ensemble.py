"""train.py --seeds: K seeds trained as one ensemble give each seed its single run's numbers and folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.train_testkit import ROOT, metrics, tokenizer_dir, write_config

SEEDS = (0, 1, 2)
STEPS = 40
RTOL = 1e-4  # per-seed losses against the single run of that seed, at every logged step


def _train(argv: list[str]) -> None:
    import train

    assert train.cli(argv) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """For each architecture: three single runs, and the same seeds as one ensemble with each engine."""
    root = tmp_path_factory.mktemp("ensemble")
    done = {}
    for arch in ("spen-tiny", "gpt2-tiny"):
        cfg = write_config(root / f"{arch}.yaml", model_name_or_path=str(ROOT / "hub_configs" / arch),
                           tokenizer_name=tokenizer_dir(), max_steps=STEPS, logging_steps=5, eval_steps=20,
                           save_steps=STEPS)
        single = {s: root / arch / f"single_{s}" for s in SEEDS}
        for s, out in single.items():
            _train(["--config", str(cfg), "--seed", str(s), "--output_dir", str(out)])
        ensembles = {}
        for engine in ("stacked", "sequential"):
            ensembles[engine] = root / arch / engine
            _train(["--config", str(cfg), "--seeds", ",".join(map(str, SEEDS)), "--ensemble_engine", engine,
                    "--output_dir", str(ensembles[engine])])
        done[arch] = (single, ensembles)
    return done


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * abs(b)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["stacked", "sequential"])
@pytest.mark.parametrize("arch", ["spen-tiny", "gpt2-tiny"])
def test_each_seed_logs_its_single_runs_losses(runs, arch, engine):
    single, ensembles = runs[arch]
    worst = 0.0
    for s in SEEDS:
        ref, got = metrics(single[s]), metrics(ensembles[engine] / f"seed_{s}")
        assert [r["step"] for r in got] == [r["step"] for r in ref]
        for r, g in zip(ref, got, strict=True):
            assert set(g) == set(r)  # the same quantities, logged at the same steps
            assert (g.get("batch_crc32"), g.get("data_pos")) == (r.get("batch_crc32"), r.get("data_pos"))
            for key in ("loss", "prediction_loss", "objective", "val_loss"):
                if key in r:
                    assert _close(g[key], r[key]), (s, r["step"], key, g[key], r[key])
                    worst = max(worst, abs(g[key] - r[key]) / abs(r[key]))
    print(f"{arch} {engine}: largest relative difference {worst:.2e}")  # shown with pytest -s
    # The seeds are different models: an ensemble that trained one seed K times would pass the check above
    # only if the single runs agreed too.
    losses = [metrics(ensembles[engine] / f"seed_{s}")[-1]["loss"] for s in SEEDS]
    assert len(set(losses)) == len(SEEDS)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["spen-tiny", "gpt2-tiny"])
def test_each_seed_folder_is_a_single_runs_folder(runs, arch):
    from transformers import AutoModelForCausalLM

    single, ensembles = runs[arch]
    folder = ensembles["stacked"] / "seed_1"
    for name in ("metrics.jsonl", "train_config.json", "tokenizer", "final/README.md", "final/model.safetensors"):
        assert (folder / name).exists(), name
    saved, ref_saved = (json.loads((d / "train_config.json").read_text()) for d in (folder, single[1]))
    assert saved["seed"] == 1 and {k: v for k, v in saved.items() if k != "output_dir"} == \
        {k: v for k, v in ref_saved.items() if k != "output_dir"}
    # The card gives the single run's command that reproduces this seed.
    assert "--seed 1 --output_dir" in (folder / "final/README.md").read_text()
    blocks = torch.randint(0, 1024, (2, 32))
    mine = AutoModelForCausalLM.from_pretrained(folder / "final", trust_remote_code=True)
    ref = AutoModelForCausalLM.from_pretrained(single[1] / "final", trust_remote_code=True)
    with torch.no_grad():
        a, b = mine(input_ids=blocks).logits, ref(input_ids=blocks).logits
    assert torch.allclose(a, b, rtol=1e-3, atol=1e-3)


def test_stacked_clipping_is_per_seed():
    """Each seed's gradients are clipped by its own global norm, as clip_grad_norm_ does for one model."""
    from transformers import AutoConfig, AutoModelForCausalLM

    import train_config
    from training.ensemble import StackedEnsemble

    cfg = train_config.read_yaml(None, {"model_name_or_path": str(ROOT / "hub_configs/gpt2-tiny")})
    models = []
    for s in SEEDS:
        torch.manual_seed(s)
        models.append(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(cfg["model_name_or_path"])))
    ens = StackedEnsemble(models, cfg)
    blocks = torch.randint(0, 1024, (2, 17))
    ens.forward_backward(blocks)
    ens.params["transformer.wte.weight"].grad[1] *= 1000  # seed 1 far above the limit, the others not
    expected = []
    for k, m in enumerate(models):
        grads = {n: ens.params[n].grad[k].clone() for n, _ in m.named_parameters() if n in ens.params}
        total = torch.cat([g.flatten() for g in grads.values()]).norm()
        expected.append((total, {n: g * min(1.0, 1.0 / (total.item() + 1e-6)) for n, g in grads.items()}))
    norms = ens.clip_(1.0)
    for k, (total, clipped) in enumerate(expected):
        assert torch.isclose(norms[k], total, rtol=1e-5)
        for n, g in clipped.items():
            assert torch.allclose(ens.params[n].grad[k], g, rtol=1e-5, atol=1e-9), (k, n)
    assert norms[1] > 100 * max(norms[0], norms[2])


@pytest.mark.parametrize("flags, words", [
    (["--seeds", "0,0"], "--seeds"),
    (["--seeds", "0,x"], "--seeds"),
    (["--seeds", "0,1", "--resume_from_checkpoint", "latest"], "--resume_from_checkpoint"),
    (["--seeds", "0,1", "--ensemble_engine", "fast"], "--ensemble_engine"),
])
def test_bad_ensemble_flags_are_one_line(tmp_path, capsys, flags, words):
    import train

    cfg = write_config(tmp_path / "c.yaml", tokenizer_name=tokenizer_dir())
    try:
        status = train.cli(["--config", str(cfg), "--output_dir", str(tmp_path / "out"), *flags])
    except SystemExit as e:  # argparse's errors
        status = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and words in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_earlier_seed_folder_is_not_replaced_without_overwrite(tmp_path, capsys):
    import train

    cfg = write_config(tmp_path / "c.yaml", tokenizer_name=tokenizer_dir(), max_steps=2, eval_steps=2, save_steps=2)
    out = tmp_path / "out"
    _train(["--config", str(cfg), "--seed", "1", "--output_dir", str(out / "seed_1")])
    before = (out / "seed_1" / "metrics.jsonl").read_text()
    assert train.cli(["--config", str(cfg), "--seeds", "0,1", "--output_dir", str(out)]) == 2
    assert "seed_1" in capsys.readouterr().err and not (out / "seed_0").exists()
    assert (out / "seed_1" / "metrics.jsonl").read_text() == before
    _train(["--config", str(cfg), "--seeds", "0,1", "--output_dir", str(out), "--overwrite_output_dir"])
    assert Path(out / "seed_0" / "final" / "model.safetensors").is_file()


@pytest.mark.slow
def test_with_a_test_split_each_seed_is_its_single_run_test_score_included(tmp_path):
    cfg = write_config(tmp_path / "t.yaml", tokenizer_name=tokenizer_dir(), max_steps=4, logging_steps=2, eval_steps=4,
                       save_steps=4, test_every=3, max_test_samples=4)
    _train(["--config", str(cfg), "--seed", "1", "--output_dir", str(tmp_path / "single")])
    _train(["--config", str(cfg), "--seeds", "0,1", "--ensemble_engine", "sequential", "--output_dir",
            str(tmp_path / "ens")])
    ref, got = metrics(tmp_path / "single")[-1], metrics(tmp_path / "ens" / "seed_1")[-1]
    assert {"test_loss", "test_tokens", "test_documents"} <= set(got) and set(got) == set(ref)
    assert got["batch_crc32"] == ref["batch_crc32"]  # the three-way split's training stream, as the single run's
    assert got["test_tokens"] == ref["test_tokens"] == 4 * 64 and got["test_documents"] == ref["test_documents"]
    assert _close(got["test_loss"], ref["test_loss"])
