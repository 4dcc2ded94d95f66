"""Every bad input is a `LayoutError` that names the tensor (and what was expected)."""

from __future__ import annotations

import pytest
import torch

from rl.megatron.layouts import LayoutError, converter_for, supported_model_types


def test_unknown_model_type_lists_the_supported_ones():
    with pytest.raises(LayoutError, match="'gpt2'.*llama, mistral, qwen2, qwen3, qwen3_moe"):
        converter_for({"model_type": "gpt2", "hidden_size": 8})
    assert "qwen3_moe" in supported_model_types()


def test_unknown_hf_name_names_architecture_and_closest_pattern(tiny_hf):
    config, _, _ = tiny_hf("qwen3")
    bad = "model.layers.1.self_attn.q_nrom.weight"
    with pytest.raises(
        LayoutError, match=rf"{bad}.*'qwen3'.*'model\.layers\.{{layer}}\.self_attn\.q_norm\.weight'"
    ):
        list(converter_for(config).from_hf([(bad, torch.zeros(16))]))


def test_unknown_mcore_name(tiny_hf):
    config, _, _ = tiny_hf("llama")
    bad = "decoder.layers.0.mlp.linear_fc3.weight"
    with pytest.raises(LayoutError, match=rf"megatron-core.*{bad}.*closest.*linear_fc"):
        list(converter_for(config).to_hf([(bad, torch.zeros(1))]))


def test_shape_mismatch_says_expected_and_got(tiny_hf):
    config, _, _ = tiny_hf("llama")
    name = "model.layers.0.self_attn.k_proj.weight"
    with pytest.raises(LayoutError, match=rf"{name}.*expected shape \(32, 64\), got \(64, 64\)"):
        list(converter_for(config).from_hf([(name, torch.zeros(64, 64))]))
    mc = "decoder.layers.0.mlp.linear_fc1.weight"
    with pytest.raises(LayoutError, match=rf"{mc}.*expected shape \(256, 64\), got \(128, 64\)"):
        list(converter_for(config).to_hf([(mc, torch.zeros(128, 64))]))


def test_incomplete_fused_group_lists_missing_parts(tiny_hf):
    config, _, checkpoint = tiny_hf("qwen2")
    partial = {k: v for k, v in checkpoint.items() if k != "model.layers.1.self_attn.v_proj.bias"}
    partial.pop("model.layers.0.mlp.up_proj.weight")
    with pytest.raises(LayoutError) as info:
        list(converter_for(config).from_hf(partial.items()))
    message = str(info.value)
    assert (
        "decoder.layers.1.self_attention.linear_qkv.bias is missing ['model.layers.1.self_attn.v_proj.bias']"
        in message
    )
    assert (
        "decoder.layers.0.mlp.linear_fc1.weight is missing ['model.layers.0.mlp.up_proj.weight']"
        in message
    )


def test_duplicate_part_is_an_error(tiny_hf):
    config, _, checkpoint = tiny_hf("llama")
    name = "model.layers.0.self_attn.q_proj.weight"
    with pytest.raises(LayoutError, match=f"{name}.*twice"):
        list(converter_for(config).from_hf([(name, checkpoint[name])] * 2))


def test_bad_spec_and_dense_layers_in_moe(tiny_hf):
    config, _, _ = tiny_hf("llama")
    with pytest.raises(LayoutError, match="'transformer_engine'"):
        converter_for(config, spec="transformer_engine")
    moe, _, _ = tiny_hf("qwen3_moe")
    with pytest.raises(LayoutError, match="mlp_only_layers=\\[1\\]"):
        converter_for({**moe.to_dict(), "mlp_only_layers": [1]})
