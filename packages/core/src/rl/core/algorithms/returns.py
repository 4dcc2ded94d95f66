"""Reverse-time recursions over the padded response axis: discounted returns and GAE.

Both walk t = R-1 .. 0 and *skip* positions where the mask is 0: the running value
is carried across them unchanged. So trailing padding, and holes inside a response
(e.g. tool-output tokens of a multi-turn rollout that the policy did not generate),
contribute nothing — neither their rewards nor their values reach a valid token.
Inputs are [B, R] float tensors; packed batches go through `segments.pad_packed`.
"""

from __future__ import annotations

import torch


def discounted_returns(
    rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float
) -> torch.Tensor:
    """G_t = r_t + gamma * G_next over valid tokens, G = 0 on padding: [B, R] like `rewards`."""
    valid = response_mask.bool()
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = torch.where(valid[:, t], rewards[:, t] + gamma * running, running)
        returns[:, t] = torch.where(valid[:, t], running, torch.zeros_like(running))
    return returns


def gae_advantages_returns(
    rewards: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016), unwhitened.

    delta_t = r_t + gamma * V_next - V_t and A_t = delta_t + gamma * lam * A_next, where
    "next" is the next *valid* token (V_next = 0 after the last one).

    Args:
        rewards: float [B, R] per-token rewards.
        values: float [B, R] critic values.
        response_mask: [B, R], bool or 0/1.

    Returns:
        (advantages, returns): float [B, R] each, returns = A + V, both 0 on padding.
    """
    valid = response_mask.bool()
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(rewards[:, 0])
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        step = delta + gamma * lam * last_gae
        last_gae = torch.where(valid[:, t], step, last_gae)
        next_value = torch.where(valid[:, t], values[:, t], next_value)
        advantages[:, t] = torch.where(valid[:, t], step, torch.zeros_like(step))
    returns = torch.where(valid, advantages + values, torch.zeros_like(values))
    return advantages, returns
