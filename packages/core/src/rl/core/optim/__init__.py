"""Optimizer helpers shared by every training backend."""

from rl.core.optim.lr_schedule import (
    lr_multiplier,
    make_lr_scheduler,
    resume_schedule,
    warmup_steps,
)

__all__ = ["lr_multiplier", "make_lr_scheduler", "resume_schedule", "warmup_steps"]
