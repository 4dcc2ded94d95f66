"""Routing replay in the FSDP engine: which pass records or replays MoE routes.

The actor with `actor.router_replay.mode` R2 records the routes in its old-log-prob pass
(returned as `LogprobOutput.routed_experts`, which the step puts in the batch) and
replays the batch's `routed_experts` in its updates; with R3 it replays them (the rollout
engine's) in both. The reference and the critic route as the model does (as verl's do).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Literal

import torch

from rl.core.models.routing_replay import (
    NO_ROUTE,
    RoutingPass,
    RoutingReplayError,
    require_routers,
    stop_replaying,
)

Phase = Literal["old", "update"]


def check_replay(model: torch.nn.Module, mode: str, sequence_parallel_size: int) -> None:
    """Refuse, by the setting's name, a replay this engine cannot run on `model`."""
    if mode == "disabled":
        return
    setting = f"actor.router_replay.mode={mode}"
    require_routers(model, setting)
    if sequence_parallel_size > 1:
        raise RoutingReplayError(
            f"{setting} does not run with actor.ulysses_sequence_parallel_size > 1 (each "
            "rank routes a slice of the row); set it to 1"
        )


@contextmanager
def replay_session(model: torch.nn.Module, mode: str) -> Iterator[None]:
    """A pass over micro-batches (their forwards and backwards) that may replay routes;
    after it the model routes by itself again (no routes are left for another caller of
    the same model, such as a reference pass through it)."""
    try:
        yield
    finally:
        if mode != "disabled":
            stop_replaying(model)


def routing_pass(mode: str, micro: Mapping[str, torch.Tensor], phase: Phase) -> RoutingPass | None:
    """The routing of one actor micro-batch pass: R2's old-log-prob pass records, every
    other replaying pass replays `micro["routed_experts"]`; None when disabled."""
    if mode == "disabled":
        return None
    if mode == "R2" and phase == "old":
        return RoutingPass()
    routes = micro.get("routed_experts")
    if routes is None:
        source = "the old-log-prob pass (R2)" if mode == "R2" else "the rollout engine (R3)"
        raise RoutingReplayError(
            f"actor.router_replay.mode={mode}: the batch has no routed_experts from {source}"
        )
    return RoutingPass(routes)


class RecordedRoutes:
    """The routes R2's old-log-prob pass records, micro-batch by micro-batch, put together
    in the caller's row order: int16 [B, S, moe_layers, top_k]."""

    def __init__(self, rows: int, width: int) -> None:
        self.rows, self.width = rows, width
        self.routes: torch.Tensor | None = None

    def add(self, rows: torch.Tensor, recorded: torch.Tensor | None) -> None:
        """A micro-batch's recorded routes [len(rows), S, L, K] (None: nothing recorded)."""
        if recorded is None:
            return
        if self.routes is None:
            shape = (self.rows, self.width, *recorded.shape[2:])
            self.routes = torch.full(shape, NO_ROUTE, dtype=torch.int16)
        self.routes[rows.cpu()] = recorded
