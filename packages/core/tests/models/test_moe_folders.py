"""Tiny Qwen3-MoE and Mixtral folders (`build_model_folder`) load with transformers as
their architectures, with every weight (routers and stacked experts too) read from the
file and an untied LM head."""

import pytest
import torch

from rl.core.models.shapes import build_model_folder

TINY = {
    "qwen3-moe": {
        "hidden_size": 128,
        "num_experts": 8,
        "experts_per_token": 2,
        "moe_intermediate_size": 64,
    },
    "mixtral": {"hidden_size": 128, "intermediate_size": 64, "num_experts": 4},
}
ARCHITECTURES = {"qwen3-moe": "Qwen3MoeForCausalLM", "mixtral": "MixtralForCausalLM"}


@pytest.fixture(scope="module", params=sorted(TINY))
def loaded(request, tmp_path_factory):
    from transformers import AutoModelForCausalLM

    name = request.param
    folder = build_model_folder(name, tmp_path_factory.mktemp(name) / "m", **TINY[name])
    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    return name, model, info


def test_every_weight_is_read_routers_and_experts_included(loaded):
    name, model, info = loaded
    assert type(model).__name__ == ARCHITECTURES[name]
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    mlp = model.model.layers[0].mlp
    assert mlp.gate.weight.shape == (TINY[name]["num_experts"], 128)
    assert mlp.gate.weight.std() > 0  # drawn, not left at zero
    assert mlp.experts.gate_up_proj.shape[0] == TINY[name]["num_experts"]


def test_a_forward_pass_routes_each_token_to_top_k_experts(loaded):
    _, model, _ = loaded
    routed = []
    hook = model.model.layers[1].mlp.gate.register_forward_hook(
        lambda module, args, output: routed.append(output[2])
    )
    try:
        logits = model(torch.tensor([[1, 2, 3, 4, 5]])).logits
    finally:
        hook.remove()
    assert torch.isfinite(logits).all()
    assert routed[0].shape == (5, 2)
    assert len(set(routed[0].flatten().tolist())) > 1  # not all tokens to one expert
