"""ROLL's batch arithmetic: data-parallel sizes per role, responses per optimizer step,
and our prompt-unit mini-batch from them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def strategy_of(flat: Mapping[str, Any], role: str) -> str:
    return str(flat.get(f"{role}.strategy_args.strategy_name") or "")


def devices_of(flat: Mapping[str, Any], role: str) -> tuple[int, ...] | None:
    from rl.core.placement import parse_device_mapping

    value = flat.get(f"{role}.device_mapping")
    return None if value is None else parse_device_mapping(value, role)


def data_parallel_size(flat: Mapping[str, Any], role: str = "actor_train") -> int:
    """ROLL's dp of a training role: its devices over the model-parallel size (megatron:
    TP·PP·CP; fsdp2: the Ulysses size); 1 without a device_mapping."""
    devices = devices_of(flat, role)
    if not devices:
        return 1
    strategy = strategy_of(flat, role)
    if strategy.startswith("megatron"):
        block = f"{role}.strategy_args.{strategy}."
        model_parallel = math.prod(
            int(flat.get(block + key) or 1)
            for key in (
                "tensor_model_parallel_size",
                "pipeline_model_parallel_size",
                "context_parallel_size",
            )
        )
    else:
        model_parallel = int(flat.get(f"{role}.model_args.ulysses_size") or 1)
    return max(len(devices) // model_parallel, 1)


def responses_per_update(flat: Mapping[str, Any], role: str) -> int:
    per_device = int(flat.get(f"{role}.training_args.per_device_train_batch_size") or 1)
    accumulation = int(flat.get(f"{role}.training_args.gradient_accumulation_steps") or 1)
    return per_device * accumulation * data_parallel_size(flat, role)


def mini_batch(role: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        n = int(flat.get("num_return_sequences_in_group") or 1)
        return responses_per_update(flat, role) // n

    return derive
