"""KL between the policy and the reference (`kl_loss_type`, `kl_penalty`) and its controllers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from rl.core.algorithms.registry import Registry

KLEstimator = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_ESTIMATORS: Registry[KLEstimator] = Registry("KL estimator", "actor.kl_loss_type")


@KL_ESTIMATORS.register("kl", "k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """log p - log q: unbiased, high variance, can be negative."""
    return logprobs - ref_logprobs


@KL_ESTIMATORS.register("abs")
def kl_abs(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    return (logprobs - ref_logprobs).abs()


@KL_ESTIMATORS.register("mse", "k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """0.5 (log p - log q)^2."""
    return 0.5 * (logprobs - ref_logprobs).square()


@KL_ESTIMATORS.register("low_var_kl", "k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """q/p - log(q/p) - 1 >= 0 (Schulman's k3), clamped to [-10, 10] for stability."""
    log_ratio = (ref_logprobs - logprobs).clamp(-20, 20)
    return (log_ratio.exp() - log_ratio - 1).clamp(-10, 10)


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, kind: str) -> torch.Tensor:
    """Per-token KL estimate [B, R] of estimator `kind` (not `full`: see `full_kl`)."""
    return KL_ESTIMATORS.get(kind)(logprobs, ref_logprobs)


def full_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """Exact KL(p || q) per token from full logits [..., V]: sum_v p (log p - log q)."""
    logp = torch.log_softmax(logits.float(), -1)
    logq = torch.log_softmax(ref_logits.float(), -1)
    return (logp.exp() * (logp - logq)).sum(-1)


@dataclass
class FixedKLController:
    value: float

    def update(self, current_kl: float, n_steps: int) -> None:
        return None


@dataclass
class AdaptiveKLController:
    """The coefficient follows `target_kl` with proportional control (Ziegler et al.)."""

    value: float
    target_kl: float
    horizon: int

    def update(self, current_kl: float, n_steps: int) -> None:
        error = max(min(current_kl / self.target_kl - 1.0, 0.2), -0.2)
        self.value *= 1.0 + error * n_steps / self.horizon


def make_kl_controller(
    kind: str, kl_coef: float, target_kl: float = 0.1, horizon: int = 10000
) -> FixedKLController | AdaptiveKLController:
    if kind == "fixed":
        return FixedKLController(kl_coef)
    if kind == "adaptive":
        return AdaptiveKLController(kl_coef, target_kl, horizon)
    raise ValueError(f"algorithm.kl_ctrl.type = {kind!r}; valid: adaptive, fixed")


def apply_kl_in_reward(
    token_level_scores: torch.Tensor,
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    kind: str,
    coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """rewards = scores - coef * KL per token; returns (rewards, mean per-sequence KL [B])."""
    kld = kl_penalty(logprobs, ref_logprobs, kind) * response_mask
    rewards = token_level_scores - coef * kld
    seq_kl = kld.sum(-1) / response_mask.sum(-1).clamp(min=1)
    return rewards, seq_kl
