"""KL estimators, exact KL from logits, the KL loss, controllers and KL-in-reward."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import (
    KL_ESTIMATORS,
    AdaptiveKLController,
    FixedKLController,
    adaptive_kl_coef,
    apply_kl_in_reward,
    full_kl,
    kl_loss,
    kl_penalty,
    make_kl_controller,
)

FORMULAS = {
    "kl": lambda a, b: a - b,
    "k1": lambda a, b: a - b,
    "abs": lambda a, b: abs(a - b),
    "mse": lambda a, b: 0.5 * (a - b) ** 2,
    "k2": lambda a, b: 0.5 * (a - b) ** 2,
    "low_var_kl": lambda a, b: min(max(math.exp(b - a) - (b - a) - 1, -10), 10),
    "k3": lambda a, b: min(max(math.exp(b - a) - (b - a) - 1, -10), 10),
}
# the `+` estimators: the value of their base, the gradient of k2 (straight-through)
FORMULAS |= {f"{name}+": formula for name, formula in list(FORMULAS.items())}


def logprob_case(seed, shape=(3, 4)):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(*shape, generator=g) * 3
    ref = logp + torch.randn(*shape, generator=g) * 0.7
    mask = (torch.rand(*shape, generator=g) > 0.3).double()
    mask[:, 0] = 1
    return logp, ref, mask


def full_reference(logits, ref_logits):
    out = []
    for lr, qr in zip(logits, ref_logits, strict=True):
        zp, zq = sum(math.exp(x) for x in lr), sum(math.exp(x) for x in qr)
        p, q = [math.exp(x) / zp for x in lr], [math.exp(x) / zq for x in qr]
        out.append(sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True)))
    return out


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_estimators_match_their_formulas(name):
    logp = torch.tensor([-1.0, -2.0, -0.5, -30.0, -0.1])
    ref = torch.tensor([-1.5, -1.0, -0.5, -1.0, -25.0])
    got = kl_penalty(logp, ref, name)
    expected = [FORMULAS[name](a, b) for a, b in zip(logp.tolist(), ref.tolist(), strict=True)]
    assert torch.allclose(got, torch.tensor(expected), atol=1e-12)


def test_k3_is_clamped_not_infinite():
    assert kl_penalty(torch.tensor([-30.0]), torch.tensor([-1.0]), "low_var_kl").item() == 10.0


def test_full_kl_from_logits():
    g = torch.Generator().manual_seed(0)
    logits, ref_logits = torch.randn(2, 3, 7, generator=g), torch.randn(2, 3, 7, generator=g)
    expected = torch.tensor(
        full_reference(logits.reshape(6, 7).tolist(), ref_logits.reshape(6, 7).tolist())
    )
    assert torch.allclose(
        kl_penalty(logits, ref_logits, "full"), expected.reshape(2, 3), atol=1e-12
    )
    low_precision = full_kl(logits.bfloat16(), ref_logits.bfloat16())
    assert low_precision.dtype == torch.float32


def test_k3_is_an_unbiased_nonnegative_estimate_of_kl():
    g = torch.Generator().manual_seed(1)
    # Moderate logits, so that the [-10, 10] clamp never binds and the estimate is unbiased.
    p_logits, q_logits = torch.randn(50, generator=g) * 0.5, torch.randn(50, generator=g) * 0.5
    logp, logq = torch.log_softmax(p_logits, 0), torch.log_softmax(q_logits, 0)
    samples = torch.multinomial(logp.exp(), 100_000, replacement=True, generator=g)
    k3 = kl_penalty(logp[samples], logq[samples], "low_var_kl")
    assert (k3 >= 0).all()
    exact = full_kl(p_logits, q_logits)
    assert k3.mean().item() == pytest.approx(exact.item(), rel=0.05)


@pytest.mark.parametrize("name", ["kl", "abs", "mse", "low_var_kl"])
def test_gradcheck_float64(name):
    logp, ref, _ = logprob_case(2)
    logp.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: kl_penalty(x, ref, name), (logp,))


@pytest.mark.parametrize("name", sorted(n for n in FORMULAS if n.endswith("+")))
def test_plus_estimators_have_the_gradient_of_k2(name):
    """The defining gradient: d/d log p = log p - log q and d/d log q = log q - log p,
    whatever the forward value (checked on inputs where k3's clamp would bind, too)."""
    logp, ref, _ = logprob_case(5)
    logp[0, 0], ref[0, 0] = -30.0, -0.1  # k3 clamped to 10 here; the gradient is still k2's
    logp.requires_grad_(True)
    ref.requires_grad_(True)
    upstream = torch.randn(logp.shape, generator=torch.Generator().manual_seed(6))
    value = kl_penalty(logp, ref, name)
    assert torch.equal(value.detach(), kl_penalty(logp, ref, name[:-1]).detach())
    (value * upstream).sum().backward()
    difference = (logp - ref).detach()
    assert torch.allclose(logp.grad, upstream * difference, atol=1e-12)
    assert torch.allclose(ref.grad, -upstream * difference, atol=1e-12)


def test_plus_estimator_as_the_kl_loss_term():
    """`actor.kl_loss_type: k3+`: the loss value is k3's, the gradient k2's, aggregated."""
    logp, ref, mask = logprob_case(7)
    logp.requires_grad_(True)
    loss, _ = kl_loss(logp, ref, mask, "k3+", "token-mean")
    plain, _ = kl_loss(logp.detach(), ref, mask, "k3", "token-mean")
    assert loss.item() == pytest.approx(plain.item(), rel=1e-12)
    loss.backward()
    expected = (logp.detach() - ref) * mask / mask.sum()
    assert torch.allclose(logp.grad, expected, atol=1e-12)


def test_gradcheck_full_kl():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 5, generator=g, requires_grad=True)
    ref_logits = torch.randn(2, 5, generator=g, requires_grad=True)
    assert torch.autograd.gradcheck(full_kl, (logits, ref_logits))


@settings(max_examples=60, deadline=None)
@given(
    a=st.floats(-20, 0),
    b=st.floats(-20, 0),
    name=st.sampled_from(["abs", "mse", "low_var_kl"]),
)
def test_non_negative_estimators_are_zero_on_agreement(a, b, name):
    value = kl_penalty(torch.tensor([a, a]), torch.tensor([b, a]), name)
    assert value[0].item() >= -1e-12  # k3 = exp(x) - x - 1 rounds to about -1e-16 near 0
    assert value[1].item() == 0.0


def test_kl_loss_aggregates_like_the_policy_loss():
    logp, ref, mask = logprob_case(4)
    loss, metrics = kl_loss(logp, ref, mask, "k2", "seq-mean-token-mean")
    rows = [
        [0.5 * (a - b) ** 2 for a, b, m in zip(lr, rr, mr, strict=True) if m]
        for lr, rr, mr in zip(logp.tolist(), ref.tolist(), mask.tolist(), strict=True)
    ]
    assert loss.item() == pytest.approx(sum(sum(r) / len(r) for r in rows) / len(rows))
    tokens = [x for r in rows for x in r]
    assert metrics["actor/kl_loss"] == pytest.approx(sum(tokens) / len(tokens))


def test_adaptive_controller_closed_form():
    ctrl = make_kl_controller("adaptive", 0.1, target_kl=0.05, horizon=100)
    assert isinstance(ctrl, AdaptiveKLController)
    ctrl.update(current_kl=0.5, n_steps=10)  # error clipped to +0.2
    assert ctrl.value == pytest.approx(0.1 * (1 + 0.2 * 10 / 100))
    ctrl.update(current_kl=0.05 * 0.9, n_steps=10)  # error -0.1
    assert ctrl.value == pytest.approx(0.1 * 1.02 * (1 - 0.1 * 10 / 100))
    assert adaptive_kl_coef(0.2, 0.0, 0.1, 50, 5) == pytest.approx(0.2 * (1 - 0.2 * 5 / 50))
    fixed = make_kl_controller("fixed", 0.3)
    assert isinstance(fixed, FixedKLController)
    fixed.update(10.0, 5)
    assert fixed.value == 0.3


def test_controller_errors_name_the_key():
    with pytest.raises(
        ValueError,
        match=r"algorithm.kl_ctrl.type = 'pid' is not a known KL controller; valid: adaptive, fixed",
    ):
        make_kl_controller("pid", 0.1)
    with pytest.raises(ValueError, match="algorithm.kl_ctrl.target_kl = 0"):
        make_kl_controller("adaptive", 0.1, target_kl=0)
    with pytest.raises(ValueError, match="algorithm.kl_ctrl.horizon = -1"):
        make_kl_controller("adaptive", 0.1, horizon=-1)


def test_kl_in_reward_subtracts_per_token_penalty():
    scores = torch.tensor([[0.0, 1.0], [0.0, 0.0]])
    logp = torch.tensor([[-1.0, -1.0], [-2.0, -0.5]])
    ref = torch.tensor([[-1.5, -0.5], [-2.0, -9.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    rewards, seq_kl = apply_kl_in_reward(scores, logp, ref, mask, "kl", 0.1)
    assert torch.allclose(rewards, torch.tensor([[-0.05, 1.05], [0.0, 0.0]]))
    assert torch.allclose(seq_kl, torch.tensor([0.0, 0.0]))


@pytest.mark.parametrize("name", ["kl", "abs", "mse", "low_var_kl"])
def test_kl_in_reward_reference_and_packed(name):
    logp, ref, mask = logprob_case(5)
    scores = torch.randn(3, 4, generator=torch.Generator().manual_seed(6))
    rewards, seq_kl = apply_kl_in_reward(scores, logp, ref, mask, name, 0.3)
    kl = [
        [FORMULAS[name](a, b) * m for a, b, m in zip(lr, rr, mr, strict=True)]
        for lr, rr, mr in zip(logp.tolist(), ref.tolist(), mask.tolist(), strict=True)
    ]
    assert torch.allclose(rewards, scores - 0.3 * torch.tensor(kl), atol=1e-12)
    expected = [sum(r) / sum(m) for r, m in zip(kl, mask.tolist(), strict=True)]
    assert torch.allclose(seq_kl, torch.tensor(expected), atol=1e-12)
    seq_ids = torch.arange(3).repeat_interleave(4)
    packed = apply_kl_in_reward(
        *(t.reshape(-1) for t in (scores, logp, ref, mask)), name, 0.3, seq_ids
    )
    assert torch.allclose(packed[0], rewards.reshape(-1)) and torch.allclose(packed[1], seq_kl)


def test_unknown_estimator_lists_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"actor.kl_loss_type / algorithm.kl_penalty = 'k4' is not a known KL estimator; "
        r"valid: abs, abs\+, full, k1, k1\+, k2, k2\+, k3, k3\+, kl, kl\+, low_var_kl, "
        r"low_var_kl\+, mse, mse\+$",
    ):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k4")
    assert "full" in KL_ESTIMATORS
