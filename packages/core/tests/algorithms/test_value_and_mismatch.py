import math

import pytest
import torch

from rl.core.algorithms import clipped_value_loss, mismatch_metrics, truncated_is_weights


def test_clipped_value_loss_per_token():
    values = torch.tensor([1.0, 0.0, 2.0])
    old = torch.tensor([0.0, 0.0, 0.0])
    returns = torch.tensor([0.0, 1.0, 0.4])
    loss, clipped = clipped_value_loss(values, old, returns, cliprange_value=0.5)
    # token 0: v=1 -> clip 0.5; max((1-0)^2, (0.5-0)^2) = 1 -> 0.5
    # token 1: v=0 inside; (0-1)^2 = 1 -> 0.5
    # token 2: v=2 -> clip 0.5; max((2-.4)^2, (.5-.4)^2) = 2.56 -> 1.28
    assert torch.allclose(loss, torch.tensor([0.5, 0.5, 1.28]))
    assert clipped.tolist() == [False, False, False]
    loss, clipped = clipped_value_loss(
        torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([2.0]), 0.5
    )
    assert loss.item() == pytest.approx(0.5 * 1.5**2) and clipped.item()


def test_truncated_importance_weights_and_mismatch_metrics():
    old = torch.tensor([[-1.0, -2.0, -0.1]])
    rollout = torch.tensor([[-1.1, -1.0, -0.1]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    weights = truncated_is_weights(old, rollout, cap=1.05)
    assert torch.allclose(weights, torch.tensor([[1.05, math.exp(-1.0), 1.0]]))
    metrics = mismatch_metrics(old, rollout, mask)
    assert metrics["mismatch/abs_logprob_diff"] == pytest.approx((0.1 + 1.0) / 2)
    k3 = [math.exp(-d) + d - 1 for d in (0.1, -1.0)]
    assert metrics["mismatch/kl"] == pytest.approx(sum(k3) / 2)
    assert metrics["mismatch/ppl_ratio"] == pytest.approx(math.exp(1.5) / math.exp(1.05))
