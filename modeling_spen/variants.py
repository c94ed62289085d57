"""The named SPEN variants: one name per reader and trace, as the SPENConfig fields that make it.

One table for every place that trains "a SPEN with reader X and trace Y": the reader and trace ablations
(``eval.ablation``), the recall map (``eval.recall.default_map_configs``) and the report's plans
(``hub_configs/report/*.yaml``). A name is the predictor, then its scope where the predictor has one
(``softmax_attention-state``), then the trace where it is not the paper's fixed-rate EMA
(``linear-selective``), then its state size where the variant fixes one (``linear-ema16``: a bank of 16
fixed rates; ``linear-selective_ssm64``: a selective state of 64 numbers per channel). Every entry sets all
three fields (and the state-size variants their size), so a variant means the same model whatever config it is
applied to.

Scope ``sequence`` attends over the trace states of every past position; ``state`` only over the traces of
the current position (see :class:`~modeling_spen.configuration_spen.SPENConfig`).
"""

from __future__ import annotations

from .configuration_spen import TRACES

__all__ = ["ALIASES", "MIXER_VARIANTS", "PREDICTOR_VARIANTS", "REFERENCE_VARIANT", "SPEN_VARIANTS",
           "STATE_SIZE_VARIANTS", "TRACE_VARIANTS", "variant_fields"]

# The paper's static reader over the paper's traces: the reference arm of both ablations.
REFERENCE_VARIANT = "linear"


def _fields(predictor: str, scope: str = "sequence", trace: str = "ema", **size: int) -> dict[str, str | int]:
    return {"predictor": predictor, "predictor_scope": scope, "trace": trace, **size}


# The paper's ablation: no reader at all (x̂ = 0), the static linear reader, and causal attention readers
# over the same fixed-rate traces at either scope.
PREDICTOR_VARIANTS: tuple[str, ...] = (
    "none",
    "linear",
    "linear_attention-state",
    "linear_attention-sequence",
    "softmax_attention-state",
    "softmax_attention-sequence",
)
# The trace ablation: the linear reader over each kind of trace, the fixed-rate EMA ("linear") first.
TRACE_VARIANTS: tuple[str, ...] = tuple(REFERENCE_VARIANT if t == "ema" else f"linear-{t}" for t in TRACES)

# The recall map's state-size axis (issue 22): the linear reader over a bank of N fixed rates (N x D numbers
# per layer) and over a selective state of N numbers per channel (D x N), for N in 3, 16, 64. N = 3 fixed
# rates is the paper's ``linear``; a selective state of 16 is ``linear-selective_ssm`` (the config's default).
STATE_SIZE_VARIANTS: tuple[str, ...] = ("linear-ema16", "linear-ema64", "linear-selective_ssm3",
                                        "linear-selective_ssm64")

# The escape routes (issue 49): Mamba's mixer as SPEN's context sublayer (``mixer="mamba"``, mixer_mamba.py) at the
# three state sizes, and its ablations at N = 16: no conv over time (kernel 1), the previous step's readout instead of
# the current token's read, no gate. ``linear-s6lagged*`` name what the ``selective_ssm`` trace is: the S6 scan read one
# step late into SPEN's slots: aliases of ``linear-selective_ssm*`` (the same fields; committed sweeps keep those).
MIXER_VARIANTS: tuple[str, ...] = ("mixer_mamba", "mixer_mamba3", "mixer_mamba64", "mixer_mamba-conv1",
                                   "mixer_mamba-lagged", "mixer_mamba-nogate")
ALIASES: dict[str, str] = {"linear-s6lagged": "linear-selective_ssm", "linear-s6lagged3": "linear-selective_ssm3",
                           "linear-s6lagged64": "linear-selective_ssm64"}


def _mixer(**fields: str | int | bool) -> dict[str, str | int | bool]:
    return {**_fields("none"), "mixer": "mamba", **fields}


SPEN_VARIANTS: dict[str, dict[str, str | int | bool]] = {
    "none": _fields("none"),
    "linear": _fields("linear"),
    "linear_attention-state": _fields("linear_attention", "state"),
    "linear_attention-sequence": _fields("linear_attention", "sequence"),
    "softmax_attention-state": _fields("softmax_attention", "state"),
    "softmax_attention-sequence": _fields("softmax_attention", "sequence"),
    **{f"linear-{t}": _fields("linear", trace=t) for t in TRACES if t != "ema"},
    "linear-ema16": _fields("linear", trace="ema", trace_num_rates=16),
    "linear-ema64": _fields("linear", trace="ema", trace_num_rates=64),
    "linear-selective_ssm3": _fields("linear", trace="selective_ssm", trace_state_size=3),
    "linear-selective_ssm64": _fields("linear", trace="selective_ssm", trace_state_size=64),
    "mixer_mamba": _mixer(trace_state_size=16),
    "mixer_mamba3": _mixer(trace_state_size=3),
    "mixer_mamba64": _mixer(trace_state_size=64),
    "mixer_mamba-conv1": _mixer(trace_state_size=16, mamba_conv_kernel=1),
    "mixer_mamba-lagged": _mixer(trace_state_size=16, mamba_read="lagged"),
    "mixer_mamba-nogate": _mixer(trace_state_size=16, mamba_gate=False),
}
SPEN_VARIANTS.update({alias: SPEN_VARIANTS[name] for alias, name in ALIASES.items()})


def variant_fields(name: str) -> dict[str, str | int | bool]:
    """The SPENConfig fields of the variant ``name`` (a copy); KeyError naming the known ones otherwise."""
    try:
        return dict(SPEN_VARIANTS[name])
    except KeyError:
        raise KeyError(f"{name!r} is not a SPEN variant (one of {', '.join(SPEN_VARIANTS)})") from None
