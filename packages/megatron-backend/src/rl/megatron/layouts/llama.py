"""Llama (and Mistral) <-> megatron-core GPT: the dense decoder every other table builds on.

`spec` names where megatron keeps the two per-layer norms: `"local"` (the
local spec: `input_layernorm`, `pre_mlp_layernorm`) or `"te"` (the
Transformer Engine spec folds them into `linear_qkv.layer_norm_weight` and
`linear_fc1.layer_norm_weight`).
"""

from __future__ import annotations

from typing import Any

from .dims import config_value
from .fuse import GATE_UP, QKV, VOCAB
from .table import Rule
from .tp import TPKind

L = "decoder.layers.{layer}."
H = "model.layers.{layer}."
SPECS = ("local", "te")


def embedding_rules() -> tuple[Rule, ...]:
    """Word embeddings, final norm and output layer (the latter tied to the embedding if asked)."""
    embedding = "embedding.word_embeddings.weight"
    return (
        Rule(
            embedding, ("model.embed_tokens.weight",), (("vocab", "hidden"),), VOCAB, TPKind.VOCAB
        ),
        Rule("decoder.final_layernorm.weight", ("model.norm.weight",), (("hidden",),)),
        Rule(
            "output_layer.weight",
            ("lm_head.weight",),
            (("vocab", "hidden"),),
            VOCAB,
            TPKind.VOCAB,
            tied_to=embedding,
        ),
    )


def attention_rules(
    spec: str, *, qkv_bias: bool = False, proj_bias: bool = False, qk_norm: bool = False
) -> tuple[Rule, ...]:
    """Input norm, fused QKV (+ bias), optional per-head q/k RMSNorm, output projection."""
    a = H + "self_attn."
    norm = (
        "input_layernorm.weight"
        if spec == "local"
        else "self_attention.linear_qkv.layer_norm_weight"
    )
    qkv = (a + "q_proj.", a + "k_proj.", a + "v_proj.")
    rules = [
        Rule(L + norm, (H + "input_layernorm.weight",), (("hidden",),)),
        Rule(
            L + "self_attention.linear_qkv.weight",
            tuple(p + "weight" for p in qkv),
            (("q", "hidden"), ("kv", "hidden"), ("kv", "hidden")),
            QKV,
            TPKind.QKV,
        ),
        Rule(
            L + "self_attention.linear_proj.weight",
            (a + "o_proj.weight",),
            (("hidden", "q"),),
            tp=TPKind.ROW,
        ),
    ]
    if qkv_bias:
        shapes = (("q",), ("kv",), ("kv",))
        rules.append(
            Rule(
                L + "self_attention.linear_qkv.bias",
                tuple(p + "bias" for p in qkv),
                shapes,
                QKV,
                TPKind.QKV,
            )
        )
    if proj_bias:
        rules.append(
            Rule(L + "self_attention.linear_proj.bias", (a + "o_proj.bias",), (("hidden",),))
        )
    if qk_norm:
        rules.append(
            Rule(L + "self_attention.q_layernorm.weight", (a + "q_norm.weight",), (("head_dim",),))
        )
        rules.append(
            Rule(L + "self_attention.k_layernorm.weight", (a + "k_norm.weight",), (("head_dim",),))
        )
    return tuple(rules)


def dense_mlp_rules(spec: str, *, mlp_bias: bool = False) -> tuple[Rule, ...]:
    """Post-attention norm, fused gate/up `linear_fc1` and `linear_fc2` (+ biases)."""
    m = H + "mlp."
    norm = "pre_mlp_layernorm.weight" if spec == "local" else "mlp.linear_fc1.layer_norm_weight"
    gate_up = (m + "gate_proj.", m + "up_proj.")
    rules = [
        Rule(L + norm, (H + "post_attention_layernorm.weight",), (("hidden",),)),
        Rule(
            L + "mlp.linear_fc1.weight",
            tuple(p + "weight" for p in gate_up),
            (("ffn", "hidden"), ("ffn", "hidden")),
            GATE_UP,
            TPKind.GATE_UP,
        ),
        Rule(
            L + "mlp.linear_fc2.weight",
            (m + "down_proj.weight",),
            (("hidden", "ffn"),),
            tp=TPKind.ROW,
        ),
    ]
    if mlp_bias:
        shapes = (("ffn",), ("ffn",))
        rules.append(
            Rule(
                L + "mlp.linear_fc1.bias",
                tuple(p + "bias" for p in gate_up),
                shapes,
                GATE_UP,
                TPKind.GATE_UP,
            )
        )
        rules.append(Rule(L + "mlp.linear_fc2.bias", (m + "down_proj.bias",), (("hidden",),)))
    return tuple(rules)


def rules(
    hf_config: Any, *, spec: str = "local", grouped_experts: bool = False
) -> tuple[Rule, ...]:
    """The Llama / Mistral table; honours `attention_bias` and `mlp_bias` when the config sets them."""
    bias = bool(config_value(hf_config, "attention_bias", False))
    return (
        *embedding_rules(),
        *attention_rules(spec, qkv_bias=bias, proj_bias=bias),
        *dense_mlp_rules(spec, mlp_bias=bool(config_value(hf_config, "mlp_bias", False))),
    )
