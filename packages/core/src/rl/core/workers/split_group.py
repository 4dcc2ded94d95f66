"""The workers of a disaggregated placement: the train ranks (actor, and the reference and
critic beside it) and the rollout replicas, as two Ray worker groups on devices of their
own, generating and training side by side.

`SplitGroup` is the pair where the run needs all its workers at once (checkpointed RNG
states, shutdown); the role handles each drive their own group. `push_weights` moves the
actor's weights to every replica over the weight group (`weight_ends`): the train ranks
gather the full tensors, rank 0 broadcasts them bucket by bucket, each replica loads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.workers.dispatch import mean_metrics
from rl.core.workers.replicas import RolloutReplicas
from rl.core.workers.waits import wait_together


class SplitGroup:
    """The train group's ranks, then the rollout group's, as one group of workers."""

    def __init__(self, train: Any, rollout: Any) -> None:
        self.train, self.rollout = train, rollout

    @property
    def world_size(self) -> int:
        return int(self.train.world_size + self.rollout.world_size)

    def call(self, role: str, method: str, *args: Any) -> list[Any]:
        """`method(*args)` on every worker of both groups at once; train ranks first."""
        train = self.train.start(method, *args)
        rollout = self.rollout.start(method, *args)
        if isinstance(self.rollout, RolloutReplicas):  # a lost replica has no answer
            replicas = self.rollout.wait(rollout, role, method)
            return self.train.wait(train, role, method) + replicas
        answers = wait_together(
            [(self.train, train, role, method), (self.rollout, rollout, role, method)]
        )
        return answers[0] + answers[1]

    def call_each(self, role: str, method: str, per_rank: Sequence[tuple[Any, ...]]) -> list[Any]:
        split = self.train.world_size
        return self.train.call_each(role, method, per_rank[:split]) + self.rollout.call_each(
            role, method, per_rank[split:]
        )

    def open_weight_group(self) -> None:
        """Every train rank and every replica joins the weight group at once (its backend
        connects them all): train rank 0 sends (and hosts the store), the other train ranks
        only gather, replica k receives as member k + 1."""
        size = 1 + self.rollout.world_size
        address, port = self.train.wait(
            [self.train.actors[0].rendezvous.remote()], "workers", "rendezvous"
        )[0]
        train = [
            actor.open_weights.remote(address, port, 0 if rank == 0 else None, size)
            for rank, actor in enumerate(self.train.actors)
        ]
        rollout = [
            actor.open_weights.remote(address, port, k + 1, size)
            for k, actor in enumerate(self.rollout.actors)
        ]
        wait_together(
            [
                (self.train, train, "actor", "open_weights"),
                (self.rollout, rollout, "rollout", "open_weights"),
            ]
        )

    def push_weights(self, version: int) -> dict[str, float]:
        """The actor's weights (`version`: the updates they hold) into every replica. With
        replicas that survive a loss (`RolloutReplicas`), a health check and the
        replacements ready to serve come first, and the weight group is formed again
        when the membership changed: every member then gets these weights."""
        renewed: dict[str, float] = {}
        if isinstance(self.rollout, RolloutReplicas):
            renewed = self._renew_membership()
        sent = self.train.start("push_weights", version)
        # a replica lost in the middle of a push ends the run (its peers in the broadcast
        # cannot tell it from a slow one): the answers are waited for together
        received = [actor.pull_weights.remote(version) for actor in self.rollout.actors]
        pushed, pulled = wait_together(
            [
                (self.train, sent, "actor", "push_weights"),
                (self.rollout, received, "rollout", "pull_weights"),
            ]
        )
        return {**pushed[0], **mean_metrics(pulled), **renewed}

    def _renew_membership(self) -> dict[str, float]:
        replicas = self.rollout
        replicas.check_health()
        replicas.admit()
        if replicas.changed:
            self.open_weight_group()
            replicas.changed = False
        return dict(replicas.metrics())

    def shutdown(self) -> None:
        """Both groups; when a call of either failed, neither waits on its workers (a
        replica may be blocked in a broadcast its sender will never finish)."""
        if self.train.broken or self.rollout.broken:
            self.train.broken = self.rollout.broken = True
        try:
            self.rollout.shutdown()
        finally:
            self.train.shutdown()
