"""Rollout-vs-trainer mismatch: truncated importance sampling and its metrics.

The rollout engine (vLLM, SGLang) and the trainer compute slightly different
log-probs for the same tokens; TIS reweights each token's loss by the capped
ratio p_trainer / p_rollout so the update stays on-policy in expectation.
"""

from __future__ import annotations

import torch

from rl.core.algorithms.masked import masked_mean


def truncated_is_weights(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, cap: float
) -> torch.Tensor:
    """min(p_trainer / p_rollout, cap) per token [B, R], without gradient."""
    ratio = torch.exp((old_logprobs - rollout_logprobs).clamp(-20, 20))
    return ratio.clamp(max=cap).detach()


def mismatch_metrics(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """Mean |Δ log p|, KL(rollout || trainer) by k3, and the perplexity ratio trainer/rollout."""
    delta = old_logprobs - rollout_logprobs
    log_ratio = -delta.clamp(-20, 20)
    k3 = log_ratio.exp() - log_ratio - 1
    ppl_trainer = torch.exp(-masked_mean(old_logprobs, mask))
    ppl_rollout = torch.exp(-masked_mean(rollout_logprobs, mask))
    return {
        "mismatch/abs_logprob_diff": float(masked_mean(delta.abs(), mask)),
        "mismatch/kl": float(masked_mean(k3, mask)),
        "mismatch/ppl_ratio": float(ppl_trainer / ppl_rollout),
    }
