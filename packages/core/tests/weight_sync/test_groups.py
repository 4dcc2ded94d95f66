"""Delta sync decides per group of weights an engine loads together (a fused module)."""

import torch

from rl.core.weight_sync import WeightSender, each_tensor, fused_module


def test_fused_module_names():
    assert (
        fused_module("model.layers.3.self_attn.k_proj.bias") == "model.layers.3.self_attn.qkv_proj"
    )
    assert fused_module("model.layers.3.self_attn.q_proj.weight") == (
        "model.layers.3.self_attn.qkv_proj"
    )
    assert fused_module("model.layers.0.mlp.up_proj.weight") == "model.layers.0.mlp.gate_up_proj"
    assert fused_module("model.layers.0.mlp.down_proj.weight") == "model.layers.0.mlp.down_proj"
    assert fused_module("model.layers.2.mlp.experts.7.gate_proj.weight") == (
        "model.layers.2.mlp.experts"
    )
    assert fused_module("model.layers.2.mlp.shared_expert.up_proj.weight") == (
        "model.layers.2.mlp.shared_expert.gate_up_proj"
    )
    assert fused_module("model.norm.weight") == "model.norm"
    assert fused_module("lm_head") == "lm_head"
    assert each_tensor("model.norm.weight") == "model.norm.weight"


def test_a_changed_part_sends_its_whole_fused_module(receiver):
    source, target = receiver.tiny_model(1), receiver.tiny_model(2)
    engine = receiver.BufferingEngine(target)
    sender = WeightSender(bucket_bytes=32 << 10, delta=True, weight_group=fused_module)
    sender.sync(source.state_dict().items(), engine)
    with torch.no_grad():
        source.model.layers[0].self_attn.q_proj.weight.add_(1.0)  # q only: k, v unchanged
        source.model.layers[1].mlp.up_proj.weight.mul_(2.0)  # up only: gate unchanged
    state = source.state_dict()
    metrics = sender.sync(state.items(), engine)
    sent = [
        n
        for n in state
        if n.startswith("model.layers.0.self_attn.")
        and n.split(".")[-2] in ("q_proj", "k_proj", "v_proj")
    ] + ["model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight"]
    sent_bytes = sum(state[n].numel() * state[n].element_size() for n in sent)
    assert metrics["weight_sync/skipped_tensors"] == len(state) - len(sent)
    assert metrics["weight_sync/sent_bytes"] == sent_bytes
    for name, tensor in target.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    # tensor by tensor (the HF engine's grouping), only the two changed tensors travel
    per_tensor = WeightSender(delta=True, weight_group=each_tensor)
    per_tensor.sync(state.items(), engine)
    with torch.no_grad():
        source.model.layers[0].self_attn.q_proj.weight.add_(1.0)
    assert per_tensor.sync(source.state_dict().items(), engine)["weight_sync/skipped_tensors"] == (
        len(state) - 1
    )
