"""verl's values as ours: the conversions of verl's key table (`verl.RULES`) where a value
changes on the way (a name, a sentinel, a ratio of two keys)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Unsupported

POLICY_LOSSES = ("vanilla", "gspo", "cispo")  # verl's loss_mode names rl implements


def policy_loss(value: Any) -> Any:
    return (
        value
        if value in POLICY_LOSSES
        else Unsupported(
            f"verl's {value} policy loss is not in rl ({', '.join(POLICY_LOSSES)} are)"
        )
    )


def warmup_steps(value: Any) -> Any:
    """verl's -1 (or null): "use lr_warmup_steps_ratio", which is our 0."""
    return 0 if value is None or value < 0 else value


def loggers(value: Any) -> Any:
    """verl's logger names as ours ("file" is verl's JSONL, which rl always writes)."""
    from rl.core.config.schema import LOGGERS

    names = [value] if isinstance(value, str) else list(value or [])
    names = ["jsonl" if name == "file" else name for name in names]
    unknown = [name for name in names if name not in LOGGERS]
    if unknown:
        return Unsupported(f"logger {unknown}: rl logs to {', '.join(LOGGERS)}")
    return names


def warmup_style(value: Any) -> Any:
    """verl's `warmup_style` / `lr_scheduler_type` -> our `lr_scheduler` names."""
    return {"constant": "constant", "cosine": "cosine", "linear": "linear"}.get(value, value)


def min_lr_ratio(flat: Mapping[str, Any], optim: str) -> Any:
    """megatron's `min_lr` (the floor the schedule decays to, absolute) as rl's
    `min_lr_ratio` of `lr`; the megatron engine decays to min_lr_ratio * lr."""
    floor, lr = flat.get(optim + "min_lr"), flat.get(optim + "lr")
    if floor is None:
        return None
    if not lr:
        return Unsupported(f"min_lr = {floor} with lr = {lr}: no ratio to express it")
    ratio = floor / lr
    if not 0.0 <= ratio <= 1.0:
        return Unsupported(f"min_lr = {floor} above lr = {lr}: the schedule would rise")
    return ratio


def load_format(value: Any) -> Any:
    """verl <= 0.5's `dummy_dtensor` / `dummy_hf` / `dummy_megatron`: random rollout weights
    until the trainer's first sync fills them (how the sync ships them is the backend's),
    which is rl's `dummy`."""
    return "dummy" if isinstance(value, str) and value.startswith("dummy") else value


def fsdp2(value: Any) -> Any:
    """verl's `fsdp2` strategy (FSDP2's fully_shard) is rl's `fsdp` engine, which is FSDP2."""
    return "fsdp" if value == "fsdp2" else value


def reward_manager(value: Any) -> Any:
    """verl's naive and dapo managers are rl's `reward.reward_manager`; others are not."""
    if value in (None, "naive", "dapo"):
        return value
    return Unsupported(
        f"rl has verl's naive and dapo reward managers (reward.reward_manager); not {value!r}"
    )


def gen_batch_size(flat: Mapping[str, Any]) -> Any:
    """verl's prompts per generation: DAPO's draw size under algorithm.filter_groups; any
    other size (the fully-async trainer streams 1 prompt at a time) changes what a step
    generates, which rl does not do without dynamic sampling."""
    value, train = flat.get("data.gen_batch_size"), flat.get("data.train_batch_size")
    if value is None or value == train or flat.get("algorithm.filter_groups.enable"):
        return value
    return Unsupported(
        f"prompts per generation ({value}) other than data.train_batch_size ({train}) "
        "without algorithm.filter_groups.enable: rl generates a step's train_batch_size "
        "prompts at once (verl's fully-async trainer streams them)"
    )
