"""`RoleWorker`: one rank, hosting the engines of every role placed on its device.

The same class runs in the driver's process (`LocalWorkerGroup`, world size 1) and in
one Ray actor per rank (`RayWorkerGroup`). It builds its engines from the config through
the engine registry, so it never knows which backend runs a role; torch.distributed is
initialised by the engines from the RANK / WORLD_SIZE / MASTER_* it sets (gloo on CPU,
NCCL on GPU).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from rl.core.config import Config
from rl.core.engine_contract import EngineContractError, callable_members, declares
from rl.core.engines import (
    Closable,
    ExportsViews,
    HasAdapters,
    Offloading,
    Rollouts,
    SharesWeights,
)
from rl.core.workers.turns import Turns

TRAIN_ROLES = ("actor", "ref", "critic", "teacher")


def offloading_roles(engines: dict[str, Any]) -> set[str]:
    """The train roles whose engine can step aside (`Offloading`) and is asked to between
    phases (its `offloads`: the FSDP engine's `fsdp_config.param_offload` /
    `optimizer_offload`, the megatron engine's `megatron.*_offload`)."""
    return {
        role
        for role, engine in engines.items()
        if role in TRAIN_ROLES and declares(engine, Offloading) and engine.offloads
    }


def shared_sync_metrics(weights: list[tuple[str, Any]]) -> dict[str, float]:
    """A sync by shared storage: every weight offered, nothing sent."""
    from rl.core.weight_sync.entries import nbytes
    from rl.core.weight_sync.stats import SyncStats

    offered = sum(nbytes(tensor) for _, tensor in weights)
    return {**SyncStats(bytes=offered).metrics(), "weight_sync/shared_tensors": float(len(weights))}


class RoleWorker:
    """The engines of one rank; `run(role, method, *args)` calls one, taking turns."""

    def __init__(self, rank: int = 0, world_size: int = 1) -> None:
        self.rank, self.world_size = rank, world_size
        self.engines: dict[str, Any] = {}
        self.members: dict[str, frozenset[str]] = {}
        self.turns: Turns | None = None
        self.sender: Any = None
        self.may_share_weights = False
        self.weight_version: int | None = None  # the updates in the rollout engine's weights
        self.weight_ends: Any = None  # this rank's end of a disaggregated weight group
        self.config: Config | None = None
        self.hosted_by: dict[str, str] = {}  # a role served by another role's engine

    # --- set-up -------------------------------------------------------------------

    def rendezvous(self) -> tuple[str, int]:
        """This host's address and a free port: rank 0's become everyone's MASTER_*."""
        import ray

        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            port = int(sock.getsockname()[1])
        return ray.util.get_node_ip_address(), port

    def connect(self, master_addr: str, master_port: int) -> None:
        """The environment torch.distributed initialises from when an engine is built."""
        os.environ.update(
            RANK=str(self.rank),
            WORLD_SIZE=str(self.world_size),
            LOCAL_RANK="0",  # Ray gives each actor its own device(s) as device 0
            MASTER_ADDR=master_addr,
            MASTER_PORT=str(master_port),
        )

    def build(self, config: Config, roles: Sequence[str], total_steps: int) -> None:
        """Build this rank's engines. Model weights use the trainer seed on every rank.
        The trainer's samples draw from their own per-sample seeds (`prompt_seeds`), the
        same on any rank; the global RNG and the engine's seed are offset by the rank, so
        that calls without them (agent turns) differ between replicas."""
        from rl.core.models import load_tokenizer
        from rl.core.rng import seed_everything
        from rl.core.weight_sync import WeightSender
        from rl.core.weight_sync.transports import InProcessTransport
        from rl.core.workers.build import build_rollout_engine, build_train_engine

        self.config = config
        if self.world_size > 1:
            seed_everything(config.trainer.seed + self.rank)
        tokenizer = load_tokenizer(config.model)
        for role in TRAIN_ROLES:
            if role in roles:
                actor: Any = self.engines.get("actor")
                if role == "ref" and declares(actor, HasAdapters) and actor.has_adapters:
                    from rl.core.workers.base_reference import BaseReference

                    # LoRA: the actor's model with its adapters off, no second copy
                    self.engines[role] = BaseReference(actor)
                    self.hosted_by[role] = "actor"
                    continue
                self.engines[role] = build_train_engine(config, role, tokenizer, total_steps)
        if "rollout" in roles:
            rollout = config.rollout
            if self.world_size > 1:
                config = replace(config, rollout=replace(rollout, seed=rollout.seed + self.rank))
            self.engines["rollout"] = build_rollout_engine(config, tokenizer)
            # the engine in this process copies the actor's tensors in: no buckets between
            self.sender = WeightSender(
                rollout.update_weights_bucket_megabytes << 20,
                delta=rollout.update_weights_delta,
                transport=InProcessTransport(pack=False),
            )
            # in sync mode the rollout never generates while the actor updates
            self.may_share_weights = config.trainer.mode == "sync"
        # what each engine declared: the members `run` may call on it
        self.members = {role: callable_members(type(e)) for role, e in self.engines.items()}
        self.turns = Turns(self.engines, offloading_roles(self.engines), config.trainer.device)

    # --- calls --------------------------------------------------------------------

    def run(self, role: str, method: str, *args: Any) -> Any:
        """`engines[role].method(*args)` after `role` takes its turn on the device; an
        iterator result is materialised (it crosses a process boundary)."""
        assert self.turns is not None, "build() first"
        engine, declared = self.engines[role], self.members[role]
        if method not in declared:
            raise EngineContractError(
                f"{role}: {type(engine).__qualname__} does not declare {method!r} (declared: "
                f"{', '.join(sorted(declared))})"
            )
        if method not in ("sleep", "wake", "offload", "onload"):
            self.turns.enter(self.hosted_by.get(role, role))
        result = getattr(engine, method)(*args)
        if isinstance(result, Iterator):
            result = list(result)
        stamp = isinstance(result, Rollouts) and not result.weight_versions
        if stamp and self.weight_version is not None:  # each sample records its weights' version
            result.weight_versions = [self.weight_version] * len(result.response_ids)
        if method == "train_step":
            result = {**result, **self.turns.drain_metrics()}
        return result

    def export(self, role: str) -> list[tuple[str, Any]] | None:
        """The role's full weights on rank 0 (every rank gathers them together)."""
        assert self.turns is not None, "build() first"
        self.turns.enter(role)
        weights = [(name, t.cpu()) for name, t in self.engines[role].export_weights()]
        return weights if self.rank == 0 else None

    def sync_weights(self, version: int) -> dict[str, float]:
        """The actor's weights (`version`: the updates they hold) into this rank's rollout
        engine (every rank gathers each tensor together; each replica loads the full
        weights). In sync mode, when the actor exports its live parameters and the rollout
        engine can take them as its own (`exports_views`, `share_weights`: same process,
        device and dtype), they are shared once and later syncs move nothing."""
        assert self.turns is not None, "build() first"
        self.turns.enter("actor")  # its weights on the device for the all-gathers
        actor, rollout = self.engines["actor"], self.engines["rollout"]
        rollout.wake()
        weights = actor.export_weights()
        metrics: dict[str, float] | None = None
        if self.may_share_weights and declares(actor, ExportsViews) and actor.exports_views:
            weights = list(weights)  # views: no copies
            if declares(rollout, SharesWeights) and rollout.share_weights(weights):
                metrics = shared_sync_metrics(weights)
        if metrics is None:
            metrics = dict(self.sender.sync(weights, rollout))
        self.weight_version = version  # once they are in
        return metrics

    # --- a disaggregated placement: weights from the trainer ranks to rollout replicas ----

    def open_weights(self, address: str, port: int, member: int | None, size: int) -> None:
        """Join the weight group (`member` 0: the trainer's rank 0, which hosts its store at
        `address:port`; 1..: the rollout replicas; None: a trainer rank that only gathers)."""
        from rl.core.workers.weight_ends import WeightEnds

        assert self.config is not None, "build() first"
        config = self.config
        if self.weight_ends is not None:  # the membership changed: a new group
            self.weight_ends.close()
        self.weight_ends = WeightEnds.open(
            address,
            port,
            member,
            size,
            backend="nccl" if config.trainer.device == "cuda" else "gloo",
            timeout_s=config.trainer.worker_timeout_s,
            bucket_bytes=config.rollout.update_weights_bucket_megabytes << 20,
            delta=config.rollout.update_weights_delta,
        )

    def push_weights(self, version: int) -> dict[str, float]:
        """The actor's full weights, gathered by every trainer rank, sent by rank 0."""
        assert self.turns is not None and self.weight_ends is not None, "open_weights() first"
        self.turns.enter("actor")
        return self.weight_ends.send(self.engines["actor"].export_weights(), version)

    def pull_weights(self, version: int) -> dict[str, float]:
        """This rollout replica's end of a push: load the weights and their version."""
        assert self.weight_ends is not None, "open_weights() first"
        rollout = self.engines["rollout"]
        rollout.wake()
        metrics = self.weight_ends.receive(rollout, version)
        self.weight_version = version
        return metrics

    def rng_state(self) -> dict[str, Any]:
        """This process's RNG state (sampling draws from it): checkpoints carry one per rank."""
        from rl.core.rng import rng_state

        return rng_state()

    def set_rng_state(self, state: dict[str, Any]) -> None:
        from rl.core.rng import set_rng_state

        set_rng_state(state)

    def pid(self) -> int:
        return os.getpid()

    def node(self) -> str:
        """The id of the Ray node this worker runs on (a death names it)."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def ping(self) -> bool:
        """A health check: answers at once when the worker is idle and alive."""
        return True

    def close_engines(self) -> None:
        """Close the rollout engine (if it can be closed) and drop every engine."""
        rollout = self.engines.get("rollout")
        if rollout is not None and declares(rollout, Closable):
            rollout.close()
        self.engines.clear()

    def shutdown(self) -> None:
        """Close the engines and leave the process group (a worker process's end)."""
        import torch.distributed as dist

        self.close_engines()
        if dist.is_initialized():
            dist.destroy_process_group()


class RolloutWorker(RoleWorker):
    """A rollout replica of a disaggregated placement: a `RoleWorker` hosting the rollout
    alone, under a name of its own (`ray::RolloutWorker` in `ps` and Ray's dashboard)."""
