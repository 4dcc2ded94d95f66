"""`algorithm.rollout_correction.bypass_mode` (verl's name; its one-step-off config turns it
on): the rollout engine's log-probs stand for the old policy's, so no pass recomputes
them, and `loss_type: ppo_clip` is PPO's clipped loss with the ratio pi / pi_rollout.
Checked against the clipped loss written out in plain Python (float64), and refused
where verl's semantics would need what rl does not do."""

from __future__ import annotations

import math

import pytest
import torch

from rl.core.config import ConfigError, config_from_mapping
from rl.core.engines import LogprobOutput
from rl.core.trainer.algorithm_setup import actor_loss_fn
from rl.core.trainer.old_logprobs import from_update


def _config(**algorithm):
    bypass = {"rollout_correction": {"bypass_mode": True}}
    return config_from_mapping({"algorithm": bypass | algorithm}, "test")


def _case():
    g = torch.Generator().manual_seed(0)
    rollout = -torch.rand(3, 4, generator=g, dtype=torch.float64) * 2
    current = rollout + torch.randn(3, 4, generator=g, dtype=torch.float64) * 0.5
    advantages = torch.randn(3, 4, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    return current, rollout, advantages, mask


def _ppo_clip_reference(current, rollout, advantages, mask, eps=0.2, dual=3.0):
    """verl's vanilla PPO loss (dual clip for negative advantages), token-mean, by hand."""
    total, count = 0.0, 0
    for i in range(current.shape[0]):
        for j in range(current.shape[1]):
            if not mask[i, j]:
                continue
            ratio = math.exp(float(current[i, j]) - float(rollout[i, j]))
            a = float(advantages[i, j])
            clipped = max(-a * ratio, -a * min(max(ratio, 1 - eps), 1 + eps))
            total += min(clipped, -a * dual) if a < 0 else clipped
            count += 1
    return total / count


def test_the_loss_takes_the_rollout_logprobs_as_the_old_policys():
    current, rollout, advantages, mask = _case()
    batch = {"rollout_logprobs": rollout, "advantages": advantages, "response_mask": mask}
    loss, metrics = actor_loss_fn(_config())(LogprobOutput(current), batch, batch)
    assert float(loss) == pytest.approx(_ppo_clip_reference(current, rollout, advantages, mask))
    assert metrics["mismatch/abs_logprob_diff"] > 0.1  # pi against pi_rollout, reported
    # without bypass the old policy is this one (ratio 1): a different loss
    plain = config_from_mapping({}, "test")
    unbypassed, _ = actor_loss_fn(plain)(LogprobOutput(current), batch, batch)
    assert float(unbypassed) != pytest.approx(float(loss))


def test_no_pass_recomputes_the_old_logprobs():
    assert from_update(_config(), rows=1000)  # more rows than a mini-batch: still none
    assert not from_update(config_from_mapping({"actor": {"ppo_epochs": 2}}, "test"), rows=1)
    epochs = config_from_mapping(
        {"actor": {"ppo_epochs": 2}, "algorithm": {"rollout_correction": {"bypass_mode": True}}},
        "test",
    )
    assert from_update(epochs, rows=1)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"rollout_correction": {"bypass_mode": True, "loss_type": "reinforce"}}, "loss_type"),
        (
            {
                "rollout_correction": {
                    "bypass_mode": True,
                    "rollout_rs": "token",
                    "rollout_rs_threshold": 2.0,
                }
            },
            "bypass_mode = True; allowed: false while",
        ),
        ({"use_kl_in_reward": True}, "algorithm.use_kl_in_reward"),
    ],
)
def test_what_rl_cannot_run_with_bypass_is_refused_by_name(settings, named):
    with pytest.raises(ConfigError, match=named):
        _config(**settings)


def test_bypass_with_tis_cap_is_refused():
    with pytest.raises(ConfigError, match="actor.tis_cap"):
        config_from_mapping(
            {
                "actor": {"tis_cap": 2.0},
                "algorithm": {"rollout_correction": {"bypass_mode": True}},
            },
            "test",
        )
