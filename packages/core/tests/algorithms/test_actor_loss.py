"""The whole actor objective: composition, masking, micro-batching and the packed path."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import ActorLossConfig, PolicyLossConfig, actor_loss, loss_denominator

POLICY_LOSSES = ["cispo", "gspo", "vanilla"]
MODES = [
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-mean",
    "token-sum",
]
SCALED = {"seq-mean-token-sum-norm", "token-sum"}


def case(seed, rows=4, width=6):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, width, generator=g) * 3
    inputs = {
        "logprobs": old + torch.randn(rows, width, generator=g) * 0.3,
        "entropy": torch.rand(rows, width, generator=g),
        "old_logprobs": old,
        "advantages": torch.randn(rows, width, generator=g),
        "ref_logprobs": old + torch.randn(rows, width, generator=g) * 0.3,
        "rollout_logprobs": old + torch.randn(rows, width, generator=g) * 0.05,
    }
    mask = (torch.rand(rows, width, generator=g) > 0.25).double()
    mask[:, 0] = 1
    return inputs, mask


def run(inputs, mask, config, **kwargs):
    return actor_loss(
        inputs["logprobs"],
        inputs["entropy"],
        inputs["old_logprobs"],
        inputs["advantages"],
        mask,
        config,
        ref_logprobs=inputs["ref_logprobs"],
        rollout_logprobs=inputs["rollout_logprobs"],
        **kwargs,
    )


def test_objective_matches_a_loop_reference():
    inputs, mask = case(0)
    config = ActorLossConfig(
        entropy_coeff=0.01, use_kl_loss=True, kl_loss_coef=0.1, kl_loss_type="k1", tis_cap=1.02
    )
    loss, metrics = run(inputs, mask, config)
    total, count = 0.0, 0
    columns = {key: value.tolist() for key, value in inputs.items()}
    for i, row in enumerate(mask.tolist()):
        for t, valid in enumerate(row):
            if not valid:
                continue
            lp, h, old, a, ref, roll = (columns[k][i][t] for k in columns)  # `case` order
            ratio = math.exp(lp - old)
            pg = max(-a * ratio, -a * min(max(ratio, 0.8), 1.2))
            pg = min(pg, -a * 3.0) if a < 0 else pg
            tis = min(math.exp(old - roll), 1.02)
            total += pg * tis - 0.01 * h + 0.1 * (lp - ref)
            count += 1
    assert loss.item() == pytest.approx(total / count, rel=1e-10)
    assert set(metrics) >= {
        "actor/pg_loss",
        "actor/entropy",
        "actor/kl_loss",
        "actor/is_weight_mean",
        "actor/pg_clipfrac",
        "actor/pg_clipfrac_high",
        "actor/pg_clipfrac_low",
        "actor/approx_kl",
        "actor/ratio_mean",
        "actor/ratio_max",
        "actor/ratio_min",
    }


def test_early_stop_imp_ratio_masks_tokens_and_valid_token_scale_rescales():
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.0, 1.1, 3.0, 0.9]]))
    adv, mask = torch.ones(1, 4), torch.ones(1, 4)
    clip = PolicyLossConfig(clip_ratio=0.2, early_stop_imp_ratio=2.0)
    loss, metrics = actor_loss(logp, None, old, adv, mask, ActorLossConfig(clip=clip))
    # token-mean over the original 4 tokens of the 3 kept: -(1 + 1.1 + 0.9) / 4
    assert loss.item() == pytest.approx(-(1.0 + 1.1 + 0.9) / 4)
    assert metrics["actor/early_stopped_frac"] == pytest.approx(0.25)
    config = ActorLossConfig(clip=clip, use_valid_token_scale=True)
    scaled, _ = actor_loss(logp, None, old, adv, mask, config)
    assert scaled.item() == pytest.approx(-(1.0 + 1.1 + 0.9) / 3)


def test_full_kl_loss_uses_the_logits():
    inputs, mask = case(1, rows=2, width=3)
    g = torch.Generator().manual_seed(2)
    logits, ref_logits = torch.randn(2, 3, 5, generator=g), torch.randn(2, 3, 5, generator=g)
    config = ActorLossConfig(use_kl_loss=True, kl_loss_coef=1.0, kl_loss_type="full")
    with pytest.raises(ValueError, match="'full' needs the full logits"):
        run(inputs, mask, config)
    loss, metrics = run(inputs, mask, config, logits=logits, ref_logits=ref_logits)
    base, _ = run(inputs, mask, ActorLossConfig())
    p, q = torch.log_softmax(logits, -1), torch.log_softmax(ref_logits, -1)
    kl = (p.exp() * (p - q)).sum(-1)
    expected = (kl * mask).sum() / mask.sum()
    assert (loss - base).item() == pytest.approx(expected.item(), rel=1e-10)
    assert metrics["actor/kl_loss"] == pytest.approx(expected.item(), rel=1e-10)


def test_missing_inputs_and_bad_names_raise():
    inputs, mask = case(2)
    inputs["entropy"] = None
    with pytest.raises(ValueError, match="entropy_coeff != 0 needs the per-token entropy"):
        run(inputs, mask, ActorLossConfig(entropy_coeff=0.01))
    inputs["ref_logprobs"] = None
    with pytest.raises(ValueError, match="use_kl_loss needs reference log-probs"):
        run(inputs, mask, ActorLossConfig(use_kl_loss=True))
    inputs["rollout_logprobs"] = None
    with pytest.raises(ValueError, match=r"actor.tis_cap\) needs the rollout engine's log-probs"):
        run(inputs, mask, ActorLossConfig(tis_cap=2.0))
    with pytest.raises(ValueError, match="actor.policy_loss = 'trpo'"):
        ActorLossConfig(policy_loss="trpo")
    with pytest.raises(ValueError, match="actor.loss_agg_mode = 'sum'"):
        ActorLossConfig(loss_agg_mode="sum")
    with pytest.raises(ValueError, match="actor.tis_cap = 0; allowed: > 0 or null"):
        ActorLossConfig(tis_cap=0)


def test_gradcheck_float64_of_the_full_ppo_objective():
    inputs, mask = case(3, rows=2, width=3)
    config = ActorLossConfig(
        clip=PolicyLossConfig(clip_ratio=10.0),
        entropy_coeff=0.1,
        use_kl_loss=True,
        kl_loss_type="low_var_kl",
        loss_agg_mode="seq-mean-token-mean",
    )

    def objective(logprobs, entropy):
        return run({**inputs, "logprobs": logprobs, "entropy": entropy}, mask, config)[0]

    leaves = (inputs["logprobs"].requires_grad_(True), inputs["entropy"].requires_grad_(True))
    assert torch.autograd.gradcheck(objective, leaves)


def loss_and_grad(inputs, mask, config, **kwargs):
    logprobs = inputs["logprobs"].detach().clone().requires_grad_(True)
    loss, _ = run({**inputs, "logprobs": logprobs}, mask, config, **kwargs)
    loss.backward()
    return loss.detach(), logprobs.grad


def full_config(policy_loss, mode):
    return ActorLossConfig(
        policy_loss=policy_loss,
        loss_agg_mode=mode,
        clip=PolicyLossConfig(clip_ratio=0.1),
        entropy_coeff=0.01,
        use_kl_loss=True,
        tis_cap=1.5,
    )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    policy_loss=st.sampled_from(POLICY_LOSSES),
    mode=st.sampled_from(MODES),
)
def test_padding_changes_neither_loss_nor_gradient(seed, policy_loss, mode):
    inputs, mask = case(seed)
    config = full_config(policy_loss, mode)
    loss, grad = loss_and_grad(inputs, mask, config)
    g = torch.Generator().manual_seed(seed + 1)
    noisy = {k: v + torch.randn(v.shape, generator=g) * 5 * (1 - mask) for k, v in inputs.items()}
    noisy_loss, noisy_grad = loss_and_grad(noisy, mask, config)
    assert noisy_loss.item() == pytest.approx(loss.item(), rel=1e-10, abs=1e-12)
    assert torch.allclose(noisy_grad, grad, atol=1e-12)
    assert not grad[mask == 0].any()


@pytest.mark.parametrize("policy_loss", POLICY_LOSSES)
@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_add_up_to_the_mini_batch(policy_loss, mode):
    """Loss and gradient of the whole objective split over micro-batches of 1, 2 and 1 rows."""
    inputs, mask = case(4)
    config = full_config(policy_loss, mode)
    whole_loss, whole_grad = loss_and_grad(inputs, mask, config)
    denominator = loss_denominator(mode, mask)
    total, grads = 0.0, []
    for rows in (slice(0, 1), slice(1, 3), slice(3, 4)):
        piece = {k: v[rows] for k, v in inputs.items()}
        loss, grad = loss_and_grad(piece, mask[rows], config, denominator=denominator)
        total, grads = total + loss.item(), [*grads, grad]
    assert total == pytest.approx(whole_loss.item(), rel=1e-10)
    assert torch.allclose(torch.cat(grads), whole_grad, atol=1e-12)


@pytest.mark.parametrize("policy_loss", POLICY_LOSSES)
@pytest.mark.parametrize("mode", MODES)
def test_packed_objective_equals_padded(policy_loss, mode):
    inputs, mask = case(5)
    scale = 6.0 if mode in SCALED else None  # packed -norm needs its constant
    config = ActorLossConfig(
        **{**full_config(policy_loss, mode).__dict__, "loss_scale_factor": scale}
    )
    padded_loss, padded_grad = loss_and_grad(inputs, mask, config)
    valid = mask.bool()
    seq_ids = torch.arange(4).unsqueeze(1).expand(4, 6)[valid]
    flat = {k: v[valid] for k, v in inputs.items()}
    packed_loss, packed_grad = loss_and_grad(
        flat, torch.ones(len(seq_ids)), config, seq_ids=seq_ids
    )
    assert packed_loss.item() == pytest.approx(padded_loss.item(), rel=1e-10)
    assert torch.allclose(packed_grad, padded_grad[valid], atol=1e-12)
