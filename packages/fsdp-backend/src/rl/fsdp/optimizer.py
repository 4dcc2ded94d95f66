"""A trained role's optimizer on FSDP2: AdamW over its trainable parameters (fused,
foreach or per parameter, whichever fits them), its LR schedule, and the gradient scaler
of `fsdp_config.grad_scaler`. A frozen role gets none and its parameters no gradients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rl.core.config import ConfigError, OptimConfig
from rl.core.optim import make_lr_scheduler
from rl.core.role_spec import RoleSpec
from rl.fsdp.config import FSDPConfig
from rl.fsdp.precision import grad_scaler


@dataclass
class Training:
    optimizer: torch.optim.Optimizer
    lr_scheduler: torch.optim.lr_scheduler.LambdaLR
    grad_scaler: Any  # None unless fsdp_config.grad_scaler is on
    # as built from the config: a resumed run keeps these, not the checkpoint's
    hyperparameters: list[dict[str, Any]]

    def parameters(self) -> list[torch.Tensor]:
        """The optimizer's parameters: the model's, without walking its modules."""
        return [p for group in self.optimizer.param_groups for p in group["params"]]


def make_training(
    model: torch.nn.Module, spec: RoleSpec, fsdp: FSDPConfig, device: torch.device
) -> Training | None:
    """The optimizer state of `spec`'s role, or None (and no gradients) when it is frozen."""
    if not spec.kind.trains:
        model.requires_grad_(False)
        return None
    optim = spec.optim
    assert optim is not None, f"the {spec.role} engine needs an optimizer config"
    refuse_megatron_schedule_keys(optim, spec.section)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        trained,
        lr=optim.lr,
        betas=tuple(optim.betas),  # type: ignore[arg-type]
        eps=optim.eps,
        weight_decay=optim.weight_decay,
        **adamw_implementation(model, trained, fsdp.grad_scaler.enabled),
    )
    return Training(
        optimizer,
        make_lr_scheduler(optimizer, optim, spec.total_steps),
        grad_scaler(fsdp.grad_scaler, device),
        [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups],
    )


def adamw_implementation(
    model: torch.nn.Module, trained: list[torch.Tensor] | None = None, scaled: bool = False
) -> dict[str, bool]:
    """torch's fused AdamW where every parameter is a plain floating tensor (one kernel
    over all of them instead of a Python loop per parameter), the foreach one for FSDP2's
    DTensors (torch picks it by itself on GPU only; on CPU it would loop per parameter,
    each op through DTensor's dispatch). Same update within fp32 rounding (tested). With a
    gradient scaler (`scaled`) foreach too: the fused kernel takes the scaler's overflow
    flag as a 0-d tensor, ShardedGradScaler's is [1]."""
    params = list(model.parameters()) if trained is None else trained
    floating = all(p.dtype in (torch.float32, torch.float16, torch.bfloat16) for p in params)
    if floating and all(type(p) is torch.nn.Parameter for p in params):
        return {"foreach": True} if scaled else {"fused": True}
    if floating and all(hasattr(p, "full_tensor") for p in params):
        return {"foreach": True}
    return {}


MEGATRON_SCHEDULE_KEYS = (
    "lr_warmup_init",
    "lr_decay_steps",
    "lr_wsd_decay_style",
    "weight_decay_incr_style",
    "use_checkpoint_opt_param_scheduler",
)


def refuse_megatron_schedule_keys(optim: OptimConfig, section: str) -> None:
    """Schedule keys only the megatron engine reads: an error rather than silence."""
    default = OptimConfig()
    for key in MEGATRON_SCHEDULE_KEYS:
        if getattr(optim, key) != getattr(default, key):
            raise ConfigError(
                f"{section}.optim.{key} = {getattr(optim, key)!r} is read by the megatron "
                f"engine only ({section}.strategy=megatron); the FSDP engine's schedule is "
                "lr_scheduler / lr_warmup_steps / min_lr_ratio / wsd_decay_ratio"
            )
