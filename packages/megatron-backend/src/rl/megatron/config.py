"""`actor.megatron` / `critic.megatron`: how the megatron-core backend splits a model.

Read when `actor.strategy` (`critic.strategy`) is `megatron`; the reference model uses the
actor's. Names are verl's (`actor_rollout_ref.actor.megatron.*`); the mapping from
ChatLearn, ROLL and RLinf is in packages/megatron-backend/README.md ("Config keys").
Whether the sizes fit the model and the world is checked by `rl.megatron.parallel`
before any process group starts (it needs the model's config).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rl.core.config.errors import FieldError
from rl.core.config.resume_rules import free
from rl.core.config.rules import POSITIVE_INT, SEED, Rule, check_fields, optional, setting

DType = Literal["float32", "bfloat16", "float16"]

VPP = Rule(lambda value: value >= 2, ">= 2 (or null: no interleaving)")


@dataclass(frozen=True)
class MegatronConfig:
    # free on resume: checkpoints reshard to another TP / PP size on load, weights and Adam
    # state bit for bit (rl.megatron.checkpoint; tested TP 2 -> 1, 1 -> 2, PP 2 -> TP 2)
    tensor_model_parallel_size: int = free(1, POSITIVE_INT)
    pipeline_model_parallel_size: int = free(1, POSITIVE_INT)
    virtual_pipeline_model_parallel_size: int | None = setting(None, optional(VPP))
    context_parallel_size: int = setting(1, POSITIVE_INT)
    # activations split over the TP ranks along the sequence outside attention/MLP
    # (verl's default; ignored at TP = 1, where there is nothing to split); no state: free
    sequence_parallel: bool = free(True)
    expert_model_parallel_size: int = setting(1, POSITIVE_INT)
    # null: the TP size
    expert_tensor_parallel_size: int | None = setting(None, optional(POSITIVE_INT))
    use_distributed_optimizer: bool = True
    # between phases (colocated roles take turns): to CPU and back
    param_offload: bool = False
    grad_offload: bool = False
    optimizer_offload: bool = False
    seed: int = setting(42, SEED)
    # null: model.dtype. bfloat16 / float16 train with fp32 master weights in the optimizer;
    # float16 with dynamic loss scaling
    dtype: DType | None = None
    # megatron-core TransformerConfig fields, applied last: recompute_granularity
    # (full | selective), recompute_method, recompute_num_layers, recompute_modules,
    # num_layers_in_first/last_pipeline_stage, moe_token_dispatcher_type, moe_grouped_gemm,
    # moe_router_load_balancing_type, moe_aux_loss_coeff, moe_router_force_load_balancing, ...
    override_transformer_config: dict[str, Any] = field(default_factory=dict)
    # megatron-core DistributedDataParallelConfig fields: overlap_grad_reduce,
    # overlap_param_gather, bucket_size, ...
    override_ddp_config: dict[str, Any] = field(default_factory=dict)
    # megatron-core OptimizerConfig fields, applied last (verl's optim.override_optimizer_config):
    # fp16 loss scaling (`loss_scale` static, else dynamic from `initial_loss_scale` with
    # `min_loss_scale`, `loss_scale_window`, `hysteresis`), ... ; the fields rl sets from its
    # own keys (lr, betas, eps, weight decay, clipping, dtypes) are refused here
    override_optimizer_config: dict[str, Any] = field(default_factory=dict)
    # start from a megatron distributed checkpoint (`rl convert-ckpt --to megatron` writes
    # one; a training checkpoint's actor folder is one) instead of model.path's HF weights
    use_dist_checkpointing: bool = False
    dist_checkpointing_path: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if self.use_dist_checkpointing and not self.dist_checkpointing_path:
            raise FieldError(
                "dist_checkpointing_path",
                self.dist_checkpointing_path,
                "a folder written by `rl convert-ckpt` when use_dist_checkpointing is true",
            )

    @property
    def model_parallel_size(self) -> int:
        """Ranks that hold one copy of the model between them (TP × PP × CP)."""
        return (
            self.tensor_model_parallel_size
            * self.pipeline_model_parallel_size
            * self.context_parallel_size
        )
