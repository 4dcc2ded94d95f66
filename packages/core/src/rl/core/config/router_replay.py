"""`actor.router_replay`: MoE routing replay (verl's `router_replay` engine section).

R2: the actor's old-log-prob pass records the experts each token is routed to, and the
updates replay them (the old-log-prob pass then always runs). R3: the rollout engine
records them while generating, and the old-log-prob pass and the updates replay them, so
the trainer computes its log-probs on the experts the sampler used
(`rl.core.models.routing_replay`, docs/routing-replay.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rl.core.config.errors import FieldError


@dataclass(frozen=True)
class RouterReplayConfig:
    mode: Literal["disabled", "R2", "R3"] = "disabled"
    # verl's files of recorded routes (a debugging aid): routes travel in the batch here
    record_file: str | None = None
    replay_file: str | None = None

    def __post_init__(self) -> None:
        for key in ("record_file", "replay_file"):
            if getattr(self, key) is not None:
                raise FieldError(
                    key,
                    getattr(self, key),
                    "null (routes travel with the batch; rl writes and reads no route files)",
                )
