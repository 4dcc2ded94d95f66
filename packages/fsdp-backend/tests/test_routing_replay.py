"""Routing replay in the FSDP engine on a tiny Qwen3-MoE: R2's old-log-prob pass records
the routes (-1 at padding) without changing its log-probs; replaying them gives the same
log-probs bit for bit in every layout (padded, packed, shared prompts) and in the update;
replaying other routes changes both; what cannot run is refused by name."""

import pytest
import torch

from rl.core.config import OptimConfig, load_config
from rl.core.engines import Rollouts
from rl.core.models import load_tokenizer
from rl.core.models.routing_replay import NO_ROUTE, RoutingReplayError
from rl.core.role_spec import RoleSpec
from rl.core.trainer.rollout_batch import build_batch
from rl.fsdp.engine import FSDPTrainEngine
from rl.fsdp.routing_replay import check_replay


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(load_config().model)


def tiny_moe(tokenizer, seed=0):
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(seed)
    config = Qwen3MoeConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        num_experts=6,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3MoeForCausalLM(config)
    for layer in model.model.layers:  # transformers starts routers at zero: all ties
        torch.nn.init.normal_(layer.mlp.gate.weight, std=0.3)
    return model.float()


def batch_of(tokenizer):
    """Ragged rows, pairs of them sharing a prompt (GRPO groups)."""
    generator = torch.Generator().manual_seed(0)
    prompts = [tokenizer(f"{i * 37}+{i}=" * (1 + i % 3)).input_ids for i in (1, 1, 2, 2, 5)]
    lengths = [6, 1, 4, 0, 3]
    responses = [
        torch.randint(3, len(tokenizer), (n,), generator=generator).tolist() for n in lengths
    ]
    return build_batch(
        Rollouts(prompts, responses, [[0.0] * len(r) for r in responses]),
        tokenizer.pad_token_id,
        6,
    )


def engine(model, mode, layout="packed"):
    return FSDPTrainEngine(
        model,
        RoleSpec(
            "actor",
            optim=OptimConfig(lr=1e-2),
            mini_batch_size=5,
            micro_batch_size=2,
            use_remove_padding=layout != "padded",
            use_prefix_grouper=layout == "shared",
            router_replay=mode,
        ),
    )


@pytest.mark.parametrize("layout", ["padded", "packed", "shared"])
def test_recorded_routes_replay_to_the_same_logprobs(tokenizer, layout):
    batch = batch_of(tokenizer)
    plain = engine(tiny_moe(tokenizer), "disabled", layout).compute_logprobs(batch, False)
    assert plain.routed_experts is None
    recorded = engine(tiny_moe(tokenizer), "R2", layout).compute_logprobs(batch, False)
    assert torch.equal(recorded.logprobs, plain.logprobs)
    routes = recorded.routed_experts
    assert routes is not None and routes.shape == (*batch["input_ids"].shape, 2, 2)
    real = batch["attention_mask"].bool()
    assert (routes[~real] == NO_ROUTE).all() and (routes[real] >= 0).all()

    replayed = engine(tiny_moe(tokenizer), "R3", layout).compute_logprobs(
        {**batch, "routed_experts": routes}, False
    )
    assert torch.equal(replayed.logprobs, plain.logprobs)
    other = routes.clone()
    other[real] = (other[real] + 1) % 6  # every token to other experts
    moved = engine(tiny_moe(tokenizer), "R3", layout).compute_logprobs(
        {**batch, "routed_experts": other}, False
    )
    mask = batch["response_mask"].bool()
    assert (moved.logprobs - plain.logprobs)[mask].abs().min() > 0


def test_the_update_replays_the_batch_routes(tokenizer):
    batch = batch_of(tokenizer)
    routes = engine(tiny_moe(tokenizer), "R2").compute_logprobs(batch, False).routed_experts
    real = batch["attention_mask"].bool()
    other = routes.clone()
    other[real] = (other[real] + 1) % 6

    def first_forward(routed):
        seen = []

        def loss_fn(output, micro, mini):
            seen.append((output.logprobs.detach(), micro["response_mask"].bool()))
            return output.logprobs.sum() * 0.0, {}

        engine(tiny_moe(tokenizer), "R2").train_step({**batch, "routed_experts": routed}, loss_fn)
        return seen

    old = engine(tiny_moe(tokenizer), "disabled").compute_logprobs(batch, False).logprobs
    same, moved = first_forward(routes), first_forward(other)
    # micro-batches of 2 rows in order: rows 0-1 first
    (logprobs, mask), (other_logprobs, _) = same[0], moved[0]
    torch.testing.assert_close(logprobs[mask], old[:2][mask], rtol=0, atol=1e-6)
    assert (other_logprobs - logprobs)[mask].abs().min() > 0


def test_what_cannot_replay_is_refused_by_name(tokenizer):
    from rl.core.models import load_causal_lm

    dense = load_causal_lm(load_config().model, tokenizer, seed=0)
    with pytest.raises(RoutingReplayError, match="actor.router_replay.mode=R2 needs a mixture"):
        engine(dense, "R2")
    with pytest.raises(RoutingReplayError, match="no routed_experts from the rollout engine"):
        engine(tiny_moe(tokenizer), "R3").compute_logprobs(batch_of(tokenizer), False)
    with pytest.raises(RoutingReplayError, match="ulysses_sequence_parallel_size > 1"):
        check_replay(tiny_moe(tokenizer), "R3", 2)
    # the reference routes as the model does: no routes needed, none recorded
    ref = FSDPTrainEngine(tiny_moe(tokenizer), RoleSpec("ref", router_replay="R3"))
    assert ref.compute_logprobs(batch_of(tokenizer), False).routed_experts is None


def test_activation_checkpointing_recomputes_with_the_replayed_routes(tokenizer):
    """The backward pass recomputes each layer after the forward's replay block ended: it
    must route as the forward did (the same update as without checkpointing)."""
    batch = batch_of(tokenizer)
    routes = engine(tiny_moe(tokenizer), "R2").compute_logprobs(batch, False).routed_experts
    real = batch["attention_mask"].bool()
    other = routes.clone()
    other[real] = (other[real] + 1) % 6  # not what the model would choose

    def loss_fn(output, micro, mini):
        return -(output.logprobs * micro["response_mask"]).sum() / 20, {}

    weights = []
    for checkpointing in (False, True):
        model = tiny_moe(tokenizer)
        if checkpointing:
            model.gradient_checkpointing_enable()
        actor = engine(model, "R3")
        actor.train_step({**batch, "routed_experts": other}, loss_fn)
        weights.append(model.model.layers[0].mlp.experts.down_proj.detach().clone())
        # no routes left behind: another pass through the model (a reference through the
        # same weights, on other rows) routes by itself
        rows = {key: value[:2] for key, value in batch.items()}
        FSDPTrainEngine(model, RoleSpec("ref")).compute_logprobs(rows, False)
    torch.testing.assert_close(weights[1], weights[0], rtol=0, atol=1e-6)
