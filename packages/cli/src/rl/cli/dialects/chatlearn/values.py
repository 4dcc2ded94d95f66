"""Value conversions from ChatLearn's settings to ours (units, names, derived values)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Unsupported

POLICY = "models.policy."
TRAINER = "models.policy_trainer."


def n(flat: Mapping[str, Any]) -> int:
    """Responses per prompt: the policy's num_inference_per_prompt (its sampler's value)."""
    return int(flat[POLICY + "num_inference_per_prompt"])


def backend(flat: Mapping[str, Any]) -> str:
    return str(flat.get("runtime_args.train_backend"))


def train_backend(value: Any) -> Any:
    known = {"fsdp": "fsdp", "megatron": "megatron"}
    return known.get(value, Unsupported(f"train_backend {value!r}: fsdp or megatron"))


def rollout_backend(value: Any) -> Any:
    known = {"vllm": "vllm", "sglang": "sglang"}
    return known.get(value, Unsupported(f"rollout_backend {value!r}: vllm or sglang"))


def prompts(key: str) -> Any:
    """A ChatLearn batch in responses as ours in prompts."""

    def derive(flat: Mapping[str, Any]) -> Any:
        return int(flat[key]) // n(flat)

    return derive


def files(value: Any) -> Any:
    """ChatLearn's comma-separated data paths as a list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def colocation(value: Any) -> Any:
    """A flat list of names is one group (ChatLearn's post-init does the same)."""
    if value and all(isinstance(name, str) for name in value):
        return [list(value)]
    return value


def loggers(flat: Mapping[str, Any]) -> Any:
    names = ["console", "jsonl"]
    if flat.get("runtime_args.log_args_dict.enable_tensorboard"):
        names.append("tensorboard")
    if flat.get("runtime_args.log_args_dict.enable_wandb"):
        names.append("wandb")
    return names


def test_freq(value: Any) -> Any:
    return -1 if not value else int(value)  # ChatLearn's 0: never


def resume_mode(value: Any) -> Any:
    return "auto" if value else "disable"


def model_path(flat: Mapping[str, Any]) -> Any:
    """The HF folder: the policy's `load` (megatron scripts keep the mcore checkpoint in the
    trainer's), else the trainer's (FSDP scripts put it there and interpolate it)."""
    return flat.get(POLICY + "load") or flat.get(TRAINER + "load")


def min_lr_ratio(flat: Mapping[str, Any]) -> Any:
    lr = float(flat[TRAINER + "optimizer.lr"])
    return float(flat.get(TRAINER + "optimizer.min_lr") or 0.0) / lr if lr else None


def betas(flat: Mapping[str, Any]) -> Any:
    return [
        float(flat[TRAINER + "optimizer.adam_beta1"]),
        float(flat[TRAINER + "optimizer.adam_beta2"]),
    ]


def only_for(wanted: str) -> Any:
    """The key's own value when the trainer runs on the `wanted` backend, else unset."""

    def derive_for(key: str) -> Any:
        def derive(flat: Mapping[str, Any]) -> Any:
            return flat.get(key) if backend(flat) == wanted else None

        return derive

    return derive_for


def dtype(flat: Mapping[str, Any]) -> Any:
    """ChatLearn's FSDP trainer always loads bf16; its megatron trainer follows `bf16`."""
    if backend(flat) == "megatron" and flat.get(TRAINER + "bf16") is False:
        return "float32"
    return "bfloat16"


def gspo(value: Any) -> Any:
    return "gspo" if value else None


def unless(default: Any) -> Any:
    """For a refused key: None ("off") at ChatLearn's `default`, the value otherwise."""
    return lambda value: None if value == default else value


def fsdp_only_coef(name: str) -> Any:
    """The trainer's coefficient `name` on FSDP; 0 on megatron, whose ChatLearn loss
    back-propagates the policy loss alone."""

    def derive(flat: Mapping[str, Any]) -> Any:
        value = float(flat.get(TRAINER + name) or 0.0)
        return value if backend(flat) == "fsdp" else 0.0

    return derive


def kl_loss_on(flat: Mapping[str, Any]) -> bool:
    """ChatLearn adds the KL term when kl_coef > 0 (FSDP only)."""
    return fsdp_only_coef("kl_coef")(flat) > 0


def scorer_file(flat: Mapping[str, Any]) -> str:
    """ChatLearn's rule reward in rl (`rl.core.rewards.chatlearn_rule`), which the run loads
    as its reward function: named by module, so the config holds on any machine."""
    return "pkg://rl.core.rewards.chatlearn_rule"
