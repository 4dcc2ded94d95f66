"""Training health, watched from each step's metrics: stop when updates keep being skipped,
warn when the loss, the gradients or the weights blow up.

Train engines report per role (`actor/`, `critic/`): `skipped_steps` (the share of
this step's optimizer steps skipped for a non-finite gradient norm), `grad_norm`,
`weight_norm`, and their losses. That is the whole contract: the controller never
looks inside an engine.
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
GRAD_SPIKE = 100.0  # warn when the gradient norm passes this multiple of its running median


class TrainingHealth:
    """Consecutive fully-skipped steps per role (an error at `max_skipped_steps`), and
    one console warning per step and role when something explodes."""

    def __init__(self, max_skipped_steps: int) -> None:
        self.max_skipped_steps = max_skipped_steps
        self.skipped_in_a_row: dict[str, int] = defaultdict(int)
        self.first_weight_norm: dict[str, float] = {}
        self.grad_norms: dict[str, list[float]] = defaultdict(list)
        self.warned_weight_norm: dict[str, float] = {}

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
        history = self.grad_norms[role]
        spike = len(history) >= 3 and grad > GRAD_SPIKE * max(statistics.median(history), 1e-12)
        history.append(grad)
        if spike:
            return f"gradient norm {grad:.3g} is over {GRAD_SPIKE:g}x its median so far"
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
