"""MoE routing replay on transformers' Qwen3-MoE and Mixtral blocks: replaying the model's
own routes changes nothing (bit for bit); forced routes give the MoE block a float64 hand
computation gives; the weights stay differentiable; a dense model is refused by name."""

import pytest
import torch

from rl.core.models.routing_replay import (
    NO_ROUTE,
    RoutingPass,
    RoutingReplayError,
    moe_routers,
    recording,
    replaying,
    stop_replaying,
    to_model_order,
    to_padded,
)


def tiny_moe(family: str, seed: int = 0) -> torch.nn.Module:
    from transformers import MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    common = dict(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        num_experts_per_tok=2,
    )
    torch.manual_seed(seed)
    if family == "qwen3-moe":
        config = Qwen3MoeConfig(
            **common,
            num_experts=6,
            moe_intermediate_size=16,
            intermediate_size=64,
            norm_topk_prob=False,
        )
        model = Qwen3MoeForCausalLM(config)
    else:
        config = MixtralConfig(**common, num_local_experts=4, intermediate_size=16)
        model = MixtralForCausalLM(config)
    for router in moe_routers(model):  # transformers initialises Qwen3-MoE's at zero
        torch.nn.init.normal_(router.weight, std=0.5)
    return model.eval()


FAMILIES = ["qwen3-moe", "mixtral"]
IDS = torch.tensor([[5, 9, 3, 17, 42, 8, 1], [7, 7, 2, 60, 33, 12, 4]])


@pytest.mark.parametrize("family", FAMILIES)
def test_replaying_the_models_own_routes_changes_nothing(family):
    model = tiny_moe(family)
    with torch.no_grad(), recording(model) as recorder:
        native = model(IDS).logits
    (routes,) = recorder.calls
    assert routes.shape == (IDS.numel(), 2, 2) and routes.dtype == torch.int16
    with torch.no_grad(), replaying(model, routes):
        replayed = model(IDS).logits
    assert torch.equal(native, replayed)


def test_replayed_routes_stay_for_a_recompute_until_stopped_or_recorded_over():
    model = tiny_moe("mixtral")
    with torch.no_grad():
        native = model(IDS).logits
        other = torch.zeros(IDS.numel(), 2, 2, dtype=torch.int16)
        other[..., 1] = 3
        with replaying(model, other):
            replayed = model(IDS).logits
        assert not torch.equal(replayed, native)
        # after the block (activation checkpointing recomputes in the backward pass)
        assert torch.equal(model(IDS).logits, replayed)
        stop_replaying(model)
        assert torch.equal(model(IDS).logits, native)
        with replaying(model, other):
            pass
        with recording(model):
            assert torch.equal(model(IDS).logits, native)


@pytest.mark.parametrize("family", FAMILIES)
def test_unrecorded_tokens_are_routed_by_the_model(family):
    model = tiny_moe(family)
    with torch.no_grad():
        native = model(IDS).logits
        unknown = torch.full((IDS.numel(), 2, 2), NO_ROUTE, dtype=torch.int16)
        with replaying(model, unknown):
            assert torch.equal(model(IDS).logits, native)


def expert_output(experts, e: int, x: torch.Tensor) -> torch.Tensor:
    """One expert's SwiGLU MLP in float64: down(silu(gate x) * up x)."""
    gate, up = (x @ experts.gate_up_proj[e].double().T).chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up) @ experts.down_proj[e].double().T


@pytest.mark.parametrize("family", FAMILIES)
def test_forced_routes_give_the_hand_computed_moe_block(family):
    model = tiny_moe(family)
    block = model.model.layers[0].mlp
    x = torch.randn(1, 5, 32)
    with torch.no_grad():
        native_index = block.gate(x.reshape(-1, 32))[2]
    # routes the model would not choose: each token's two least likely experts
    with torch.no_grad():
        logits64 = x.reshape(-1, 32).double() @ block.gate.weight.double().T
    forced = logits64.argsort(dim=-1)[:, :2]
    assert not torch.equal(forced.sort(-1).values, native_index.sort(-1).values)
    routes = torch.cat([forced[:, None], forced[:, None]], 1).to(torch.int16)  # both layers
    with torch.no_grad(), replaying(model, routes):
        out = block(x).reshape(-1, 32)
    probs = torch.softmax(logits64, -1).gather(-1, forced)
    if family == "mixtral" or block.gate.norm_topk_prob:
        probs = probs / probs.sum(-1, keepdim=True)
    flat = x.reshape(-1, 32).double()
    expected = torch.zeros_like(flat)
    for token in range(flat.shape[0]):
        for slot in range(2):
            e = int(forced[token, slot])
            expected[token] += probs[token, slot] * expert_output(block.experts, e, flat[token])
    torch.testing.assert_close(out.double(), expected, atol=1e-6, rtol=1e-5)


def test_the_replayed_weights_carry_the_router_gradient():
    model = tiny_moe("qwen3-moe").train()
    routes = torch.zeros(IDS.numel(), 2, 2, dtype=torch.int16)
    routes[..., 1] = 3  # every token to experts 0 and 3
    with replaying(model, routes):
        model(IDS).logits.square().mean().backward()
    gate = model.model.layers[0].mlp.gate.weight.grad
    assert gate is not None and gate[[0, 3]].abs().sum() > 0
    # the softmax's other experts get gradient through the normaliser only
    assert gate[[1, 2, 4, 5]].abs().sum() > 0


def test_routes_are_mapped_to_and_from_a_packed_token_order():
    routes = torch.arange(2 * 3 * 1 * 2, dtype=torch.int16).reshape(2, 3, 1, 2)
    # row 0: padding, then two tokens; row 1: three tokens
    flat_to_packed = torch.tensor([-1, 0, 1, 2, 3, 4])
    packed = to_model_order(routes, flat_to_packed)
    assert torch.equal(packed, routes.reshape(6, 1, 2)[1:])
    back = to_padded(packed, 2, 3, flat_to_packed)
    assert torch.equal(back[0, 0], torch.tensor([[NO_ROUTE, NO_ROUTE]], dtype=torch.int16))
    assert torch.equal(back.reshape(6, 1, 2)[1:], packed)


def test_a_routing_pass_records_padded_routes_with_padding_unrouted():
    model = tiny_moe("mixtral")
    mask = torch.ones_like(IDS)
    mask[0, :2] = 0
    recorded = RoutingPass()
    with torch.no_grad(), recorded.around(model, mask):
        model(IDS, attention_mask=mask)
    assert recorded.recorded is not None and recorded.recorded.shape == (2, 7, 2, 2)
    assert (recorded.recorded[0, :2] == NO_ROUTE).all()
    assert (recorded.recorded[mask.bool()] >= 0).all()


def test_a_dense_model_and_an_unknown_router_are_refused_by_name():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    dense = Qwen3ForCausalLM(
        Qwen3Config(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=16,
            intermediate_size=64,
        )
    )
    with (
        pytest.raises(RoutingReplayError, match="actor.router_replay.mode=R3 needs a mixture"),
        recording(dense, "actor.router_replay.mode=R3"),
    ):
        pass

    class OtherTopKRouter(torch.nn.Module):
        top_k = 2

    holder = torch.nn.Module()
    holder.gate = OtherTopKRouter()
    with pytest.raises(RoutingReplayError, match="not OtherTopKRouter"):
        moe_routers(holder)
