"""`actor.fsdp_config` / `critic.fsdp_config`: how the FSDP2 backend shards a model.

Names are verl's (`actor_rollout_ref.actor.fsdp_config.*`); the reference model uses the
actor's. ROLL's `strategy_args.strategy_config` and ChatLearn's `fsdp_size` map here
(packages/fsdp-backend/README.md, "Config keys").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rl.core.config.errors import FieldError
from rl.core.config.resume_rules import free
from rl.core.config.rules import Rule, check_fields

DType = Literal["float32", "bfloat16", "float16"]

FSDP_SIZE = Rule(lambda value: value == -1 or value >= 1, "-1 (the whole world) or >= 1")


@dataclass(frozen=True)
class MixedPrecisionConfig:
    """FSDP2's MixedPrecisionPolicy: parameters all-gathered in `param_dtype`, gradients
    reduce-scattered in `reduce_dtype`; the sharded master copy keeps the model's dtype."""

    param_dtype: DType = "float32"
    reduce_dtype: DType = "float32"


@dataclass(frozen=True)
class AutocastConfig:
    """torch.autocast around every forward of the model (RLinf's `fsdp_config.amp_autocast`):
    matmuls in `precision`, the master weights in the model's dtype. Not with FSDP's
    mixed precision (RLinf refuses the pair too)."""

    enabled: bool = False
    precision: DType = "bfloat16"


@dataclass(frozen=True)
class GradScalerConfig:
    """Dynamic loss scaling (RLinf's `fsdp_config.grad_scaler`, torch's ShardedGradScaler):
    the loss is multiplied by the scale before backward and the gradients divided by it
    before clipping; a step whose gradients overflow is skipped (counted in
    `<role>/skipped_steps`) and the scale multiplied by `backoff_factor`; after
    `growth_interval` clean steps it grows by `growth_factor`. The scale is checkpointed."""

    enabled: bool = False
    init_scale: float = 65536.0
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000

    def __post_init__(self) -> None:
        for name, ok, allowed in (
            ("init_scale", self.init_scale > 0, "> 0"),
            ("growth_factor", self.growth_factor > 1, "> 1"),
            ("backoff_factor", 0 < self.backoff_factor < 1, "in (0, 1)"),
            ("growth_interval", self.growth_interval >= 1, ">= 1"),
        ):
            if not ok:
                raise FieldError(name, getattr(self, name), allowed)


@dataclass(frozen=True)
class FSDPConfig:
    # ranks one model is sharded over; the world is fsdp_size × replicas (HSDP) when smaller.
    # Free on resume: checkpoints reshard to any world and shard size (rl.fsdp.checkpoint)
    fsdp_size: int = free(-1, FSDP_SIZE)
    # between phases (colocated roles take turns): parameters / optimizer state to CPU
    param_offload: bool = False
    optimizer_offload: bool = False
    # FSDP2 CPUOffloadPolicy: shards live on CPU, moved per layer, optimizer steps on CPU
    offload_policy: bool = False
    reshard_after_forward: bool = True
    # only rank 0 reads the weights; the others build the model on the meta device and
    # receive their shards by broadcast (ChatLearn's meta_init): for models that do not
    # fit one host's memory once per rank
    meta_init: bool = False
    mixed_precision: MixedPrecisionConfig = field(default_factory=MixedPrecisionConfig)
    amp_autocast: AutocastConfig = field(default_factory=AutocastConfig)
    grad_scaler: GradScalerConfig = field(default_factory=GradScalerConfig)

    def __post_init__(self) -> None:
        check_fields(self)
        mixed = self.mixed_precision
        if self.amp_autocast.enabled and (mixed.param_dtype, mixed.reduce_dtype) != (
            "float32",
            "float32",
        ):
            raise FieldError(
                "amp_autocast.enabled",
                True,
                "false while mixed_precision is not float32 (autocast and FSDP's mixed "
                "precision both cast the compute; RLinf refuses the pair too): set "
                "mixed_precision.param_dtype/reduce_dtype to float32, or turn autocast off",
            )
        if self.offload_policy and (self.param_offload or self.optimizer_offload):
            raise FieldError(
                "offload_policy",
                self.offload_policy,
                "false when param_offload or optimizer_offload is set (the policy keeps "
                "shards on CPU already)",
            )
