"""KL in the reward (`algorithm.use_kl_in_reward`) and its coefficient controllers.

token_level_rewards = token_level_scores - kl_coef * KL per token, where KL is the
estimator `algorithm.kl_penalty`. The coefficient comes from a controller
(`algorithm.kl_ctrl.type`): `fixed` keeps `kl_ctrl.kl_coef`; `adaptive` steers it
towards `kl_ctrl.target_kl` over `kl_ctrl.horizon` samples (Ziegler et al. 2019).

Controllers hold one float of state; the update rule itself is the pure function
`adaptive_kl_coef`, and the controller is checkpointed through its `value`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from rl.core.algorithms.kl import kl_penalty
from rl.core.algorithms.registry import Registry
from rl.core.algorithms.segments import sequence_sums

# The adaptive controller never moves the coefficient by more than 20% of the
# proportional error per horizon, so one noisy KL estimate cannot swing it.
_MAX_PROPORTIONAL_ERROR = 0.2


def adaptive_kl_coef(
    kl_coef: float, current_kl: float, target_kl: float, horizon: int, n_steps: int
) -> float:
    """The next coefficient: kl_coef * (1 + clip(current/target - 1, +-0.2) * n_steps/horizon)."""
    error = min(
        max(current_kl / target_kl - 1.0, -_MAX_PROPORTIONAL_ERROR), _MAX_PROPORTIONAL_ERROR
    )
    return kl_coef * (1.0 + error * n_steps / horizon)


class KLController(Protocol):
    value: float

    def update(self, current_kl: float, n_steps: int) -> None: ...


@dataclass
class FixedKLController:
    """A constant coefficient (`kl_ctrl.type: fixed`)."""

    value: float

    def update(self, current_kl: float, n_steps: int) -> None:
        """Nothing to adapt."""


@dataclass
class AdaptiveKLController:
    """A coefficient that follows `target_kl` (`kl_ctrl.type: adaptive`)."""

    value: float
    target_kl: float
    horizon: int

    def __post_init__(self) -> None:
        if self.target_kl <= 0:
            raise ValueError(f"algorithm.kl_ctrl.target_kl = {self.target_kl!r}; allowed: > 0")
        if self.horizon <= 0:
            raise ValueError(f"algorithm.kl_ctrl.horizon = {self.horizon!r}; allowed: > 0")

    def update(self, current_kl: float, n_steps: int) -> None:
        """Adapt after a batch of `n_steps` samples whose mean KL was `current_kl`."""
        self.value = adaptive_kl_coef(self.value, current_kl, self.target_kl, self.horizon, n_steps)


ControllerFactory = Callable[[float, float, int], KLController]
KL_CONTROLLERS: Registry[ControllerFactory] = Registry("KL controller", "algorithm.kl_ctrl.type")
KL_CONTROLLERS.register("fixed")(lambda kl_coef, target_kl, horizon: FixedKLController(kl_coef))
KL_CONTROLLERS.register("adaptive")(AdaptiveKLController)


def make_kl_controller(
    kind: str, kl_coef: float, target_kl: float = 0.1, horizon: int = 10000
) -> KLController:
    """The controller `kind` (`algorithm.kl_ctrl.type`) starting at `kl_coef`."""
    return KL_CONTROLLERS.get(kind)(kl_coef, target_kl, horizon)


def apply_kl_in_reward(
    token_level_scores: torch.Tensor,
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    kl_penalty_type: str,
    kl_coef: float,
    seq_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """token_level_rewards = scores - kl_coef * KL on valid tokens.

    Args:
        token_level_scores: float [B, R] (or packed [T] with `seq_ids` [T]).
        logprobs: the rollout policy's log-probs (`old_logprobs`), like the scores.
        ref_logprobs: the reference model's log-probs, like the scores.
        response_mask: like the scores, bool or 0/1; padding gets no penalty.
        kl_penalty_type: the estimator (`algorithm.kl_penalty`).

    Returns:
        (token_level_rewards like the scores, mean KL per token of each sequence [S]).
        Feed the batch mean of the latter to the controller's `update`.
    """
    kl = kl_penalty(logprobs, ref_logprobs, kl_penalty_type)
    kl = torch.where(response_mask.bool(), kl, torch.zeros_like(kl))
    sums, counts = sequence_sums(kl, response_mask, seq_ids)
    return token_level_scores - kl_coef * kl, sums / counts.clamp(min=1)
