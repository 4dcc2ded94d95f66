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


def _gpu_models(flat: Mapping[str, Any]) -> dict[str, int]:
    """Each model section's num_gpu, for the models that run on devices (num_gpu > 0)."""
    found = {}
    for key, value in flat.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "models" and parts[2] == "num_gpu" and value:
            found[parts[1]] = int(value)
    return found


def _blocks(flat: Mapping[str, Any]) -> list[tuple[list[str], int]] | None:
    """ChatLearn's device blocks (its ModelManager): each colocation group on its largest
    model's num_gpu devices, then each GPU model outside every group on num_gpu of its
    own, in the order the config lists the models; None when every GPU model is in one
    group (the whole-cluster colocation rl's cluster.colocation expresses)."""
    from rl.core.placement.colocation import colocation_groups

    models = _gpu_models(flat)
    groups = colocation_groups(colocation(flat.get("runtime_args.colocation") or []))
    grouped = {name for group in groups for name in group}
    lone = [name for name in models if name not in grouped]
    if len(groups) <= 1 and not lone:
        return None
    blocks = [(group, max((models.get(name, 0) for name in group), default=0)) for group in groups]
    return blocks + [([name], models[name]) for name in lone]


def colocation_of(flat: Mapping[str, Any]) -> Any:
    """`cluster.colocation` when every GPU model shares one group, else none (placement)."""
    value = flat.get("runtime_args.colocation")
    return colocation(value) if _blocks(flat) is None else None


def placement_of(flat: Mapping[str, Any]) -> Any:
    """`cluster.placement` of models apart (`_blocks`), one after another from device 0."""
    from rl.core.placement.colocation import CHATLEARN_ROLES, CHATLEARN_UNSUPPORTED
    from rl.core.placement.roles import lookup_role

    blocks = _blocks(flat)
    if blocks is None:
        return None
    placement, start = {}, 0
    for names, size in blocks:
        for name in names:
            role = lookup_role(name, CHATLEARN_ROLES, CHATLEARN_UNSUPPORTED, "ChatLearn")
            placement[role] = list(range(start, start + size))
        start += size
    return placement


def total_gpus(flat: Mapping[str, Any]) -> Any:
    """The devices ChatLearn asks for: the trainer's num_gpu when every model shares them,
    else the sum of the blocks (`_blocks`)."""
    blocks = _blocks(flat)
    if blocks is None:
        return flat.get(TRAINER + "num_gpu")
    return sum(size for _, size in blocks)


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
