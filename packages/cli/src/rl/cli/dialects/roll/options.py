"""ROLL's fields without a counterpart in rl, with the reason for each (the ROLL key table
refuses or ignores them by these: `rules`), and the reasons more than one ROLL rule gives."""

from __future__ import annotations

from rl.cli.dialects.vocabulary import (
    MTP,
    PROFILING,
    ROUTER_REPLAY,
    VAL_GENERATIONS,
    WEIGHT_SYNC_EVERY_UPDATE,
)

INFRA = "ROLL's scheduling/infrastructure setting; rl's launcher decides it"
DISTILL = "an OPD teacher's coefficient: rl reads it from the teacher section only"
REWARDS = (
    "ROLL's per-domain reward workers are not in rl, which scores each row by its data "
    "source with one reward: pass reward.custom_reward_function.path=FILE and "
    "--allow-unsupported 'rewards.*'"
)
SCHEDULER = "ROLL's rollout scheduler; rl's engine generates each step's prompts in one batch"
UNUSED = "defined by ROLL but not read by its RLVR pipeline"

# WorkerConfig fields without a counterpart, under any role
WORKER_OPTIONS = {
    "model_update_frequency": WEIGHT_SYNC_EVERY_UPDATE,
    "backend_timeout": INFRA,
    "max_concurrency": INFRA,
    "offload_nccl": INFRA,
    "logits_in_fp32": "rl computes log-probs in float32 always (its fused kernel)",
    "apply_loss_scale": INFRA,
    "router_replay.": ROUTER_REPLAY,
    "mtp_training_mode": MTP,
    "topr_*": "ROLL's TOPR loss is not in rl",
    "opd_kl_coef": DISTILL,
    "tag_included": REWARDS,
    "use_dynamic_batching_in_infer": "rl's critic forward takes forward_max_token_len_per_gpu",
    "max_tokens_per_microbatch_in_infer": "set critic.forward_max_token_len_per_gpu",
    "use_remove_padding": "a key ROLL no longer reads (rl: actor.use_remove_padding)",
    "checkpoint_config.": "rl checkpoints under trainer.output_dir/checkpoints",
    "resume_from_checkpoint": "ROLL copies the top-level value",
}

# WorkerConfig fields that change how, not what, a role computes
_PACKING = "rl packs sequences whenever use_remove_padding is on (default); numerics only"
WORKER_INFRA = {
    "use_sequence_packing": _PACKING,
    "sequence_packing_args.": _PACKING,
    "sequence_length_round_in_*": "rl pads packed micro-batches itself",
}

# top-level RLVRConfig / PPOConfig / BaseConfig fields without a counterpart
PIPELINE_OPTIONS = {
    "generate_opt_level": SCHEDULER,
    "is_use_additional_prompts": SCHEDULER,
    "max_additional_running_prompts": SCHEDULER,
    "router_args.": SCHEDULER,
    "user_defined_rollout_loop_cls": SCHEDULER,
    "model_download_type": "rl reads model.path from disk (no model hub download)",
    "profiler_*": PROFILING,
    "otlp_output_dir": PROFILING,
    "report_length_and_rewards": PROFILING,
    "length_profiler_dir": PROFILING,
    "rollout_dump_dir": VAL_GENERATIONS,
    "transfer_backend.": "rl's weight sync picks its transport (rl.core.weight_sync)",
    "is_offload_states": "set actor.fsdp_config / megatron offload keys",
    "is_offload_optimizer_states_in_train_step": "set *.optimizer_offload",
    "local_rank": INFRA,
    "base_dir": INFRA,
    "val_prompt_length": "rl validates with data.max_prompt_length",
    "val_sequence_length": "rl validates with data.max_prompt_length + max_response_length",
    "num_nodes": "derived from the device mappings (cluster.nnodes)",
    "val_greedy": UNUSED,
    "val_n_sample": UNUSED,
    "l2": UNUSED,
    "use_reward_scaling": UNUSED,
    "use_reward_norm": UNUSED,
    "add_len_reward": UNUSED,
    "dataset_filter.": UNUSED,
    "save_logging_board_dir": UNUSED,
    "reward_norm": "a ROLL 0.1 key its dataclass no longer has (norm_mean_type now)",
    "reward_shift": "a ROLL 0.1 key its dataclass no longer has",
    "reward_scale": "a ROLL 0.1 key its dataclass no longer has",
    "use_policy_loss_type": "ROLL's plain-PG switch is not in rl",
    "use_topr_loss": "ROLL's TOPR loss is not in rl",
    "use_topr_neg_loss_coef": "ROLL's TOPR loss is not in rl",
    "rl_loss_coef": "rl's policy loss has weight 1",
    "postive_loss_coef": "an SFT-on-positives term rl does not have",
    "enable_reference": "rl runs the reference when the KL loss or KL-in-reward needs it",
    "enable_old_logprobs_recompute": "rl decides when old log-probs are recomputed",
    "force_disable_old_logprobs_recompute": "rl decides when old log-probs are recomputed",
    "minibatch_data_iter_num": UNUSED,
    "offload_nccl": INFRA,
    "reward_system_config.": REWARDS,
}
