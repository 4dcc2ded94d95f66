"""What a trainable (actor, critic) engine adds to its chunks: megatron-core's DDP around
each (bucketed gradients, optionally overlapped), its optimizer (distributed or not, fp32
master weights under bf16/fp16, dynamic loss scaling under fp16) and its
`OptimizerParamScheduler` for the learning rate.
"""

from __future__ import annotations

from typing import Any

import torch

from rl.core.config import ConfigError, OptimConfig
from rl.core.optim import warmup_steps
from rl.megatron.build import known_fields
from rl.megatron.config import MegatronConfig

DECAY_STYLES = {"constant": "constant", "cosine": "cosine", "linear": "linear", "wsd": "WSD"}


def make_training(
    chunks: list[torch.nn.Module],
    tf_config: Any,
    m: MegatronConfig,
    optim: OptimConfig,
    total_steps: int,
    dtype: torch.dtype,
    section: str,
) -> tuple[list[torch.nn.Module], Any, Any]:
    """The chunks wrapped in DDP, megatron's optimizer over them and its LR scheduler;
    `tf_config` gets the hooks megatron's schedule calls (gradient finalisation, loss
    scaling, no-sync, parameter sync)."""
    from megatron.core.distributed import (
        DistributedDataParallel,
        DistributedDataParallelConfig,
        finalize_model_grads,
    )

    key = f"{section}.megatron.override_ddp_config"
    ddp_config = DistributedDataParallelConfig(
        **{
            "grad_reduce_in_fp32": True,
            "use_distributed_optimizer": m.use_distributed_optimizer,
            **known_fields(DistributedDataParallelConfig, m.override_ddp_config, key),
        }
    )
    chunks = [
        DistributedDataParallel(tf_config, ddp_config, chunk, disable_bucketing=i > 0)
        for i, chunk in enumerate(chunks)
    ]
    optimizer = megatron_optimizer(chunks, m, optim, dtype, section)
    tf_config.finalize_model_grads_func = finalize_model_grads
    tf_config.grad_scale_func = optimizer.scale_loss
    no_sync = [chunk.no_sync for chunk in chunks]
    tf_config.no_sync_func = no_sync[0] if len(no_sync) == 1 else no_sync
    if ddp_config.overlap_param_gather and m.use_distributed_optimizer:
        syncs = [chunk.start_param_sync for chunk in chunks]
        tf_config.param_sync_func = syncs[0] if len(syncs) == 1 else syncs
    return chunks, optimizer, lr_scheduler(optimizer, optim, total_steps)


# OptimizerConfig fields rl sets from its own keys: not overridable
OWN_FIELDS = {
    "optimizer": "rl's optimizer is Adam",
    "lr": "actor.optim.lr",
    "min_lr": "actor.optim.min_lr_ratio",
    "weight_decay": "actor.optim.weight_decay",
    "adam_beta1": "actor.optim.betas",
    "adam_beta2": "actor.optim.betas",
    "adam_eps": "actor.optim.eps",
    "clip_grad": "actor.optim.grad_clip",
    "bf16": "megatron.dtype (or model.dtype)",
    "fp16": "megatron.dtype (or model.dtype)",
    "params_dtype": "megatron.dtype (or model.dtype)",
    "use_distributed_optimizer": "megatron.use_distributed_optimizer",
}


def optimizer_config(
    m: MegatronConfig, optim: OptimConfig, dtype: torch.dtype, section: str
) -> Any:
    """megatron-core's OptimizerConfig from `optim` and `m`, `override_optimizer_config`
    last (an unknown field, or one rl sets from its own keys, is an error naming it)."""
    from megatron.core.optimizer import OptimizerConfig

    key = f"{section}.megatron.override_optimizer_config"
    overrides = known_fields(OptimizerConfig, m.override_optimizer_config, key)
    owned = sorted(set(overrides) & set(OWN_FIELDS))
    if owned:
        raise ConfigError(
            f"{key}.{owned[0]}: rl sets it from {OWN_FIELDS[owned[0]].replace('actor.', section + '.')}"
            " (set that key instead)"
        )
    beta1, beta2 = optim.betas
    return OptimizerConfig(
        optimizer="adam",
        lr=optim.lr,
        min_lr=optim.min_lr_ratio * optim.lr,
        weight_decay=optim.weight_decay,
        adam_beta1=beta1,
        adam_beta2=beta2,
        adam_eps=optim.eps,
        clip_grad=optim.grad_clip,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        params_dtype=dtype,
        use_distributed_optimizer=m.use_distributed_optimizer,
        **overrides,
    )


def megatron_optimizer(
    chunks: list[torch.nn.Module],
    m: MegatronConfig,
    optim: OptimConfig,
    dtype: torch.dtype,
    section: str = "actor",
) -> Any:
    """megatron-core's Adam over the DDP-wrapped `chunks`, as `optim` and `m` say."""
    from megatron.core.optimizer import get_megatron_optimizer

    return get_megatron_optimizer(optimizer_config(m, optim, dtype, section), chunks)


def lr_scheduler(optimizer: Any, optim: OptimConfig, total_steps: int) -> Any:
    """megatron-core's `OptimizerParamScheduler` for `optim`'s schedule over `total_steps`."""
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    warmup = warmup_steps(optim, total_steps)
    decay_steps = optim.lr_decay_steps or max(total_steps, warmup + 1)
    return OptimizerParamScheduler(
        optimizer,
        init_lr=optim.lr_warmup_init,
        max_lr=optim.lr,
        min_lr=optim.min_lr_ratio * optim.lr,
        lr_warmup_steps=warmup,
        lr_decay_steps=decay_steps,
        lr_decay_style=DECAY_STYLES[optim.lr_scheduler],
        start_wd=optim.weight_decay,
        end_wd=optim.weight_decay,
        wd_incr_steps=max(total_steps, 1),
        wd_incr_style=optim.weight_decay_incr_style,
        use_checkpoint_opt_param_scheduler=optim.use_checkpoint_opt_param_scheduler,
        override_opt_param_scheduler=not optim.use_checkpoint_opt_param_scheduler,
        wsd_decay_steps=int(optim.wsd_decay_ratio * decay_steps)
        if optim.lr_scheduler == "wsd"
        else None,
        lr_wsd_decay_style=optim.lr_wsd_decay_style,
    )
