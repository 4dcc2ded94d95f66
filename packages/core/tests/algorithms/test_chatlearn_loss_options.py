"""ChatLearn's two fixed GRPO details as rl options, against float64 formulas written from
ChatLearn's code (b7af31a9): `algorithm.grpo_std: population` (+ `grpo_std_eps`), from
grpo_utils/advantage_compute.py, and `actor.policy_loss_cap`, from
grpo_utils/loss_gallery.py calculate_grpo_loss."""

import numpy as np
import pytest
import torch

from rl.core.algorithms import PolicyLossConfig, compute_advantages, get_policy_loss
from rl.core.algorithms.policy_losses import cap_policy_loss
from rl.core.config import ConfigError
from rl.core.config.loader import config_from_mapping
from rl.core.trainer.algorithm_setup import actor_loss_config

UIDS = ["a", "a", "a", "b", "b", "b", "b", "c", "c"]
SCORES = [1.0, 0.0, 0.0, 0.5, 1.0, 0.0, 1.0, 2.0, 2.0]


def chatlearn_advantages(scores, uids):
    """advantage_compute.AdvantageComputer: (r - np.mean) / (np.std + 1e-5) by prompt uid."""
    out = []
    for score, uid in zip(scores, uids, strict=True):
        group = [s for s, u in zip(scores, uids, strict=True) if u == uid]
        out.append((score - np.mean(group)) / (np.std(group) + 1e-5))
    return out


def chatlearn_grpo_loss(logprobs, old_logprobs, advantages, low=0.2, high=0.2, cap=3.0):
    """loss_gallery.calculate_grpo_loss per token (the log-ratio well under diff_clip 10)."""
    ratio = np.exp(np.minimum(logprobs - old_logprobs, 10.0))
    pg_loss = -advantages * ratio
    pg_loss_2 = -advantages * np.clip(ratio, 1 - low, 1 + high)
    return np.minimum(np.maximum(pg_loss, pg_loss_2), cap)


def grpo(grpo_std="sample", epsilon=1e-6, scores=SCORES):
    rewards = torch.zeros(len(scores), 3, dtype=torch.float64)
    rewards[:, -1] = torch.tensor(scores, dtype=torch.float64)  # the outcome on the last token
    mask = torch.ones_like(rewards)
    advantages, _ = compute_advantages(
        "grpo", rewards, mask, prompt_uid=UIDS, grpo_std=grpo_std, epsilon=epsilon
    )
    return advantages[:, 0]


def test_population_std_matches_chatlearn():
    got = grpo("population", 1e-5)
    assert torch.allclose(got, torch.tensor(chatlearn_advantages(SCORES, UIDS)), atol=1e-12)


def test_population_group_of_one_is_zero_as_in_chatlearn():
    scores, uids = [3.0], ["x"]
    rewards = torch.tensor(scores, dtype=torch.float64)[:, None]
    got, _ = compute_advantages(
        "grpo", rewards, torch.ones_like(rewards), prompt_uid=uids, grpo_std="population"
    )
    assert got.item() == chatlearn_advantages(scores, uids)[0] == 0.0


def test_sample_std_is_unchanged_default():
    expected = []
    for score, uid in zip(SCORES, UIDS, strict=True):
        group = [s for s, u in zip(SCORES, UIDS, strict=True) if u == uid]
        expected.append((score - np.mean(group)) / (np.std(group, ddof=1) + 1e-6))
    assert torch.allclose(grpo(), torch.tensor(expected), atol=1e-12)


def test_flipping_grpo_std_and_eps_changes_the_advantages():
    assert not torch.allclose(grpo("sample"), grpo("population"))
    assert not torch.equal(grpo("population", 1e-6), grpo("population", 1e-5))


def test_unknown_grpo_std_is_refused():
    with pytest.raises(ValueError, match="algorithm.grpo_std"):
        grpo("biased")


def loss_case():
    gen = torch.Generator().manual_seed(0)
    old = -torch.rand(6, 5, generator=gen, dtype=torch.float64) * 3
    new = old + torch.randn(6, 5, generator=gen, dtype=torch.float64) * 1.5
    advantages = torch.tensor([4.0, -4.0, 2.5, -0.5, 1.0, -6.0], dtype=torch.float64)
    return old, new, advantages[:, None].expand(6, 5).contiguous()


def vanilla(config):
    old, new, advantages = loss_case()
    mask = torch.ones_like(old)
    return get_policy_loss("vanilla")(old, new, advantages, mask, config).loss


def test_cap_without_dual_clip_is_chatlearns_grpo_loss():
    old, new, advantages = loss_case()
    got = vanilla(PolicyLossConfig(clip_ratio_c=None, policy_loss_cap=3.0))
    expected = chatlearn_grpo_loss(new.numpy(), old.numpy(), advantages.numpy())
    # A > 0 gives a loss <= -(1 - low) * A < 0, so the (positive) cap binds where A < 0:
    # at a constant 3, where rl's dual clip would give -c * A
    assert (expected == 3.0).any() and (expected[advantages.numpy() > 0] < 0).all()
    assert np.allclose(got.numpy(), expected, atol=1e-12)


def test_cap_binds_for_either_sign_of_the_advantage():
    loss = torch.tensor([5.0, -5.0, 2.0], dtype=torch.float64)
    assert cap_policy_loss(loss, 3.0).tolist() == [3.0, -5.0, 2.0]
    assert cap_policy_loss(loss, None) is loss
    old = torch.zeros(2, 1, dtype=torch.float64)
    new = torch.tensor([[-2.0], [2.0]], dtype=torch.float64)  # ratio e^-2 / e^2
    advantages = torch.tensor([[-10.0], [-10.0]], dtype=torch.float64)
    config = PolicyLossConfig(clip_ratio_c=None, policy_loss_cap=3.0)
    got = get_policy_loss("vanilla")(old, new, advantages, torch.ones_like(old), config).loss
    assert got.flatten().tolist() == [3.0, 3.0]  # max(-A r, -A clip r) = 8 and 73.9


def test_cap_is_gradient_free_where_it_binds():
    old, new, advantages = loss_case()
    new = new.clone().requires_grad_(True)
    config = PolicyLossConfig(clip_ratio_c=None, policy_loss_cap=3.0)
    loss = get_policy_loss("vanilla")(old, new, advantages, torch.ones_like(old), config).loss
    loss.sum().backward()
    assert (new.grad[loss.detach() == 3.0] == 0).all()


def test_flipping_the_cap_changes_the_loss():
    assert not torch.equal(
        vanilla(PolicyLossConfig(clip_ratio_c=None)),
        vanilla(PolicyLossConfig(clip_ratio_c=None, policy_loss_cap=3.0)),
    )
    assert torch.equal(vanilla(PolicyLossConfig()), vanilla(PolicyLossConfig(policy_loss_cap=None)))


def test_gspo_is_capped_too():
    old, new, advantages = loss_case()
    mask = torch.ones_like(old)
    plain = get_policy_loss("gspo")(old, new, advantages, mask, PolicyLossConfig()).loss
    capped = get_policy_loss("gspo")(
        old, new, advantages, mask, PolicyLossConfig(policy_loss_cap=0.01)
    ).loss
    assert torch.equal(capped, plain.clamp(max=0.01))


def test_config_keys_reach_the_algorithms():
    config = config_from_mapping(
        {
            "algorithm": {"grpo_std": "population", "grpo_std_eps": 1e-5},
            "actor": {"policy_loss_cap": 3.0, "clip_ratio_c": None},
        },
        "test",
    )
    assert actor_loss_config(config).clip.policy_loss_cap == 3.0
    assert (config.algorithm.grpo_std, config.algorithm.grpo_std_eps) == ("population", 1e-5)
    defaults = config_from_mapping({}, "test")
    assert defaults.algorithm.grpo_std == "sample" and defaults.algorithm.grpo_std_eps == 1e-6
    assert defaults.actor.policy_loss_cap is None


@pytest.mark.parametrize(
    "mapping",
    [
        {"algorithm": {"grpo_std": "biased"}},
        {"algorithm": {"grpo_std_eps": -1.0}},
        {"actor": {"policy_loss_cap": 0}},
    ],
)
def test_bad_values_are_refused(mapping):
    with pytest.raises(ConfigError):
        config_from_mapping(mapping, "test")
