"""ROLL's dataclass defaults that the mapping needs (roll/configs/*.py,
roll/pipeline/rlvr/rlvr_config.py at 8eb27cc2), and the names of its roles and sections."""

from __future__ import annotations

from typing import Any

TRAIN_ROLES = ("actor_train", "critic")
INFER_STRATEGIES = {"vllm": "vllm", "sglang": "sglang", "hf_infer": "hf"}
TRAIN_STRATEGIES = {"megatron_train": "megatron", "fsdp2_train": "fsdp"}

# ROLL's dataclass defaults (roll/configs/*.py, roll/pipeline/rlvr/rlvr_config.py) for the
# keys the mapping reads; a file's own values win.
TRAINING_ARGS = {
    "learning_rate": 5.0e-5,
    "weight_decay": 0.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "lr_scheduler_type": "linear",
    "warmup_steps": 0,
    "warmup_ratio": 0.0,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
}
MODEL_ARGS = {"dtype": "bf16", "disable_gradient_checkpointing": False, "ulysses_size": 1}
GENERATING_ARGS = {"temperature": 0.95, "top_p": 0.7, "top_k": 50, "repetition_penalty": 1.0}
DEFAULTS: dict[str, Any] = {
    "seed": 42,
    "output_dir": "./output",
    "track_with": "tensorboard",
    "max_steps": 500,
    "save_steps": 50,
    "eval_steps": 10,
    "resume_from_checkpoint": False,
    "rollout_batch_size": 128,
    "prompt_length": 1024,
    "num_return_sequences_in_group": 1,
    "num_gpus_per_node": 8,
    "adv_estimator": "gae",
    "ppo_epochs": 1,
    "max_grad_norm": 1.0,
    "gamma": 1.0,
    "lambd": 0.95,
    "pg_clip": 0.2,
    "use_pg_clip_range": False,
    "pg_clip_low": 0.2,
    "pg_clip_high": 0.2,
    "dual_clip_loss": False,
    "kl_penalty": "kl",
    "init_kl_coef": 0.2,
    "kl_horizon": 10000,
    "add_token_level_kl": False,
    "use_kl_loss": False,
    "kl_loss_coef": 0.0,
    "entropy_loss_coef": 0.0,
    "loss_agg_mode": "seq-mean-token-mean",
    "actor_train": {
        "model_args": dict(MODEL_ARGS),
        "training_args": dict(TRAINING_ARGS),
        "strategy_args": {"strategy_name": "fsdp2_train"},
        "infer_batch_size": 16,
    },
    "actor_infer": {"model_args": {"dtype": "bf16"}, "generating_args": dict(GENERATING_ARGS)},
    "reference": {"infer_batch_size": 16},
}
# RLVRConfig's sections (anything else that is a mapping and interpolated is a variable)
SECTIONS = (
    "actor_train",
    "actor_infer",
    "reference",
    "critic",
    "validation",
    "rewards",
    "reward_model",
    "reward",
    "checkpoint_config",
    "tracker_kwargs",
    "system_envs",
    "train_infer_correction",
    "router_args",
    "rollout_mock",
    "transfer_backend",
    "dataset_filter",
    "teacher",
    "student_train",
    "student_infer",
)
VARIABLES_KEY = "__interpolated_only__"  # set by compose, read (and removed) by check
MEGATRON_DEFAULTS = {"sequence_parallel": False, "use_distributed_optimizer": False}
