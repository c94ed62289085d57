"""SPEN, an EMA-trace language model, as a Hugging Face transformers model.

Importing this package registers ``SPENConfig`` (model_type ``"spen"``), ``SPENModel`` and
``SPENForCausalLM`` with ``AutoConfig``, ``AutoModel`` and ``AutoModelForCausalLM``, and marks them
for ``register_for_auto_class`` so that ``save_pretrained`` writes ``auto_map`` and the modeling
files beside the weights (``from_pretrained(..., trust_remote_code=True)`` then works anywhere).
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .card_text import SUPPORT_TABLE
from .configuration_spen import SPENConfig, log_uniform_rates
from .modeling_spen import SPENForCausalLM, SPENModel, SPENPreTrainedModel, SPENState
from .traces import ema_step, ema_traces
from .traces_naive import ema_traces_naive

AutoConfig.register("spen", SPENConfig, exist_ok=True)
AutoModel.register(SPENConfig, SPENModel, exist_ok=True)
AutoModelForCausalLM.register(SPENConfig, SPENForCausalLM, exist_ok=True)
SPENConfig.register_for_auto_class()
SPENModel.register_for_auto_class("AutoModel")
SPENForCausalLM.register_for_auto_class("AutoModelForCausalLM")

__all__ = [
    "SUPPORT_TABLE",
    "SPENConfig",
    "log_uniform_rates",
    "SPENModel",
    "SPENForCausalLM",
    "SPENPreTrainedModel",
    "SPENState",
    "ema_traces",
    "ema_traces_naive",
    "ema_step",
]
