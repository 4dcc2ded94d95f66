"""KL between the policy and the reference: estimators and the KL loss term.

Sampled-token estimators (Schulman, "Approximating KL divergence") take the
log-probs of the sampled tokens under the policy (`logprobs`, log p) and the
reference (`ref_logprobs`, log q), float [B, R] or packed [T], and return a per-token
estimate of KL(p || q) of the same shape. They are selected by `actor.kl_loss_type`
(KL as a loss) and `algorithm.kl_penalty` (KL in the reward; see `kl_control`).

`full` is exact: it needs the full logits [..., V] of both models instead of log-probs,
and sums over the vocabulary.

Each sampled-token estimator also exists with a `+` suffix (`k1+`, `k3+`, `low_var_kl+`,
...; verl's names): the value of the named estimator with the gradient of k2. The
expected value of k1 or k3 is the KL, but the expected gradient of neither is the KL's
gradient; k2's is (d k2 / d log p = log p - log q). A straight-through construction
keeps one's value and the other's gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rl.core.algorithms.aggregation import agg_loss
from rl.core.algorithms.masked import masked_mean
from rl.core.algorithms.registry import Registry

KLEstimator = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
KL_ESTIMATORS: Registry[KLEstimator] = Registry(
    "KL estimator", "actor.kl_loss_type / algorithm.kl_penalty"
)
register_kl_estimator = KL_ESTIMATORS.register
get_kl_estimator = KL_ESTIMATORS.get

# log q - log p is clamped before exp() in k3 so a token the reference finds far more
# likely cannot overflow; the result is clamped to [-10, 10] as verl does.
_K3_LOG_RATIO_BOUND = 20.0
_K3_BOUND = 10.0


@register_kl_estimator("kl", "k1")
def kl_k1(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k1 = log p - log q: unbiased, high variance, can be negative."""
    return logprobs - ref_logprobs


@register_kl_estimator("abs")
def kl_abs(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """|log p - log q|: a biased, non-negative proxy."""
    return (logprobs - ref_logprobs).abs()


@register_kl_estimator("mse", "k2")
def kl_k2(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k2 = 0.5 (log p - log q)^2: biased, low variance, non-negative."""
    return 0.5 * (logprobs - ref_logprobs).square()


@register_kl_estimator("low_var_kl", "k3")
def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """k3 = q/p - log(q/p) - 1: unbiased for KL(p || q), low variance, >= 0; clamped."""
    log_ratio = (ref_logprobs - logprobs).clamp(-_K3_LOG_RATIO_BOUND, _K3_LOG_RATIO_BOUND)
    return (log_ratio.exp() - log_ratio - 1).clamp(-_K3_BOUND, _K3_BOUND)


def straight_through_k2(estimator: KLEstimator) -> KLEstimator:
    """`estimator`'s value with the gradient of k2 = 0.5 (log p - log q)^2."""

    def plus(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
        value = estimator(logprobs, ref_logprobs)
        k2 = kl_k2(logprobs, ref_logprobs)
        return k2 - k2.detach() + value.detach()

    plus.__doc__ = f"{estimator.__name__} in value, k2 in gradient (straight-through)."
    return plus


for _names, _estimator in (
    (("kl+", "k1+"), kl_k1),
    (("abs+",), kl_abs),
    (("low_var_kl+", "k3+"), kl_k3),
):
    register_kl_estimator(*_names)(straight_through_k2(_estimator))
# k2's own gradient is k2's: `mse+` / `k2+` are k2 itself
register_kl_estimator("mse+", "k2+")(kl_k2)


@register_kl_estimator("full")
def full_kl(logits: torch.Tensor, ref_logits: torch.Tensor) -> torch.Tensor:
    """Exact KL(p || q) = sum_v p_v (log p_v - log q_v) from full logits [..., V] -> [...].

    Computed in at least float32 whatever the logits' dtype (bf16 softmax is too coarse).
    """
    dtype = torch.promote_types(logits.dtype, torch.float32)
    logp = torch.log_softmax(logits.to(dtype), -1)
    logq = torch.log_softmax(ref_logits.to(dtype), -1)
    return (logp.exp() * (logp - logq)).sum(-1)


def kl_penalty(logprobs: torch.Tensor, ref_logprobs: torch.Tensor, kl_type: str) -> torch.Tensor:
    """Per-token KL estimate of estimator `kl_type`: the shape of `logprobs`.

    For `full`, pass the full logits [..., V] of policy and reference instead; the
    result is [...].
    """
    return get_kl_estimator(kl_type)(logprobs, ref_logprobs)


def kl_loss(
    logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    kl_loss_type: str,
    loss_agg_mode: str = "token-mean",
    denominator: float | None = None,
    seq_ids: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The KL loss term (`actor.use_kl_loss`), aggregated like the policy loss.

    Args:
        logprobs, ref_logprobs: float [B, R] (or [T]); for `full`, logits [B, R, V].
        response_mask: [B, R] (or [T]), bool or 0/1.
        denominator, seq_ids, loss_scale_factor: as for `aggregation.agg_loss`.

    Returns:
        (scalar loss — multiply by `actor.kl_loss_coef` —, {"actor/kl_loss": mean KL/token}).
    """
    kl = kl_penalty(logprobs, ref_logprobs, kl_loss_type)
    loss = agg_loss(kl, response_mask, loss_agg_mode, denominator, seq_ids, loss_scale_factor)
    return loss, {"actor/kl_loss": float(masked_mean(kl.detach(), response_mask))}
