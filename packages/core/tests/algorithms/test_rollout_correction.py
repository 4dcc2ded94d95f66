"""Rollout correction (IS weights, rejection sampling, veto) against plain-Python float64
references, in the actor loss, micro-batched, packed, and with extreme ratios."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.core.algorithms import (
    ActorLossConfig,
    PolicyLossConfig,
    RolloutCorrectionConfig,
    actor_loss,
    actor_loss_denominator,
    rollout_correction,
    rollout_correction_metrics,
)

MODES = [
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "token-mean",
    "token-sum",
]


def case(seed, rows=6, width=5, spread=1.0):
    """Trainer and rollout log-probs with holes, trailing padding and one all-padding row."""
    g = torch.Generator().manual_seed(seed)
    rollout = -torch.rand(rows, width, generator=g) * 3
    old = rollout + torch.randn(rows, width, generator=g) * spread
    mask = (torch.rand(rows, width, generator=g) > 0.25).double()
    mask[:, 0] = 1
    mask[rows - 2] = 0  # a row with no response token at all
    return old, rollout, mask


def reference(old, rollout, mask, cfg):
    """Per row, in plain Python: (weights, kept) as nested lists, thresholds in log space."""
    weights, kept = [], []
    for o_row, r_row, m_row in zip(old, rollout, mask, strict=True):
        lr = [o - r for o, r in zip(o_row, r_row, strict=True)]
        valid = [t for t, m in enumerate(m_row) if m]
        total = sum(lr[t] for t in valid)
        mean = total / len(valid) if valid else 0.0
        by_level = {"token": lr, "sequence": [total] * len(lr), "geometric": [mean] * len(lr)}
        w = [0.0] * len(lr)
        keep = [1.0 if m else 0.0 for m in m_row]
        for t in valid:
            if cfg.rollout_is is not None:
                x = min(max(by_level[cfg.rollout_is][t], -20.0), 20.0)
                w[t] = min(math.exp(x), cfg.rollout_is_threshold)
            else:
                w[t] = 1.0
            if cfg.rollout_rs is not None:
                upper = cfg.rollout_rs_threshold
                lower = cfg.rollout_rs_threshold_lower
                lower = 1 / upper if lower is None else lower
                x = by_level[cfg.rollout_rs][t]
                if x > math.log(upper) or (lower > 0 and x < math.log(lower)):
                    keep[t] = 0.0
        veto = cfg.rollout_token_veto_threshold
        if veto is not None and any(lr[t] < math.log(veto) for t in valid):
            keep = [0.0] * len(lr)
        weights.append([wt * k for wt, k in zip(w, keep, strict=True)])
        kept.append(keep)
    return torch.tensor(weights), torch.tensor(kept)


CONFIGS = [
    RolloutCorrectionConfig(rollout_is="token", rollout_is_threshold=1.5),
    RolloutCorrectionConfig(rollout_is="sequence", rollout_is_threshold=3.0),
    RolloutCorrectionConfig(rollout_rs="token", rollout_rs_threshold=2.0),
    RolloutCorrectionConfig(
        rollout_rs="sequence", rollout_rs_threshold=4.0, rollout_rs_threshold_lower=0.1
    ),
    RolloutCorrectionConfig(rollout_rs="geometric", rollout_rs_threshold=1.3),
    RolloutCorrectionConfig(
        rollout_rs="geometric", rollout_rs_threshold=1.5, rollout_rs_threshold_lower=0.0
    ),
    RolloutCorrectionConfig(rollout_token_veto_threshold=0.2),
    RolloutCorrectionConfig(
        rollout_is="sequence",
        rollout_is_threshold=2.0,
        rollout_rs="token",
        rollout_rs_threshold=3.0,
        rollout_token_veto_threshold=1e-2,
    ),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: repr(c)[24:80])
@pytest.mark.parametrize("spread", [0.3, 1.0, 30.0])  # up to |log-ratio| ~ 100
def test_weights_and_mask_match_the_reference(cfg, spread):
    old, rollout, mask = case(0, spread=spread)
    result = rollout_correction(old, rollout, mask, cfg)
    weights, kept = reference(old.tolist(), rollout.tolist(), mask.tolist(), cfg)
    assert torch.equal(result.mask, kept)
    assert torch.allclose(result.weights, weights, rtol=1e-12, atol=0)
    assert torch.isfinite(result.weights).all()
    assert not result.weights.requires_grad


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: repr(c)[24:80])
def test_packed_equals_padded(cfg):
    old, rollout, mask = case(1, rows=5, width=7)
    valid = mask.bool()
    seq_ids = torch.arange(5).unsqueeze(1).expand(5, 7)[valid]
    # the all-padding row 3 has no tokens, so packed ids skip it: renumber densely
    seq_ids = torch.unique(seq_ids, return_inverse=True)[1]
    padded = rollout_correction(old, rollout, mask, cfg)
    packed = rollout_correction(old[valid], rollout[valid], mask[valid], cfg, seq_ids)
    assert torch.equal(packed.mask, padded.mask[valid])
    assert torch.allclose(packed.weights, padded.weights[valid], rtol=1e-12, atol=0)
    packed_metrics = rollout_correction_metrics(
        old[valid], rollout[valid], mask[valid], cfg, seq_ids
    )
    assert packed_metrics == pytest.approx(
        rollout_correction_metrics(old, rollout, mask, cfg), rel=1e-12
    )


def test_metrics_against_their_formulas():
    old, rollout, mask = case(2, spread=1.0)
    cfg = RolloutCorrectionConfig(
        rollout_is="token",
        rollout_is_threshold=1.5,
        rollout_rs="token",
        rollout_rs_threshold=4.0,
        rollout_token_veto_threshold=0.05,
    )
    metrics = rollout_correction_metrics(old, rollout, mask, cfg)
    lr = [
        (o - r)
        for o_row, r_row, m_row in zip(old.tolist(), rollout.tolist(), mask.tolist(), strict=True)
        for o, r, m in zip(o_row, r_row, m_row, strict=True)
        if m
    ]
    raw = [math.exp(x) for x in lr]
    w = [min(x, 1.5) for x in raw]
    n = len(w)
    assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(sum(w) / n, rel=1e-12)
    assert metrics["rollout_corr/rollout_is_max"] == pytest.approx(max(raw), rel=1e-12)
    ess = (sum(w) / n) ** 2 / (sum(x * x for x in w) / n)
    assert metrics["rollout_corr/rollout_is_eff_sample_size"] == pytest.approx(ess, rel=1e-12)
    high = sum(x > 1.5 for x in raw) / n
    assert metrics["rollout_corr/rollout_is_ratio_fraction_high"] == pytest.approx(high)
    rejected = sum(x > 4.0 or x < 0.25 for x in raw) / n
    assert metrics["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(rejected)
    rows_with_tokens = [r for r in mask.tolist() if any(r)]
    _, kept = reference(old.tolist(), rollout.tolist(), mask.tolist(), cfg)
    assert 0 <= metrics["rollout_corr/rollout_is_veto_fraction"] <= 1
    vetoed = sum(
        any((o - r) < math.log(0.05) for o, r, m in zip(o_row, r_row, m_row, strict=True) if m)
        for o_row, r_row, m_row in zip(old.tolist(), rollout.tolist(), mask.tolist(), strict=True)
    )
    assert metrics["rollout_corr/rollout_is_veto_fraction"] == pytest.approx(
        vetoed / len(rows_with_tokens)
    )
    assert kept.sum() < mask.sum()  # the case exercises rejection


def test_identical_policies_change_nothing():
    old, _, mask = case(3)
    cfg = CONFIGS[-1]
    result = rollout_correction(old, old.clone(), mask, cfg)
    assert torch.equal(result.mask, mask)
    assert torch.equal(result.weights, mask)
    metrics = rollout_correction_metrics(old, old.clone(), mask, cfg)
    assert metrics["rollout_corr/rollout_is_eff_sample_size"] == 1.0


def loop_actor_loss(inputs, mask, cfg, mode):
    """PPO (dual clip) x IS weight, aggregated over the tokens the correction keeps."""
    weights, kept = reference(
        inputs["old_logprobs"].tolist(), inputs["rollout_logprobs"].tolist(), mask.tolist(), cfg
    )
    rows = []
    for i in range(mask.shape[0]):
        terms = []
        for t in range(mask.shape[1]):
            if not kept[i][t]:
                continue
            lp, old = inputs["logprobs"][i][t].item(), inputs["old_logprobs"][i][t].item()
            a = inputs["advantages"][i][t].item()
            ratio = math.exp(lp - old)
            pg = max(-a * ratio, -a * min(max(ratio, 0.8), 1.2))
            pg = min(pg, -a * 3.0) if a < 0 else pg
            terms.append(pg * weights[i][t].item())
        rows.append(terms)
    sequences = [r for r in rows if r]
    tokens = [x for r in rows for x in r]
    if mode == "token-mean":
        return sum(tokens) / len(tokens)
    if mode == "token-sum":
        return sum(tokens)
    if mode == "seq-mean-token-sum":
        return sum(tokens) / len(sequences)
    if mode == "seq-mean-token-mean":
        return sum(sum(r) / len(r) for r in sequences) / len(sequences)
    return sum(tokens) / (len(sequences) * mask.shape[1])


def actor_case(seed):
    old, rollout, mask = case(seed, rows=6, width=5, spread=0.8)
    g = torch.Generator().manual_seed(seed + 100)
    inputs = {
        "logprobs": old + torch.randn(old.shape, generator=g) * 0.3,
        "old_logprobs": old,
        "advantages": torch.randn(old.shape, generator=g),
        "rollout_logprobs": rollout,
    }
    return inputs, mask


def run(inputs, mask, config, **kwargs):
    return actor_loss(
        inputs["logprobs"],
        None,
        inputs["old_logprobs"],
        inputs["advantages"],
        mask,
        config,
        rollout_logprobs=inputs["rollout_logprobs"],
        **kwargs,
    )


ACTOR_CORRECTION = RolloutCorrectionConfig(
    rollout_is="token", rollout_is_threshold=1.5, rollout_rs="geometric", rollout_rs_threshold=1.4
)


@pytest.mark.parametrize("mode", MODES)
def test_actor_loss_applies_weights_and_rejection(mode):
    inputs, mask = actor_case(4)
    config = ActorLossConfig(loss_agg_mode=mode, rollout_correction=ACTOR_CORRECTION)
    loss, metrics = run(inputs, mask, config)
    expected = loop_actor_loss(inputs, mask, ACTOR_CORRECTION, mode)
    assert loss.item() == pytest.approx(expected, rel=1e-10)
    assert "actor/is_weight_mean" in metrics


@pytest.mark.parametrize("mode", MODES)
def test_micro_batches_add_up_with_rejection(mode):
    """The mini-batch normaliser counts only kept tokens, so the pieces add up exactly."""
    inputs, mask = actor_case(5)
    config = ActorLossConfig(loss_agg_mode=mode, rollout_correction=ACTOR_CORRECTION)
    logprobs = inputs["logprobs"].clone().requires_grad_(True)
    whole, _ = run({**inputs, "logprobs": logprobs}, mask, config)
    whole.backward()
    denominator = actor_loss_denominator(
        config, inputs["old_logprobs"], mask, inputs["rollout_logprobs"]
    )
    total, grads = 0.0, []
    for rows in (slice(0, 1), slice(1, 4), slice(4, 6)):
        piece = {k: v[rows] for k, v in inputs.items()}
        part_lp = piece["logprobs"].clone().requires_grad_(True)
        loss, _ = run({**piece, "logprobs": part_lp}, mask[rows], config, denominator=denominator)
        loss.backward()
        total, grads = total + loss.item(), [*grads, part_lp.grad]
    assert total == pytest.approx(whole.item(), rel=1e-10)
    assert torch.allclose(torch.cat(grads), logprobs.grad, atol=1e-12)


def test_rejected_tokens_get_no_gradient_and_kept_ones_are_weighted():
    inputs, mask = actor_case(6)
    config = ActorLossConfig(
        clip=PolicyLossConfig(clip_ratio=100.0, clip_ratio_c=None),  # no clipping: r A
        rollout_correction=ACTOR_CORRECTION,
    )
    logprobs = inputs["logprobs"].clone().requires_grad_(True)
    loss, _ = run({**inputs, "logprobs": logprobs}, mask, config)
    loss.backward()
    weights, kept = reference(
        inputs["old_logprobs"].tolist(),
        inputs["rollout_logprobs"].tolist(),
        mask.tolist(),
        ACTOR_CORRECTION,
    )
    ratio = torch.exp(inputs["logprobs"] - inputs["old_logprobs"])
    expected = -inputs["advantages"] * ratio * weights / kept.sum()
    assert torch.allclose(logprobs.grad, expected, atol=1e-12)
    assert not logprobs.grad[kept == 0].any()


def test_tis_cap_is_token_level_is():
    inputs, mask = actor_case(7)
    capped, _ = run(inputs, mask, ActorLossConfig(tis_cap=1.2))
    explicit = ActorLossConfig(
        rollout_correction=RolloutCorrectionConfig(rollout_is="token", rollout_is_threshold=1.2)
    )
    assert capped.item() == run(inputs, mask, explicit)[0].item()
    with pytest.raises(ValueError, match="actor.tis_cap and algorithm.rollout_correction"):
        ActorLossConfig(tis_cap=1.2, rollout_correction=explicit.rollout_correction)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rollout_is": "seq"}, r"rollout_is = 'seq'; allowed: token, sequence"),
        ({"rollout_is_threshold": 0.0}, r"rollout_is_threshold = 0.0; allowed: > 0"),
        ({"rollout_rs": "token"}, r"rollout_rs_threshold = None; allowed: a number > 0"),
        ({"rollout_rs": "tok", "rollout_rs_threshold": 2.0}, r"allowed: token, sequence, geom"),
        (
            {"rollout_rs": "token", "rollout_rs_threshold": 2.0, "rollout_rs_threshold_lower": 3},
            r"rollout_rs_threshold_lower = 3; allowed: in \[0, rollout_rs_threshold\]",
        ),
        ({"rollout_token_veto_threshold": -1e-4}, r"rollout_token_veto_threshold = -0.0001"),
    ],
)
def test_bad_settings_name_the_key(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RolloutCorrectionConfig(**kwargs)


def test_missing_rollout_logprobs_is_a_clear_error():
    inputs, mask = actor_case(8)
    config = ActorLossConfig(rollout_correction=ACTOR_CORRECTION)
    with pytest.raises(ValueError, match="needs the rollout engine's log-probs"):
        run({**inputs, "rollout_logprobs": None}, mask, config)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    rows=st.integers(1, 4),
    width=st.integers(1, 6),
    spread=st.sampled_from([0.01, 1.0, 30.0]),
    cfg=st.sampled_from(CONFIGS),
)
def test_odd_shapes_and_extreme_ratios(seed, rows, width, spread, cfg):
    g = torch.Generator().manual_seed(seed)
    rollout = -torch.rand(rows, width, generator=g) * 3
    old = rollout + torch.randn(rows, width, generator=g) * spread
    mask = (torch.rand(rows, width, generator=g) > 0.4).double()
    result = rollout_correction(old, rollout, mask, cfg)
    weights, kept = reference(old.tolist(), rollout.tolist(), mask.tolist(), cfg)
    assert torch.equal(result.mask, kept)
    assert torch.allclose(result.weights, weights, rtol=1e-12, atol=0)
    metrics = rollout_correction_metrics(old, rollout, mask, cfg)
    assert all(math.isfinite(v) for v in metrics.values())


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_float64_of_the_corrected_objective(mode):
    """Away from the clip kinks the corrected loss is smooth in the log-probs (the weights
    and the rejection depend only on old and rollout log-probs)."""
    inputs, mask = actor_case(9)
    config = ActorLossConfig(
        loss_agg_mode=mode,
        clip=PolicyLossConfig(clip_ratio=50.0, clip_ratio_c=None),
        rollout_correction=RolloutCorrectionConfig(
            rollout_is="sequence",
            rollout_is_threshold=2.0,
            rollout_rs="token",
            rollout_rs_threshold=2.5,
        ),
    )

    def objective(logprobs):
        return run({**inputs, "logprobs": logprobs}, mask, config)[0]

    leaf = inputs["logprobs"].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(objective, (leaf,))
