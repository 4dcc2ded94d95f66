"""TP split/merge: round trips at TP 1/2/4, resharding TP2 -> TP4, megatron's per-rank slices."""

from __future__ import annotations

import pytest
import torch

from rl.megatron.layouts import LayoutError, converter_for, padded_vocab_size, split_parts

from .conftest import ARCHS


def _mcore(tiny_hf, model_type, **overrides):
    config, _, checkpoint = tiny_hf(model_type, **overrides)
    converter = converter_for(config)
    return converter, dict(converter.from_hf(checkpoint.items()))


@pytest.mark.parametrize("model_type", sorted(ARCHS))
@pytest.mark.parametrize("tp_size", [1, 2, 4])
def test_split_then_merge_is_identity(tiny_hf, model_type, tp_size):
    converter, mcore = _mcore(
        tiny_hf, model_type, num_attention_heads=8, num_key_value_heads=4, head_dim=8
    )
    for name, full in mcore.items():
        shards = converter.split_tp(name, full, tp_size)
        assert len(shards) == tp_size
        assert torch.equal(converter.merge_tp(name, shards), full), name


@pytest.mark.parametrize("model_type", sorted(ARCHS))
def test_reshard_tp2_to_tp4_equals_splitting_the_full_tensor(tiny_hf, model_type):
    converter, mcore = _mcore(
        tiny_hf, model_type, num_attention_heads=8, num_key_value_heads=4, head_dim=8
    )
    for name, full in mcore.items():
        tp2 = converter.split_tp(name, full, 2, make_vocab_size_divisible_by=8)
        tp4 = converter.split_tp(
            name, converter.merge_tp(name, tp2), 4, make_vocab_size_divisible_by=8
        )
        direct = converter.split_tp(name, full, 4, make_vocab_size_divisible_by=8)
        assert all(torch.equal(a, b) for a, b in zip(tp4, direct, strict=True)), name


def test_shard_kinds_match_megatron(tiny_hf):
    """Column on dim 0, row on dim 1, norms replicated, fc1 as [gate_r; up_r], qkv in whole groups."""
    converter, mcore = _mcore(
        tiny_hf, "llama", num_attention_heads=8, num_key_value_heads=4, head_dim=8
    )
    layer = "decoder.layers.0."
    proj = converter.split_tp(
        layer + "self_attention.linear_proj.weight",
        mcore[layer + "self_attention.linear_proj.weight"],
        2,
    )
    assert proj[0].shape == (64, 32)
    norm = mcore[layer + "input_layernorm.weight"]
    assert all(s is norm for s in converter.split_tp(layer + "input_layernorm.weight", norm, 4))

    fc1 = mcore[layer + "mlp.linear_fc1.weight"]  # [gate(128); up(128)]
    shards = converter.split_tp(layer + "mlp.linear_fc1.weight", fc1, 2)
    assert torch.equal(shards[1], torch.cat([fc1[64:128], fc1[192:256]]))

    qkv = mcore[layer + "self_attention.linear_qkv.weight"]  # 4 groups of (2 q + k + v) heads of 8
    shards = converter.split_tp(layer + "self_attention.linear_qkv.weight", qkv, 4)
    assert torch.equal(shards[3], qkv[3 * 32 : 4 * 32])


def test_vocab_is_padded_then_trimmed(tiny_hf):
    converter, mcore = _mcore(tiny_hf, "qwen2", vocab_size=250)
    name = "embedding.word_embeddings.weight"
    assert padded_vocab_size(250, 4, 8) == 256
    shards = converter.split_tp(name, mcore[name], 4, make_vocab_size_divisible_by=8)
    assert [s.shape[0] for s in shards] == [64] * 4
    assert torch.count_nonzero(shards[3][-6:]) == 0
    assert torch.equal(converter.merge_tp(name, shards), mcore[name])


def test_padded_vocab_is_trimmed_on_export(tiny_hf):
    config, _, checkpoint = tiny_hf("qwen2", vocab_size=250)
    converter = converter_for(config)
    name = "output_layer.weight"
    padded = torch.cat([checkpoint["lm_head.weight"], torch.zeros(6, 64)])
    ((hf_name, tensor),) = converter.to_hf([(name, padded)])
    assert hf_name == "lm_head.weight" and torch.equal(tensor, checkpoint["lm_head.weight"])


def test_replicated_shards_that_differ_are_an_error(tiny_hf):
    converter, mcore = _mcore(tiny_hf, "llama")
    name = "decoder.final_layernorm.weight"
    with pytest.raises(LayoutError, match="decoder.final_layernorm.weight.*rank 1"):
        converter.merge_tp(name, [mcore[name], mcore[name] + 1])


def test_tp_not_dividing_the_dim_names_the_tensor(tiny_hf):
    converter, mcore = _mcore(tiny_hf, "llama")  # 2 query groups, ffn 128
    qkv = "decoder.layers.0.self_attention.linear_qkv.weight"
    with pytest.raises(LayoutError, match=f"{qkv}.*num_key_value_heads \\(2\\).*4"):
        converter.split_tp(qkv, mcore[qkv], 4)
    fc2 = "decoder.layers.1.mlp.linear_fc2.weight"
    with pytest.raises(LayoutError, match=f"{fc2}.*TP 3.*dim 1"):
        converter.split_tp(fc2, mcore[fc2], 3)
    with pytest.raises(LayoutError, match="'x'.*fused part"):
        split_parts("x", torch.zeros(10, 4), 2, parts=2)
