"""Reward and advantage statistics that neither overflow nor go silent: float32 rewards
near 2e19 (squares past float32's 3.4e38) against float64 references written here, and
the counts of non-finite scores and all-equal groups reported as metrics."""

import math

import numpy as np
import pytest
import torch

from rl.core.algorithms import (
    compute_advantages,
    group_mean_std,
    masked_whiten,
    nonfinite_count,
    score_statistics,
)

HUGE = [2e19, -2e19, 3e19, 1e19, 2.5e19, -1e19]  # two prompts of three responses
UIDS = ["a", "a", "a", "b", "b", "b"]


def outcome_rewards(scores, width=3):
    """float32 [B, width]: each score on the last token, the rest 0."""
    rewards = torch.zeros(len(scores), width, dtype=torch.float32)
    rewards[:, -1] = torch.tensor(scores, dtype=torch.float32)
    return rewards, torch.ones_like(rewards)


def grpo_reference(scores, uids, ddof, eps=1e-6):
    scores = np.asarray(np.float32(scores), dtype=np.float64)  # what float32 storage holds
    out = np.empty_like(scores)
    for uid in set(uids):
        rows = [i for i, u in enumerate(uids) if u == uid]
        group = scores[rows]
        out[rows] = (group - group.mean()) / (group.std(ddof=ddof) + eps)
    return out


@pytest.mark.parametrize("grpo_std,ddof", [("sample", 1), ("population", 0)])
def test_grpo_on_rewards_near_2e19_matches_float64(grpo_std, ddof):
    rewards, mask = outcome_rewards(HUGE)
    adv, _ = compute_advantages("grpo", rewards, mask, prompt_uid=UIDS, grpo_std=grpo_std)
    assert adv.dtype == torch.float32
    expected = grpo_reference(HUGE, UIDS, ddof)
    assert np.all(np.abs(expected) > 0.05)  # the old float32 std was inf: every advantage 0
    np.testing.assert_allclose(adv[:, -1].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(adv[:, 0].numpy(), expected, rtol=1e-6)


def test_group_mean_std_on_huge_values_is_finite():
    values = torch.tensor(HUGE, dtype=torch.float32)
    mean, std = group_mean_std(values, torch.tensor([0, 0, 0, 1, 1, 1]))
    wide = np.float32(HUGE).astype(np.float64)
    np.testing.assert_allclose(mean.numpy()[:3], wide[:3].mean(), rtol=1e-6)
    np.testing.assert_allclose(std.numpy()[3:], wide[3:].std(ddof=1), rtol=1e-6)


def test_rloo_and_baseline_estimator_on_huge_rewards_match_float64():
    rewards, mask = outcome_rewards(HUGE)
    wide = np.float32(HUGE).astype(np.float64)
    rloo, _ = compute_advantages("rloo", rewards, mask, prompt_uid=UIDS)
    expected = np.empty(6)
    for rows in ([0, 1, 2], [3, 4, 5]):
        for i in rows:
            others = [wide[j] for j in rows if j != i]
            expected[i] = wide[i] - sum(others) / len(others)
    np.testing.assert_allclose(rloo[:, -1].numpy(), expected, rtol=1e-6)

    baseline, _ = compute_advantages("reinforce_plus_plus_baseline", rewards, mask, prompt_uid=UIDS)
    centred = np.concatenate([wide[:3] - wide[:3].mean(), wide[3:] - wide[3:].mean()])
    tokens = np.repeat(centred, 3)  # every token of a row carries its centred score
    whitened = (tokens - tokens.mean()) / math.sqrt(tokens.var(ddof=1) + 1e-8)
    np.testing.assert_allclose(baseline.flatten().numpy(), whitened, rtol=1e-5, atol=1e-6)
    assert torch.isfinite(baseline).all()


def test_batch_whitening_of_huge_values_matches_float64():
    values = torch.tensor([HUGE, HUGE[::-1]], dtype=torch.float32)
    mask = torch.tensor([[1, 1, 1, 1, 0, 1], [1, 1, 1, 1, 1, 1]])
    wide = values.double().numpy()[mask.bool().numpy()]
    expected = (wide - wide.mean()) / math.sqrt(wide.var(ddof=1) + 1e-8)
    out = masked_whiten(values, mask)
    np.testing.assert_allclose(out[mask.bool()].numpy(), expected, rtol=1e-5)
    assert out[0, 4] == 0.0


def test_non_finite_and_all_equal_groups_are_counted():
    scores = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, math.nan, 2.0, 2.0, math.inf, 5.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3, 3, 4])  # group 4 is alone
    metrics = score_statistics(scores, groups)
    assert metrics == {
        "reward/nonfinite_count": 2.0,
        "reward/zero_std_groups": 1.0,  # group 0; group 2 and 3 hold a non-finite score
        "reward/zero_std_group_frac": 0.25,  # of the 4 groups of two or more
    }


def test_single_response_groups_report_no_zero_std_share():
    metrics = score_statistics(torch.tensor([1.0, 1.0]), torch.tensor([0, 1]))
    assert metrics == {"reward/nonfinite_count": 0.0}


def test_nonfinite_advantages_are_counted_on_valid_tokens_only():
    values = torch.tensor([[1.0, math.nan], [math.inf, 0.0]])
    assert nonfinite_count(values, torch.tensor([[1, 0], [1, 1]])) == 1.0
