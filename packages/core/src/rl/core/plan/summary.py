"""The plan in one line, for the log of `rl train` (`rl plan` prints it all)."""

from __future__ import annotations

from rl.core.plan.build import Plan
from rl.core.plan.device_memory import human_bytes


def summary(plan: Plan) -> str:
    actor = plan.train["actor"]
    rollout = plan.rollout
    text = (
        f"plan: actor {actor.rows_per_rank} rows per rank over {actor.dp} data-parallel "
        f"rank(s), {actor.optimizer_steps} optimizer step(s) of {actor.micro_per_mini} "
        f"micro-batch(es); rollout {rollout.replicas} replica(s) of "
        f"{rollout.samples_per_replica} samples"
    )
    if plan.devices:
        peak = max(group.peak for group in plan.devices)
        text += f"; estimated peak {human_bytes(peak)} per device"
        if plan.device_bytes is not None:
            text += f" of {human_bytes(plan.device_bytes)} ({plan.device_source})"
    return text + " (rl plan shows the arithmetic)"
