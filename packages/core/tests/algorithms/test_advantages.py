"""Advantage estimators against float64 references written here with plain Python loops."""

import math
import statistics

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import ADVANTAGE_ESTIMATORS, compute_advantages, group_index


def random_case(seed, rows=6, width=5):
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(rows, width, generator=g, dtype=torch.float64)
    values = torch.randn(rows, width, generator=g, dtype=torch.float64)
    mask = (torch.rand(rows, width, generator=g) > 0.25).double()
    mask[:, 0] = 1.0
    return rewards, values, mask


def whiten_reference(matrix, mask):
    valid = [matrix[i][j] for i in range(len(matrix)) for j in range(len(matrix[0])) if mask[i][j]]
    mean = sum(valid) / len(valid)
    var = sum((v - mean) ** 2 for v in valid) / (len(valid) - 1)
    return [
        [
            (matrix[i][j] - mean) / math.sqrt(var + 1e-8) if mask[i][j] else 0.0
            for j in range(len(matrix[0]))
        ]
        for i in range(len(matrix))
    ]


def gae_reference(rewards, values, mask, gamma, lam):
    """Per row: walk the valid tokens backwards, skipping padding entirely."""
    advantages = [[0.0] * len(rewards[0]) for _ in rewards]
    for i in range(len(rewards)):
        valid = [t for t in range(len(rewards[0])) if mask[i][t]]
        gae, next_value = 0.0, 0.0
        for t in reversed(valid):
            delta = rewards[i][t] + gamma * next_value - values[i][t]
            gae = delta + gamma * lam * gae
            advantages[i][t] = gae
            next_value = values[i][t]
    returns = [
        [advantages[i][t] + values[i][t] if mask[i][t] else 0.0 for t in range(len(rewards[0]))]
        for i in range(len(rewards))
    ]
    return whiten_reference(advantages, mask), returns


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (0.5, 0.0)])
def test_gae_matches_reference(seed, gamma, lam):
    rewards, values, mask = random_case(seed)
    adv, ret = compute_advantages("gae", rewards, mask, values=values, gamma=gamma, lam=lam)
    ref_adv, ref_ret = gae_reference(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lam)
    assert torch.allclose(adv, torch.tensor(ref_adv), atol=1e-10)
    assert torch.allclose(ret, torch.tensor(ref_ret), atol=1e-10)


def test_gae_closed_form_single_token():
    # One valid token per row: A = r - V before whitening, return = r; padding is 0.
    adv, ret = compute_advantages(
        "gae",
        torch.tensor([[2.0, 0.0], [1.0, 5.0]]),
        torch.tensor([[1.0, 0.0], [1.0, 0.0]]),
        values=torch.tensor([[0.5, 9.0], [0.0, 3.0]]),
    )
    assert ret.tolist() == [[2.0, 0.0], [1.0, 0.0]]
    # raw advantages 1.5 and 1.0, whitened: (x - 1.25) / std_unbiased = +-0.7071
    expected = torch.tensor([[0.70710678, 0.0], [-0.70710678, 0.0]])
    assert torch.allclose(adv, expected, atol=1e-6)


def outcome(rewards, mask):
    return [
        sum(r * m for r, m in zip(rr, mm, strict=True))
        for rr, mm in zip(rewards, mask, strict=True)
    ]


def grpo_reference(scores, uids, norm, eps=1e-6):
    out = []
    for score, uid in zip(scores, uids, strict=True):
        group = [s for s, u in zip(scores, uids, strict=True) if u == uid]
        if len(group) < 2:
            mean, std = 0.0, 1.0
        else:
            mean, std = statistics.fmean(group), statistics.stdev(group)
        out.append((score - mean) / (std + eps) if norm else score - mean)
    return out


@pytest.mark.parametrize("norm", [True, False])
def test_grpo_groups_by_uid_not_position(norm):
    rewards, _, mask = random_case(3)
    uids = ["b", "a", "b", "c", "a", "b"]  # interleaved; "c" is a group of one
    adv, ret = compute_advantages(
        "grpo", rewards, mask, group_index=group_index(uids), norm_adv_by_std=norm
    )
    expected = grpo_reference(outcome(rewards.tolist(), mask.tolist()), uids, norm)
    assert torch.allclose(adv, torch.tensor(expected).unsqueeze(-1) * mask, atol=1e-10)
    assert torch.equal(adv, ret)


def test_rloo_reference():
    rewards, _, mask = random_case(4)
    uids = [0, 0, 0, 1, 1, 2]
    adv, _ = compute_advantages("rloo", rewards, mask, group_index=group_index(uids))
    scores = outcome(rewards.tolist(), mask.tolist())
    expected = []
    for i, uid in enumerate(uids):
        others = [
            s for j, (s, u) in enumerate(zip(scores, uids, strict=True)) if u == uid and j != i
        ]
        expected.append(scores[i] - sum(others) / len(others) if others else scores[i])
    assert torch.allclose(adv, torch.tensor(expected).unsqueeze(-1) * mask, atol=1e-10)


def discounted_reference(rewards, mask, gamma):
    out = [[0.0] * len(rewards[0]) for _ in rewards]
    for i in range(len(rewards)):
        running = 0.0
        for t in reversed(range(len(rewards[0]))):
            if mask[i][t]:
                running = rewards[i][t] + gamma * running
                out[i][t] = running
    return out


def test_reinforce_plus_plus_reference():
    rewards, _, mask = random_case(5)
    adv, ret = compute_advantages("reinforce_plus_plus", rewards, mask, gamma=0.9)
    expected_returns = discounted_reference(rewards.tolist(), mask.tolist(), 0.9)
    assert torch.allclose(ret, torch.tensor(expected_returns), atol=1e-10)
    assert torch.allclose(
        adv, torch.tensor(whiten_reference(expected_returns, mask.tolist())), atol=1e-10
    )


def test_reinforce_plus_plus_baseline_reference():
    rewards, _, mask = random_case(6)
    uids = [1, 1, 2, 2, 2, 3]
    adv, _ = compute_advantages(
        "reinforce_plus_plus_baseline", rewards, mask, group_index=group_index(uids)
    )
    scores = outcome(rewards.tolist(), mask.tolist())
    centred = []
    for s, u in zip(scores, uids, strict=True):
        group = [x for x, v in zip(scores, uids, strict=True) if v == u]
        centred.append(s - (statistics.fmean(group) if len(group) > 1 else 0.0))
    matrix = [[c * m for m in row] for c, row in zip(centred, mask.tolist(), strict=True)]
    assert torch.allclose(adv, torch.tensor(whiten_reference(matrix, mask.tolist())), atol=1e-10)


def test_remax_reference():
    rewards, _, mask = random_case(7)
    baselines = torch.tensor([0.5, -1.0, 0.0, 2.0, 1.0, 0.25])
    adv, _ = compute_advantages("remax", rewards, mask, reward_baselines=baselines)
    returns = discounted_reference(rewards.tolist(), mask.tolist(), 1.0)
    expected = [
        [(returns[i][t] - baselines[i].item()) * mask[i][t].item() for t in range(5)]
        for i in range(6)
    ]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-10)


def test_unknown_estimator_lists_valid_names():
    with pytest.raises(
        ValueError,
        match=r"algorithm.adv_estimator = 'ppo2' is not a known advantage "
        r"estimator; valid: gae, grpo, reinforce_plus_plus, "
        r"reinforce_plus_plus_baseline, remax, rloo",
    ):
        compute_advantages("ppo2", torch.zeros(1, 1), torch.ones(1, 1))
    with pytest.raises(ValueError, match="'gae' needs values"):
        compute_advantages("gae", torch.zeros(1, 1), torch.ones(1, 1))
    assert "grpo" in ADVANTAGE_ESTIMATORS.names()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    name=st.sampled_from(
        ["gae", "grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "remax"]
    ),
)
def test_padding_never_leaks(seed, name):
    """Changing rewards and values at padded positions changes no valid output."""
    rewards, values, mask = random_case(seed)
    kwargs = {
        "values": values,
        "group_index": torch.tensor([0, 0, 1, 1, 2, 2]),
        "reward_baselines": torch.zeros(6),
        "gamma": 0.9,
        "lam": 0.8,
    }
    adv, ret = compute_advantages(name, rewards, mask, **kwargs)
    noise = torch.randn(rewards.shape, generator=torch.Generator().manual_seed(seed + 1)) * 100
    kwargs["values"] = values + noise * (1 - mask)
    adv2, ret2 = compute_advantages(name, rewards + noise * (1 - mask), mask, **kwargs)
    assert torch.allclose(adv * mask, adv2 * mask, atol=1e-9)
    assert torch.allclose(ret * mask, ret2 * mask, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(scores=st.lists(st.floats(-5, 5), min_size=2, max_size=12), groups=st.integers(1, 4))
def test_grpo_advantages_sum_to_zero_per_group(scores, groups):
    uids = [i % groups for i in range(len(scores))]
    rewards = torch.tensor(scores).unsqueeze(-1)
    adv, _ = compute_advantages(
        "grpo",
        rewards,
        torch.ones_like(rewards),
        group_index=group_index(uids),
        norm_adv_by_std=False,
    )
    for g in set(uids):
        members = [adv[i, 0].item() for i, u in enumerate(uids) if u == g]
        if len(members) > 1:
            assert abs(sum(members)) < 1e-9
