"""KL estimators, exact KL from logits, controllers and KL-in-reward, against formulas."""

import math

import pytest
import torch

from rl.core.algorithms import (
    AdaptiveKLController,
    apply_kl_in_reward,
    full_kl,
    kl_penalty,
    make_kl_controller,
)


def test_estimators_match_their_formulas():
    logp = torch.tensor([-1.0, -2.0, -0.5, -30.0])
    ref = torch.tensor([-1.5, -1.0, -0.5, -1.0])
    for name, fn in {
        "kl": lambda a, b: a - b,
        "k1": lambda a, b: a - b,
        "abs": lambda a, b: abs(a - b),
        "mse": lambda a, b: 0.5 * (a - b) ** 2,
        "k2": lambda a, b: 0.5 * (a - b) ** 2,
        "low_var_kl": lambda a, b: min(max(math.exp(b - a) - (b - a) - 1, -10), 10),
    }.items():
        got = kl_penalty(logp, ref, name)
        expected = [fn(a, b) for a, b in zip(logp.tolist(), ref.tolist(), strict=True)]
        assert torch.allclose(got, torch.tensor(expected), atol=1e-12), name
    assert kl_penalty(logp, ref, "low_var_kl")[3].item() == 10.0  # clamped, not inf


def test_full_kl_from_logits():
    g = torch.Generator().manual_seed(0)
    logits, ref_logits = torch.randn(3, 7, generator=g), torch.randn(3, 7, generator=g)
    p, q = torch.softmax(logits, -1), torch.softmax(ref_logits, -1)
    expected = [
        sum(pi * math.log(pi / qi) for pi, qi in zip(pr, qr, strict=True))
        for pr, qr in zip(p.tolist(), q.tolist(), strict=True)
    ]
    assert torch.allclose(full_kl(logits, ref_logits).double(), torch.tensor(expected), atol=1e-5)


def test_k3_is_an_unbiased_nonnegative_estimate_of_kl():
    g = torch.Generator().manual_seed(1)
    # Moderate logits, so that the [-10, 10] clamp never binds and the estimate is unbiased.
    p_logits, q_logits = torch.randn(50, generator=g) * 0.5, torch.randn(50, generator=g) * 0.5
    logp, logq = torch.log_softmax(p_logits, 0), torch.log_softmax(q_logits, 0)
    samples = torch.multinomial(logp.exp(), 200_000, replacement=True, generator=g)
    k3 = kl_penalty(logp[samples], logq[samples], "low_var_kl")
    assert (k3 >= 0).all()
    exact = (logp.exp() * (logp - logq)).sum()
    assert k3.mean().item() == pytest.approx(exact.item(), rel=0.05)


def test_adaptive_controller_closed_form():
    ctrl = make_kl_controller("adaptive", 0.1, target_kl=0.05, horizon=100)
    assert isinstance(ctrl, AdaptiveKLController)
    ctrl.update(current_kl=0.5, n_steps=10)  # error clipped to +0.2
    assert ctrl.value == pytest.approx(0.1 * (1 + 0.2 * 10 / 100))
    ctrl.update(current_kl=0.05 * 0.9, n_steps=10)  # error -0.1
    assert ctrl.value == pytest.approx(0.1 * 1.02 * (1 - 0.1 * 10 / 100))
    fixed = make_kl_controller("fixed", 0.3)
    fixed.update(10.0, 5)
    assert fixed.value == 0.3
    with pytest.raises(ValueError, match="kl_ctrl.type = 'pid'"):
        make_kl_controller("pid", 0.1)


def test_kl_in_reward_subtracts_per_token_penalty():
    scores = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    logp = torch.tensor([[-1.0, -1.0], [-2.0, -0.5]])
    ref = torch.tensor([[-1.5, -0.5], [-2.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    rewards, seq_kl = apply_kl_in_reward(scores, logp, ref, mask, "kl", 0.1)
    assert torch.allclose(rewards, torch.tensor([[-0.05, 1.05], [0.0, 0.0]]))
    assert torch.allclose(seq_kl, torch.tensor([0.0, 0.0]))
