"""SPEN: Sparse Predictive Equilibrium Network, an EMA-trace language model.

One block (pre-norm, as GPT-2), for block input x_t:

    u_t       = LayerNorm(x_t)                                   (zeroed at padded positions)
    h_t^(s)   = (1 - a_s) h_{t-1}^(s) + a_s u_t                  S traces, h_{-1} = 0
    x̂_t       = Predictor(u_t, h_{t-1})                          reads the strictly past traces
    e_t       = u_t - x̂_t                                        prediction error
    c_t       = W_mix [u_t; e_t; h_{t-1}^(1); ...; h_{t-1}^(S)]  context mix
    x'_t      = x_t + c_t
    x''_t     = x'_t + SparseFFN(LayerNorm(x'_t))                top-k hidden units per token

Prediction loss (predictive coding made real): ``P = mean over blocks of mean_t ||u_t - x̂_t||^2 / D``
with the target ``u_t`` detached (gradients reach the predictor and what it reads, never the
target); ``mean_t`` runs over every non-padded position of the batch (each token weighs the same, as
in the next-token loss). ``loss = CE + config.prediction_loss_weight * P`` when ``labels`` are given;
``P`` is returned as ``prediction_loss`` in every forward, so a training loop that computes its own
next-token loss adds ``weight * prediction_loss`` itself. ``prediction_losses`` ``(batch, num_blocks)``
holds each row's own per-block value (``mean_t`` over that row's positions), so a row's outputs never
depend on the rest of the batch; without padding ``P == prediction_losses.mean()``.
Without it, ``x̂_t`` is not asked to predict anything: a linear predictor then only reparametrises
the context mix (``predictor="none"`` is the same function class).

Context mix: a learned linear map of the concatenation, the reference choice. It reads
``h_{t-1}`` rather than ``h_t``: since ``h_t = (1 - a) h_{t-1} + a u_t`` is a fixed linear
function of ``h_{t-1}`` and ``u_t``, both give the same span, and one trace tensor serves the
predictor, the mix and the recurrent state.

Other trace kinds fill the same S slots: ``trace="selective_ssm"`` (:mod:`.traces_ssm`, a Mamba S6
state of D x ``trace_state_size`` numbers per layer, slots read out with input-dependent vectors).
With ``residual="attention"`` (:mod:`.residuals`) the two residual adds of each block become softmax
attention over depth: each sublayer reads a learned mixture of the embedding and every earlier
sublayer output.

There are no position embeddings: the traces carry order. The LM head is tied to the token
embeddings. Decoding keeps a recurrent state (:class:`SPENState`): per layer the S traces (and the
``selective_ssm`` state), plus the linear-attention sums or the key/value cache of a ``sequence``-scope
attention predictor. For ``predictor="linear"`` and the ``state`` scope the state has constant size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_spen import SPENConfig
from .mixer_mamba import MambaMixer
from .predictors import build_predictor
from .residuals import DepthAttention
from .traces import accumulation_dtype, ema_step, ema_traces
from .traces_ssm import SelectiveSSMTraces, dt_init_range

# A rate of exactly 1 (a saturated sigmoid) would put log(1 - a) = -inf in the trace operator.
_MAX_RATE = 1.0 - 1e-6
# transformers 5.24 renamed the cache field/argument from `past_key_values` to `cache`.
_CACHE_KEY = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


@dataclass
class SPENModelOutputWithPast(BaseModelOutputWithPast):
    r"""
    The fields, in this order (``return_dict=False`` gives them as a tuple, ``None`` fields left out, as
    every transformers output): ``last_hidden_state``, ``cache``, ``hidden_states``, ``attentions`` (always
    ``None``: SPEN has no attention over tokens), ``prediction_loss``, ``prediction_losses``.

    hidden_states (`tuple(torch.FloatTensor)`, *optional*, returned when `output_hidden_states=True`):
        ``num_hidden_layers + 1`` tensors ``(batch, seq_len, hidden_size)``: the input embeddings, the
        residual stream as each later block reads it, and the final output after ``ln_f`` (as GPT-2).
    prediction_loss (`torch.FloatTensor`, a scalar):
        The prediction loss ``P`` that training adds: per block, ``||u_t - x̂_t||^2 / D`` averaged over every
        non-padded position of the batch, then averaged over blocks (target detached).
    prediction_losses (`torch.FloatTensor` of shape `(batch, num_hidden_layers)`):
        Per row and block, ``mean_t ||u_t - x̂_t||^2 / D`` over that row's non-padded positions.
    """

    prediction_loss: torch.FloatTensor | None = None
    prediction_losses: torch.FloatTensor | None = None


@dataclass
class SPENCausalLMOutputWithPast(CausalLMOutputWithPast):
    r"""
    The fields, in this order (``return_dict=False`` gives them as a tuple, ``None`` fields left out):
    ``loss``, ``logits``, ``cache``, ``hidden_states``, ``attentions`` (always ``None``), ``lm_loss``,
    ``prediction_loss``, ``prediction_losses``.

    lm_loss (`torch.FloatTensor`, *optional*, returned when `labels` are given):
        The next-token cross-entropy alone; ``loss = lm_loss + prediction_loss_weight * prediction_loss``.
    prediction_loss (`torch.FloatTensor`, a scalar):
        The prediction loss ``P`` (see :class:`SPENModelOutputWithPast`): what ``loss`` adds.
    prediction_losses (`torch.FloatTensor` of shape `(batch, num_hidden_layers)`):
        Per row and block, ``mean_t ||u_t - x̂_t||^2 / D`` over that row's non-padded positions.
    """

    lm_loss: torch.FloatTensor | None = None
    prediction_loss: torch.FloatTensor | None = None
    prediction_losses: torch.FloatTensor | None = None


def _prediction_error(u: torch.Tensor, x_hat: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    """Per row, ``sum_t ||u_t - x̂_t||^2 / D`` over the valid positions, ``(B,)`` float32; ``u`` is detached."""
    err = (u.detach().float() - x_hat.float()).pow(2).mean(-1)  # (B, T)
    if valid is not None:
        err = err * valid
    return err.sum(1)


class SPENState:
    """The recurrent state of a SPEN model: everything needed to continue a batch of sequences.

    ``layers[i]`` is a dict: ``"traces"`` ``(B, S, D)`` (``h_{t-1}`` for the next token; float32,
    or float64 in a float64 model), ``"ssm"`` ``(B, D, N)`` for the ``selective_ssm`` trace,
    and for attention predictors of scope ``sequence`` either ``"kv"``/``"z"`` (linear
    attention sums) or ``"k"``/``"v"``/``"valid"`` (softmax key/value cache).
    """

    is_compileable = False

    def __init__(self, num_layers: int) -> None:
        self.layers: list[dict[str, torch.Tensor]] = [{} for _ in range(num_layers)]
        self.seen_tokens = 0

    # --- the parts of the transformers Cache interface that generate() uses ---
    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.seen_tokens

    @property
    def is_linear(self) -> list[bool]:
        return [True] * len(self.layers)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Reorder the batch (beam search)."""
        for layer in self.layers:
            for name, tensor in layer.items():
                layer[name] = tensor.index_select(0, beam_idx.to(tensor.device))

    def num_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.layers for t in layer.values())


def _rate_buffers(config: SPENConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The values of :class:`SPENTraces`' buffers: the write rates ``(S,)`` and their logits, float32."""
    rates = torch.tensor(config.trace_rates, dtype=torch.float32)
    return rates, torch.log(rates) - torch.log1p(-rates)


class SPENTraces(nn.Module):
    """Write rates of the traces (fixed, learned or input-dependent) and the trace computation."""

    def __init__(self, config: SPENConfig) -> None:
        super().__init__()
        self.kind = config.trace
        D, S = config.hidden_size, config.num_traces
        # Non-persistent buffers (not in checkpoints), computed from config.trace_rates here and again in
        # SPENPreTrainedModel._init_weights: a model built on the meta device gets them back from
        # init_weights() (from_pretrained does it), one built with init_empty_weights() keeps these values.
        # `rate_logit` is also this module's own tensor: transformers calls _init_weights only on modules
        # of custom code that hold a tensor of their own, and the selective rates' bias is set there.
        # Float32 whatever the default dtype: from_pretrained(dtype=torch.bfloat16) keeps the fixed rates exact.
        rates, rate_logit = _rate_buffers(config)
        self.register_buffer("rate_logit", rate_logit, persistent=False)
        if self.kind == "ema":
            self.register_buffer("alpha", rates, persistent=False)
        elif self.kind == "learned":
            self.alpha_logit = nn.Parameter(torch.empty(S, D))
        else:
            self.alpha_down = nn.Linear(D, config.selective_rank, bias=False)
            self.alpha_up = nn.Linear(config.selective_rank, S * D)
        self.num_traces = S

    def write_rates(self, u: torch.Tensor) -> torch.Tensor:
        """``(S,)``, ``(S, D)`` or ``(B, T, S, D)`` write rates for input ``u`` of shape (B, T, D)."""
        if self.kind == "ema":
            return self.alpha
        acc = accumulation_dtype(u.dtype)  # the traces' dtype: float32, or float64 in a float64 model
        if self.kind == "learned":
            return torch.sigmoid(self.alpha_logit.to(acc)).clamp(max=_MAX_RATE)
        logits = self.alpha_up(self.alpha_down(u)).to(acc)
        return torch.sigmoid(logits.unflatten(-1, (self.num_traces, -1))).clamp(max=_MAX_RATE)

    def forward(self, u: torch.Tensor, state: dict[str, torch.Tensor] | None) -> torch.Tensor:
        """Past traces ``h_{t-1}`` for every position, ``(B, T, S, D)`` in ``u``'s dtype.

        ``state`` (a decoding state, updated in place) holds ``"traces"``: ``h_{T-1}`` after the last
        consumed token, in the traces' accumulation dtype (float32, or float64 for float64 ``u``).
        """
        alpha = self.write_rates(u)
        B, T, D = u.shape
        h0 = state.get("traces") if state is not None else None
        if h0 is None:
            h0 = u.new_zeros(B, self.num_traces, D, dtype=accumulation_dtype(u.dtype))
        if T == 1:  # decoding: the one-step update
            h_last = ema_step(u[:, 0], alpha[:, 0] if alpha.dim() == 4 else alpha, h0)
            h_prev = h0[:, None]
        else:
            traces, h_last = ema_traces(u, alpha, h0)
            h_prev = torch.cat([h0[:, None], traces[:, :-1]], 1)
        if state is not None:
            state["traces"] = h_last
        return h_prev.to(u.dtype)


class ResidualProjection(nn.Linear):
    """A linear map whose output is added to the residual stream (the context mix, the FFN's down map).

    Its own class so that initialisation can find it: GPT-2's init scales these weights by
    ``1 / sqrt(2 * num_hidden_layers)``, two residual additions per block.
    """


class SparseFFN(nn.Module):
    """GELU FFN whose hidden activation keeps only its top-k units per token."""

    def __init__(self, config: SPENConfig) -> None:
        super().__init__()
        self.up = nn.Linear(config.hidden_size, config.intermediate_size)
        self.down = ResidualProjection(config.intermediate_size, config.hidden_size)
        self.k = config.ffn_topk

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(x), approximate="tanh")
        if self.k < h.shape[-1]:
            # Keep the k largest units: a mask at the k-th largest value equals gathering the top-k
            # indices and scattering them into zeros (units tied with the k-th value aside: all are
            # kept). As fast at tiny widths, a 1.46x faster forward at the 130M FFN's shape
            # (benchmarks/bench_ffn.py); the selection itself (topk) is the cost. No gradient flows
            # through the threshold, as none flowed through the indices.
            threshold = h.detach().topk(self.k, dim=-1).values[..., -1:]
            h = h * (h >= threshold)
        return self.down(h)


class SPENBlock(nn.Module):
    """One SPEN block: two sublayers, the context mix and the sparse FFN, each read from the residual stream.

    :meth:`forward` is the ordinary residual sum; :meth:`context` and :meth:`feed_forward` are the two
    sublayers alone (what they add to the stream), for Attention Residuals (``residuals.py``).
    """

    def __init__(self, config: SPENConfig, layer_idx: int) -> None:
        super().__init__()
        D, S = config.hidden_size, config.num_traces
        self.layer_idx = layer_idx
        self.ln_1 = nn.LayerNorm(D, eps=config.layer_norm_epsilon)
        if config.mixer == "mamba":
            self.mixer = MambaMixer(config)
        else:
            self.traces = SelectiveSSMTraces(config) if config.trace == "selective_ssm" else SPENTraces(config)
            self.predictor = build_predictor(config)
            self.mix = ResidualProjection((2 + S) * D, D)
        self.ln_2 = nn.LayerNorm(D, eps=config.layer_norm_epsilon)
        self.ffn = SparseFFN(config)
        if config.residual == "attention":
            self.mix_input = DepthAttention(D, config.layer_norm_epsilon)
            self.ffn_input = DepthAttention(D, config.layer_norm_epsilon)

    def context(
        self, x: torch.Tensor, valid: torch.Tensor | None, state: dict[str, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The context mix ``c_t`` for sublayer input ``x`` and each row's summed prediction error ``(B,)``."""
        u = self.ln_1(x)
        if valid is not None:
            # Padded positions enter the traces as zeros: with traces starting at zero, left
            # padding then leaves every trace exactly as if the padding were absent.
            u = u * valid[..., None].to(u.dtype)
        if not hasattr(self, "traces"):  # mixer="mamba": no predictor, so no prediction error
            return self.mixer(u, valid, state), u.new_zeros(u.shape[0], dtype=torch.float32)
        h_prev = self.traces(u, state)
        x_hat = self.predictor(u, h_prev, valid, state)
        e = u - x_hat
        c = self.mix(torch.cat([u, e, h_prev.flatten(-2).to(u.dtype)], -1))
        return c, _prediction_error(u, x_hat, valid)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The sparse FFN's output for sublayer input ``x``."""
        return self.ffn(self.ln_2(x))

    def forward(
        self, x: torch.Tensor, valid: torch.Tensor | None, state: dict[str, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The block output with residual adds and each row's ``sum_t ||u_t - x̂_t||^2 / D`` ``(B,)``."""
        c, prediction_error = self.context(x, valid, state)
        x = x + c
        return x + self.feed_forward(x), prediction_error


class SPENPreTrainedModel(PreTrainedModel):
    config_class = SPENConfig
    config: SPENConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = ["SPENBlock"]
    _is_stateful = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # transformers' init functions skip tensors that from_pretrained already loaded.
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            if isinstance(module, ResidualProjection):
                # GPT-2's scaled init of the two residual projections per block. It lives on the Linear itself:
                # transformers skips _init_weights for custom-code modules without tensors of their own
                # (such as SPENBlock), so a block-level rule would never run.
                std = std / math.sqrt(2 * self.config.num_hidden_layers)
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        if isinstance(module, SPENTraces):
            # Non-persistent buffers are not in the checkpoint, so they are (re)written here too: after a
            # build on the meta device they hold whatever memory to_empty() gave them.
            rates, rate_logit = _rate_buffers(self.config)
            init.copy_(module.rate_logit, rate_logit)
            if module.kind == "ema":
                init.copy_(module.alpha, rates)
            elif module.kind == "learned":
                init.copy_(module.alpha_logit, module.rate_logit[:, None].expand_as(module.alpha_logit))
            elif module.kind == "selective":
                # Start as the fixed EMA: the input term only gradually moves the rates.
                D = module.alpha_up.out_features // module.num_traces
                init.copy_(module.alpha_up.bias, module.rate_logit.repeat_interleave(D))
        if isinstance(module, SelectiveSSMTraces):
            D, N = module.A_log.shape
            # S4D-real: A[d, n] = -(n + 1), the same for every channel.
            init.copy_(module.A_log, torch.log(torch.arange(1, N + 1, dtype=torch.float32)).expand(D, N))
            # Mamba's dt init: log-uniform over channels, here over dt_init_range(trace_rates), with the
            # bias the inverse softplus of dt. Evenly spaced quantiles rather than random draws: the init
            # is the same whatever the seed, as the other traces' rates are.
            lo, hi = dt_init_range(self.config.trace_rates)
            q = (torch.arange(D, dtype=torch.float64) + 0.5) / D
            dt = torch.exp(math.log(lo) + q * (math.log(hi) - math.log(lo)))
            init.copy_(module.dt_up.bias, (dt + torch.log(-torch.expm1(-dt))).float())
        if isinstance(module, MambaMixer):
            module.reset_mamba_parameters()  # after its Linear children's normal init: Mamba's own, as transformers'
        if isinstance(module, DepthAttention):
            init.zeros_(module.query)
        if hasattr(module, "slot_embedding"):
            init.normal_(module.slot_embedding, mean=0.0, std=std)


def _validate_inputs(
    config: SPENConfig,
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    past: int,
) -> None:
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("SPEN: pass exactly one of input_ids and inputs_embeds")
    if input_ids is not None:
        if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
            raise ValueError(f"SPEN: input_ids must be an integer tensor, got dtype {input_ids.dtype}")
        if input_ids.dim() != 2:
            raise ValueError(f"SPEN: input_ids must have shape (batch, seq_len), got {tuple(input_ids.shape)}")
        B, T = input_ids.shape
        if T > 0 and B > 0:
            lo, hi = int(input_ids.min()), int(input_ids.max())
            if lo < 0 or hi >= config.vocab_size:
                raise ValueError(
                    f"SPEN: input_ids must lie in [0, vocab_size={config.vocab_size}), got values in [{lo}, {hi}]"
                )
    else:
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.hidden_size:
            raise ValueError(
                f"SPEN: inputs_embeds must have shape (batch, seq_len, {config.hidden_size}), "
                f"got {tuple(inputs_embeds.shape)}"
            )
        B, T = inputs_embeds.shape[:2]
    if T == 0:
        raise ValueError("SPEN: empty sequence (seq_len == 0)")
    if attention_mask is not None:
        if attention_mask.dim() != 2 or attention_mask.shape[0] != B or attention_mask.shape[1] not in (T, past + T):
            expected = f"({B}, {T})" if past == 0 else f"({B}, {T}) or ({B}, {past + T})"
            raise ValueError(
                f"SPEN: attention_mask must have shape {expected}, got {tuple(attention_mask.shape)}"
            )


class SPENModel(SPENPreTrainedModel):
    """The SPEN trunk: token embeddings, blocks, final LayerNorm. No position embeddings."""

    def __init__(self, config: SPENConfig) -> None:
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.h = nn.ModuleList(SPENBlock(config, i) for i in range(config.num_hidden_layers))
        if config.residual == "attention":
            # The pseudo-query of the final output over all 2 L + 1 sources (the blocks hold the others).
            self.final_input = DepthAttention(config.hidden_size, config.layer_norm_epsilon)
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.wte

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.wte = value

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        cache: SPENState | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        past_key_values: Any = None,
        output_attentions: bool | None = None,
        **kwargs: Any,
    ) -> SPENModelOutputWithPast | tuple:
        r"""
        Args:
            input_ids: token ids ``(batch, seq_len)``.
            attention_mask: 1 for real tokens, 0 for padding, ``(batch, seq_len)`` or, when continuing
                from a state, ``(batch, past + seq_len)``. Padding must be on the left (or at the
                end, where it affects nothing before it).
            inputs_embeds: ``(batch, seq_len, hidden_size)`` instead of ``input_ids`` (soft prompts).
            cache: an :class:`SPENState` to continue from (``past_key_values`` is accepted too).
                Any other object (e.g. a cache that generate() built) is treated as empty.
            use_cache: return the updated state.
            output_hidden_states: return ``hidden_states`` (``num_hidden_layers + 1`` tensors, the
                embeddings first); ``None`` reads ``config.output_hidden_states``.
            return_dict: ``False`` returns the output's non-``None`` fields as a tuple, in their
                documented order; ``None`` reads ``config.return_dict``.
            output_attentions: accepted for the common API; SPEN has no attention over tokens
                (``attentions`` is always ``None``).

        The base model has no LM head and computes no loss: passing ``labels`` is an error (use
        :class:`SPENForCausalLM` to train, or add ``prediction_loss`` to a loss of your own head).
        """
        if "labels" in kwargs:
            raise TypeError("SPENModel takes no labels (it has no LM head): train SPENForCausalLM instead")
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        state = cache if cache is not None else past_key_values
        if not isinstance(state, SPENState):
            state = None
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        past = state.seen_tokens if state is not None else 0
        _validate_inputs(self.config, input_ids, inputs_embeds, attention_mask, past)
        if use_cache and state is None:
            state = SPENState(self.config.num_hidden_layers)
        valid = None
        if attention_mask is not None:
            valid = attention_mask[:, -(input_ids if input_ids is not None else inputs_embeds).shape[1]:].bool()
            if bool(valid.all()):
                valid = None  # nothing to mask: take the cheaper path
        x = self.wte(input_ids) if inputs_embeds is None else inputs_embeds
        hidden_states = [x] if output_hidden_states else None
        prediction_errors: list[torch.Tensor] = []  # per block, each row's summed error (B,)
        if self.config.residual == "attention":
            layer_states = state if use_cache else None
            x = self._attention_residual_blocks(x, valid, layer_states, prediction_errors, hidden_states)
        else:
            for i, block in enumerate(self.h):
                x, prediction_error = block(x, valid, state.layers[i] if use_cache else None)
                prediction_errors.append(prediction_error)
                if output_hidden_states:
                    hidden_states.append(x)
        x = self.ln_f(x)
        if output_hidden_states:
            hidden_states[-1] = x
        if use_cache:
            state.seen_tokens += x.shape[1]
        # Each row's mean over its own positions (per-row outputs never depend on the batch), and the
        # training loss P: every non-padded token of the batch weighs the same.
        errors = torch.stack(prediction_errors, 1)  # (B, L)
        positions = errors.new_full((errors.shape[0],), x.shape[1]) if valid is None else valid.sum(1).to(errors)
        prediction_loss = (errors.sum(0) / positions.sum().clamp(min=1)).mean()
        out = SPENModelOutputWithPast(
            last_hidden_state=x,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            prediction_loss=prediction_loss,
            prediction_losses=errors / positions.clamp(min=1)[:, None],
            **{_CACHE_KEY: state if use_cache else None},
        )
        return out if return_dict else out.to_tuple()

    def _attention_residual_blocks(
        self,
        x: torch.Tensor,
        valid: torch.Tensor | None,
        state: SPENState | None,
        prediction_errors: list[torch.Tensor],
        hidden_states: list[torch.Tensor] | None,
    ) -> torch.Tensor:
        """The blocks with Attention Residuals (``residuals.py``); returns the final output before ``ln_f``.

        The sources of each sublayer: the embedding, then every earlier sublayer output; with
        ``residual_block_size = k``, the sums of the completed groups of ``k`` sublayers and the partial
        sum of the current group instead (Block AttnRes). ``hidden_states`` (when given) gets the input of
        each block's first sublayer after the first, then the final output: the stream as the next reader
        sees it, as with residual adds.
        """
        size = self.config.residual_block_size or 1
        done = [x]  # the embedding, then each completed group's sum, in the embedding's dtype
        partial: torch.Tensor | None = None  # the sum of the current group's outputs so far
        written = 0

        def sources() -> torch.Tensor:
            return torch.stack(done if partial is None else [*done, partial], -2)

        def write(out: torch.Tensor) -> None:
            nonlocal partial, written
            out = out.to(x.dtype)
            partial = out if partial is None else partial + out
            written += 1
            if written % size == 0:
                done.append(partial)
                partial = None

        for i, block in enumerate(self.h):
            x_in = block.mix_input(sources())
            if hidden_states is not None and i > 0:
                hidden_states.append(x_in)
            c, prediction_error = block.context(x_in, valid, state.layers[i] if state is not None else None)
            prediction_errors.append(prediction_error)
            write(c)
            write(block.feed_forward(block.ffn_input(sources())))
        out = self.final_input(sources())
        if hidden_states is not None:
            hidden_states.append(out)
        return out


class SPENForCausalLM(SPENPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.wte.weight"}

    def __init__(self, config: SPENConfig) -> None:
        super().__init__(config)
        self.model = SPENModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.wte

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.wte = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # SPEN builds its own recurrent state; a DynamicCache would only be thrown away.
        return False

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        cache: SPENState | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        past_key_values: Any = None,
        output_attentions: bool | None = None,
        **kwargs: Any,
    ) -> SPENCausalLMOutputWithPast | tuple:
        r"""
        Args:
            labels: targets ``(batch, seq_len)`` for the next-token loss (shifted inside, as in
                GPT-2); -100 is ignored. ``loss`` is that cross-entropy plus
                ``config.prediction_loss_weight`` times the prediction loss (see the module docstring).
            logits_to_keep: if an int ``n > 0``, compute logits for the last ``n`` positions only.
            return_dict: ``False`` returns the output's non-``None`` fields as a tuple, in their
                documented order (:class:`SPENCausalLMOutputWithPast`).

        The other arguments are :meth:`SPENModel.forward`'s. Further keywords go to the loss function
        (e.g. ``num_items_in_batch``) when ``labels`` are given, and are ignored otherwise.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            cache=cache if cache is not None else past_key_values,
            use_cache=use_cache,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        x = out.last_hidden_state
        if isinstance(logits_to_keep, int):
            x = x[:, -logits_to_keep:] if logits_to_keep > 0 else x
        else:
            x = x[:, logits_to_keep]
        logits = self.lm_head(x)
        loss = lm_loss = None
        if labels is not None:
            lm_loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
            loss = lm_loss
            if self.config.prediction_loss_weight:
                loss = lm_loss + self.config.prediction_loss_weight * out.prediction_loss
        result = SPENCausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            hidden_states=out.hidden_states,
            lm_loss=lm_loss,
            prediction_loss=out.prediction_loss,
            prediction_losses=out.prediction_losses,
            **{_CACHE_KEY: getattr(out, _CACHE_KEY)},
        )
        return result if return_dict else result.to_tuple()

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.LongTensor,
        next_sequence_length: int | None = None,
        cache: SPENState | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        is_first_iteration: bool | None = False,
        use_cache: bool = True,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """The next forward's inputs in generate(): only what the state has not consumed yet.

        The first call (``is_first_iteration``) with ``inputs_embeds`` feeds the embeddings past the state: as
        in every transformers model they are the whole sequence's (a generation continued from a state passes
        the old embeddings with the new). Decoding after it feeds the last ``next_sequence_length`` tokens
        (one): after a prompt given as embeddings, ``input_ids`` holds only the generated tokens. Otherwise
        ``input_ids`` past the state (the whole sequence without one). Every other keyword, e.g. what
        callers pass through ``generate(**kwargs)``, goes on to :meth:`forward`.
        """
        state = cache if cache is not None else kwargs.get("past_key_values")
        kwargs.pop("past_key_values", None)
        if not isinstance(state, SPENState):
            state = None
        past = state.seen_tokens if state is not None else 0
        inputs: dict[str, Any] = {"attention_mask": attention_mask, "use_cache": use_cache, _CACHE_KEY: state}
        if inputs_embeds is not None and is_first_iteration:
            inputs["inputs_embeds"] = inputs_embeds[:, past:]
        elif past > 0 and next_sequence_length is not None:
            inputs["input_ids"] = input_ids[:, -next_sequence_length:]
        else:
            inputs["input_ids"] = input_ids[:, past:]
        # As transformers' own prepare_inputs_for_generation: labels never; return_dict is generate()'s own.
        for key, value in kwargs.items():
            if key not in inputs and key not in ("labels", "return_dict"):
                inputs[key] = value
        return inputs


__all__ = [
    "SPENState",
    "SPENModelOutputWithPast",
    "SPENCausalLMOutputWithPast",
    "SPENModel",
    "SPENForCausalLM",
    "SPENPreTrainedModel",
]
