"""Training metrics of the policy loss and of the advantages, over valid tokens only.

Values are plain floats, ready for the logger. Names follow verl's where it has one
(`actor/pg_clipfrac`, `critic/advantages/mean`, ...).
"""

from __future__ import annotations

import torch

from rl.core.algorithms.masked import masked_mean, masked_stats
from rl.core.algorithms.policy_losses import PolicyLossTerms


def policy_metrics(
    terms: PolicyLossTerms,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
) -> dict[str, float]:
    """Clip fractions, approximate KL and importance-ratio statistics.

    Args:
        terms: what the policy loss returned.
        logprobs, old_logprobs: float [B, R] (or [T]).
        response_mask: like `logprobs`; the statistics are over its valid tokens, early-
            stopped ones included (their fraction is reported separately).

    Returns:
        actor/pg_clipfrac (either bound), actor/pg_clipfrac_high, actor/pg_clipfrac_low,
        actor/pg_clipfrac_dual, actor/approx_kl (mean log p_old - log p),
        actor/ratio_mean|max|min, actor/early_stopped_frac.
    """
    mask = response_mask.to(logprobs.dtype)
    ratio = masked_stats(terms.ratio, mask, "ratio")
    valid = mask.sum().clamp(min=1)

    def fraction(flags: torch.Tensor) -> float:
        return float(masked_mean(flags.to(mask.dtype), mask))

    return {
        "actor/pg_clipfrac": fraction(terms.clipped_high | terms.clipped_low),
        "actor/pg_clipfrac_high": fraction(terms.clipped_high),
        "actor/pg_clipfrac_low": fraction(terms.clipped_low),
        "actor/pg_clipfrac_dual": fraction(terms.dual_clipped),
        "actor/approx_kl": float(masked_mean((old_logprobs - logprobs).detach(), mask)),
        "actor/ratio_mean": ratio["ratio/mean"],
        "actor/ratio_max": ratio["ratio/max"],
        "actor/ratio_min": ratio["ratio/min"],
        "actor/early_stopped_frac": float(1 - (terms.mask * mask).sum() / valid),
    }


def advantage_metrics(
    advantages: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    values: torch.Tensor | None = None,
) -> dict[str, float]:
    """mean / max / min of advantages, returns and (with a critic) values.

    All tensors float [B, R] (or [T]) like `response_mask`. Keys:
    critic/advantages/*, critic/returns/*, critic/values/*.
    """
    metrics = masked_stats(advantages, response_mask, "critic/advantages")
    metrics |= masked_stats(returns, response_mask, "critic/returns")
    if values is not None:
        metrics |= masked_stats(values, response_mask, "critic/values")
    return metrics
