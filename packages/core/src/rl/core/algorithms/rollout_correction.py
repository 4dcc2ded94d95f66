"""Rollout correction (`algorithm.rollout_correction`, verl's names): importance weights,
rejection sampling and a veto between the trainer's and the rollout engine's log-probs.

The rollout engine (vLLM, SGLang, an older policy in async training) samples from
pi_rollout; the trainer's policy at rollout time is pi_old. Their per-token log-ratio
log rho_t = log pi_old - log pi_rollout measures how off-policy each token is.

- Importance sampling (`rollout_is`): multiply each token's policy loss by a weight,
  truncated at `rollout_is_threshold` — `token`: rho_t; `sequence`: prod_t rho_t (one
  weight for all tokens of a sequence).
- Rejection sampling (`rollout_rs`): drop from the loss what lies outside
  [`rollout_rs_threshold_lower` (default 1 / upper), `rollout_rs_threshold`] —
  `token`: each token by rho_t; `sequence`: whole sequences by prod_t rho_t;
  `geometric`: whole sequences by exp(mean_t log rho_t).
- Veto (`rollout_token_veto_threshold`): drop a whole sequence if any of its tokens has
  rho_t below the threshold (a catastrophic token poisons its sequence).

Weights are detached (they change the measure, not the objective). Rejected tokens
leave the actor loss entirely — policy, entropy and KL terms — and its normaliser.
Inputs are float [B, R] with a response mask, or packed [T] with `seq_ids`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from rl.core.algorithms.importance import bounded_exp
from rl.core.algorithms.masked import masked_mean
from rl.core.algorithms.segments import per_token, sequence_sums

IS_LEVELS = ("token", "sequence")
RS_LEVELS = ("token", "sequence", "geometric")


def _check(ok: bool, key: str, value: object, allowed: str) -> None:
    if not ok:
        raise ValueError(f"{key} = {value!r}; allowed: {allowed}")


@dataclass(frozen=True)
class RolloutCorrectionConfig:
    """`algorithm.rollout_correction.*`; every part is off by default.

    rollout_is: importance-weight level, `token` | `sequence` | None (off).
    rollout_is_threshold: upper truncation of the weights (> 0).
    rollout_rs: rejection level, `token` | `sequence` | `geometric` | None (off).
    rollout_rs_threshold / rollout_rs_threshold_lower: the accepted ratio range
        (lower defaults to 1 / upper); the upper bound is required when `rollout_rs` is set.
    rollout_token_veto_threshold: drop a sequence holding a token with rho below it.
    bypass_mode: the rollout engine's log-probs are the old policy's (verl's bypass mode:
        no pass recomputes them; `rl.core.trainer.old_logprobs`), so PPO's ratio is
        pi / pi_rollout; not together with IS, rejection or veto.
    loss_type: the loss in bypass mode; `ppo_clip` (verl's default: the policy loss with
        that ratio) is the one rl runs.
    """

    rollout_is: Literal["token", "sequence"] | None = None
    rollout_is_threshold: float = 2.0
    rollout_rs: Literal["token", "sequence", "geometric"] | None = None
    rollout_rs_threshold: float | None = None
    rollout_rs_threshold_lower: float | None = None
    rollout_token_veto_threshold: float | None = None
    bypass_mode: bool = False
    loss_type: Literal["ppo_clip"] = "ppo_clip"

    def __post_init__(self) -> None:
        _check(
            self.rollout_is in (None, *IS_LEVELS), "rollout_is", self.rollout_is, "token, sequence"
        )
        _check(
            self.rollout_is_threshold > 0, "rollout_is_threshold", self.rollout_is_threshold, "> 0"
        )
        _check(
            self.rollout_rs in (None, *RS_LEVELS),
            "rollout_rs",
            self.rollout_rs,
            "token, sequence, geometric",
        )
        upper, lower = self.rollout_rs_threshold, self.rollout_rs_threshold_lower
        if self.rollout_rs is not None:
            _check(upper is not None, "rollout_rs_threshold", upper, "a number > 0 with rollout_rs")
        _check(upper is None or upper > 0, "rollout_rs_threshold", upper, "> 0")
        _check(
            lower is None or 0 <= lower <= (upper if upper is not None else math.inf),
            "rollout_rs_threshold_lower",
            lower,
            "in [0, rollout_rs_threshold]",
        )
        veto = self.rollout_token_veto_threshold
        _check(veto is None or veto > 0, "rollout_token_veto_threshold", veto, "> 0 or null")
        _check(
            self.loss_type == "ppo_clip",
            "loss_type",
            self.loss_type,
            "ppo_clip (verl's reinforce loss of bypass mode is not in rl)",
        )
        _check(
            not (self.bypass_mode and self.enabled),
            "bypass_mode",
            self.bypass_mode,
            "false while rollout_is, rollout_rs or rollout_token_veto_threshold is set (rl's "
            "bypass mode is verl's ppo_clip without importance weights or rejection)",
        )

    @property
    def enabled(self) -> bool:
        return (
            self.rollout_is is not None
            or self.rollout_rs is not None
            or self.rollout_token_veto_threshold is not None
        )

    @property
    def rs_bounds(self) -> tuple[float, float]:
        """(lower, upper) accepted ratio of rejection sampling."""
        assert self.rollout_rs_threshold is not None
        upper = self.rollout_rs_threshold
        lower = self.rollout_rs_threshold_lower
        return (1.0 / upper if lower is None else lower), upper


@dataclass
class RolloutCorrection:
    """What the correction does to one batch; tensors have the shape of the log-probs.

    weights: float, detached truncated IS weights (1 where IS is off, 0 on padding).
    mask: float, `response_mask` without rejected and vetoed tokens.
    """

    weights: torch.Tensor
    mask: torch.Tensor


@dataclass
class _Parts:
    """The pieces both the loss and the metrics need, each like the log-probs.

    raw: untruncated IS weights at `rollout_is` level (None when IS is off).
    accepted: float, 1 where rejection sampling keeps the token (None when off).
    not_vetoed: float, 1 on sequences without a catastrophic token (None when off).
    """

    mask: torch.Tensor
    raw: torch.Tensor | None
    accepted: torch.Tensor | None
    not_vetoed: torch.Tensor | None


def _sequence_log_ratio(
    log_ratio: torch.Tensor, mask: torch.Tensor, seq_ids: torch.Tensor | None, mean: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence sum (or mean) of the valid log-ratios [S], and valid-token counts [S]."""
    sums, counts = sequence_sums(log_ratio, mask, seq_ids)
    return (sums / counts.clamp(min=1) if mean else sums), counts


def _level_log_ratio(
    level: str, log_ratio: torch.Tensor, mask: torch.Tensor, seq_ids: torch.Tensor | None
) -> torch.Tensor:
    """The log-ratio each token is judged by at `level`: the shape of `log_ratio`."""
    if level == "token":
        return log_ratio
    seq, _ = _sequence_log_ratio(log_ratio, mask, seq_ids, mean=level == "geometric")
    return per_token(seq, log_ratio, seq_ids)


def _parts(
    old_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    config: RolloutCorrectionConfig,
    seq_ids: torch.Tensor | None,
) -> _Parts:
    """IS weights, rejection and veto of one batch, each only when configured."""
    mask = response_mask.to(old_logprobs.dtype)
    valid = mask.bool()
    log_ratio = torch.where(valid, (old_logprobs - rollout_logprobs).detach(), 0.0)
    parts = _Parts(mask, None, None, None)
    if config.rollout_is is not None:
        level_ratio = _level_log_ratio(config.rollout_is, log_ratio, mask, seq_ids)
        parts.raw = bounded_exp(level_ratio) * mask
    if config.rollout_rs is not None:
        lower, upper = config.rs_bounds
        level_ratio = _level_log_ratio(config.rollout_rs, log_ratio, mask, seq_ids)
        accepted = level_ratio <= math.log(upper)
        if lower > 0:
            accepted &= level_ratio >= math.log(lower)
        parts.accepted = accepted.to(mask.dtype)
    if config.rollout_token_veto_threshold is not None:
        catastrophic = valid & (log_ratio < math.log(config.rollout_token_veto_threshold))
        vetoed, _ = sequence_sums(catastrophic.to(mask.dtype), mask, seq_ids)
        parts.not_vetoed = per_token((vetoed == 0).to(mask.dtype), mask, seq_ids)
    return parts


def _combine(parts: _Parts, config: RolloutCorrectionConfig) -> RolloutCorrection:
    kept = parts.mask
    for factor in (parts.accepted, parts.not_vetoed):
        if factor is not None:
            kept = kept * factor
    weights = parts.mask if parts.raw is None else parts.raw.clamp(max=config.rollout_is_threshold)
    return RolloutCorrection(weights=weights * kept, mask=kept)


def rollout_correction(
    old_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    config: RolloutCorrectionConfig,
    seq_ids: torch.Tensor | None = None,
) -> RolloutCorrection:
    """IS weights and the rejection mask of one batch: tensor work only, no host syncs
    (the loss calls it per micro-batch; `rollout_correction_metrics` reports on it).

    Args:
        old_logprobs: float [B, R] (or [T]), the trainer's log-probs of the rollout.
        rollout_logprobs: like `old_logprobs`, the rollout engine's.
        response_mask: like `old_logprobs`, bool or 0/1.
        config: which corrections apply.
        seq_ids: long [T] for packed inputs.
    """
    parts = _parts(old_logprobs, rollout_logprobs, response_mask, config, seq_ids)
    return _combine(parts, config)


def rollout_correction_metrics(
    old_logprobs: torch.Tensor,
    rollout_logprobs: torch.Tensor,
    response_mask: torch.Tensor,
    config: RolloutCorrectionConfig,
    seq_ids: torch.Tensor | None = None,
) -> dict[str, float]:
    """What the correction does to a batch (arguments as for `rollout_correction`).

    Returns verl's names, prefixed `rollout_corr/`, each only when its part is on:
    rollout_is_mean / rollout_is_max (before truncation) / rollout_is_eff_sample_size /
    rollout_is_ratio_fraction_high (truncated share), rollout_rs_masked_fraction (tokens)
    / rollout_rs_seq_masked_fraction (sequences), rollout_is_veto_fraction (sequences).
    """
    parts = _parts(old_logprobs, rollout_logprobs, response_mask, config, seq_ids)
    mask, metrics = parts.mask, dict[str, float]()
    if parts.raw is not None:
        weights = parts.raw.clamp(max=config.rollout_is_threshold)
        metrics |= _is_metrics(parts.raw, weights, mask, config.rollout_is_threshold)
    if parts.accepted is not None:
        kept = mask * parts.accepted
        metrics["rollout_corr/rollout_rs_masked_fraction"] = _fraction_dropped(kept, mask)
        metrics["rollout_corr/rollout_rs_seq_masked_fraction"] = _seq_fraction_dropped(
            kept, mask, seq_ids
        )
    if parts.not_vetoed is not None:
        metrics["rollout_corr/rollout_is_veto_fraction"] = _seq_fraction_dropped(
            mask * parts.not_vetoed, mask, seq_ids
        )
    return metrics


def _is_metrics(
    raw: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor, threshold: float
) -> dict[str, float]:
    """Mean, max (of `raw`, before truncation), effective sample size and truncated share."""
    mean = masked_mean(weights, mask)
    # Kish's effective sample size of the truncated weights, as a fraction of the tokens
    # (verl also clamps the weights from below at 1 / threshold first; we do not)
    ess = mean.square() / masked_mean(weights.square(), mask).clamp(min=1e-30)
    valid = mask.bool()
    return {
        "rollout_corr/rollout_is_mean": float(mean),
        "rollout_corr/rollout_is_max": float(raw[valid].max()) if valid.any() else 0.0,
        "rollout_corr/rollout_is_eff_sample_size": float(ess) if valid.any() else 1.0,
        "rollout_corr/rollout_is_ratio_fraction_high": float(
            masked_mean((raw > threshold).to(mask.dtype), mask)
        ),
    }


def _fraction_dropped(kept: torch.Tensor, mask: torch.Tensor) -> float:
    return float(1 - kept.sum() / mask.sum()) if mask.sum() > 0 else 0.0


def _seq_fraction_dropped(
    kept: torch.Tensor, mask: torch.Tensor, seq_ids: torch.Tensor | None
) -> float:
    """Share of sequences (with any valid token) that lost at least one token."""
    _, valid = sequence_sums(mask, mask, seq_ids)
    _, left = sequence_sums(kept, kept, seq_ids)
    has_tokens = valid > 0
    return float(((left < valid) & has_tokens).sum() / has_tokens.sum().clamp(min=1))
