"""The part of `TrainEngine.train_step` every train engine shares: the mini-batch updates
and the metrics they report, named as the controller's health checks read them.

An engine brings its own optimizer step (one per mini-batch, with whatever parallelism
it has) and its weight norm; `mini_batch_updates` runs the steps, advances the LR schedule
once unless every step was skipped, and averages the metrics over them. `step_metrics`
makes one step's metrics those of its whole mini-batch, over micro-batches and ranks, under
the role (`actor/`, `critic/`) unless the loss function named them already (`actor/pg_loss`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

import torch

Mini = TypeVar("Mini")

# Shares of the mini-batch loss (each micro-batch's is normalised by the whole mini-batch):
# they add up over micro-batches and data-parallel ranks; `<role>/loss` is the whole loss.
# (`actor/kl_loss` is not one: `algorithms.kl.kl_loss` reports the mean KL per token, which
# is averaged over tokens like entropy; summed, it grew with the micro-batches per rank.)
LOSS_SHARES = frozenset(
    {
        "actor/pg_loss",
        "critic/vf_loss",
        "actor/loss",
        "critic/loss",
        "actor/distillation_loss",
    }
)
TOKENS = "_tokens"  # a micro-batch's valid response tokens: the weight of its means

AllReduce = Callable[[torch.Tensor, str], torch.Tensor]  # (values, "sum" | "max") -> reduced


def reduce_kind(key: str) -> str:
    """How a step metric combines over micro-batches and ranks: "sum" (a loss share),
    "max" / "min" (extremes), else "mean" weighted by valid tokens."""
    if key in LOSS_SHARES:
        return "sum"
    if key.endswith(("_max", "/max")):
        return "max"
    if key.endswith(("_min", "/min")):
        return "min"
    return "mean"


def step_metrics(
    values: Mapping[str, list[float]],
    prefix: str,
    all_reduce: AllReduce | None = None,
    duplicates: int = 1,
) -> dict[str, float]:
    """One optimizer step's metrics from its micro-batches' (`values`, with their valid
    token counts under `TOKENS`), over every data-parallel rank through `all_reduce`: loss
    shares summed, extremes kept, the rest averaged over tokens. So they are the metrics
    of the whole mini-batch, whatever the micro-batch size and however many ranks split it
    (1 rank or N report alike). `duplicates`: ranks holding the same share (a sequence-
    parallel group), whose sums count once. Named under `prefix`/ unless named already."""
    tokens = values.get(TOKENS) or [1.0] * max((len(v) for v in values.values()), default=0)
    keys = sorted(key for key in values if key != TOKENS)
    kinds = {key: reduce_kind(key) for key in keys}
    sums = [k for k in keys if kinds[k] in ("sum", "mean")]
    total = torch.tensor(
        [
            *(
                sum(
                    v * (w if kinds[k] == "mean" else 1.0)
                    for v, w in zip(values[k], tokens, strict=True)
                )
                for k in sums
            ),
            float(sum(tokens)),
        ],
        dtype=torch.float64,
    )
    extremes = [k for k in keys if kinds[k] in ("max", "min")]
    signed = torch.tensor(
        [max(values[k]) if kinds[k] == "max" else -min(values[k]) for k in extremes],
        dtype=torch.float64,
    )
    if all_reduce is not None:
        total = all_reduce(total, "sum")
        if extremes:
            signed = all_reduce(signed, "max")
    out: dict[str, float] = {}
    weight = max(float(total[-1]), 1e-12)
    for at, key in enumerate(sums):
        value = float(total[at])
        out[key] = value / weight if kinds[key] == "mean" else value / duplicates
    for at, key in enumerate(extremes):
        out[key] = float(signed[at]) if kinds[key] == "max" else -float(signed[at])
    return {(k if "/" in k else f"{prefix}/{k}"): v for k, v in out.items()}


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
