"""HF -> megatron-core -> HF is bit-exact for every architecture, spec and GQA shape."""

from __future__ import annotations

import pytest
import torch

from rl.megatron.layouts import converter_for

from .conftest import ARCHS


def _round_trip(config, checkpoint, **options):
    converter = converter_for(config, **options)
    mcore = dict(converter.from_hf(checkpoint.items()))
    back = dict(converter.to_hf(mcore.items()))
    assert sorted(back) == sorted(checkpoint)
    for name, tensor in checkpoint.items():
        assert torch.equal(back[name], tensor), name
    return mcore


@pytest.mark.parametrize("model_type", sorted(ARCHS))
@pytest.mark.parametrize("spec", ["local", "te"])
def test_round_trip_is_bit_exact(tiny_hf, model_type, spec):
    config, _, checkpoint = tiny_hf(model_type)
    mcore = _round_trip(config, checkpoint, spec=spec)
    layer = "decoder.layers.1."
    assert mcore[layer + "self_attention.linear_qkv.weight"].shape == (128, 64)
    norm = (
        "input_layernorm.weight"
        if spec == "local"
        else "self_attention.linear_qkv.layer_norm_weight"
    )
    assert layer + norm in mcore


@pytest.mark.parametrize(
    ("heads", "kv_heads", "head_dim"),
    [(8, 4, 8), (8, 2, 8), (4, 1, 16), (4, 4, 16)],
    ids=["4-groups", "2-groups-of-4", "mqa", "mha"],
)
@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_gqa_shapes_round_trip(tiny_hf, model_type, heads, kv_heads, head_dim):
    config, _, checkpoint = tiny_hf(
        model_type, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim
    )
    mcore = _round_trip(config, checkpoint)
    assert mcore["decoder.layers.0.self_attention.linear_qkv.weight"].shape == (
        (heads + 2 * kv_heads) * head_dim,
        64,
    )


def test_qkv_is_grouped_per_query_group(tiny_hf):
    """Group g holds its q heads, then k head g, then v head g (megatron-core's order)."""
    config, _, ckpt = tiny_hf("qwen2", num_attention_heads=8, num_key_value_heads=4, head_dim=8)
    mcore = dict(converter_for(config).from_hf(ckpt.items()))
    p = "model.layers.0.self_attn."
    q, k, v = (ckpt[p + f"{n}_proj.bias"] for n in "qkv")
    fused = mcore["decoder.layers.0.self_attention.linear_qkv.bias"].view(
        4, 4, 8
    )  # [group, head, dim]
    for g in range(4):
        assert torch.equal(fused[g, :2].reshape(-1), q[g * 16 : (g + 1) * 16])
        assert torch.equal(fused[g, 2], k[g * 8 : (g + 1) * 8])
        assert torch.equal(fused[g, 3], v[g * 8 : (g + 1) * 8])


def test_gate_up_is_gate_then_up(tiny_hf):
    config, _, ckpt = tiny_hf("llama")
    mcore = dict(converter_for(config).from_hf(ckpt.items()))
    fc1 = mcore["decoder.layers.0.mlp.linear_fc1.weight"]
    assert torch.equal(fc1[:128], ckpt["model.layers.0.mlp.gate_proj.weight"])
    assert torch.equal(fc1[128:], ckpt["model.layers.0.mlp.up_proj.weight"])


@pytest.mark.parametrize("grouped", [False, True])
def test_moe_expert_names(tiny_hf, grouped):
    config, _, checkpoint = tiny_hf("qwen3_moe")
    mcore = _round_trip(config, checkpoint, grouped_experts=grouped)
    experts = "decoder.layers.1.mlp.experts."
    fc1 = experts + ("linear_fc1.weight3" if grouped else "local_experts.3.linear_fc1.weight")
    assert mcore[fc1].shape == (64, 64)
    assert mcore["decoder.layers.1.mlp.router.weight"].shape == (4, 64)
    assert "decoder.layers.1.pre_mlp_layernorm.weight" in mcore


def test_streaming_emits_each_fused_tensor_when_its_last_part_arrives(tiny_hf):
    """At most the parts of one fused tensor are held back; output order follows input order."""
    config, _, checkpoint = tiny_hf("qwen3_moe")
    converter = converter_for(config)
    consumed: list[str] = []

    def source():
        for name, tensor in checkpoint.items():
            consumed.append(name)
            yield name, tensor

    held_back = []
    for mcore_name, _ in converter.from_hf(source()):
        rule, _ = converter.table.match_mcore(mcore_name)
        assert (
            converter.table.match_hf(consumed[-1])[0] is rule
        )  # emitted right after its last part
        held_back.append(len(consumed))
    assert held_back == sorted(held_back)


def test_dtype_passes_through(tiny_hf):
    config, _, checkpoint = tiny_hf("qwen3")
    half = {k: v.to(torch.bfloat16) for k, v in checkpoint.items()}
    converter = converter_for(config)
    assert all(t.dtype == torch.bfloat16 for _, t in converter.from_hf(half.items()))
