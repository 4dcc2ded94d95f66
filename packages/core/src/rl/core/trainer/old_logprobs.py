"""Whether a step's old log-probs need a forward pass of their own.

PPO's "old" policy is the actor as it is before the update. When the update is one epoch
of one mini-batch, its first (and only) forward runs exactly those weights on exactly
those rows, so the loss can take the old log-probs from it (detached: the ratio is exactly
1 and its gradient is that of the log-probs) and the separate pass is pure redundancy.
verl's actor makes the same substitution (its `on_policy` case) but still runs the pass;
here it is skipped. The pass stays when something reads the old log-probs before the
update (the KL penalty in the reward; the rollout correction, whose weights and rejected
tokens the loss normaliser needs for the whole mini-batch) or when
`actor.old_log_prob_pass: always` asks for it.

In bypass mode (`algorithm.rollout_correction.bypass_mode`, verl's) the rollout engine's
log-probs are the old policy's: no pass runs, whatever the epochs and mini-batches, and
the loss reads them from the batch (`algorithm_setup.actor_loss_fn`).
"""

from __future__ import annotations

from typing import Any

from rl.core.micro_batches import Rows
from rl.core.trainer.algorithm_setup import actor_loss_config


def from_update(config: Any, rows: int) -> bool:
    """True when no separate pass computes the old log-probs of a batch of `rows`
    responses: the actor's update gives them, or bypass mode takes the rollout's."""
    actor, algorithm = config.actor, config.algorithm
    if algorithm.rollout_correction.bypass_mode:
        return True
    return (
        actor.old_log_prob_pass == "auto"
        and actor.ppo_epochs == 1
        and rows <= Rows.of(config, actor).rows_per_mini
        and not algorithm.use_kl_in_reward
        and not actor_loss_config(config).correction.enabled
        # R2 records the routes the updates replay in that pass
        and actor.router_replay.mode != "R2"
    )
