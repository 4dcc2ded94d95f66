"""Policy losses against per-token float64 formulas, gradient checks and clip-range properties."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import ActorLossConfig, PolicyLossConfig, actor_loss, get_policy_loss


def ppo_token_reference(logp, old, adv, low, high, c):
    ratio = math.exp(logp - old)
    loss = max(-adv * ratio, -adv * min(max(ratio, 1 - low), 1 + high))
    if adv < 0:
        loss = min(loss, -adv * c)
    return loss


def case(seed, rows=4, width=6):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, width, generator=g) * 3
    logp = old + torch.randn(rows, width, generator=g) * 0.5
    adv = torch.randn(rows, width, generator=g) * 2
    mask = (torch.rand(rows, width, generator=g) > 0.2).double()
    return old, logp, adv, mask


@pytest.mark.parametrize(("low", "high", "c"), [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.1, 0.3, 1.5)])
def test_ppo_clip_dual_clip_asymmetric_per_token(low, high, c):
    old, logp, adv, mask = case(0)
    terms = get_policy_loss("vanilla")(
        old,
        logp,
        adv,
        mask,
        PolicyLossConfig(clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c),
    )
    expected = [
        [
            ppo_token_reference(logp[i, t].item(), old[i, t].item(), adv[i, t].item(), low, high, c)
            for t in range(6)
        ]
        for i in range(4)
    ]
    assert torch.allclose(terms.loss, torch.tensor(expected), atol=1e-12)
    assert torch.equal(terms.mask, mask)


def test_gspo_uses_the_sequence_ratio():
    old, logp, adv, mask = case(1)
    config = PolicyLossConfig(clip_ratio_low=3e-4, clip_ratio_high=4e-4)
    terms = get_policy_loss("gspo")(old, logp, adv, mask, config)
    for i in range(4):
        valid = [t for t in range(6) if mask[i, t]]
        s = math.exp(sum(logp[i, t].item() - old[i, t].item() for t in valid) / len(valid))
        for t in range(6):
            a = adv[i, t].item()
            expected = max(-a * s, -a * min(max(s, 1 - 3e-4), 1 + 4e-4))
            if a < 0:
                expected = min(expected, -a * 3.0)
            assert terms.loss[i, t].item() == pytest.approx(expected, abs=1e-10)


def test_cispo_gradient_is_the_clipped_weight_times_advantage():
    old, logp, adv, mask = case(2)
    logp = logp.clone().requires_grad_(True)
    config = PolicyLossConfig(clip_ratio_low=0.2, clip_ratio_high=0.2)
    terms = get_policy_loss("cispo")(old, logp, adv, mask, config)
    terms.loss.sum().backward()
    weight = torch.exp(logp.detach() - old).clamp(0.8, 1.2)
    assert torch.allclose(logp.grad, -weight * adv, atol=1e-12)


def test_gradcheck_float64_of_the_full_ppo_objective():
    old, logp, adv, mask = case(3, rows=2, width=3)
    ref = old - 0.2
    logp = logp.clone().requires_grad_(True)
    entropy = torch.rand(2, 3, generator=torch.Generator().manual_seed(1), requires_grad=True)
    config = ActorLossConfig(
        clip=PolicyLossConfig(clip_ratio=10.0),
        entropy_coeff=0.1,
        use_kl_loss=True,
        kl_loss_type="low_var_kl",
    )

    def objective(x, h):
        return actor_loss(x, h, old, adv, mask, config, ref_logprobs=ref)[0]

    assert torch.autograd.gradcheck(objective, (logp, entropy), eps=1e-6, atol=1e-6)


def test_gspo_gradient_is_the_sequence_ratio_times_advantage():
    """Stop-gradient losses are checked against their defining gradient (gradcheck's finite
    differences would also move the stopped factors)."""
    old, logp, adv, mask = case(5, rows=2, width=3)
    logp = logp.clone().requires_grad_(True)
    terms = get_policy_loss("gspo")(old, logp, adv, mask, PolicyLossConfig(clip_ratio=10.0))
    terms.loss.sum().backward()
    seq = torch.exp(((logp.detach() - old) * mask).sum(-1) / mask.sum(-1)).unsqueeze(-1)
    assert torch.allclose(logp.grad, -adv * seq, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(log_ratio=st.floats(-2, 2), advantage=st.floats(-3, 3).filter(lambda a: abs(a) > 1e-3))
def test_clipped_loss_is_flat_outside_the_clip_range(log_ratio, advantage):
    """Where the clipped branch is active, the gradient w.r.t. log p is exactly zero."""
    low, high = 0.2, 0.28
    ratio = math.exp(log_ratio)
    logp = torch.tensor([[log_ratio]], requires_grad=True)
    terms = get_policy_loss("vanilla")(
        torch.zeros(1, 1),
        logp,
        torch.tensor([[advantage]]),
        torch.ones(1, 1),
        PolicyLossConfig(clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=100.0),
    )
    terms.loss.sum().backward()
    outside = (advantage > 0 and ratio > 1 + high) or (advantage < 0 and ratio < 1 - low)
    if outside:
        assert logp.grad.item() == 0.0
    else:
        assert logp.grad.item() == pytest.approx(-advantage * ratio, rel=1e-9)


def test_early_stop_imp_ratio_masks_tokens_and_valid_token_scale_rescales():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.0, 1.1, 3.0, 0.9]]))
    adv, mask = torch.ones(1, 4), torch.ones(1, 4)
    config = PolicyLossConfig(clip_ratio=0.2, early_stop_imp_ratio=2.0)
    terms = get_policy_loss("vanilla")(old, logp, adv, mask, config)
    assert terms.mask.tolist() == [[1, 1, 0, 1]]
    base = ActorLossConfig(clip=config)
    loss, metrics = actor_loss(logp, None, old, adv, mask, base)
    # token-mean over the original 4 tokens of the 3 kept: -(1 + 1.1 + 0.9) / 4
    assert loss.item() == pytest.approx(-(1.0 + 1.1 + 0.9) / 4)
    assert metrics["actor/early_stopped_frac"] == pytest.approx(0.25)
    scaled, _ = actor_loss(
        logp, None, old, adv, mask, ActorLossConfig(clip=config, use_valid_token_scale=True)
    )
    assert scaled.item() == pytest.approx(-(1.0 + 1.1 + 0.9) / 3)


def test_actor_loss_adds_entropy_bonus_kl_loss_and_tis():
    old, logp, adv, mask = case(4)
    entropy = torch.rand(4, 6, generator=torch.Generator().manual_seed(9))
    ref = old - 0.3
    rollout = old + 0.05
    config = ActorLossConfig(
        entropy_coeff=0.01, use_kl_loss=True, kl_loss_coef=0.1, kl_loss_type="k1", tis_cap=1.02
    )
    loss, metrics = actor_loss(
        logp, entropy, old, adv, mask, config, ref_logprobs=ref, rollout_logprobs=rollout
    )
    n = mask.sum()
    ratio = torch.exp(logp - old)
    pg = torch.maximum(-adv * ratio, -adv * ratio.clamp(0.8, 1.2))
    pg = torch.where((adv < 0) & (-adv * 3.0 < pg), -adv * 3.0, pg)
    tis = torch.exp(old - rollout).clamp(max=1.02)
    expected = (
        (pg * tis * mask).sum() / n
        - 0.01 * (entropy * mask).sum() / n
        + 0.1 * ((logp - ref) * mask).sum() / n
    )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-10)
    assert set(metrics) >= {
        "actor/pg_loss",
        "actor/entropy",
        "actor/kl_loss",
        "actor/pg_clipfrac_high",
        "actor/pg_clipfrac_low",
        "actor/approx_kl",
        "actor/ratio_max",
    }
    with pytest.raises(ValueError, match="needs reference log-probs"):
        actor_loss(logp, None, old, adv, mask, ActorLossConfig(use_kl_loss=True))


def test_unknown_policy_loss_lists_valid_ones():
    with pytest.raises(
        ValueError, match=r"actor.policy_loss = 'trpo' .*valid: cispo, gspo, ppo, vanilla"
    ):
        get_policy_loss("trpo")
