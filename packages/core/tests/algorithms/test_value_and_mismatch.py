"""Critic loss with value clipping, truncated importance sampling and mismatch metrics."""

import math

import pytest
import torch

from rl.core.algorithms import (
    clipped_value_loss,
    mismatch_metrics,
    truncated_is_weights,
    value_loss,
)


def value_case(seed, rows=3, width=5):
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(rows, width, generator=g)
    values = old + torch.randn(rows, width, generator=g) * 0.6
    returns = torch.randn(rows, width, generator=g)
    mask = (torch.rand(rows, width, generator=g) > 0.3).double()
    mask[:, 0] = 1
    return values, old, returns, mask


def value_reference(v, old, ret, c):
    clipped_v = old + min(max(v - old, -c), c)
    return 0.5 * max((v - ret) ** 2, (clipped_v - ret) ** 2), (clipped_v - ret) ** 2 > (
        v - ret
    ) ** 2


def test_clipped_value_loss_closed_form():
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


def test_value_loss_matches_reference_with_metrics():
    values, old, returns, mask = value_case(0)
    loss, metrics = value_loss(values, old, returns, mask, 0.2, "token-mean")
    rows = zip(values.tolist(), old.tolist(), returns.tolist(), mask.tolist(), strict=True)
    per_token = [
        value_reference(v, o, r, 0.2)
        for vr, orow, rr, mr in rows
        for v, o, r, m in zip(vr, orow, rr, mr, strict=True)
        if m
    ]
    assert loss.item() == pytest.approx(sum(x for x, _ in per_token) / len(per_token), rel=1e-12)
    assert metrics["critic/vf_clipfrac"] == pytest.approx(
        sum(c for _, c in per_token) / len(per_token)
    )
    assert metrics["critic/vf_loss"] == pytest.approx(loss.item())
    assert metrics["critic/vpred_mean"] == pytest.approx(
        (values * mask).sum().item() / mask.sum().item()
    )


@pytest.mark.parametrize(
    ("mode", "scale", "normaliser"),
    [("token-sum", None, 1.0), ("token-sum", 8.0, 8.0), ("seq-mean-token-sum-norm", 8.0, 24.0)],
)
def test_value_loss_token_sum_and_scale_factor(mode, scale, normaliser):
    """token-sum: the plain sum (/ loss_scale_factor); -norm: sum / (sequences x factor)."""
    values, old, returns, mask = value_case(2)
    loss, _ = value_loss(values, old, returns, mask, 0.2, mode, loss_scale_factor=scale)
    rows = zip(values.tolist(), old.tolist(), returns.tolist(), mask.tolist(), strict=True)
    total = sum(
        value_reference(v, o, r, 0.2)[0]
        for vr, orow, rr, mr in rows
        for v, o, r, m in zip(vr, orow, rr, mr, strict=True)
        if m
    )
    assert loss.item() == pytest.approx(total / normaliser, rel=1e-12)  # 3 rows x 8 for -norm


def test_value_loss_without_clipping_is_half_the_squared_error():
    values, old, returns, _ = value_case(1)
    loss, clipped = clipped_value_loss(values, old, returns, None)
    assert torch.allclose(loss, 0.5 * (values - returns) ** 2) and not clipped.any()


def test_value_loss_gradcheck_float64():
    values, old, returns, mask = value_case(2)
    # keep finite differences off the clip kinks |v - v_old| = c
    assert ((values - old).abs() - 0.2).abs().min() > 1e-4
    values.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda v: value_loss(v, old, returns, mask, 0.2, "seq-mean-token-mean")[0], (values,)
    )


def test_truncated_importance_weights_and_mismatch_metrics():
    old = torch.tensor([[-1.0, -2.0, -0.1]])
    rollout = torch.tensor([[-1.1, -1.0, -5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    weights = truncated_is_weights(old, rollout, cap=1.05)
    assert torch.allclose(weights, torch.tensor([[1.05, math.exp(-1.0), 1.05]]))
    assert not weights.requires_grad
    metrics = mismatch_metrics(old, rollout, mask)
    assert metrics["mismatch/abs_logprob_diff"] == pytest.approx((0.1 + 1.0) / 2)
    # the largest over valid tokens (the masked one is 4.9 apart)
    assert metrics["mismatch/max_abs_logprob_diff"] == pytest.approx(1.0)
    # k3 with r = p_trainer / p_rollout on the two valid tokens: log r = 0.1 and -1.0
    k3 = [math.exp(d) - 1 - d for d in (0.1, -1.0)]
    assert metrics["mismatch/kl"] == pytest.approx(sum(k3) / 2)
    # ppl_trainer = exp(1.5), ppl_rollout = exp(1.05)
    assert metrics["mismatch/ppl_ratio"] == pytest.approx(math.exp(1.5 - 1.05))


def test_mismatch_kl_estimates_kl_rollout_to_trainer():
    """Tokens drawn from the rollout distribution: k3 averages to KL(rollout || trainer)."""
    g = torch.Generator().manual_seed(3)
    rollout_logits, trainer_logits = torch.randn(40, generator=g), torch.randn(40, generator=g)
    log_r, log_t = (
        torch.log_softmax(rollout_logits * 0.5, 0),
        torch.log_softmax(trainer_logits * 0.5, 0),
    )
    tokens = torch.multinomial(log_r.exp(), 100_000, replacement=True, generator=g)
    metrics = mismatch_metrics(log_t[tokens], log_r[tokens], torch.ones(len(tokens)))
    exact = (log_r.exp() * (log_r - log_t)).sum().item()
    assert metrics["mismatch/kl"] == pytest.approx(exact, rel=0.05)
