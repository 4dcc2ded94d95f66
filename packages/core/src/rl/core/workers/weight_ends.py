"""A worker's end of the weight group of a disaggregated placement (the rollout replicas on
devices of their own): the trainer's rank 0 sends, the other trainer ranks only take part
in gathering the full tensors, each rollout replica receives.

The weights travel as broadcast buckets (`rl.core.weight_sync.broadcast`) on a process
group opened for the purpose (`rl.core.weight_sync.channel`: gloo on CPU, NCCL on GPU),
packed by the bucket planner and, with `rollout.update_weights_delta`, only the groups of
tensors that changed. The version of the weights (the updates they hold) travels in the
plan's header, and a replica that receives another version than the controller announced
says so instead of generating with them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import torch

from rl.core.engines import RolloutEngine
from rl.core.errors import TrainingError
from rl.core.weight_sync import BroadcastReceiver, BroadcastSender, WeightSender
from rl.core.weight_sync.channel import close_weight_group, open_weight_group
from rl.core.weight_sync.groups import fused_module


class WeightEnds:
    """`member` 0 sends, 1.. receive, None (a trainer rank past 0) gathers only."""

    def __init__(self, group: Any, member: int | None, bucket_bytes: int, delta: bool) -> None:
        self.member, self.group = member, group
        self.sender: WeightSender | None = None
        self.receiver: BroadcastReceiver | None = None
        if member == 0:
            # the engines' own groups are not known on this side: q/k/v, gate/up and a MoE
            # block's experts go whole (a delta sync may send a little more, never less)
            self.transport = BroadcastSender(src=0, group=group)
            self.sender = WeightSender(
                bucket_bytes, delta=delta, transport=self.transport, weight_group=fused_module
            )
        elif member is not None:
            self.receiver = BroadcastReceiver(src=0, group=group)

    @classmethod
    def open(
        cls,
        address: str,
        port: int,
        member: int | None,
        size: int,
        *,
        backend: str,
        timeout_s: float,
        bucket_bytes: int,
        delta: bool,
    ) -> WeightEnds:
        group = None
        if member is not None:
            group = open_weight_group(address, port, member, size, backend, timeout_s)
        return cls(group, member, bucket_bytes, delta)

    def close(self) -> None:
        """Leave this weight group (a new one is formed when the replicas change; the new
        sender starts afresh, so its first push sends every weight)."""
        if self.group is not None:
            close_weight_group(self.group)
            self.group = None

    def send(self, weights: Iterable[tuple[str, torch.Tensor]], version: int) -> dict[str, float]:
        """Rank 0 sends `weights` with their version; the other trainer ranks consume
        them (every rank takes part in gathering each full tensor)."""
        if self.sender is None:
            for _ in weights:
                pass
            return {}
        self.transport.header = {"version": version}
        return self.sender.sync(weights)

    def receive(self, rollout: RolloutEngine, version: int) -> dict[str, float]:
        """Load the weights broadcast now into `rollout`; they must be `version`."""
        assert self.receiver is not None, "not a receiving member of the weight group"
        started = time.perf_counter()
        received = self.receiver.receive(rollout)
        got = self.receiver.header.get("version")
        if got != version:
            raise TrainingError(
                f"the rollout replica received weights of version {got} where the trainer "
                f"announced {version}: the weight group is out of step; restart the run "
                "(it resumes from its last checkpoint)"
            )
        return {
            "weight_sync/received_bytes": float(received),
            "weight_sync/receive_s": time.perf_counter() - started,
        }
