"""Loss metrics are computed over valid tokens only, and agree with counting by hand."""

import math

import pytest
import torch

from rl.core.algorithms import (
    PolicyLossConfig,
    advantage_metrics,
    get_policy_loss,
    policy_metrics,
)


def test_clip_fractions_ratio_stats_and_approx_kl_by_hand():
    # ratios 1.0, 1.5, 0.5, 1.1, 4.0 (padding), with clip 0.2 and dual clip 3
    ratios = [1.0, 1.5, 0.5, 1.1, 4.0]
    advantages = torch.tensor([[1.0, 1.0, -1.0, -1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])
    old = torch.zeros(1, 5)
    logp = torch.log(torch.tensor([ratios]))
    terms = get_policy_loss("vanilla")(old, logp, advantages, mask, PolicyLossConfig())
    metrics = policy_metrics(terms, logp, old, mask)
    # 1.5 with A > 0 hits the high bound; 0.5 with A < 0 hits the low bound
    assert metrics["actor/pg_clipfrac_high"] == pytest.approx(1 / 4)
    assert metrics["actor/pg_clipfrac_low"] == pytest.approx(1 / 4)
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 4)
    assert metrics["actor/pg_clipfrac_dual"] == 0.0  # the 4.0 that would be dual-clipped is padding
    assert metrics["actor/ratio_max"] == pytest.approx(1.5)
    assert metrics["actor/ratio_min"] == pytest.approx(0.5)
    assert metrics["actor/ratio_mean"] == pytest.approx((1.0 + 1.5 + 0.5 + 1.1) / 4)
    assert metrics["actor/approx_kl"] == pytest.approx(-sum(math.log(r) for r in ratios[:4]) / 4)
    assert metrics["actor/early_stopped_frac"] == 0.0


def test_dual_clip_fraction():
    advantages = torch.tensor([[-1.0, -1.0]])
    logp = torch.log(torch.tensor([[4.0, 2.0]]))
    terms = get_policy_loss("vanilla")(
        torch.zeros(1, 2), logp, advantages, torch.ones(1, 2), PolicyLossConfig()
    )
    metrics = policy_metrics(terms, logp, torch.zeros(1, 2), torch.ones(1, 2))
    assert metrics["actor/pg_clipfrac_dual"] == pytest.approx(0.5)


def test_advantage_return_value_stats_are_masked():
    advantages = torch.tensor([[1.0, -2.0, 99.0], [0.5, -99.0, -99.0]])
    returns = advantages * 2
    values = advantages - 1
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    metrics = advantage_metrics(advantages, returns, mask, values)
    assert metrics["critic/advantages/mean"] == pytest.approx((1 - 2 + 0.5) / 3)
    assert metrics["critic/advantages/max"] == 1.0
    assert metrics["critic/advantages/min"] == -2.0
    assert metrics["critic/returns/max"] == 2.0
    assert metrics["critic/values/min"] == -3.0
    assert "critic/values/mean" not in advantage_metrics(advantages, returns, mask)
    empty = advantage_metrics(advantages, returns, torch.zeros_like(mask))
    assert empty["critic/advantages/mean"] == 0.0
