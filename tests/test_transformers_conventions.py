"""SPEN behaves as every transformers model (issue 36), for every variant, and after a fresh-process load.

The six conventions of transformers' common model and generation tests that SPEN once missed, each a check in
tests/conventions_testkit.py: hidden states (L + 1, embeddings first, in the graph), generation from
``inputs_embeds`` (greedy, beam, continued from the state), meta-device builds, per-row outputs, tuple outputs,
keyword forwarding; plus which class trains and ``attentions`` being None (``has_attentions = False``: SPEN has
no attention over tokens). docs/spen_transformers.md is the table of what is supported and how.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from modeling_spen.variants import SPEN_VARIANTS
from tests import conventions_testkit as kit
from tests.test_modeling import tiny_model

# What transformers' ModelTesterMixin calls `has_attentions`: SPEN returns no attention weights.
has_attentions = False

# Every named variant (readers and scopes, trace kinds, the fixed bank of N rates, selective_ssm state sizes),
# and Attention Residuals, full and in blocks, over two trace kinds.
VARIANTS = {name: fields for name, fields in SPEN_VARIANTS.items()} | {
    "linear+attnres": {"residual": "attention"},
    "softmax_attention-sequence-selective_ssm+block_attnres": {
        "predictor": "softmax_attention", "trace": "selective_ssm", "residual": "attention", "residual_block_size": 2,
    },
}
CHECKS = [kit.check_hidden_states, kit.check_no_attentions, kit.check_generate_from_embeds, kit.check_rows_alone,
          kit.check_tuple_outputs, kit.check_kwargs_forwarded, kit.check_which_classes_train, kit.check_meta_builds]


def _model(name: str):
    # Three layers: hidden states in the middle of the stack, not only at its ends.
    return tiny_model(num_hidden_layers=3, **VARIANTS[name])


def _ids(batch: int = 3, length: int = 7) -> torch.Tensor:
    return torch.randint(1, 61, (batch, length), generator=torch.Generator().manual_seed(batch * 100 + length))


@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_convention_on_every_variant(name: str) -> None:
    model = _model(name)
    for check in CHECKS:
        check(model, _ids(2, 6) if check is kit.check_generate_from_embeds else _ids())


def test_checks_can_fail() -> None:
    # The kit sees the failures the issue reported: batch-level prediction losses, a buffer left unset.
    model = _model("linear")
    real = model.forward

    def batch_level(*args, **kwargs):  # the old definition: one value per block for the whole batch
        out = real(*args, **kwargs)
        out.prediction_losses = out.prediction_losses.mean(0, keepdim=True).expand_as(out.prediction_losses)
        return out

    model.forward = batch_level
    with pytest.raises(AssertionError, match="prediction_losses"):
        kit.check_rows_alone(model, _ids())
    model = _model("linear")
    model.model.h[0].traces.alpha.fill_(0.3)  # a buffer that init_weights would not give back
    with pytest.raises(AssertionError, match="buffer"):
        kit.check_meta_builds(model, _ids())


def test_base_model_refuses_labels_in_one_line() -> None:
    with pytest.raises(TypeError, match="SPENModel takes no labels"):
        _model("linear").model(_ids(), labels=_ids())


def test_from_pretrained_on_meta_and_with_device_map_is_bit_identical(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    for name in ("linear", "linear-selective", "linear+attnres"):
        model = _model(name)
        model.save_pretrained(tmp_path / name)
        ids = _ids()
        expected = model(ids).logits
        for kwargs in ({}, {"device_map": "cpu"}, {"dtype": torch.float32, "low_cpu_mem_usage": True}):
            loaded = AutoModelForCausalLM.from_pretrained(tmp_path / name, **kwargs).eval()
            assert torch.equal(loaded(ids).logits, expected), (name, kwargs)


@pytest.mark.slow
def test_conventions_hold_after_a_fresh_process_load(tmp_path: Path) -> None:
    # One variant with the most machinery: selective_ssm state, a sequence-scope softmax reader, block AttnRes.
    name = "softmax_attention-sequence-selective_ssm+block_attnres"
    _model(name).save_pretrained(tmp_path / "saved")
    assert "auto_map" in json.loads((tmp_path / "saved" / "config.json").read_text())
    script = f"""
import sys, torch
sys.path.insert(0, {str(Path(__file__).parent)!r})
import conventions_testkit as kit
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained({str(tmp_path / 'saved')!r}, trust_remote_code=True).eval()
assert "modeling_spen" not in sys.modules and type(model).__module__.startswith("transformers_modules")
checks = {[c.__name__ for c in CHECKS]!r}
for check in checks:
    n, T = (2, 6) if check == "check_generate_from_embeds" else (3, 7)
    getattr(kit, check)(model, torch.randint(1, 61, (n, T), generator=torch.Generator().manual_seed(n * 100 + T)))
print("OK", len(checks))
"""
    # Outside the repository, without it on the path: the project itself cannot be imported.
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": ""}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"OK {len(CHECKS)}" in result.stdout


def test_docs_table_is_the_model_card_text() -> None:
    from modeling_spen import SUPPORT_TABLE

    doc = (Path(__file__).resolve().parents[1] / "docs" / "spen_transformers.md").read_text()
    assert SUPPORT_TABLE in doc
    assert "`attentions` is `None`" in SUPPORT_TABLE and "has_attentions = False" in SUPPORT_TABLE
