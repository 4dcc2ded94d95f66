"""Advantage estimators against float64 references written here with plain Python loops."""

import math
import statistics

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import (
    ADVANTAGE_ESTIMATORS,
    compute_advantages,
    group_index,
    normalize_advantages,
)

ESTIMATORS = [
    "gae",
    "grpo",
    "reinforce",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "remax",
    "rloo",
]


def random_case(seed, rows=6, width=5):
    """Rewards, values and a mask with holes and trailing padding (first token valid)."""
    g = torch.Generator().manual_seed(seed)
    rewards = torch.randn(rows, width, generator=g, dtype=torch.float64)
    values = torch.randn(rows, width, generator=g, dtype=torch.float64)
    mask = (torch.rand(rows, width, generator=g) > 0.25).double()
    mask[:, 0] = 1.0
    return rewards, values, mask


def whiten_reference(matrix, mask):
    valid = [
        x
        for row, mrow in zip(matrix, mask, strict=True)
        for x, m in zip(row, mrow, strict=True)
        if m
    ]
    mean = sum(valid) / len(valid)
    var = sum((v - mean) ** 2 for v in valid) / (len(valid) - 1)
    return [
        [(x - mean) / math.sqrt(var + 1e-8) if m else 0.0 for x, m in zip(row, mrow, strict=True)]
        for row, mrow in zip(matrix, mask, strict=True)
    ]


def gae_reference(rewards, values, mask, gamma, lam):
    """Per row: walk the valid tokens backwards, skipping padding entirely."""
    advantages = [[0.0] * len(row) for row in rewards]
    returns = [[0.0] * len(row) for row in rewards]
    for i, row in enumerate(rewards):
        gae, next_value = 0.0, 0.0
        for t in reversed([t for t in range(len(row)) if mask[i][t]]):
            delta = row[t] + gamma * next_value - values[i][t]
            gae = delta + gamma * lam * gae
            advantages[i][t], returns[i][t] = gae, gae + values[i][t]
            next_value = values[i][t]
    return whiten_reference(advantages, mask), returns


def discounted_reference(rewards, mask, gamma):
    out = [[0.0] * len(row) for row in rewards]
    for i, row in enumerate(rewards):
        running = 0.0
        for t in reversed(range(len(row))):
            if mask[i][t]:
                running = row[t] + gamma * running
                out[i][t] = running
    return out


def outcome(rewards, mask):
    return [
        sum(r * m for r, m in zip(rr, mm, strict=True))
        for rr, mm in zip(rewards, mask, strict=True)
    ]


def broadcast(per_row, mask):
    return torch.tensor([[x * m for m in row] for x, row in zip(per_row, mask, strict=True)])


def group_of(scores, uids, uid, skip=None):
    return [s for j, (s, u) in enumerate(zip(scores, uids, strict=True)) if u == uid and j != skip]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (0.5, 0.0)])
def test_gae_matches_reference(seed, gamma, lam):
    rewards, values, mask = random_case(seed)
    adv, ret = compute_advantages("gae", rewards, mask, values=values, gamma=gamma, lam=lam)
    ref_adv, ref_ret = gae_reference(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lam)
    assert torch.allclose(adv, torch.tensor(ref_adv), atol=1e-10)
    assert torch.allclose(ret, torch.tensor(ref_ret), atol=1e-10)


def test_gae_closed_form_hole_is_skipped():
    # Tokens 0 and 2 are valid, 1 is a hole (e.g. a tool output). gamma = lam = 1:
    # A_2 = r_2 - V_2 = 1 - 0.5; A_0 = r_0 + V_2 - V_0 + A_2 = r_0 + r_2 - V_0 = 2 + 1 - 1.
    rewards = torch.tensor([[2.0, 100.0, 1.0, 7.0]])
    values = torch.tensor([[1.0, -50.0, 0.5, 9.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0, 0.0]])
    _, returns = compute_advantages("gae", rewards, mask, values=values)
    assert returns.tolist() == [[3.0, 0.0, 1.0, 0.0]]


@pytest.mark.parametrize("norm", [True, False])
def test_grpo_groups_by_uid_not_position(norm):
    rewards, _, mask = random_case(3)
    uids = ["b", "a", "b", "c", "a", "b"]  # interleaved; "c" is a group of one
    adv, ret = compute_advantages("grpo", rewards, mask, prompt_uid=uids, norm_adv_by_std=norm)
    expected = []
    for score, uid in zip(outcome(rewards.tolist(), mask.tolist()), uids, strict=True):
        group = group_of(outcome(rewards.tolist(), mask.tolist()), uids, uid)
        mean, std = (statistics.fmean(group), statistics.stdev(group)) if len(group) > 1 else (0, 1)
        expected.append((score - mean) / (std + 1e-6) if norm else score - mean)
    assert torch.allclose(adv, broadcast(expected, mask.tolist()), atol=1e-10)
    assert torch.equal(adv, ret)


def test_prompt_uids_as_list_numpy_tensor_or_group_index_agree():
    rewards, _, mask = random_case(8)
    uids = [7, 3, 7, 3, 9, 9]
    results = [
        compute_advantages("grpo", rewards, mask, prompt_uid=uids)[0],
        compute_advantages("grpo", rewards, mask, prompt_uid=np.array(uids))[0],
        compute_advantages("grpo", rewards, mask, prompt_uid=torch.tensor(uids))[0],
        compute_advantages("grpo", rewards, mask, prompt_uid=np.array([str(u) for u in uids]))[0],
        compute_advantages("grpo", rewards, mask, group_index=group_index(uids))[0],
    ]
    for other in results[1:]:
        assert torch.equal(results[0], other)


def test_rloo_reference():
    rewards, _, mask = random_case(4)
    uids = [0, 0, 0, 1, 1, 2]
    adv, _ = compute_advantages("rloo", rewards, mask, prompt_uid=uids)
    scores = outcome(rewards.tolist(), mask.tolist())
    expected = []
    for i, uid in enumerate(uids):
        others = group_of(scores, uids, uid, skip=i)
        expected.append(scores[i] - sum(others) / len(others) if others else scores[i])
    assert torch.allclose(adv, broadcast(expected, mask.tolist()), atol=1e-10)


def test_reinforce_plus_plus_reference():
    rewards, _, mask = random_case(5)
    adv, ret = compute_advantages("reinforce_plus_plus", rewards, mask, gamma=0.9)
    expected_returns = discounted_reference(rewards.tolist(), mask.tolist(), 0.9)
    assert torch.allclose(ret, torch.tensor(expected_returns), atol=1e-10)
    expected = whiten_reference(expected_returns, mask.tolist())
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-10)


def test_reinforce_plus_plus_baseline_reference():
    rewards, _, mask = random_case(6)
    uids = [1, 1, 2, 2, 2, 3]
    adv, returns = compute_advantages(
        "reinforce_plus_plus_baseline", rewards, mask, prompt_uid=uids
    )
    scores = outcome(rewards.tolist(), mask.tolist())
    centred = []
    for s, u in zip(scores, uids, strict=True):
        group = group_of(scores, uids, u)
        centred.append(s - (statistics.fmean(group) if len(group) > 1 else 0.0))
    matrix = broadcast(centred, mask.tolist()).tolist()
    expected = torch.tensor(whiten_reference(matrix, mask.tolist()))
    assert torch.allclose(adv, expected, atol=1e-10)
    # returns are the whitened advantages, as in verl (not the centred scores)
    assert torch.allclose(returns, expected, atol=1e-10)


def test_remax_reference():
    rewards, _, mask = random_case(7)
    baselines = [0.5, -1.0, 0.0, 2.0, 1.0, 0.25]
    adv, _ = compute_advantages("remax", rewards, mask, reward_baselines=torch.tensor(baselines))
    returns = discounted_reference(rewards.tolist(), mask.tolist(), 1.0)
    expected = [
        [(returns[i][t] - baselines[i]) * mask[i, t].item() for t in range(5)] for i in range(6)
    ]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-10)


def test_normalize_advantages_reference():
    advantages, _, mask = random_case(9)
    expected = whiten_reference(advantages.tolist(), mask.tolist())
    assert torch.allclose(normalize_advantages(advantages, mask), torch.tensor(expected))


def pack(tensors, mask, seed):
    """Pack padded rows into one flat stream: each sequence gets a few prompt tokens
    (mask 0, garbage values) and its response up to the last valid token, and the
    sequences are laid out in a shuffled order."""
    g = torch.Generator().manual_seed(seed)
    flat = [[] for _ in tensors]
    flat_mask, seq_ids, where = [], [], []
    for b in torch.randperm(mask.shape[0], generator=g).tolist():
        prompt = int(torch.randint(0, 3, (1,), generator=g))
        length = int(mask[b].nonzero().max()) + 1
        for out, tensor in zip(flat, tensors, strict=True):
            out += (torch.randn(prompt, generator=g) * 50).tolist() + tensor[b, :length].tolist()
        flat_mask += [0.0] * prompt + mask[b, :length].tolist()
        seq_ids += [b] * (prompt + length)
        where += [None] * prompt + [(b, t) for t in range(length)]
    packed = [torch.tensor(out) for out in flat]
    return packed, torch.tensor(flat_mask), torch.tensor(seq_ids), where


@pytest.mark.parametrize("name", ESTIMATORS)
def test_packed_sequences_equal_the_padded_batch(name):
    rewards, values, mask = random_case(10, rows=5, width=6)
    kwargs = {
        "prompt_uid": ["x", "y", "x", "y", "x"],
        "reward_baselines": torch.tensor([0.1, -0.2, 0.3, 0.0, 1.0]),
        "gamma": 0.9,
        "lam": 0.7,
    }
    padded_adv, padded_ret = compute_advantages(name, rewards, mask, values=values, **kwargs)
    (flat_rewards, flat_values), flat_mask, seq_ids, where = pack([rewards, values], mask, 0)
    adv, ret = compute_advantages(
        name, flat_rewards, flat_mask, values=flat_values, seq_ids=seq_ids, **kwargs
    )
    for i, position in enumerate(where):
        expected = (0.0, 0.0) if position is None else (padded_adv[position], padded_ret[position])
        assert adv[i].item() == pytest.approx(float(expected[0]), abs=1e-10)
        assert ret[i].item() == pytest.approx(float(expected[1]), abs=1e-10)


def test_errors_name_what_is_missing():
    with pytest.raises(
        ValueError,
        match=r"algorithm.adv_estimator = 'ppo2' is not a known advantage estimator; "
        r"valid: gae, grpo, reinforce, reinforce_plus_plus, reinforce_plus_plus_baseline, "
        r"remax, rloo$",
    ):
        compute_advantages("ppo2", torch.zeros(1, 1), torch.ones(1, 1))
    with pytest.raises(ValueError, match="'gae' needs values"):
        compute_advantages("gae", torch.zeros(1, 1), torch.ones(1, 1))
    with pytest.raises(ValueError, match="'grpo' needs prompt_uid"):
        compute_advantages("grpo", torch.zeros(2, 1), torch.ones(2, 1))
    with pytest.raises(ValueError, match="3 prompt uids for 2 sequences"):
        compute_advantages("rloo", torch.zeros(2, 1), torch.ones(2, 1), prompt_uid=[1, 2, 3])
    with pytest.raises(ValueError, match=r"algorithm.gamma = 1.5; allowed: a number in \[0, 1\]"):
        compute_advantages("remax", torch.zeros(1, 1), torch.ones(1, 1), gamma=1.5)
    assert ADVANTAGE_ESTIMATORS.names() == ESTIMATORS


def test_gradcheck_float64():
    rewards, values, mask = random_case(11, rows=3, width=4)
    rewards.requires_grad_(True)
    values.requires_grad_(True)
    uids = [0, 0, 1]

    def gae(r, v):
        return compute_advantages("gae", r, mask, values=v, gamma=0.9, lam=0.8)

    def grpo(r):
        return compute_advantages("grpo", r, mask, prompt_uid=[0, 0, 0])[0]

    assert torch.autograd.gradcheck(gae, (rewards, values))
    assert torch.autograd.gradcheck(grpo, (rewards,))
    for name in ("rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline"):
        fn = lambda r, n=name: compute_advantages(n, r, mask, prompt_uid=uids)[0]  # noqa: E731
        assert torch.autograd.gradcheck(fn, (rewards,)), name


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), name=st.sampled_from(ESTIMATORS))
def test_padding_never_leaks(seed, name):
    """Changing rewards and values at padded positions changes no output."""
    rewards, values, mask = random_case(seed)
    kwargs = {
        "values": values,
        "prompt_uid": [0, 0, 1, 1, 2, 2],
        "reward_baselines": torch.zeros(6),
        "gamma": 0.9,
        "lam": 0.8,
    }
    adv, ret = compute_advantages(name, rewards, mask, **kwargs)
    noise = torch.randn(rewards.shape, generator=torch.Generator().manual_seed(seed + 1)) * 100
    kwargs["values"] = values + noise * (1 - mask)
    adv2, ret2 = compute_advantages(name, rewards + noise * (1 - mask), mask, **kwargs)
    assert torch.allclose(adv, adv2, atol=1e-9)
    assert torch.allclose(ret, ret2, atol=1e-9)
    assert not adv[mask == 0].any() and not ret[mask == 0].any()


@settings(max_examples=50, deadline=None)
@given(
    scores=st.lists(st.floats(-5, 5), min_size=2, max_size=12),
    groups=st.integers(1, 4),
    norm=st.booleans(),
)
def test_grpo_advantages_sum_to_zero_per_group(scores, groups, norm):
    uids = [i % groups for i in range(len(scores))]
    rewards = torch.tensor(scores).unsqueeze(-1)
    adv, _ = compute_advantages(
        "grpo", rewards, torch.ones_like(rewards), prompt_uid=uids, norm_adv_by_std=norm
    )
    for g in set(uids):
        members = [adv[i, 0].item() for i, u in enumerate(uids) if u == g]
        if len(members) > 1:
            assert abs(sum(members)) < 1e-6


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["grpo", "rloo"]))
def test_reordering_rows_reorders_advantages(seed, name):
    """Groups come from uids, so a permutation of the rows permutes the result."""
    rewards, _, mask = random_case(seed)
    uids = ["p", "q", "p", "r", "q", "p"]
    order = torch.randperm(6, generator=torch.Generator().manual_seed(seed))
    adv, _ = compute_advantages(name, rewards, mask, prompt_uid=uids)
    shuffled_uids = [uids[i] for i in order.tolist()]
    shuffled, _ = compute_advantages(name, rewards[order], mask[order], prompt_uid=shuffled_uids)
    assert torch.allclose(shuffled, adv[order], atol=1e-12)
