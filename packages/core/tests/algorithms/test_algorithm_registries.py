"""Every algorithm is selectable by name; new names can be registered; typos are reported."""

import pytest
import torch

from rl.core import algorithms as alg
from rl.core.algorithms import Registry


def test_registry_aliases_duplicates_and_unknown_names():
    registry: Registry[int] = Registry("fruit", "shop.fruit")
    registry.register("pear", "poire")(1)
    registry.register("apple")(2)
    assert registry.get("poire") == 1 and "pear" in registry and "kiwi" not in registry
    assert registry.names() == ["apple", "pear", "poire"]
    with pytest.raises(ValueError, match="fruit 'apple' is already registered"):
        registry.register("apple")(3)
    with pytest.raises(ValueError, match="needs at least one name"):
        registry.register()
    with pytest.raises(
        ValueError, match=r"^shop.fruit = 'kiwi' is not a known fruit; valid: apple, pear, poire$"
    ):
        registry.get("kiwi")


@pytest.mark.parametrize(
    ("lookup", "key"),
    [
        (alg.get_advantage_estimator, "algorithm.adv_estimator"),
        (alg.get_policy_loss, "actor.policy_loss"),
        (alg.get_loss_agg_mode, "actor.loss_agg_mode"),
        (alg.get_kl_estimator, "actor.kl_loss_type / algorithm.kl_penalty"),
        (alg.KL_CONTROLLERS.get, "algorithm.kl_ctrl.type"),
    ],
)
def test_every_registry_names_its_config_key(lookup, key):
    with pytest.raises(ValueError, match=f"^{key} = 'nope' is not a known .*; valid: "):
        lookup("nope")


def test_registered_estimator_policy_loss_and_kl_are_usable(isolated_registries):
    @alg.register_advantage_estimator("constant")
    def constant(rewards, mask, inputs):
        return mask * 1.0, mask * 2.0

    @alg.register_kl_estimator("zero")
    def zero(logprobs, ref_logprobs):
        return torch.zeros_like(logprobs)

    @alg.register_policy_loss("reinforce")
    def reinforce(old_logprobs, logprobs, advantages, response_mask, config, seq_ids=None):
        terms = alg.get_policy_loss("vanilla")(
            old_logprobs, logprobs, advantages, response_mask, config
        )
        terms.loss = -advantages * logprobs
        return terms

    mask = torch.tensor([[1.0, 0.0]])
    _, returns = alg.compute_advantages("constant", torch.zeros_like(mask), mask)
    assert returns.tolist() == [[2.0, 0.0]]
    assert alg.kl_penalty(torch.ones(2), torch.zeros(2), "zero").tolist() == [0.0, 0.0]
    config = alg.ActorLossConfig(policy_loss="reinforce", use_kl_loss=True, kl_loss_type="zero")
    logp = torch.tensor([[-2.0, -9.0]])
    loss, _ = alg.actor_loss(
        logp, None, logp, torch.tensor([[3.0, 5.0]]), mask, config, ref_logprobs=logp
    )
    assert loss.item() == pytest.approx(6.0)
