"""config.json of each shape against the released files' figures (no weights built)."""

import pytest

from rl.core.models.shapes import SHAPES, model_shape, scaled_heads, shape_config

# The released config.json figures (Qwen2.5-0.5B-Instruct, Qwen2.5-1.5B-Instruct, Qwen3-0.6B, Llama-3.2-1B-Instruct).
RELEASED = {
    "qwen2.5-0.5b": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "use_sliding_window": False,
    },
    "qwen2.5-1.5b": {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "max_window_layers": 21,
        "use_sliding_window": False,
    },
    "qwen3-0.6b": {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "rope_theta": 1000000,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "attention_bias": False,
        "eos_token_id": 151645,
    },
    "llama-3.2-1b": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 32.0,
            "high_freq_factor": 4.0,
            "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
        "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5,
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
    },
    # Qwen3-30B-A3B's config.json
    "qwen3-moe": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-6,
        "router_aux_loss_coef": 0.001,
        "eos_token_id": 151645,
    },
    # Mixtral-8x7B-Instruct-v0.1's config.json, but the Llama-3.2 vocabulary and ids
    "mixtral": {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-5,
        "router_aux_loss_coef": 0.02,
    },
}


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_config_has_the_released_figures_and_the_layers_asked_for(name):
    config = shape_config(model_shape(name), num_layers=3)
    assert {key: config[key] for key in RELEASED[name]} == RELEASED[name]
    for value in config.values():  # what a caller (transformers) edits stays its own
        if isinstance(value, dict):
            value["edited"] = True
    again = shape_config(model_shape(name), num_layers=3)
    assert {key: again[key] for key in RELEASED[name]} == RELEASED[name]
    assert config["num_hidden_layers"] == 3
    assert config["torch_dtype"] == "float32"


def test_every_shape_is_described():
    assert set(SHAPES) == set(RELEASED)
    assert all(shape.description for shape in SHAPES.values())


@pytest.mark.parametrize(
    ("name", "hidden", "heads"),
    [
        ("qwen2.5-0.5b", 448, (7, 1)),
        ("qwen2.5-0.5b", 256, (4, 1)),
        ("qwen3-0.6b", 256, (4, 2)),
        ("llama-3.2-1b", 256, (4, 1)),
        ("llama-3.2-1b", 512, (8, 2)),
        ("llama-3.2-1b", 2048, (32, 8)),
        ("qwen3-moe", 256, (4, 1)),
        ("mixtral", 256, (2, 1)),
    ],
)
def test_a_smaller_hidden_size_keeps_head_dim_and_the_kv_grouping(name, hidden, heads):
    assert scaled_heads(model_shape(name), hidden) == heads
    config = shape_config(model_shape(name), hidden_size=hidden, intermediate_size=512)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == heads
    assert config["intermediate_size"] == 512
    assert config["vocab_size"] == RELEASED[name]["vocab_size"]


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="multiple of 64"):
        shape_config(model_shape("qwen3-0.6b"), hidden_size=100)
    with pytest.raises(ValueError, match="num_layers"):
        shape_config(model_shape("qwen3-0.6b"), num_layers=0)
    with pytest.raises(ValueError, match="dtype"):
        shape_config(model_shape("qwen3-0.6b"), dtype="fp8")
    with pytest.raises(ValueError, match="known: qwen2.5-0.5b"):
        model_shape("qwen2-7b")


def test_moe_shapes_take_fewer_and_narrower_experts():
    qwen = shape_config(
        model_shape("qwen3-moe"), num_experts=8, experts_per_token=2, moe_intermediate_size=64
    )
    assert (qwen["num_experts"], qwen["num_experts_per_tok"], qwen["moe_intermediate_size"]) == (
        8,
        2,
        64,
    )
    mixtral = shape_config(model_shape("mixtral"), num_experts=4)
    assert (mixtral["num_local_experts"], mixtral["num_experts_per_tok"]) == (4, 2)
    # fewer experts than the released top-k: top-k shrinks to fit
    assert shape_config(model_shape("qwen3-moe"), num_experts=4)["num_experts_per_tok"] == 4


def test_expert_arguments_are_refused_where_they_do_not_fit():
    with pytest.raises(ValueError, match="dense model: num_experts"):
        shape_config(model_shape("qwen3-0.6b"), num_experts=4)
    with pytest.raises(ValueError, match="experts_per_token must be in 1..4"):
        shape_config(model_shape("mixtral"), num_experts=4, experts_per_token=5)
    with pytest.raises(ValueError, match="no moe_intermediate_size"):
        shape_config(model_shape("mixtral"), moe_intermediate_size=64)
