"""The ROLL key table: each upstream key to ours, or why not (first match wins). The rules
of the training roles are in `roles`, ROLL's fields without a counterpart in `options`."""

from __future__ import annotations

from rl.cli.dialects.mapping import Rule, as_list, ignore, ignored_for, unsupported_for
from rl.cli.dialects.roll import distillation, lora, reward_domains, rewards, values
from rl.cli.dialects.roll.options import (
    INFRA,
    PIPELINE_OPTIONS,
    REWARDS,
    WORKER_INFRA,
    WORKER_OPTIONS,
)
from rl.cli.dialects.roll.roles import role_rules
from rl.cli.dialects.vocabulary import (
    CRITIC_WARMUP,
    LORA,
    OUTPUT_DIR_LOGS,
    REF_LAYOUT,
    ROLLOUT_ROUTES,
)

_MASKS = "this ROLL sample mask or loss weight is not in rl (max_len_mask and difficulty_mask are)"
_REWARD_WORKER = "a setting of a ROLL reward worker (refused by rewards.<domain>.worker_cls)"
_ENVS = (
    "ROLL's environments and env managers do not load in rl: write the environment as a "
    "class with reset(task) / step(action) and name it in rollout.multi_turn.environment "
    "(with rollout.multi_turn.enable); rl plays one instance per trajectory"
)
_NO_TRAINING = "an inference role: ROLL does not train it"

RULES: list[Rule] = [
    # the agentic pipeline: the turn budgets map; environments are rl code of their own
    Rule("max_tokens_per_step", "rollout.multi_turn.max_tokens_per_turn"),
    Rule("max_actions_per_traj", "rollout.multi_turn.max_assistant_turns"),
    Rule("custom_envs.*.max_tokens_per_step", "rollout.multi_turn.max_tokens_per_turn"),
    Rule("custom_envs.*.max_steps", "rollout.multi_turn.max_assistant_turns"),
    Rule("custom_envs.", reason=_ENVS),
    Rule(
        "train_env_manager.group_size",
        reason="ROLL's env group is one GRPO group of trajectories: with an rl environment "
        "set rollout.n to it and data.train_batch_size to num_env_groups",
    ),
    *unsupported_for(_ENVS, "train_env_manager.", "val_env_manager.", "env_manager_cls"),
    # ROLL's per-domain reward workers: rl's reward.domains (roll/reward_domains.py)
    *reward_domains.RULES,
    Rule(
        "rewards.*.query_filter_config.type",
        "algorithm.filter_groups.enable",
        derive=rewards.query_filter,
        also=(("algorithm.filter_groups.metric", rewards.filter_metric),),
    ),
    ignore("rewards.*.query_filter_config.", rewards.QUERY_FILTER),
    ignore("rewards.*.", _REWARD_WORKER),
    Rule("reward_model.model_args.model_name_or_path", reason=REWARDS),
    ignore("reward_model.", _REWARD_WORKER),
    *[ignore(f"*.{key}", why) for key, why in WORKER_INFRA.items()],
    Rule(
        "rollout_mock.mode",
        convert=lambda v: None if v == "dump" else v,  # dump only records the rollouts
        reason="ROLL's rollout replay (mock mode) is not in rl",
    ),
    ignore("rollout_mock.", "ROLL's rollout dump for precision tests"),
    ignore("sequence_length", "ROLL derives it (prompt + response)"),
    *unsupported_for(_ENVS, "*_agent_template", "*_agent_system_template"),
    Rule(
        "reward_normalization.",
        reason="the agentic pipeline's reward normalisation is not in rl (its RLVR keys "
        "norm_mean_type / norm_std_type map)",
    ),
    # ROLL's plumbing
    ignore("hydra.", "Hydra's own run settings"),
    ignore("**.worker_cls", "ROLL's worker class path"),
    *ignored_for(
        "set environment variables in the shell that runs rl", "system_envs.", "**.system_envs."
    ),
    ignore("logging_dir", OUTPUT_DIR_LOGS),
    ignore("logging_steps", "rl logs every step"),
    ignore("checkpoint_config.", "rl checkpoints under trainer.output_dir/checkpoints"),
    Rule("rpc_timeout", "trainer.worker_timeout_s"),
    Rule(
        "num_gpus_per_node",
        "cluster.n_gpus_per_node",
        also=(("cluster.nnodes", values.nnodes),),  # ROLL derives num_nodes the same way
    ),
    # run, logging, checkpoints
    Rule("exp_name", "trainer.experiment_name"),
    Rule("seed", "trainer.seed"),
    Rule("output_dir", "trainer.output_dir"),
    Rule("track_with", "trainer.logger", convert=values.loggers),
    Rule("tracker_kwargs.project", "trainer.project_name"),
    Rule("tracker_kwargs.name", "trainer.experiment_name"),
    ignore("tracker_kwargs.", "a tracker option rl does not pass (use the tracker's env vars)"),
    ignore("*.name", "ROLL's cluster name"),
    Rule("max_steps", "trainer.total_training_steps"),
    Rule("save_steps", "trainer.save_freq"),
    Rule("max_ckpt_to_keep", "trainer.max_ckpt_to_keep", convert=lambda v: v or None),
    Rule("eval_steps", "trainer.test_freq"),
    Rule(
        "resume_from_checkpoint",
        "trainer.resume_mode",
        convert=values.resume_mode,
        also=(("trainer.resume_from_path", values.resume_path),),
    ),
    # data and generation
    Rule("pretrain", "model.path", derive=values.model_path),
    Rule("actor_train.model_args.model_name_or_path", "model.path", derive=values.model_path),
    Rule("actor_infer.model_args.model_name_or_path", "model.path", derive=values.model_path),
    Rule("reference.model_args.model_name_or_path", "model.path", derive=values.model_path),
    ignore(
        "reward_pretrain",
        "the tokenizer ROLL's rule workers load (rl's rule scorers need none; a judge names its own model)",
    ),
    Rule("rollout_batch_size", "data.train_batch_size"),
    Rule("val_batch_size", "data.val_batch_size"),
    Rule(
        "prompt_length",
        "data.max_prompt_length",
        # ROLL drops prompts longer than prompt_length (preprocess_dataset's filter)
        also=(("data.filter_overlong_prompts", lambda flat: True),),
    ),
    Rule("response_length", "data.max_response_length"),
    Rule("num_return_sequences_in_group", "rollout.n"),
    Rule(
        "actor_train.data_args.file_name",
        "data.train_files",
        convert=as_list,
        also=(  # ROLL's layout: the answer in `ground_truth`, the domain by `tag`
            ("data.answer_key", lambda flat: "ground_truth"),
            ("data.data_source_key", lambda flat: flat.get("actor_train.data_args.tag", "tag")),
        ),
    ),
    Rule(
        "validation.data_args.file_name",
        "data.val_files",
        convert=as_list,
    ),
    *[
        Rule(
            key,
            "data.chat_template",
            derive=values.template_mode,
            also=(
                ("data.apply_chat_template_kwargs", values.template_kwargs),
                ("model.custom_chat_template", values.custom_template),
            ),
        )
        for key in ("global_template", "actor_train.data_args.template")
    ],
    ignore(
        "*.data_args.template",
        "ROLL renders every prompt, validation's too, with actor_train's template "
        "(or global_template)",
    ),
    ignore(
        "*.data_args.dataset_dir",
        "not a field of ROLL's DataArguments: ROLL drops it (file names are "
        "relative to where it runs)",
    ),
    ignore("*.data_args.interleave_probs", "not a field of ROLL's DataArguments: ROLL drops it"),
    # dacite's from_dict (ROLL's entry scripts) drops keys its dataclasses do not have
    ignore(
        "*.model_args.flash_attn",
        "not a field of ROLL's ModelArguments (attn_implementation is): ROLL drops it",
    ),
    ignore(
        "validation.eval_steps",
        "not a field of ROLL's WorkerConfig: ROLL drops it (it validates every top-level "
        "eval_steps)",
    ),
    Rule("actor_train.data_args.image_max_pixels", "data.image_max_pixels"),
    Rule("actor_train.data_args.image_min_pixels", "data.image_min_pixels"),
    ignore(
        "*.data_args.image_*_pixels",
        "rl processes every role's images within actor_train's bounds "
        "(data.image_min_pixels / image_max_pixels)",
    ),
    Rule("*.data_args.prompt", "data.prompt_key"),
    Rule("*.data_args.messages", "data.prompt_key"),
    Rule("*.data_args.preprocessing_num_workers", "data.filter_num_workers"),
    Rule("actor_train.data_args.domain_interleave_probs.", "data.domain_interleave_probs."),
    ignore(
        "*.data_args.domain_interleave_probs.",
        "ROLL mixes the training batches by actor_train's data_args only",
    ),
    Rule(
        "*.data_args.", reason="a ROLL data option rl does not have (see data.* in rl config show)"
    ),
    Rule("actor_infer.generating_args.temperature", "rollout.temperature"),
    Rule("actor_infer.generating_args.top_p", "rollout.top_p"),
    Rule("actor_infer.generating_args.top_k", "rollout.top_k"),
    Rule("actor_infer.generating_args.repetition_penalty", "rollout.repetition_penalty"),
    ignore(
        "*.generating_args.num_return_sequences", "ROLL sets it from num_return_sequences_in_group"
    ),
    ignore("*.generating_args.max_new_tokens", "ROLL sets it from response_length"),
    Rule("validation.generating_args.temperature", "rollout.val_kwargs.temperature"),
    Rule("validation.generating_args.top_p", "rollout.val_kwargs.top_p"),
    Rule("validation.generating_args.top_k", "rollout.val_kwargs.top_k"),
    ignore(
        "*.generating_args.do_sample",
        "rl samples when the temperature is > 0 and decodes greedily at 0",
    ),
    Rule(
        "*.generating_args.num_beams",
        convert=lambda v: None if v in (None, 1) else v,
        reason="beam search is not in rl (it samples)",
    ),
    Rule("*.generating_args.", reason="a generation option rl does not expose"),
    Rule("validation.", reason="rl validates with data.val_files and rollout.val_kwargs"),
    # algorithm
    *[
        Rule(
            key,
            "algorithm.adv_estimator",
            derive=values.estimator,
            also=(("algorithm.norm_adv_by_std_in_grpo", values.norm_by_std),),
        )
        for key in ("adv_estimator", "norm_mean_type", "norm_std_type")
    ],
    Rule("ppo_epochs", "actor.ppo_epochs", also=(("critic.ppo_epochs", None),)),
    Rule("max_grad_norm", "actor.optim.grad_clip", also=(("critic.optim.grad_clip", None),)),
    Rule("gamma", "algorithm.gamma"),
    Rule("lambd", "algorithm.lam"),
    Rule("pg_clip", "actor.clip_ratio"),
    ignore("use_pg_clip_range", "decides whether pg_clip_low/high apply"),
    Rule("pg_clip_low", "actor.clip_ratio_low", derive=values.clip("low")),
    Rule("pg_clip_high", "actor.clip_ratio_high", derive=values.clip("high")),
    Rule("dual_clip_loss", "actor.clip_ratio_c", derive=values.dual_clip),
    Rule("value_clip", "critic.cliprange_value"),
    Rule("kl_penalty", "algorithm.kl_penalty"),
    Rule("init_kl_coef", "algorithm.kl_ctrl.kl_coef"),
    Rule(
        "target_kl",
        "algorithm.kl_ctrl.target_kl",
        also=(("algorithm.kl_ctrl.type", values.kl_type),),
    ),
    Rule("kl_horizon", "algorithm.kl_ctrl.horizon"),
    Rule("add_token_level_kl", "algorithm.use_kl_in_reward"),
    Rule("use_kl_loss", "actor.use_kl_loss"),
    Rule(
        "kl_loss_coef",
        "actor.kl_loss_coef",
        also=(("actor.kl_loss_type", lambda flat: "low_var_kl"),),  # ROLL's KL loss is k3
    ),
    Rule("entropy_loss_coef", "actor.entropy_coeff"),
    Rule("loss_agg_mode", "actor.loss_agg_mode"),
    Rule("whiten_advantages", "algorithm.whiten_advantages", derive=values.whiten_advantages),
    Rule("whiten_rewards", "algorithm.whiten_rewards", derive=values.whiten_rewards),
    Rule("reward_clip", "algorithm.reward_clip", derive=values.reward_clip),
    Rule("advantage_clip", "algorithm.advantage_clip"),
    Rule("critic_warmup", reason=CRITIC_WARMUP),
    Rule(
        "train_infer_correction.is_weight.enabled",
        "algorithm.rollout_correction.rollout_is",
        derive=values.rollout_is,
    ),
    Rule(
        "train_infer_correction.is_weight.upper_bound",
        "algorithm.rollout_correction.rollout_is_threshold",
    ),
    ignore("train_infer_correction.is_weight.weight_type", "read with is_weight.enabled"),
    Rule(
        "train_infer_correction.",
        reason="ROLL's mismatch filters: use algorithm.rollout_correction.rollout_rs",
    ),
    Rule("actor_train.pg_variant", "actor.policy_loss", convert=values.pg_variant),
    Rule(
        "actor_train.router_replay.mode", "actor.router_replay.mode", convert=values.router_replay
    ),
    ignore("actor_infer.router_replay.mode", ROLLOUT_ROUTES),
    ignore("pg_variant", "a name ROLL files interpolate elsewhere"),
    Rule("max_len_mask", "algorithm.max_len_mask"),
    Rule("difficulty_mask", "algorithm.difficulty_mask"),
    Rule("difficulty_low_threshold", "algorithm.difficulty_low_threshold"),
    Rule("difficulty_high_threshold", "algorithm.difficulty_high_threshold"),
    ignore("error_max_len_threshold", "read only with error_max_len_clip (refused when on)"),
    *unsupported_for(
        _MASKS,
        "difficulty_*",
        "error_max_len_clip",
        "length_loss_weight",
        "mask_type",
        "balance_length",
    ),
    Rule(
        "importance_sampling",
        "actor.policy_loss",
        convert=lambda v: None if v == "token" else "gspo",
    ),
    Rule(
        "async_generation_ratio",
        reason="rl runs generation ahead with trainer.mode: async and trainer.max_staleness "
        "(set them by hand)",
    ),
    ignore("is_num_return_sequences_expand", INFRA),
    Rule("max_running_requests", "rollout.max_num_seqs"),
    Rule("model_update_buffer_size_mb", "rollout.update_weights_bucket_megabytes"),
    Rule("tag_to_template.", reason="per-tag chat templates are not in rl"),
    *distillation.RULES,  # use_opd, is_pure_opd, teacher.*, student_*
    *lora.RULES,  # actor_train's LoRA keys map (roll/lora.py); any other is refused
    ignore(
        "lora_*",
        "a variable of the file (ROLL reads LoRA from <role>.model_args.lora_*, where "
        "the examples interpolate it)",
    ),
    Rule("**.lora_*", reason=LORA),
    *unsupported_for(REWARDS, "rewards.", "reward_model."),
    # ROLL's `reward` role (a WorkerConfig); rl's own reward.custom_reward_function.* is not
    # one of its fields, so it stays ours on a command line (own_keys)
    *[
        Rule(f"reward.{part}.", reason=REWARDS)
        for part in ("model_args", "strategy_args", "generating_args", "data_args", "training_args")
    ],
    Rule("reward.*", reason=REWARDS),
    # roles
    Rule("actor_train.model_args.dtype", "model.dtype", convert=values.dtype),
    Rule(
        "actor_train.model_args.disable_gradient_checkpointing",
        "model.gradient_checkpointing",
        convert=lambda v: not v,
    ),
    ignore("*.model_args.attn_implementation", "rl picks the attention kernel itself"),
    ignore(
        "actor_infer.model_args.disable_gradient_checkpointing",
        "ROLL's inference role: nothing is checkpointed",
    ),
    ignore(
        "actor_train.training_args.num_train_epochs",
        "ROLL's RLVR pipeline runs max_steps steps (it reads no epoch count)",
    ),
    Rule("actor_train.infer_batch_size", "rollout.log_prob_micro_batch_size_per_gpu"),
    Rule("actor_train.use_dynamic_batching_in_infer", "rollout.log_prob_use_dynamic_bsz"),
    Rule(
        "actor_train.max_tokens_per_microbatch_in_infer", "rollout.log_prob_max_token_len_per_gpu"
    ),
    *role_rules("actor_train", "actor"),
    *role_rules("critic", "critic"),
    Rule("critic.model_args.", reason="the critic shares model.* with the actor in rl"),
    ignore("*.pg_variant", "ROLL reads pg_variant on actor_train only"),
    *ignored_for(
        _NO_TRAINING,
        "actor_infer.training_args.",
        "actor_infer.*_in_train",
        "reference.training_args.",
        "reference.*_in_train",
    ),
    Rule("actor_infer.strategy_args.strategy_name", "rollout.name", convert=values.infer_strategy),
    ignore(
        "actor_infer.strategy_args.vllm.sleep_level",
        "rl frees the KV cache between phases (rollout.free_cache_engine)",
    ),
    ignore("actor_infer.strategy_args.vllm.VLLM_USE_V1", "rl runs vLLM's V1 engine"),
    Rule("actor_infer.strategy_args.sglang.mem_fraction_static", "rollout.gpu_memory_utilization"),
    *[
        Rule(f"actor_infer.strategy_args.*.{key}", f"rollout.{key}")
        for key in (
            "gpu_memory_utilization",
            "tensor_parallel_size",
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
            "enable_chunked_prefill",
            "enable_prefix_caching",
            "enforce_eager",
            "load_format",
        )
    ],
    Rule("actor_infer.strategy_args.vllm.", "rollout.engine_kwargs.vllm."),
    Rule("actor_infer.strategy_args.sglang.", "rollout.engine_kwargs.sglang."),
    Rule("actor_infer.strategy_args.", reason="a rollout backend rl does not have"),
    Rule("actor_infer.model_args.dtype", "rollout.dtype", convert=values.dtype),
    Rule("actor_infer.device_mapping", "cluster.placement.rollout", convert=values.placement),
    ignore("actor_infer.num_gpus_per_worker", "rl takes it from the tensor-parallel size"),
    ignore("actor_infer.infer_batch_size", "rl's engine batches all prompts of a step"),
    Rule("reference.infer_batch_size", "ref.log_prob_micro_batch_size_per_gpu"),
    Rule("reference.use_dynamic_batching_in_infer", "ref.log_prob_use_dynamic_bsz"),
    Rule("reference.max_tokens_per_microbatch_in_infer", "ref.log_prob_max_token_len_per_gpu"),
    Rule("reference.device_mapping", "cluster.placement.ref", convert=values.placement),
    ignore(
        "reference.strategy_args.strategy_name",
        "rl computes the reference log-probs on the actor's backend (the same "
        "weights; only the kernels differ)",
    ),
    *ignored_for(REF_LAYOUT, "reference.strategy_args.", "reference.model_args."),
    Rule("reference.", reason=REF_LAYOUT),
    Rule("*.model_args.", reason="a model option rl does not have (it reads model.path's config)"),
    ignore("*.world_size", "ROLL derives it from device_mapping"),
    ignore("*.num_gpus_per_worker", "ROLL derives it from the strategy"),
    Rule("*.infer_batch_size", reason="rl's critic forward uses its ppo_micro_batch_size_per_gpu"),
    *[Rule(f"*.{key}", reason=why) for key, why in WORKER_OPTIONS.items()],
    *[Rule(key, reason=why) for key, why in PIPELINE_OPTIONS.items()],
]

REASONS: list[Rule] = []
