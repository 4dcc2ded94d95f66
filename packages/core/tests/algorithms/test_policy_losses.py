"""Policy losses against per-token float64 formulas, gradient checks and clip-range properties."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import PolicyLossConfig, get_policy_loss


def ppo_token_reference(logp, old, adv, low, high, c):
    ratio = math.exp(logp - old)
    loss = max(-adv * ratio, -adv * min(max(ratio, 1 - low), 1 + high))
    if c is not None and adv < 0:
        loss = min(loss, -adv * c)
    return loss


def case(seed, rows=4, width=6):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, width, generator=g) * 3
    logp = old + torch.randn(rows, width, generator=g) * 0.5
    adv = torch.randn(rows, width, generator=g) * 2
    mask = (torch.rand(rows, width, generator=g) > 0.2).double()
    mask[:, 0] = 1
    return old, logp, adv, mask


def table(fn, *tensors):
    """Apply a scalar reference to every position of equally shaped [B, R] tensors."""
    rows = [t.tolist() for t in tensors]
    return torch.tensor(
        [
            [fn(*(r[i][t] for r in rows)) for t in range(len(rows[0][0]))]
            for i in range(len(rows[0]))
        ]
    )


@pytest.mark.parametrize(
    ("low", "high", "c"), [(0.2, 0.2, 3.0), (0.2, 0.28, 3.0), (0.1, 0.3, 1.5), (0.2, 0.2, None)]
)
def test_ppo_clip_dual_clip_asymmetric_per_token(low, high, c):
    old, logp, adv, mask = case(0)
    adv = adv * 5  # large advantages so that dual clip binds somewhere
    config = PolicyLossConfig(clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c)
    terms = get_policy_loss("vanilla")(old, logp, adv, mask, config)
    expected = table(lambda lp, o, a: ppo_token_reference(lp, o, a, low, high, c), logp, old, adv)
    assert torch.allclose(terms.loss, expected, atol=1e-12)
    assert torch.equal(terms.mask, mask)
    assert get_policy_loss("ppo") is get_policy_loss("vanilla")


def test_symmetric_clip_ratio_applies_to_both_sides():
    config = PolicyLossConfig(clip_ratio=0.3)
    assert (config.low, config.high) == (0.3, 0.3)
    assert PolicyLossConfig(clip_ratio=0.3, clip_ratio_high=0.4).high == 0.4


def gspo_reference(logp, old, adv, mask, low, high):
    """The GSPO paper's per-sequence term, on every token of the sequence: no dual clip."""
    out = []
    for lp_row, o_row, a_row, m_row in zip(logp, old, adv, mask, strict=True):
        valid = [lp - o for lp, o, m in zip(lp_row, o_row, m_row, strict=True) if m]
        s = math.exp(sum(valid) / len(valid))
        out.append([max(-a * s, -a * min(max(s, 1 - low), 1 + high)) for a in a_row])
    return torch.tensor(out)


def test_gspo_uses_the_sequence_ratio():
    old, logp, adv, mask = case(1)
    config = PolicyLossConfig(clip_ratio_low=3e-4, clip_ratio_high=4e-4)
    terms = get_policy_loss("gspo")(old, logp, adv, mask, config)
    expected = gspo_reference(logp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), 3e-4, 4e-4)
    assert torch.allclose(terms.loss, expected, atol=1e-12)


def test_gspo_has_no_dual_clip_for_negative_advantages_and_large_ratios():
    """A < 0 and a sequence ratio of 5 (> clip_ratio_c = 3): vanilla PPO would cap the loss
    at -A c; GSPO (paper, verl) does not, and its gradient is -A s on every valid token."""
    old = torch.zeros(3, 4)
    log_ratio = torch.tensor(
        [[1.2, 2.0, 1.6, 9.9], [0.5, -0.5, 0.0, 0.0], [2.5, 0.7, 0.0, 0.0]]
    )  # masked-out positions carry junk
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    logp = (old + log_ratio).requires_grad_(True)
    adv = torch.tensor([-2.0, -1.0, -0.5]).unsqueeze(-1).expand(3, 4)
    config = PolicyLossConfig(clip_ratio=0.2, clip_ratio_c=3.0)
    terms = get_policy_loss("gspo")(old, logp, adv, mask, config)
    expected = gspo_reference(logp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), 0.2, 0.2)
    assert torch.allclose(terms.loss, expected, atol=1e-12)
    assert terms.loss[0, 0].item() == pytest.approx(2.0 * math.exp(1.6))  # s = e^1.6 ≈ 4.95
    assert not terms.dual_clipped.any()
    vanilla = get_policy_loss("vanilla")(old, logp, adv, mask, config)
    assert vanilla.dual_clipped[0, 1] and vanilla.loss[0, 1].item() == pytest.approx(6.0)
    (terms.loss * mask).sum().backward()
    seq_ratio = torch.tensor([math.exp(1.6), 1.0, math.exp(1.6)]).unsqueeze(-1)
    # rows 0 and 2: the unclipped branch -A s decides; row 1 (s = 1): inside the clip range
    assert torch.allclose(logp.grad, -adv * seq_ratio * mask, atol=1e-12)


def test_gspo_on_packed_sequences_equals_padded():
    old, logp, adv, mask = case(2)
    config = PolicyLossConfig(clip_ratio=0.1)
    padded = get_policy_loss("gspo")(old, logp, adv, mask, config)
    seq_ids = torch.arange(4).unsqueeze(1).expand(4, 6).reshape(-1)
    packed = get_policy_loss("gspo")(
        old.reshape(-1), logp.reshape(-1), adv.reshape(-1), mask.reshape(-1), config, seq_ids
    )
    assert torch.allclose(packed.loss, padded.loss.reshape(-1), atol=1e-12)
    assert torch.allclose(packed.ratio, padded.ratio.reshape(-1), atol=1e-12)


def test_gspo_gradient_is_the_sequence_ratio_times_advantage():
    """Stop-gradient losses are checked against their defining gradient (gradcheck's finite
    differences would also move the stopped factors)."""
    old, logp, adv, mask = case(5, rows=2, width=3)
    logp = logp.clone().requires_grad_(True)
    terms = get_policy_loss("gspo")(old, logp, adv, mask, PolicyLossConfig(clip_ratio=10.0))
    terms.loss.sum().backward()
    seq = torch.exp(((logp.detach() - old) * mask).sum(-1) / mask.sum(-1)).unsqueeze(-1)
    assert torch.allclose(logp.grad, -adv * seq, atol=1e-12)


def test_cispo_per_token_and_its_gradient():
    old, logp, adv, mask = case(2)
    logp = logp.clone().requires_grad_(True)
    config = PolicyLossConfig(clip_ratio_low=0.2, clip_ratio_high=0.28)
    terms = get_policy_loss("cispo")(old, logp, adv, mask, config)

    def reference(lp, o, a):
        return -min(max(math.exp(lp - o), 0.8), 1.28) * a * lp

    assert torch.allclose(terms.loss, table(reference, logp.detach(), old, adv), atol=1e-12)
    terms.loss.sum().backward()
    weight = torch.exp(logp.detach() - old).clamp(0.8, 1.28)
    assert torch.allclose(logp.grad, -weight * adv, atol=1e-12)
    assert torch.equal(terms.clipped_high, torch.exp(logp.detach() - old) > 1.28)


@pytest.mark.parametrize("c", [3.0, None])
def test_gradcheck_float64_away_from_the_kinks(c):
    old, logp, adv, mask = case(3)
    adv = adv * 4
    ratio = torch.exp(logp - old)
    kinks = torch.stack([ratio - 0.8, ratio - 1.2, -adv * 3.0 - (-adv * ratio)]).abs()
    assert kinks.min() > 1e-4  # finite differences must not straddle a kink
    config = PolicyLossConfig(clip_ratio=0.2, clip_ratio_c=c)

    def loss(x):
        return get_policy_loss("vanilla")(old, x, adv, mask, config).loss

    assert torch.autograd.gradcheck(loss, (logp.clone().requires_grad_(True),))


@settings(max_examples=80, deadline=None)
@given(log_ratio=st.floats(-2, 2), advantage=st.floats(-3, 3).filter(lambda a: abs(a) > 1e-3))
def test_clipped_loss_is_flat_outside_the_clip_range(log_ratio, advantage):
    """Where a clip bound decides the loss, the gradient w.r.t. log p is exactly zero."""
    low, high, c = 0.2, 0.28, 2.0
    ratio = math.exp(log_ratio)
    logp = torch.tensor([[log_ratio]], requires_grad=True)
    config = PolicyLossConfig(clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c)
    terms = get_policy_loss("vanilla")(
        torch.zeros(1, 1), logp, torch.tensor([[advantage]]), torch.ones(1, 1), config
    )
    terms.loss.sum().backward()
    clipped = (advantage > 0 and ratio > 1 + high) or (advantage < 0 and ratio < 1 - low)
    dual = advantage < 0 and ratio > c
    if clipped or dual:
        assert logp.grad.item() == 0.0
        assert terms.clipped_high.item() == (advantage > 0 and ratio > 1 + high)
        assert terms.dual_clipped.item() == dual
    else:
        assert logp.grad.item() == pytest.approx(-advantage * ratio, rel=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clip_ratio": -0.1}, "actor.clip_ratio = -0.1; allowed: >= 0"),
        ({"clip_ratio_low": -0.5}, "actor.clip_ratio_low = -0.5; allowed: >= 0"),
        ({"clip_ratio_c": 0.5}, "actor.clip_ratio_c = 0.5; allowed: > 1 or null"),
        ({"early_stop_imp_ratio": 0.0}, "actor.early_stop_imp_ratio = 0.0; allowed: > 0"),
    ],
)
def test_bad_clip_settings_name_the_key(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PolicyLossConfig(**kwargs)


def test_unknown_policy_loss_lists_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"actor.policy_loss = 'trpo' is not a known policy loss; "
        r"valid: cispo, gspo, ppo, vanilla$",
    ):
        get_policy_loss("trpo")
