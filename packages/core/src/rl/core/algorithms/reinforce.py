"""ROLL's `reinforce` advantage estimator: the discounted return-to-go of the token
rewards, G_t = r_t + gamma * G_{t+1}, with no baseline and no whitening (the advantage is
the return). ROLL subtracts a baseline only through its reward normalisation
(norm_mean_type) and whitens only with whiten_advantages (`algorithm.whiten_advantages`
here); it is unlike `reinforce_plus_plus`, which whitens always."""

from __future__ import annotations

import torch

from rl.core.algorithms.advantages import AdvantageInputs, register_advantage_estimator
from rl.core.algorithms.returns import discounted_returns
from rl.core.algorithms.segments import pad_packed, unpad_packed


@register_advantage_estimator("reinforce")
def reinforce(
    rewards: torch.Tensor, mask: torch.Tensor, inputs: AdvantageInputs
) -> tuple[torch.Tensor, torch.Tensor]:
    """(returns, returns): the discounted return on each valid token, 0 on padding."""
    if inputs.seq_ids is None:
        returns = discounted_returns(rewards, mask, inputs.gamma)
        return returns, returns
    padded = discounted_returns(
        pad_packed(rewards, inputs.seq_ids), pad_packed(mask, inputs.seq_ids), inputs.gamma
    )
    returns = unpad_packed(padded, inputs.seq_ids)
    return returns, returns
