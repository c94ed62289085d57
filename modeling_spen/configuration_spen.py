"""SPEN model configuration."""

from __future__ import annotations

import math
from collections.abc import Sequence

from transformers import PretrainedConfig

PREDICTORS = ("none", "linear", "linear_attention", "softmax_attention")
PREDICTOR_SCOPES = ("sequence", "state")
TRACES = ("ema", "learned", "selective", "selective_ssm")
RESIDUALS = ("add", "attention")
MIXERS = ("trace", "mamba")
MAMBA_READS = ("current", "lagged")
# The paper's fast, medium and slow write rates.
DEFAULT_TRACE_RATES = (0.5, 0.1, 0.02)


def log_uniform_rates(n: int, fastest: float = 0.5, slowest: float = 0.02) -> list[float]:
    """``n`` write rates spread log-uniformly from ``fastest`` down to ``slowest`` (both included).

    ``log_uniform_rates(3)`` is the paper's ``[0.5, 0.1, 0.02]`` (a factor 5 apart); larger ``n`` fill
    the same range more densely: a fixed-rate bank of ``n`` traces keeps ``n x D`` numbers per layer.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"log_uniform_rates: n must be a positive integer, got {n!r}")
    if not 0.0 < slowest <= fastest < 1.0:
        raise ValueError(f"log_uniform_rates: need 0 < slowest <= fastest < 1, got {slowest!r} and {fastest!r}")
    if n == 1:
        return [float(fastest)]
    if slowest == fastest:
        raise ValueError("log_uniform_rates: n > 1 distinct rates need slowest < fastest")
    step = (math.log(slowest) - math.log(fastest)) / (n - 1)
    return [math.exp(math.log(fastest) + i * step) for i in range(n)]


class SPENConfig(PretrainedConfig):
    r"""Configuration of a SPEN (Sparse Predictive Equilibrium Network) language model.

    A SPEN block has no attention over tokens: every bit of temporal context enters through
    EMA traces of the block input, ``h_t = (1 - a) h_{t-1} + a x_t``, one per write rate ``a``.
    There are no position embeddings: the traces themselves carry order.

    Args:
        vocab_size (`int`, defaults to 50257): vocabulary size (GPT-2's by default).
        hidden_size (`int`, defaults to 768): model width ``d_model``.
        num_hidden_layers (`int`, defaults to 12): number of SPEN blocks.
        intermediate_size (`int`, defaults to 2048): hidden width of the sparse FFN. 2048 rather
            than GPT-2's 3072 so that 12 blocks at width 768 total the paper's ~130M parameters
            (each block also carries a predictor and a context mix).
        ffn_topk_fraction (`float`, defaults to 0.06): fraction of FFN hidden units kept per
            token (top-k of the activations; the paper's 6% active), in (0, 1].
        trace (`str`, defaults to ``"ema"``): how the write rates are set.
            ``"ema"``: the fixed ``trace_rates`` (the paper); ``"learned"``: per-channel rates
            learned but independent of the input (initialised at ``trace_rates``);
            ``"selective"``: input-dependent per-channel rates ``a_t = sigmoid(W x_t + b)``
            (a gated recurrence in the style of Mamba/GLA; ``b`` initialised at ``trace_rates``);
            ``"selective_ssm"``: a Mamba (S6) selective state space per channel, ``trace_state_size``
            numbers per channel written with an input-dependent step ``dt_t = softplus(W x_t + b)``
            (``W`` of rank ``selective_rank``) and key ``B_t``, ``A`` diagonal with S4D-real init
            ``A[d, n] = -(n + 1)`` (see ``traces_ssm.py``). It fills the ``len(trace_rates)`` slots
            that the predictor and the context mix read with ``len(trace_rates)`` input-dependent read
            vectors ``C_t^(s)``: slot ``s`` at position ``t`` is the readout ``y_{t-1}^(s)`` of the
            previous step, strictly past as the other traces' ``h_{t-1}``. ``trace_rates`` set the
            initial steps: ``dt`` is log-uniform over channels so that each channel's slowest mode
            has a write rate between the slowest and the fastest of ``trace_rates``.
        trace_rates (`Sequence[float]`, defaults to ``(0.5, 0.1, 0.02)``): write rates ``a`` of the
            traces (fast, medium, slow), distinct, each in (0, 1): ``a`` is the weight of the new
            input, so 0.5 is the fast trace. Configs saved before the rename call this field
            ``trace_decays``; that name is still accepted. ``None`` gives the paper's three rates, or
            ``trace_num_rates`` rates when that is set.
        trace_num_rates (`int`, *optional*): ask for this many rates spread log-uniformly from 0.5
            down to 0.02 (``log_uniform_rates``; 3 gives the paper's rates) instead of listing
            ``trace_rates``: a bank of N fixed rates keeps N x D numbers per layer, the state-size
            control for ``selective_ssm`` (D x ``trace_state_size``). Give it or ``trace_rates``, not
            both; it is stored resolved, as ``trace_rates``.
        trace_state_size (`int`, defaults to 16): numbers per channel of the ``selective_ssm`` state
            (Mamba's ``d_state``); unused by the other traces.
        selective_rank (`int`, defaults to 48): rank of the low-rank map ``W`` of the ``selective``
            trace's rates and of the ``selective_ssm`` trace's step ``dt`` (as Mamba's ``dt_rank``);
            unused by the other traces.
        predictor (`str`, defaults to ``"linear"``): reader of the past traces that predicts
            ``x_t``: ``"none"`` (``x̂_t = 0``, so the error is the input itself: the control arm),
            ``"linear"``, ``"linear_attention"`` or ``"softmax_attention"``.
        predictor_scope (`str`, defaults to ``"sequence"``): what the attention predictors attend
            over. ``"sequence"``: the trace states of every past position (the paper's causal
            attention; its cache grows with the sequence). ``"state"``: only the timescale slots
            of the current past state ``h_{t-1}`` (the reader sees nothing but the state).
            Ignored by ``"none"`` and ``"linear"``.
        prediction_loss_weight (`float`, defaults to 1.0): weight ``λ`` of the prediction loss
            added to the next-token loss when ``labels`` are given: ``loss = CE + λ * P`` with
            ``P`` the mean over blocks of ``mean_t ||u_t - x̂_t||^2 / D`` (``u_t`` the block's
            normalised input, padded positions left out). The target ``u_t`` is detached: the loss
            trains the predictor (and, through ``h_{t-1}``, what it reads) to predict ``u_t``, and
            never moves ``u_t`` toward the prediction, which would let the model shrink its inputs
            to make prediction trivial. Dividing by ``D`` keeps ``λ`` meaningful across widths.
            Without this loss nothing asks ``x̂_t`` to predict anything, and a linear predictor is an
            exact reparametrisation of the context mix (``e_t = u_t - x̂_t`` enters it linearly).
            ``>= 0``; 0 turns the loss off. The default 1.0 comes from a declared experiment
            (docs/notes/issue14-phase1.md): on the tiny config, 5 seeds, weights 0.1 and 1 both gave a
            lower validation loss than 0 (by 0.054 and 0.036 nats), and the rule declared before the
            runs picks the largest weight that is not worse than 0.
        residual (`str`, defaults to ``"add"``): how sublayer inputs are formed from the residual stream.
            ``"add"``: the ordinary sum, ``x_{l+1} = x_l + f_l(x_l)`` (GPT-2). ``"attention"``: Attention
            Residuals (Kimi Team, arXiv 2603.15031): each of the ``2 L`` sublayers (context mix, FFN)
            takes ``sum_i alpha_i v_i`` over ``v_0`` = the token embedding and ``v_i`` = every earlier
            sublayer output, ``alpha = softmax_i(w . RMSNorm(v_i))`` with one learned pseudo-query ``w``
            per sublayer, and one more for the final output (before the final LayerNorm). The
            pseudo-queries start at zero, so every sublayer starts as the uniform average of its sources.
            Per token, so the decoding state is unchanged. See ``residuals.py``.
        residual_block_size (`int`, *optional*): with ``residual="attention"``, Block Attention Residuals:
            the ``2 L`` sublayers are grouped into depth blocks of this many consecutive sublayers, summed
            inside a block as ordinary residuals, and each sublayer attends over the embedding, the sums
            of the completed blocks and the partial sum of its own block (O(blocks) sources instead of
            O(layers)). ``None`` (the default) and 1 are the full variant.
        mixer (`str`, defaults to ``"trace"``): the block's context sublayer. ``"trace"``: the traces, the
            predictor and the context mix above (the paper's SPEN block). ``"mamba"``: Mamba's mixer (in-projection,
            causal depthwise conv, S6 with the current token's read ``y_t = C_t h_t + D c_t``, SiLU gate,
            out-projection; ``mixer_mamba.py``), with ``trace_state_size`` numbers per channel and
            ``selective_rank`` as its ``dt`` rank; the trace and predictor fields are then unused and the prediction
            loss is 0 (there is no predictor). The sparse FFN is the same either way.
        mamba_expand (`int`, defaults to 1): with ``mixer="mamba"``, the inner width ``E = mamba_expand * hidden_size``.
        mamba_conv_kernel (`int`, defaults to 4): with ``mixer="mamba"``, the causal conv's kernel (1: no conv over
            time, an ablation).
        mamba_read (`str`, defaults to ``"current"``): with ``mixer="mamba"``, ``"current"`` reads ``C_t h_t`` (Mamba);
            ``"lagged"`` reads the previous step's readout ``C_{t-1} h_{t-1}`` (an ablation).
        mamba_gate (`bool`, defaults to True): with ``mixer="mamba"``, the SiLU gate ``z``; False drops it (an
            ablation).
        num_attention_heads (`int`, defaults to 12): heads of the attention predictors; must
            divide ``hidden_size`` when an attention predictor is used.
        layer_norm_epsilon (`float`, defaults to 1e-5): LayerNorm epsilon.
        initializer_range (`float`, defaults to 0.02): std of the normal weight init.
        max_position_embeddings (`int`, defaults to 1024): the training context length. SPEN has
            no position embeddings and no hard limit; tools such as lm-eval read this field.
        use_cache (`bool`, defaults to True): return the recurrent state from ``forward``.
    """

    model_type = "spen"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]

    def __init__(
        self,
        vocab_size: int = 50257,
        hidden_size: int = 768,
        num_hidden_layers: int = 12,
        intermediate_size: int = 2048,
        ffn_topk_fraction: float = 0.06,
        trace: str = "ema",
        trace_rates: Sequence[float] | None = None,
        trace_num_rates: int | None = None,
        trace_state_size: int = 16,
        selective_rank: int = 48,
        predictor: str = "linear",
        predictor_scope: str = "sequence",
        prediction_loss_weight: float = 1.0,
        residual: str = "add",
        residual_block_size: int | None = None,
        mixer: str = "trace",
        mamba_expand: int = 1,
        mamba_conv_kernel: int = 4,
        mamba_read: str = "current",
        mamba_gate: bool = True,
        num_attention_heads: int = 12,
        layer_norm_epsilon: float = 1e-5,
        initializer_range: float = 0.02,
        max_position_embeddings: int = 1024,
        use_cache: bool = True,
        bos_token_id: int | None = 50256,
        eos_token_id: int | None = 50256,
        pad_token_id: int | None = None,
        tie_word_embeddings: bool = True,
        **kwargs,
    ) -> None:
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.intermediate_size = intermediate_size
        self.ffn_topk_fraction = ffn_topk_fraction
        self.trace = trace
        # The field's old name, kept readable so that configs saved before the rename still load.
        legacy = kwargs.pop("trace_decays", None)
        if legacy is not None and trace_rates is not None:
            raise ValueError("SPENConfig: give trace_rates or its old name trace_decays, not both")
        rates_name = "trace_decays" if legacy is not None else "trace_rates"
        rates = legacy if legacy is not None else trace_rates
        if trace_num_rates is not None:
            if rates is not None:
                raise ValueError(f"SPENConfig.trace_num_rates: give it or {rates_name}, not both")
            if isinstance(trace_num_rates, bool) or not isinstance(trace_num_rates, int) or trace_num_rates < 1:
                raise ValueError(f"SPENConfig.trace_num_rates must be a positive integer, got {trace_num_rates!r}")
            rates = log_uniform_rates(trace_num_rates)
        rates = rates if rates is not None else DEFAULT_TRACE_RATES
        self.trace_rates = [float(a) for a in rates] if _is_sequence(rates) else rates
        self.trace_state_size = trace_state_size
        self.selective_rank = selective_rank
        self.predictor = predictor
        self.predictor_scope = predictor_scope
        self.prediction_loss_weight = prediction_loss_weight
        self.residual = residual
        self.residual_block_size = residual_block_size
        self.mixer = mixer
        self.mamba_expand = mamba_expand
        self.mamba_conv_kernel = mamba_conv_kernel
        self.mamba_read = mamba_read
        self.mamba_gate = mamba_gate
        self.num_attention_heads = num_attention_heads
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.max_position_embeddings = max_position_embeddings
        self.use_cache = use_cache
        self._validate(rates_name)
        super().__init__(
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            pad_token_id=pad_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )

    @property
    def num_traces(self) -> int:
        return len(self.trace_rates)

    @property
    def ffn_topk(self) -> int:
        """Number of FFN hidden units kept per token."""
        return max(1, round(self.ffn_topk_fraction * self.intermediate_size))

    def _validate(self, rates_name: str = "trace_rates") -> None:
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size", "selective_rank",
                     "trace_state_size",
                     "mamba_expand", "mamba_conv_kernel", "num_attention_heads", "max_position_embeddings"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"SPENConfig.{name} must be a positive integer, got {value!r}")
        if self.trace not in TRACES:
            raise ValueError(f"SPENConfig.trace must be one of {TRACES}, got {self.trace!r}")
        if self.mixer not in MIXERS:
            raise ValueError(f"SPENConfig.mixer must be one of {MIXERS}, got {self.mixer!r}")
        if self.mamba_read not in MAMBA_READS:
            raise ValueError(f"SPENConfig.mamba_read must be one of {MAMBA_READS}, got {self.mamba_read!r}")
        if not isinstance(self.mamba_gate, bool):
            raise ValueError(f"SPENConfig.mamba_gate must be true or false, got {self.mamba_gate!r}")
        if self.residual not in RESIDUALS:
            raise ValueError(f"SPENConfig.residual must be one of {RESIDUALS}, got {self.residual!r}")
        size = self.residual_block_size
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise ValueError(f"SPENConfig.residual_block_size must be a positive integer or None, got {size!r}")
            if self.residual != "attention":
                raise ValueError("SPENConfig.residual_block_size needs residual='attention'")
        if self.predictor not in PREDICTORS:
            raise ValueError(f"SPENConfig.predictor must be one of {PREDICTORS}, got {self.predictor!r}")
        if self.predictor_scope not in PREDICTOR_SCOPES:
            raise ValueError(
                f"SPENConfig.predictor_scope must be one of {PREDICTOR_SCOPES}, got {self.predictor_scope!r}"
            )
        rates = self.trace_rates
        if not _is_sequence(rates) or len(rates) == 0:
            raise ValueError(f"SPENConfig.{rates_name} must be a non-empty list of floats, got {rates!r}")
        if any(not 0.0 < a < 1.0 for a in rates):
            raise ValueError(f"SPENConfig.{rates_name} must each lie in (0, 1), got {rates!r}")
        if len(set(rates)) != len(rates):
            raise ValueError(f"SPENConfig.{rates_name} must be distinct, got {rates!r}")
        if not 0.0 < self.ffn_topk_fraction <= 1.0:
            raise ValueError(f"SPENConfig.ffn_topk_fraction must lie in (0, 1], got {self.ffn_topk_fraction!r}")
        weight = self.prediction_loss_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight < float("inf"):
            raise ValueError(f"SPENConfig.prediction_loss_weight must be a finite number >= 0, got {weight!r}")
        if self.predictor not in ("none", "linear") and self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"SPENConfig.num_attention_heads ({self.num_attention_heads}) must divide "
                f"hidden_size ({self.hidden_size}) for the {self.predictor} predictor"
            )
        if not self.layer_norm_epsilon > 0:
            raise ValueError(f"SPENConfig.layer_norm_epsilon must be > 0, got {self.layer_norm_epsilon!r}")
        if not self.initializer_range > 0:
            raise ValueError(f"SPENConfig.initializer_range must be > 0, got {self.initializer_range!r}")


def _is_sequence(value: object) -> bool:
    return isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    )
