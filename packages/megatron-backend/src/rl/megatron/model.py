"""A megatron-core `GPTModel` from a Hugging Face config (Llama, Qwen2/2.5, Qwen3, Qwen3-MoE).

`transformer_config` maps the HF config's shapes and choices to megatron-core's
`TransformerConfig` (RMSNorm, SwiGLU, rotary base and Llama 3's rotary scaling, grouped
query attention, Qwen2's QKV bias, Qwen3's QK norm, the MoE router, tied embeddings); `build_gpt_model` builds the model with the
local layer spec or, when TransformerEngine is installed (`rl-megatron[te]`), its spec.
The weights then come from `rl.megatron.layouts.converter_for(hf_config, spec=...)`, whose
names are this model's state-dict names (checked against it in the tests, with the
converted HF weights giving the HF model's logits).
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any, Literal

import torch

SUPPORTED = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe")
Spec = Literal["auto", "local", "te"]


def _rope_theta(config: Any) -> float:
    rope = _rope_parameters(config)
    return float(rope.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def _rope_parameters(config: Any) -> dict[str, Any]:
    return dict(
        getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    )


def check_rope_scaling(config: Any) -> str:
    """The HF config's rotary scaling: "default" (none) or "llama3" (Llama 3.1 / 3.2,
    applied to megatron's frequencies by `build_gpt_model`); any other type is refused,
    since the model would silently compute other positions than the HF one."""
    kind = _rope_parameters(config).get("rope_type") or "default"
    if kind not in ("default", "llama3"):
        raise ValueError(
            f"rope_scaling of type {kind!r} is not supported by rl-megatron yet (supported: "
            "none, llama3); train this model with the FSDP strategy"
        )
    return str(kind)


def _scale_rotary(model: torch.nn.Module, config: Any) -> None:
    """Llama 3's frequency scaling, computed by transformers itself (low frequencies slowed
    by `factor`, a smooth ramp between low_freq_factor and high_freq_factor of the
    original context), so the positions are exactly the HF model's."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    rotary = model.rotary_pos_emb
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS["llama3"](config, rotary.inv_freq.device)
    if attention_factor != 1.0:
        raise ValueError(f"llama3 rope scaling with attention factor {attention_factor} != 1")
    rotary.inv_freq = inv_freq.to(rotary.inv_freq.dtype)


def _moe(config: Any) -> dict[str, Any]:
    if config.model_type != "qwen3_moe":
        return {}
    return dict(
        num_moe_experts=config.num_experts,
        moe_router_topk=config.num_experts_per_tok,
        moe_ffn_hidden_size=config.moe_intermediate_size,
        moe_router_pre_softmax=not config.norm_topk_prob,
        moe_aux_loss_coeff=0.0,
        moe_grouped_gemm=False,
    )


def transformer_config(
    config: Any, params_dtype: torch.dtype = torch.float32, **overrides: Any
) -> Any:
    """megatron-core's TransformerConfig for the HF `config` (no fused kernels: they need
    CUDA; `overrides` sets parallelism, recompute, MoE dispatch and the like)."""
    if config.model_type not in SUPPORTED:
        raise ValueError(
            f"model_type {config.model_type!r} is not supported by rl-megatron yet "
            f"(supported: {', '.join(SUPPORTED)})"
        )
    check_rope_scaling(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.transformer import TransformerConfig

    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    options: dict[str, Any] = dict(
        num_layers=config.num_hidden_layers,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        num_query_groups=config.num_key_value_heads,
        kv_channels=head_dim,
        ffn_hidden_size=config.intermediate_size,
        normalization="RMSNorm",
        layernorm_epsilon=config.rms_norm_eps,
        gated_linear_unit=True,
        activation_func=torch.nn.functional.silu,
        add_bias_linear=False,
        add_qkv_bias=config.model_type == "qwen2",
        qk_layernorm=config.model_type in ("qwen3", "qwen3_moe"),
        hidden_dropout=0.0,
        attention_dropout=0.0,
        params_dtype=params_dtype,
        use_cpu_initialization=not torch.cuda.is_available(),
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        gradient_accumulation_fusion=False,
        apply_rope_fusion=False,
        **_moe(config),
    )
    options.update(overrides)
    return TransformerConfig(**options)


def resolve_spec(spec: Spec) -> Literal["local", "te"]:
    """`auto`: TransformerEngine's spec when it is installed, the local spec otherwise."""
    if spec != "auto":
        return spec
    return "te" if importlib.util.find_spec("transformer_engine") is not None else "local"


class ValueHead(torch.nn.Linear):
    """The critic's output layer: hidden state -> V(s), one output with a bias (Hugging
    Face's token-classification `score` with `num_labels = 1`), replicated on every TP
    rank (its input, the final norm's output, is whole on each)."""

    def __init__(self, hidden_size: int, dtype: torch.dtype) -> None:
        super().__init__(hidden_size, 1, bias=True, dtype=dtype)


def build_gpt_model(
    config: Any,
    spec: Spec = "auto",
    params_dtype: torch.dtype = torch.float32,
    pre_process: bool = True,
    post_process: bool = True,
    vp_stage: int | None = None,
    value_head: bool = False,
    **overrides: Any,
) -> torch.nn.Module:
    """A GPTModel with the HF `config`'s shapes (random weights: load them with
    `rl.megatron.layouts.converter_for(config, spec=resolve_spec(spec)).from_hf(...)`).

    `pre_process` / `post_process`: whether this pipeline stage holds the embedding / the
    output layer; `vp_stage`: its virtual pipeline chunk; `value_head`: a critic, whose
    output layer is a `ValueHead` (no vocabulary projection, embeddings never tied). The
    local spec's attention is `CausalCoreAttention` (packed sequences without
    TransformerEngine) and its norms `LocalRMSNorm` (sequence parallelism without
    TransformerEngine)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.models.gpt import GPTModel, gpt_layer_specs

    from megatron.core.transformer.transformer_block import (
        TransformerBlockSubmodules,
        get_num_layers_to_build,
    )
    from rl.megatron.attention import CausalCoreAttention
    from rl.megatron.compat import fix_router_without_te
    from rl.megatron.norm import LocalRMSNorm

    tc = transformer_config(config, params_dtype, **overrides)
    layer_spec = {
        "local": gpt_layer_specs.get_gpt_layer_local_spec,
        "te": gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec,
    }[resolve_spec(spec)]
    if resolve_spec(spec) == "local":
        layers = layer_spec(
            num_experts=tc.num_moe_experts, qk_layernorm=tc.qk_layernorm, normalization="RMSNorm"
        )
        fix_router_without_te()
        layers.submodules.input_layernorm = LocalRMSNorm
        layers.submodules.pre_mlp_layernorm = LocalRMSNorm
        attention = layers.submodules.self_attention.submodules
        attention.core_attention = CausalCoreAttention
        if tc.qk_layernorm:
            attention.q_layernorm = attention.k_layernorm = LocalRMSNorm
        layers = TransformerBlockSubmodules(
            layer_specs=[layers] * get_num_layers_to_build(tc, vp_stage), layer_norm=LocalRMSNorm
        )
    else:
        layers = layer_spec(num_experts=tc.num_moe_experts, qk_layernorm=tc.qk_layernorm)
    model = GPTModel(
        tc,
        layers,
        vocab_size=config.vocab_size,
        max_sequence_length=config.max_position_embeddings,
        position_embedding_type="rope",
        rotary_base=_rope_theta(config),
        # tie_word_embeddings: one tensor on a single stage; with pipeline stages, the last
        # one's output layer is a copy megatron keeps equal (its gradient all-reduced with
        # the embedding's over the embedding group)
        share_embeddings_and_output_weights=config.tie_word_embeddings and not value_head,
        pre_process=pre_process,
        post_process=post_process,
        vp_stage=vp_stage,
    )
    if check_rope_scaling(config) == "llama3":
        _scale_rotary(model, config)
    if value_head and post_process:
        model.output_layer = ValueHead(config.hidden_size, params_dtype)
    return model
