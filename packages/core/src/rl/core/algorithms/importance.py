"""Rollout-vs-trainer mismatch: truncated importance sampling (TIS) and its metrics.

The rollout engine (vLLM, SGLang) and the trainer compute slightly different
log-probs for the same tokens (kernels, precision, sampling tweaks), so the data is
a little off-policy even on the first update. TIS reweights each token's loss by
the capped ratio p_trainer / p_rollout, which keeps the gradient close to on-policy
while the cap bounds its variance.

`old_logprobs` are the trainer's log-probs of the rollout (before the update) and
`rollout_logprobs` the engine's, both float [B, R] or packed [T].
"""

from __future__ import annotations

import torch

from rl.core.algorithms.masked import masked_mean

# exp() of a log-ratio beyond this overflows float32 long before it means anything
MAX_LOG_RATIO = 20.0


def bounded_exp(log_ratio: torch.Tensor) -> torch.Tensor:
    """exp(log_ratio) with the log-ratio clamped to [-MAX_LOG_RATIO, MAX_LOG_RATIO]: the one
    guard every importance ratio (PPO, TIS, rollout correction, metrics) goes through."""
    return log_ratio.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO).exp()


def truncated_is_weights(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, cap: float
) -> torch.Tensor:
    """min(p_trainer / p_rollout, cap) per token, detached: the shape of `old_logprobs`.

    The token-level case of `rollout_correction` (rollout_is: token) without a mask.
    """
    return bounded_exp(old_logprobs - rollout_logprobs).clamp(max=cap).detach()


def mismatch_metrics(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, response_mask: torch.Tensor
) -> dict[str, float]:
    """How far the trainer is from the rollout engine, over valid tokens.

    Returns:
        mismatch/abs_logprob_diff: mean |log p_trainer - log p_rollout|.
        mismatch/max_abs_logprob_diff: its largest (0 exactly with rollout.batch_invariant).
        mismatch/kl: KL(rollout || trainer), estimated with k3 on the tokens the rollout
            engine sampled: mean(r - 1 - log r) with r = p_trainer / p_rollout.
        mismatch/ppl_ratio: perplexity of the trainer over that of the rollout engine,
            exp(mean(log p_rollout) - mean(log p_trainer)).
    """
    old, rollout = old_logprobs.detach(), rollout_logprobs.detach()
    log_ratio = (old - rollout).clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO)
    k3 = log_ratio.exp() - 1 - log_ratio
    ppl_log_ratio = masked_mean(rollout, response_mask) - masked_mean(old, response_mask)
    return {
        "mismatch/abs_logprob_diff": float(masked_mean((old - rollout).abs(), response_mask)),
        "mismatch/max_abs_logprob_diff": float(
            ((old - rollout).abs() * response_mask).max() if response_mask.any() else 0.0
        ),
        "mismatch/kl": float(masked_mean(k3, response_mask)),
        "mismatch/ppl_ratio": float(ppl_log_ratio.exp()),
    }
