"""Training health, watched from each step's metrics: stop when updates keep being skipped,
warn when the loss, the gradients or the weights blow up, and when the rewards give
nothing to learn from.

Train engines report per role (`actor/`, `critic/`): `skipped_steps` (the share of
this step's optimizer steps skipped for a non-finite gradient norm), `grad_norm`,
`weight_norm`, and their losses. That is the whole contract: the controller never
looks inside an engine. The trainer adds `reward/zero_std_group_frac` (the share of
prompt groups whose rewards are all equal; `algorithms.score_statistics`).

The gradient-spike baseline is robust: the median and the MAD of the last
`GRAD_WINDOW` finite, non-zero gradient norms. Zeros (a skipped update, a batch whose
advantages are all 0) and the spikes themselves cannot drag it down or up.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict

from rl.core.errors import TrainingError

log = logging.getLogger(__name__)
ROLES = ("actor", "critic")
LOSSES = ("pg_loss", "vf_loss", "loss")
WEIGHT_GROWTH = 10.0  # warn when the weight norm passes this multiple of its first value
GRAD_WINDOW = 50  # the recent finite, non-zero gradient norms the spike baseline is taken over
GRAD_HISTORY = 5  # norms needed before a spike is called
GRAD_SPIKE = 10.0  # a spike is over this multiple of the median ...
GRAD_SIGMAS = 6.0  # ... and over this many robust sigmas (1.4826 x MAD) above it
IDENTICAL_REWARD_STEPS = 5  # warn once when every group's rewards are equal this many steps


class TrainingHealth:
    """Consecutive fully-skipped steps per role (an error at `max_skipped_steps`), and
    one console warning per step and role when something explodes."""

    def __init__(self, max_skipped_steps: int) -> None:
        self.max_skipped_steps = max_skipped_steps
        self.skipped_in_a_row: dict[str, int] = defaultdict(int)
        self.first_weight_norm: dict[str, float] = {}
        self.grad_norms: dict[str, list[float]] = defaultdict(list)
        self.warned_weight_norm: dict[str, float] = {}
        self.identical_in_a_row = 0
        self.warned_identical = False

    def check(self, metrics: dict[str, float], step: int) -> list[str]:
        """Warnings for this step (also logged); raises `TrainingError` when stuck."""
        warnings = []
        for role in ROLES:
            if f"{role}/grad_norm" not in metrics:
                continue
            problem = self._explosion(role, metrics)
            if problem:
                warnings.append(f"step {step}: {role} {problem}")
            self._count_skips(role, metrics, step)
        identical = self._identical_rewards(metrics, step)
        if identical:
            warnings.append(identical)
        for warning in warnings:
            log.warning(warning)
        return warnings

    def _explosion(self, role: str, metrics: dict[str, float]) -> str | None:
        for name in LOSSES:
            value = metrics.get(f"{role}/{name}")
            if value is not None and not math.isfinite(value):
                return f"{name} is {value}: the update was skipped"
        grad = metrics[f"{role}/grad_norm"]
        if not math.isfinite(grad):
            return f"gradient norm is {grad}: the update was skipped"
        median = self._grad_spike(role, grad)
        if median is not None:
            return (
                f"gradient norm {grad:.3g} is over {GRAD_SPIKE:g}x the median {median:.3g} of "
                f"the last {GRAD_WINDOW} non-zero norms (if it recurs, lower {role}.optim.lr)"
            )
        weight = metrics.get(f"{role}/weight_norm")
        if weight is None:
            return None
        first = self.first_weight_norm.setdefault(role, weight)
        # once past the bound, warn again only each time the norm doubles
        bound = max(WEIGHT_GROWTH * first, 2 * self.warned_weight_norm.get(role, 0.0))
        if not math.isfinite(weight) or weight > bound:
            self.warned_weight_norm[role] = weight
            return (
                f"weight norm {weight:.3g} is over {WEIGHT_GROWTH:g}x its first value "
                f"{first:.3g}: training is diverging (lower {role}.optim.lr?)"
            )
        return None

    def _grad_spike(self, role: str, grad: float) -> float | None:
        """The baseline median when `grad` is a spike against the recent non-zero norms."""
        if grad == 0.0:
            return None  # a skipped or empty update: no evidence either way
        history = self.grad_norms[role]
        median = statistics.median(history) if len(history) >= GRAD_HISTORY else None
        spike = False
        if median is not None:
            sigma = 1.4826 * statistics.median(abs(g - median) for g in history)
            spike = grad > GRAD_SPIKE * median and grad > median + GRAD_SIGMAS * sigma
        history.append(grad)
        del history[:-GRAD_WINDOW]
        return median if spike else None

    def _identical_rewards(self, metrics: dict[str, float], step: int) -> str | None:
        """One warning per run when every group's rewards were equal for
        `IDENTICAL_REWARD_STEPS` steps in a row: group advantages are then all 0."""
        share = metrics.get("reward/zero_std_group_frac")
        if share is None:
            return None
        self.identical_in_a_row = self.identical_in_a_row + 1 if share >= 1.0 else 0
        if self.warned_identical or self.identical_in_a_row < IDENTICAL_REWARD_STEPS:
            return None
        self.warned_identical = True
        return (
            f"step {step}: every prompt group's rewards were identical for "
            f"{self.identical_in_a_row} steps in a row (reward/zero_std_group_frac = 1): "
            "group-relative advantages are 0 and nothing is learned; check the reward "
            "function (reward.*) on a few responses, that sampling varies (rollout.temperature "
            "> 0) and that the prompts are neither too hard nor too easy"
        )

    def _count_skips(self, role: str, metrics: dict[str, float], step: int) -> None:
        if metrics.get(f"{role}/skipped_steps", 0.0) < 1.0:
            self.skipped_in_a_row[role] = 0
            return
        self.skipped_in_a_row[role] += 1
        if self.skipped_in_a_row[role] >= self.max_skipped_steps:
            raise TrainingError(
                f"step {step}: {self.skipped_in_a_row[role]} steps in a row skipped every "
                f"{role} update (non-finite gradient norm); lower {role}.optim.lr, check the "
                "rewards and the data, or raise trainer.max_skipped_steps"
            )
