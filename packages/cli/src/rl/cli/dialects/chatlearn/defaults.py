"""ChatLearn's dataclass defaults that the mapping needs (chatlearn/configs/*.py at
b7af31a9), and how its legacy v1.0 format is recognised."""

from __future__ import annotations

import re
from typing import Any

_OPTIMIZER = {
    "lr": 2e-6,
    "min_lr": 0.0,
    "weight_decay": 0.01,
    "adam_beta1": 0.9,
    "adam_beta2": 0.95,
    "clip_grad": 1.0,
}
_TRAINER = {
    "optimizer": _OPTIMIZER,
    "entropy_coef": 0.0,
    "kl_coef": 0.0,
    "pos_clip_ratio": 0.2,
    "neg_clip_ratio": 0.2,
    "final_clip_ratio": 3.0,
    "gradient_checkpointing": True,
    "trust_remote_code": True,
    "seed": 1234,
}
DEFAULTS: dict[str, Any] = {
    "runtime_args": {
        "rollout_backend": "vllm",
        "exp_name": "CHATLEARN",
        "num_training_epoch": 1,
        "num_inference_per_prompt": 32,  # interpolated by the megatron template
        "enable_resume_training": True,
        "data_shuffle": True,
        "data_rerank": True,
        "eval_episode_interval": 0,
        "enable_eval_before_training": False,
        "log_args_dict": {"enable_tensorboard": False, "enable_wandb": False},
    },
    "models": {
        "policy": {
            "num_inference_per_prompt": 32,
            "max_prompt_tokens_length": 1024,
            "max_response_tokens_length": 2048,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "eval_temperature": 0.6,
            "eval_top_p": 0.95,
            "eval_top_k": 20,
            "gpu_memory_utilization": 0.8,
            "enforce_eager": False,
            "max_num_batched_tokens": 32768,
        },
        "policy_trainer": _TRAINER,
    },
}

# a `${NAME:default}` of the legacy parser (no dot in the name; OmegaConf refuses it)
_ENV_DEFAULT = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*(:[^}]*)?\}$")


def legacy_reason(values: Any, text: str) -> str:
    """Why `values` (unresolved) is ChatLearn's legacy v1.0 format, or "" if it is not."""
    if not isinstance(values, dict):
        return ""
    if "runtime_args" not in values and values.keys() & {"runtime", "rlhf", "runtime_env"}:
        found = sorted(values.keys() & {"runtime", "rlhf", "runtime_env"})
        return f"top-level {', '.join(found)} instead of runtime_args"
    if "includes" in values:
        return "an `includes:` list"
    models = values.get("models") or {}
    for name, section in models.items() if isinstance(models, dict) else []:
        if isinstance(section, dict) and "model_config_file" in section:
            return f"models.{name}.model_config_file"
    colocation = (values.get("runtime_args") or {}).get("colocation") or []
    if any(isinstance(group, str) and "," in group for group in colocation):
        return "colocation given as 'a,b' strings"
    for line in text.splitlines():
        value = line.partition(":")[2].split("#")[0].strip().strip("'\"")
        if _ENV_DEFAULT.match(value):
            return f"the environment-variable default {value}"
    return ""
