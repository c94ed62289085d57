"""modeling_spen.variants: one name per SPEN variant, each a full and valid set of SPENConfig fields."""

import pytest

from modeling_spen import SPENConfig
from modeling_spen.configuration_spen import PREDICTOR_SCOPES, PREDICTORS, TRACES
from modeling_spen.variants import (
    ALIASES,
    MIXER_VARIANTS,
    PREDICTOR_VARIANTS,
    REFERENCE_VARIANT,
    SPEN_VARIANTS,
    STATE_SIZE_VARIANTS,
    TRACE_VARIANTS,
    variant_fields,
)


def test_every_variant_is_one_distinct_valid_config():
    seen = set()
    for name, fields in SPEN_VARIANTS.items():
        assert {"predictor", "predictor_scope", "trace"} <= set(fields), name
        assert set(fields) - {"predictor", "predictor_scope", "trace"} <= {
            "trace_num_rates", "trace_state_size", "mixer", "mamba_conv_kernel", "mamba_read", "mamba_gate"}
        assert fields["predictor"] in PREDICTORS and fields["predictor_scope"] in PREDICTOR_SCOPES
        assert fields["trace"] in TRACES
        config = SPENConfig(hidden_size=16, num_attention_heads=2, **fields)
        made = {k: getattr(config, k) for k in fields if k != "trace_num_rates"}  # stored resolved, as trace_rates
        assert made == {k: fields[k] for k in made}
        # The config that results, rates resolved: two names never make one model (but the declared aliases).
        mamba = (config.mixer, config.mamba_conv_kernel, config.mamba_read, config.mamba_gate)
        seen.add((*(made[k] for k in ("predictor", "predictor_scope", "trace")), tuple(config.trace_rates),
                  config.trace_state_size if "selective_ssm" in (config.trace, config.mixer) or config.mixer == "mamba"
                  else None, mamba if config.mixer == "mamba" else None))
    assert len(seen) == len(SPEN_VARIANTS) - len(ALIASES)
    for alias, name in ALIASES.items():
        assert SPEN_VARIANTS[alias] == SPEN_VARIANTS[name]


def test_the_ablation_axes_are_variants():
    assert REFERENCE_VARIANT in PREDICTOR_VARIANTS and REFERENCE_VARIANT in TRACE_VARIANTS
    assert (set(PREDICTOR_VARIANTS) | set(TRACE_VARIANTS) | set(STATE_SIZE_VARIANTS) | set(MIXER_VARIANTS)
            | set(ALIASES)) == set(SPEN_VARIANTS)
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


def test_the_state_size_variants_give_their_state():
    for n in (16, 64):
        config = SPENConfig(hidden_size=16, num_attention_heads=2, **variant_fields(f"linear-ema{n}"))
        assert config.trace == "ema" and config.num_traces == n  # N fixed rates, log-uniform
        assert max(config.trace_rates) == 0.5 and min(config.trace_rates) == 0.02
    for n in (3, 64):
        config = SPENConfig(hidden_size=16, num_attention_heads=2, **variant_fields(f"linear-selective_ssm{n}"))
        assert config.trace == "selective_ssm" and config.trace_state_size == n
    # N = 16 selective is the trace ablation's arm at the config's default size; N = 3 fixed is the paper's.
    assert SPENConfig(**variant_fields("linear-selective_ssm")).trace_state_size == 16
    assert SPENConfig(**variant_fields("linear")).num_traces == 3
