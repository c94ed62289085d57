"""modeling_spen.variants: one name per SPEN variant, each a full and valid set of SPENConfig fields."""

import pytest

from modeling_spen import SPENConfig
from modeling_spen.configuration_spen import PREDICTOR_SCOPES, PREDICTORS, TRACES
from modeling_spen.variants import (
    PREDICTOR_VARIANTS,
    REFERENCE_VARIANT,
    SPEN_VARIANTS,
    TRACE_VARIANTS,
    variant_fields,
)


def test_every_variant_is_one_distinct_valid_config():
    seen = set()
    for name, fields in SPEN_VARIANTS.items():
        assert set(fields) == {"predictor", "predictor_scope", "trace"}, name
        assert fields["predictor"] in PREDICTORS and fields["predictor_scope"] in PREDICTOR_SCOPES
        assert fields["trace"] in TRACES
        config = SPENConfig(hidden_size=16, num_attention_heads=2, **fields)
        assert {k: getattr(config, k) for k in fields} == fields
        seen.add(tuple(sorted(fields.items())))
    assert len(seen) == len(SPEN_VARIANTS)  # no config has two names


def test_the_ablation_axes_are_variants():
    assert REFERENCE_VARIANT in PREDICTOR_VARIANTS and REFERENCE_VARIANT in TRACE_VARIANTS
    assert set(PREDICTOR_VARIANTS) | set(TRACE_VARIANTS) == set(SPEN_VARIANTS)
    # The predictor arms keep the EMA traces; the trace arms keep the linear reader, one arm per trace kind.
    assert {SPEN_VARIANTS[v]["trace"] for v in PREDICTOR_VARIANTS} == {"ema"}
    assert {SPEN_VARIANTS[v]["predictor"] for v in TRACE_VARIANTS} == {"linear"}
    assert sorted(SPEN_VARIANTS[v]["trace"] for v in TRACE_VARIANTS) == sorted(TRACES)


def test_names_read_as_their_fields():
    assert variant_fields("softmax_attention-state") == {"predictor": "softmax_attention",
                                                         "predictor_scope": "state", "trace": "ema"}
    assert variant_fields("linear-selective")["trace"] == "selective"
    fields = variant_fields("linear")
    fields["trace"] = "learned"  # a copy: the table is not changed through it
    assert SPEN_VARIANTS["linear"]["trace"] == "ema"
    with pytest.raises(KeyError, match="'spen-linattn-state' is not a SPEN variant"):
        variant_fields("spen-linattn-state")
