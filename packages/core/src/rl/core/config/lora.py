"""The LoRA keys of `model` (verl's actor_rollout_ref.model.lora_rank / lora_alpha /
target_modules / exclude_modules / lora_adapter_path), checked by their names."""

from __future__ import annotations

from typing import Any

from rl.core.config.errors import FieldError

ALL_LINEAR = "all-linear"


def check_lora(model: Any) -> None:
    """`model.lora_*`: a rank >= 0 (0 = off), alpha > 0, target modules "all-linear" or a
    non-empty list of module names; the adapter-only keys need lora_rank > 0."""
    if model.lora_rank < 0:
        raise FieldError("lora_rank", model.lora_rank, ">= 0 (0 = LoRA off)")
    if model.lora_alpha <= 0:
        raise FieldError("lora_alpha", model.lora_alpha, "> 0")
    targets = model.target_modules
    if (isinstance(targets, str) and targets != ALL_LINEAR) or not targets:
        raise FieldError(
            "target_modules", targets, f'"{ALL_LINEAR}" or a non-empty list of module names'
        )
    if model.lora_rank == 0:
        for key in ("lora_adapter_path", "lora_save_merged"):
            if getattr(model, key):
                raise FieldError(key, getattr(model, key), "unset while lora_rank = 0 (LoRA off)")


def lora_on(model: Any) -> bool:
    return bool(model.lora_rank > 0)
