"""Value conversions from ROLL's settings to ours (names, units, derived values)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import NULL, Unsupported
from rl.cli.dialects.roll import batch
from rl.cli.dialects.roll.defaults import INFER_STRATEGIES, TRAIN_STRATEGIES

_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_DTYPES.update({name: name for name in ("bfloat16", "float16", "float32")})


def dtype(value: Any) -> Any:
    return _DTYPES.get(str(value), Unsupported(f"dtype {value!r}: one of bf16, fp16, fp32"))


def train_strategy(value: Any) -> Any:
    if value in TRAIN_STRATEGIES:
        return TRAIN_STRATEGIES[value]
    return Unsupported(
        f"{value!r}: rl trains with megatron_train (megatron) or fsdp2_train (fsdp); "
        "ROLL 0.3 removed deepspeed"
    )


def infer_strategy(value: Any) -> Any:
    return INFER_STRATEGIES.get(
        value, Unsupported(f"{value!r}: rl rolls out with vllm, sglang or hf")
    )


def scheduler(value: Any) -> Any:
    known = {"linear": "linear", "cosine": "cosine", "constant": "constant"}
    known["constant_with_warmup"] = "constant"  # ours warms up by lr_warmup_* too
    return known.get(
        value, Unsupported(f"lr_scheduler_type {value!r}: rl has constant, cosine, linear")
    )


def reference_strategy(flat: Mapping[str, Any]) -> Any:
    """The reference runs on the actor's backend and layout in rl: fine when ROLL's does."""
    actor = train_strategy(batch.strategy_of(flat, "actor_train"))
    reference = batch.strategy_of(flat, "reference").replace("_infer", "_train")
    if reference and train_strategy(reference) != actor:
        return Unsupported(
            f"the reference runs on the actor's backend in rl ({actor}), not "
            f"{batch.strategy_of(flat, 'reference')}"
        )
    return actor


def estimator(value: Any) -> Any:
    known = {"gae": "gae", "grpo": "grpo"}
    return known.get(
        value,
        Unsupported(
            f"adv_estimator {value!r}: ROLL's variant has no exact counterpart in rl (grpo, "
            "gae, rloo, remax, reinforce_plus_plus[_baseline]); set algorithm.adv_estimator"
        ),
    )


def pg_variant(value: Any) -> Any:
    known = {"ppo": "vanilla", "cispo": "cispo"}  # ROLL's ppo is verl's vanilla PPO clip
    return known.get(
        value,
        Unsupported(
            f"pg_variant {value!r}: ROLL's unclipped/TIS/TOPR/Kimi variants are not in rl "
            "(its ppo and cispo are)"
        ),
    )


def placement(value: Any) -> Any:
    from rl.core.placement import parse_device_mapping

    return list(parse_device_mapping(value, "device_mapping"))


def fsdp_size(value: Any) -> Any:
    return -1 if value is None or int(value) <= 1 else int(value)  # ROLL's 1: full shard


def loggers(value: Any) -> Any:
    known = {"tensorboard": "tensorboard", "wandb": "wandb", "stdout": "console"}
    known["swanlab"] = "swanlab"
    if value not in known:
        return Unsupported(f"track_with {value!r}: rl logs to console, tensorboard, wandb, swanlab")
    return ["console", "jsonl", known[value]] if known[value] != "console" else ["console", "jsonl"]


def resume_mode(value: Any) -> Any:
    if isinstance(value, str):
        return "path"
    return "auto" if value else "disable"


def resume_path(flat: Mapping[str, Any]) -> Any:
    value = flat.get("resume_from_checkpoint")
    return value if isinstance(value, str) else None


def betas(role: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return [
            float(flat[f"{role}.training_args.adam_beta1"]),
            float(flat[f"{role}.training_args.adam_beta2"]),
        ]

    return derive


def model_path(flat: Mapping[str, Any]) -> Any:
    """ROLL: `pretrain` fills the policy roles' paths when any of them is unset."""
    own = [
        flat.get(f"{r}.model_args.model_name_or_path")
        for r in ("actor_train", "actor_infer", "reference")
    ]
    return own[0] if all(own) else flat.get("pretrain")


def clip(side: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return flat.get(f"pg_clip_{side}") if flat.get("use_pg_clip_range") else None

    return derive


def dual_clip(flat: Mapping[str, Any]) -> Any:
    """ROLL's dual clip bound is 1 + 2·pg_clip when on; off is our null."""
    return 1 + 2 * float(flat["pg_clip"]) if flat.get("dual_clip_loss") else NULL


def kl_type(flat: Mapping[str, Any]) -> Any:
    return "adaptive" if flat.get("target_kl") is not None else "fixed"


def rollout_is(flat: Mapping[str, Any]) -> Any:
    """ROLL's train/infer IS weights: per token or per sequence, when enabled."""
    if not flat.get("train_infer_correction.is_weight.enabled"):
        return None
    kind = flat.get("train_infer_correction.is_weight.weight_type") or "token"
    return "token" if kind == "token" else "sequence"
