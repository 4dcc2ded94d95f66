"""The part of `TrainEngine.train_step` every train engine shares: the mini-batch updates
and the metrics they report, named as the controller's health checks read them.

An engine brings its own optimizer step (one per mini-batch, with whatever parallelism
it has) and its weight norm; `mini_batch_updates` runs the steps, advances the LR schedule
once unless every step was skipped, and averages the metrics. `role_means` names a step's
micro-batch metrics under the role (`actor/`, `critic/`) unless the loss function
already did (`actor/pg_loss`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

Mini = TypeVar("Mini")


def role_means(values: Mapping[str, list[float]], prefix: str) -> dict[str, float]:
    """The mean of each metric's values, under `prefix`/ unless its name has a "/"."""
    return {(k if "/" in k else f"{prefix}/{k}"): sum(v) / len(v) for k, v in values.items()}


def mini_batch_updates(
    minis: Iterable[Mini],
    optimizer_step: Callable[[Mini], Mapping[str, float]],
    prefix: str,
    lr: Callable[[], float],
    advance_schedule: Callable[[], None],
    weight_norm: Callable[[], float],
) -> dict[str, float]:
    """`optimizer_step(mini)` for each of `minis` (one optimizer step each; its metrics
    must hold `prefix`/skipped_steps, 1.0 for a skipped step), then `lr()` (the rate the
    steps used), `advance_schedule()` unless every step was skipped (the LR schedule
    follows real updates) and `weight_norm()`. Returns every metric averaged over the
    steps, with `lr` and `prefix`/weight_norm."""
    metrics: dict[str, list[float]] = defaultdict(list)
    for mini in minis:
        for key, value in optimizer_step(mini).items():
            metrics[key].append(value)
    metrics["lr"].append(lr())
    if min(metrics[f"{prefix}/skipped_steps"]) < 1.0:
        advance_schedule()
    metrics[f"{prefix}/weight_norm"].append(weight_norm())
    return {key: sum(values) / len(values) for key, values in metrics.items()}
