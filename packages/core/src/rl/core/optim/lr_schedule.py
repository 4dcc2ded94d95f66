"""Learning-rate schedules: constant, cosine, linear and WSD (warmup-stable-decay).

`lr_multiplier` is a pure function of the step, so every backend (FSDP,
Megatron) gets the same curve and a resumed run the same learning rates.
"""

from __future__ import annotations

import math

import torch

from rl.core.config import ConfigError, OptimConfig


def warmup_steps(config: OptimConfig, total_steps: int) -> int:
    """`lr_warmup_steps` when set (> 0), else `lr_warmup_ratio` of the total."""
    if config.lr_warmup_steps > 0:
        return config.lr_warmup_steps
    return int(config.lr_warmup_ratio * total_steps)


def lr_multiplier(
    step: int,
    total_steps: int,
    warmup: int,
    kind: str,
    min_ratio: float = 0.0,
    decay_ratio: float = 0.1,
) -> float:
    """Factor applied to the base LR at optimizer step `step` (0-based).

    Linear warmup from 1/warmup to 1 over `warmup` steps, then:
    constant 1; cosine and linear from 1 down to `min_ratio` at `total_steps`;
    wsd stays at 1 until the last `decay_ratio` of the steps, then decays linearly.
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if kind == "constant":
        return 1.0
    span = max(total_steps - warmup, 1)
    progress = min(max(step - warmup, 0) / span, 1.0)
    if kind == "cosine":
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    if kind == "linear":
        return min_ratio + (1 - min_ratio) * (1 - progress)
    if kind == "wsd":
        decay_start = 1.0 - decay_ratio
        if progress <= decay_start:
            return 1.0
        return min_ratio + (1 - min_ratio) * (
            1 - (progress - decay_start) / max(decay_ratio, 1e-12)
        )
    raise ConfigError(f"optim.lr_scheduler = {kind!r}; choose constant, cosine, linear or wsd")


def make_lr_scheduler(
    optimizer: torch.optim.Optimizer, config: OptimConfig, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """A `LambdaLR` following `lr_multiplier`; its state goes into checkpoints."""
    warmup = warmup_steps(config, total_steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_multiplier(
            step,
            total_steps,
            warmup,
            config.lr_scheduler,
            config.min_lr_ratio,
            config.wsd_decay_ratio,
        ),
    )


def resume_schedule(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LambdaLR,
    state: dict[str, object],
    hyperparameters: list[dict[str, object]],
) -> None:
    """Continue a checkpoint's schedule at its step with this run's hyper-parameters: the
    optimizer's moments come from the checkpoint, but its learning rate, betas and weight
    decay from the config (`hyperparameters`, each group's as the optimizer was built),
    so that a changed (and allowed) `optim.lr` is the one used from the resumed step on."""
    for group, fresh in zip(optimizer.param_groups, hyperparameters, strict=True):
        group.update(fresh)
    bases = [group.get("initial_lr", group["lr"]) for group in hyperparameters]
    state = {**state, "base_lrs": bases}
    scheduler.load_state_dict(state)
    step = scheduler.last_epoch
    for group, base, factor in zip(
        optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True
    ):
        group["initial_lr"] = base
        group["lr"] = base * factor(step)
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
