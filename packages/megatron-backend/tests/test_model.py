"""rl.megatron.model: the HF config -> megatron-core mapping (the logits check against the HF
model lives with the weight layouts, packages/megatron-backend/tests/layouts/test_megatron_reference.py)."""

import importlib.util

import pytest
from transformers import AutoConfig

pytest.importorskip("megatron.core", reason="megatron-core is not installed")

from rl.megatron.model import resolve_spec, transformer_config

pytestmark = [
    pytest.mark.megatron,
    pytest.mark.filterwarnings("ignore::DeprecationWarning:megatron.*"),
]
TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=256,
)


@pytest.mark.parametrize(
    ("model_type", "qkv_bias", "qk_norm"),
    [("llama", False, False), ("qwen2", True, False), ("qwen3", False, True)],
)
def test_shapes_and_architecture_choices_follow_the_hf_config(model_type, qkv_bias, qk_norm):
    config = AutoConfig.for_model(model_type, **TINY, head_dim=16)
    tc = transformer_config(config)
    assert (tc.num_layers, tc.hidden_size, tc.ffn_hidden_size) == (2, 64, 128)
    assert (tc.num_attention_heads, tc.num_query_groups, tc.kv_channels) == (4, 2, 16)
    assert (tc.add_qkv_bias, tc.qk_layernorm) == (qkv_bias, qk_norm)
    assert tc.normalization == "RMSNorm" and tc.gated_linear_unit
    assert transformer_config(config, tensor_model_parallel_size=1).tensor_model_parallel_size == 1


def test_an_unsupported_architecture_is_named():
    config = AutoConfig.for_model("gpt2", n_layer=1, n_embd=32, n_head=2)
    with pytest.raises(ValueError, match="model_type 'gpt2' is not supported by rl-megatron yet"):
        transformer_config(config)


def test_auto_spec_is_transformer_engine_only_when_installed():
    installed = importlib.util.find_spec("transformer_engine") is not None
    assert resolve_spec("auto") == ("te" if installed else "local")
    assert resolve_spec("local") == "local"


def test_rope_scaling_other_than_llama3_is_refused_by_name():
    """Llama 3's scaling is applied (test_tied.py checks the log-probs against HF); any
    other would give other positions than the HF model's, silently."""
    from rl.megatron.model import check_rope_scaling

    llama3 = dict(
        rope_type="llama3",
        factor=8.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=32,
    )
    config = AutoConfig.for_model("llama", **TINY, rope_scaling=llama3)
    assert check_rope_scaling(config) == "llama3"
    assert check_rope_scaling(AutoConfig.for_model("qwen2", **TINY)) == "default"
    yarn = AutoConfig.for_model(
        "qwen3", **TINY, rope_scaling=dict(rope_type="yarn", factor=4.0), head_dim=16
    )
    with pytest.raises(ValueError, match="rope_scaling of type 'yarn' is not supported"):
        transformer_config(yarn)
