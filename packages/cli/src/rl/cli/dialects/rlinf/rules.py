"""The RLinf key table: each upstream key to ours, or why not (first match wins)."""

from __future__ import annotations

from rl.cli.dialects.mapping import Rule, ignore, ignored_for, unsupported_for
from rl.cli.dialects.rlinf import values
from rl.cli.dialects.vocabulary import (
    CRITIC_WARMUP,
    MEGATRON_PARALLEL_KEYS,
    OUTPUT_DIR_LOGS,
    PROFILING,
    ROLLOUT_TP_ONLY,
    SEEDED_BY_TRAINER,
    TOKENIZER_FROM_MODEL,
    VAL_GENERATIONS,
    ddp_overlap_rules,
)

_ARCH = "rl reads the architecture from model.path's config (RLinf: from its config.json)"
_DERIVED = "RLinf derives it (validate_cfg)"
_INFRA = "RLinf's Ray/process setup; rl's launcher decides it"
_DEAD = "not read by RLinf's reasoning runner"
_CKPT = "RLinf's HF -> megatron conversion; rl converts HF weights itself (rl.megatron.layouts)"
_ENGINE = "an engine option rl does not expose"
_DYNAMIC = "RLinf's dynamic scheduler is not in rl"
_REWARD_RANGE = "rl's RLinf math reward is +1 / -1 (times reward.reward_scale)"
_ROLLOUT_INFRA = "a rollout engine's kernels, logging or process setup; rl's engine chooses them"
_FSDP_INFRA = "an FSDP performance switch (prefetch, kernels, pinning); the same update in rl"
_SPEC = "megatron's layer spec (which kernels build the GPT layers): rl uses megatron's local spec"
_INFERENCE = (
    "RLinf's disaggregated inference workers run the reference (and old) log-probs; rl's "
    "reference runs with the actor's layout (placement: cluster.component_placement.inference)"
)
# megatron TransformerConfig fields in RLinf's actor.model that tune kernels, not shapes
_TRANSFORMER_KEYS = (
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "apply_rope_fusion",
    "bias_activation_fusion",
    "bias_dropout_fusion",
    "persist_layer_norm",
    "moe_token_dispatcher_type",
    "moe_grouped_gemm",
    "moe_aux_loss_coeff",
    "moe_router_load_balancing_type",
    "moe_router_bias_update_rate",
    "gradient_accumulation_fusion",
    "batch_p2p_comm",
)
RLINF_LORA = (
    "RLinf's LoRA also adapts the output layer (lm_head) and sets alpha = rank; rl's "
    "LoRA (model.lora_rank) does not adapt lm_head"
)


def _trainer_rules(section: str, ours: str) -> list[Rule]:
    """What the actor and the critic share: the megatron or FSDP model, optimizer, schedule."""
    model, optim, sched = f"{section}.model.", f"{section}.optim.", f"{section}.lr_sched."
    return [
        *[Rule(model + key, f"{ours}.megatron.{key}") for key in MEGATRON_PARALLEL_KEYS],
        *[
            Rule(model + key, f"{ours}.megatron.override_transformer_config.{key}")
            for key in _TRANSFORMER_KEYS
        ],
        Rule(model + "megatron_checkpoint", f"{ours}.megatron.dist_checkpointing_path"),
        ignore(model + "seq_length", _DERIVED + " from runner.seq_length"),
        ignore(model + "encoder_seq_length", _DERIVED),
        ignore(model + "variable_seq_lengths", "rl packs variable lengths always"),
        ignore(model + "model_type", "rl reads the model type from model.path's config"),
        Rule(model + "is_lora", reason=RLINF_LORA, convert=lambda v: v or None),
        ignore(model + "lora_*", f"read only with is_lora, which is refused ({RLINF_LORA})"),
        Rule(model + "use_cpu_initialization", reason="rl initialises on the device (or meta)"),
        ignore(model + "*", _ARCH),
        Rule(optim + "lr", f"{ours}.optim.lr"),
        Rule(optim + "weight_decay", f"{ours}.optim.weight_decay"),
        Rule(optim + "adam_beta1", f"{ours}.optim.betas", derive=values.betas(section)),
        Rule(optim + "adam_beta2", f"{ours}.optim.betas", derive=values.betas(section)),
        Rule(optim + "adam_eps", f"{ours}.optim.eps"),
        Rule(optim + "clip_grad", f"{ours}.optim.grad_clip"),
        Rule(optim + "min_lr", f"{ours}.optim.min_lr_ratio", derive=values.min_lr_ratio(section)),
        Rule(
            optim + "min_lr_rate", f"{ours}.optim.min_lr_ratio", derive=values.min_lr_ratio(section)
        ),
        Rule(optim + "lr_scheduler", f"{ours}.optim.lr_scheduler", convert=values.scheduler),
        Rule(
            optim + "lr_warmup_steps", f"{ours}.optim.lr_warmup_steps", convert=values.warmup_steps
        ),
        Rule(optim + "lr_warmup_steps_ratio", f"{ours}.optim.lr_warmup_ratio"),
        Rule(optim + "use_distributed_optimizer", f"{ours}.megatron.use_distributed_optimizer"),
        *ddp_overlap_rules(optim, ours),
        ignore(optim + "optimizer", "rl's optimizer is AdamW (RLinf's adam)"),
        Rule(optim + "fp16", "model.dtype", derive=values.optim_precision(section, "fp16")),
        Rule(optim + "bf16", "model.dtype", derive=values.optim_precision(section, "bf16")),
        # megatron's fp16 loss scaling (static loss_scale, else dynamic): its own fields
        *[
            Rule(optim + key, f"{ours}.megatron.override_optimizer_config.{key}")
            for key in (
                "loss_scale",
                "initial_loss_scale",
                "min_loss_scale",
                "loss_scale_window",
                "hysteresis",
            )
        ],
        ignore(
            optim + "optimizer_cpu_offload",
            "megatron's CPU optimizer runs the same Adam on the host; rl keeps it on "
            "the device (offload between phases: actor.megatron.optimizer_offload)",
        ),
        ignore(optim + "optimizer_offload_fraction", _INFRA),
        ignore(optim + "optimizer_enable_pin", _INFRA),
        ignore(optim + "total_training_steps", "rl takes it from trainer.total_training_steps"),
        Rule(optim + "*", reason="a megatron optimizer option rl does not expose"),
        Rule(sched + "lr_decay_style", f"{ours}.optim.lr_scheduler", convert=values.scheduler),
        Rule(sched + "lr_warmup_fraction", f"{ours}.optim.lr_warmup_ratio"),
        Rule(sched + "lr_warmup_iters", f"{ours}.optim.lr_warmup_steps"),
        Rule(sched + "lr_warmup_init", f"{ours}.optim.lr_warmup_init"),
        Rule(sched + "lr_decay_iters", f"{ours}.optim.lr_decay_steps"),
        Rule(sched + "min_lr", f"{ours}.optim.min_lr_ratio", derive=values.min_lr_ratio(section)),
        ignore(sched + "max_lr", "RLinf sets it to optim.lr"),
        Rule(sched + "weight_decay_incr_style", f"{ours}.optim.weight_decay_incr_style"),
        Rule(
            sched + "start_weight_decay",
            f"{ours}.optim.weight_decay",
            derive=values.constant_weight_decay(section),
        ),
        Rule(
            sched + "end_weight_decay",
            f"{ours}.optim.weight_decay",
            derive=values.constant_weight_decay(section),
        ),
        Rule(sched + "lr_wsd_decay_style", f"{ours}.optim.lr_wsd_decay_style"),
        Rule(
            sched + "use_checkpoint_opt_param_scheduler",
            f"{ours}.optim.use_checkpoint_opt_param_scheduler",
        ),
        Rule(sched + "*", reason="a megatron scheduler option rl does not expose"),
        Rule(f"{section}.megatron.use_dist_ckpt", f"{ours}.megatron.use_dist_checkpointing"),
        ignore(f"{section}.megatron.ckpt_convertor.", _CKPT),
        ignore(f"{section}.megatron.use_hf_ckpt", _CKPT),
        ignore(f"{section}.megatron.mbridge", _CKPT),
        ignore(f"{section}.megatron.profiler.", PROFILING),
        Rule(f"{section}.megatron.use_profiler", reason=PROFILING),
        Rule(
            f"{section}.megatron.ddp_bucket_size",
            f"{ours}.megatron.override_ddp_config.bucket_size",
        ),
        ignore(f"{section}.megatron.*", "a megatron runtime option rl sets itself"),
        Rule(
            f"{section}.fsdp_config.reshard_after_forward",
            f"{ours}.fsdp_config.reshard_after_forward",
        ),
        Rule(f"{section}.fsdp_config.cpu_offload", f"{ours}.fsdp_config.offload_policy"),
        Rule(
            f"{section}.fsdp_config.mixed_precision.param_dtype",
            f"{ours}.fsdp_config.mixed_precision.param_dtype",
            convert=values.mixed_precision,
        ),
        Rule(
            f"{section}.fsdp_config.mixed_precision.reduce_dtype",
            f"{ours}.fsdp_config.mixed_precision.reduce_dtype",
            convert=values.mixed_precision,
        ),
        Rule(f"{section}.fsdp_config.gradient_checkpointing", "model.gradient_checkpointing"),
        ignore(f"{section}.fsdp_config.strategy", "rl's FSDP is FSDP2"),
        Rule(
            f"{section}.fsdp_config.sharding_strategy",
            f"{ours}.fsdp_config.fsdp_size",
            convert=values.sharding,
        ),
        ignore(
            f"{section}.fsdp_config.mixed_precision.buffer_dtype",
            "rl keeps buffers in the parameters' dtype",
        ),
        *[
            ignore(f"{section}.fsdp_config.{key}", _FSDP_INFRA)
            for key in (
                "enable_gradient_accumulation",
                "forward_prefetch",
                "backward_prefetch",
                "limit_all_gathers",
                "use_orig_params",
                "use_liger_kernel",
                "offload_pin_memory",
            )
        ],
        # RLinf's names: torch.autocast around the forwards, ShardedGradScaler (rl.fsdp)
        Rule(
            f"{section}.fsdp_config.amp_autocast.enabled",
            f"{ours}.fsdp_config.amp_autocast.enabled",
            derive=values.amp_autocast(section),
        ),
        Rule(
            f"{section}.fsdp_config.amp_autocast.precision",
            f"{ours}.fsdp_config.amp_autocast.precision",
            convert=values.dtype,
        ),
        Rule(f"{section}.fsdp_config.grad_scaler.", f"{ours}.fsdp_config.grad_scaler."),
        Rule(f"{section}.fsdp_config.", reason="an FSDP detail rl sets itself"),
        Rule(f"{section}.tokenizer.trust_remote_code", "model.trust_remote_code"),
        ignore(f"{section}.tokenizer.", TOKENIZER_FROM_MODEL),
        ignore(f"{section}.micro_batch_size", _DERIVED),
        ignore(f"{section}.global_batch_size", _DERIVED),
        ignore(f"{section}.group_name", _INFRA),
        ignore(f"{section}.mcore_gpt", "rl builds megatron's GPT model"),
        ignore(f"{section}.spec_name", _SPEC),
        Rule(
            f"{section}.offload_weight",
            f"{ours}.megatron.param_offload",
            derive=values.offload_for("megatron", f"{section}.offload_weight", section),
        ),
        Rule(
            f"{section}.offload_optimizer",
            f"{ours}.megatron.optimizer_offload",
            derive=values.offload_for("megatron", f"{section}.offload_optimizer", section),
        ),
        Rule(
            f"{section}.offload_grad",
            f"{ours}.megatron.grad_offload",
            derive=values.offload_for("megatron", f"{section}.offload_grad", section),
        ),
    ]


RULES: list[Rule] = [
    ignore("hydra.", "Hydra's own run settings"),
    # cluster and runner
    Rule("cluster.num_nodes", "cluster.nnodes"),
    Rule("cluster.num_gpus_per_node", "cluster.n_gpus_per_node"),
    Rule("cluster.component_placement.", "cluster.component_placement."),
    *unsupported_for(
        _DYNAMIC, "cluster.auto_scheduler", "cluster.use_*_policy", "cluster.recreate_nccl_groups"
    ),
    Rule("cluster.node_groups.", reason="heterogeneous node groups are not in rl"),
    Rule("cluster.", reason=_INFRA),
    ignore("runner.task_type", "checked: reasoning"),
    Rule("runner.logger.logger_backends", "trainer.logger", convert=values.loggers),
    Rule("runner.logger.project_name", "trainer.project_name"),
    Rule("runner.logger.experiment_name", "trainer.experiment_name"),
    ignore("runner.logger.log_path", OUTPUT_DIR_LOGS),
    Rule("runner.output_dir", "trainer.output_dir", derive=values.output_dir),
    Rule("runner.experiment_name", "trainer.experiment_name"),
    Rule("runner.max_epochs", "trainer.total_epochs"),
    Rule("runner.max_steps", "trainer.total_training_steps", convert=values.steps),
    Rule("runner.val_check_interval", "trainer.test_freq", convert=values.freq),
    Rule("runner.save_interval", "trainer.save_freq", convert=values.freq),
    Rule(
        "runner.resume_dir",
        "trainer.resume_mode",
        convert=values.resume_mode,
        also=(("trainer.resume_from_path", values.resume_path),),
    ),
    Rule("runner.seq_length", "rollout.max_model_len"),
    Rule("runner.enable_dynamic_batch_size", "actor.use_dynamic_bsz"),
    Rule("runner.max_tokens_per_mbs", "actor.ppo_max_token_len_per_gpu"),
    Rule("runner.per_worker_log*", reason=_INFRA),
    # algorithm
    Rule("algorithm.group_size", "rollout.n"),
    Rule("algorithm.n_minibatches", "actor.ppo_mini_batch_size", derive=values.mini_batch),
    Rule("algorithm.training_batch_size_per_gpu", "actor.ppo_micro_batch_size_per_gpu"),
    Rule(
        "algorithm.logprob_forward_micro_batch_size",
        "rollout.log_prob_micro_batch_size_per_gpu",
        also=(("ref.log_prob_micro_batch_size_per_gpu", None),),
    ),
    *ignored_for(
        _DEAD, "algorithm.*_rollout_batch_size_per_gpu", "algorithm.rollout_batch_size_per_gpu"
    ),
    ignore(
        "algorithm.recompute_logprobs",
        "rl recomputes the old log-probs with the trainer when the update needs them",
    ),
    Rule("algorithm.shuffle_rollout", "actor.shuffle"),
    Rule(
        "algorithm.max_num_gen_batches",
        reason="rl generates one batch of prompts per step",
        convert=values.one_is_off,
    ),
    Rule("algorithm.loss_type", "actor.policy_loss", convert=values.policy_loss),
    Rule("algorithm.loss_agg_func", "actor.loss_agg_mode", derive=values.loss_agg),
    Rule(
        "algorithm.kl_beta",
        "actor.kl_loss_coef",
        also=(("actor.use_kl_loss", values.kl_loss),),
    ),
    Rule(
        "algorithm.kl_penalty_type",
        "actor.kl_loss_type",
        derive=values.kl_loss_type,
        also=(("algorithm.kl_penalty", values.in_reward_kl_type),),
    ),
    Rule("algorithm.ratio_clip_eps", "actor.clip_ratio"),
    Rule("algorithm.clip_ratio_low", "actor.clip_ratio_low"),
    Rule("algorithm.clip_ratio_high", "actor.clip_ratio_high"),
    Rule("algorithm.clip_ratio_c", "actor.clip_ratio_c", convert=values.clip_ratio_c),
    Rule("algorithm.entropy_bonus", "actor.entropy_coeff", derive=values.entropy),
    ignore("algorithm.calculate_entropy", "rl always logs the entropy"),
    Rule(
        "algorithm.adv_type",
        "algorithm.adv_estimator",
        derive=values.estimator,
        also=(("algorithm.norm_adv_by_std_in_grpo", lambda flat: True),),
    ),
    ignore("algorithm.use_reinpp_baseline", "read with adv_type"),
    Rule(
        "algorithm.reinpp_kl_beta",
        "algorithm.kl_ctrl.kl_coef",
        derive=values.in_reward_kl,
        also=(("algorithm.use_kl_in_reward", lambda flat: bool(values.in_reward_kl(flat) or 0)),),
    ),
    Rule(
        "algorithm.normalize_advantages",
        "algorithm.whiten_advantages",
        derive=values.whiten_advantages,
        also=(("algorithm.whiten_style", values.whiten_style),),
    ),
    Rule("algorithm.early_stop_imp_ratio", "actor.early_stop_imp_ratio"),
    Rule("algorithm.use_valid_token_scale", "actor.use_valid_token_scale"),
    Rule("algorithm.importance_sampling_fix", "actor.tis_cap", derive=values.tis_cap),
    Rule("algorithm.importance_sampling_clip", "actor.tis_cap", derive=values.tis_cap),
    Rule("algorithm.gamma", "algorithm.gamma"),
    Rule("algorithm.gae_lambda", "algorithm.lam"),
    Rule("algorithm.value_cliprange", "critic.cliprange_value"),
    Rule("algorithm.critic_warmup_steps", reason=CRITIC_WARMUP),
    Rule("algorithm.sampling_params.temperature", "rollout.temperature", derive=values.temperature),
    Rule("algorithm.sampling_params.do_sample", "rollout.temperature", derive=values.temperature),
    Rule("algorithm.sampling_params.top_k", "rollout.top_k", convert=values.top_k),
    Rule("algorithm.sampling_params.top_p", "rollout.top_p"),
    Rule("algorithm.sampling_params.repetition_penalty", "rollout.repetition_penalty"),
    Rule("algorithm.sampling_params.max_new_tokens", "data.max_response_length"),
    Rule("algorithm.sampling_params.min_new_tokens", "rollout.min_new_tokens"),
    # rollout
    Rule("rollout.rollout_backend", "rollout.name", convert=values.rollout_backend),
    Rule("rollout.gpu_memory_utilization", "rollout.gpu_memory_utilization"),
    Rule("rollout.tensor_parallel_size", "rollout.tensor_parallel_size"),
    Rule("rollout.max_running_requests", "rollout.max_num_seqs"),
    Rule("rollout.enforce_eager", "rollout.enforce_eager"),
    Rule("rollout.detokenize", "rollout.detokenize"),
    Rule("rollout.validate_weight", "rollout.load_format", convert=values.load_format),
    Rule("rollout.model.model_path", "model.path", derive=values.model_path),
    Rule("rollout.model.precision", "rollout.dtype", convert=values.dtype),
    ignore("rollout.model.model_type", "rl reads the model type from model.path's config"),
    Rule("rollout.model.trust_remote_code", "model.trust_remote_code"),
    Rule("rollout.vllm.enable_chunked_prefill", "rollout.enable_chunked_prefill"),
    Rule("rollout.vllm.enable_prefix_caching", "rollout.enable_prefix_caching"),
    Rule("rollout.vllm.max_num_batched_tokens", "rollout.max_num_batched_tokens"),
    Rule("rollout.cuda_graph_max_bs", "rollout.engine_kwargs.sglang.cuda_graph_max_bs"),
    ignore("rollout.return_logprobs", "rl's engines return log-probs when asked"),
    Rule("rollout.pipeline_parallel_size", reason=ROLLOUT_TP_ONLY, convert=values.one_is_off),
    *ignored_for(
        _ROLLOUT_INFRA,
        "rollout.sglang.",
        "rollout.vllm.attention_backend",
        "rollout.vllm.enable_flash_infer_sampler",
        "rollout.distributed_executor_backend",
        "rollout.disable_log_stats",
    ),
    Rule("rollout.custom_chat_template", "model.custom_chat_template"),
    ignore("rollout.group_name", _INFRA),
    Rule("rollout.print_outputs", reason=VAL_GENERATIONS),
    ignore("rollout.validate_save_dir", _DEAD),
    Rule(
        "rollout.weight_reload",
        reason="rl syncs the weights after every update (RLinf's sync)",
        convert=values.weight_reload,
    ),
    Rule("rollout.", reason=_ENGINE),
    # data
    Rule("data.type", "data.chat_template", derive=values.data_type),
    ignore("data.dataset_name", "a label RLinf logs"),
    Rule("data.max_prompt_length", "data.max_prompt_length"),
    Rule(
        "data.filter_prompt_by_length",
        "data.filter_overlong_prompts",
        # RLinf keeps the first max_prompt_length tokens of a longer prompt it did not filter
        also=(("data.truncation", lambda flat: "right"),),
    ),
    Rule("data.process_workers", "data.filter_num_workers"),
    Rule("data.rollout_batch_size", "data.train_batch_size"),
    Rule("data.val_rollout_batch_size", "data.val_batch_size"),
    Rule("data.prompt_key", "data.prompt_key"),
    Rule("data.answer_key", "data.answer_key"),
    Rule("data.apply_chat_template", "data.chat_template", convert=values.chat_template),
    Rule("data.shuffle", "data.shuffle"),
    Rule("data.seed", "data.seed"),
    Rule("data.train_data_paths", "data.train_files"),
    Rule("data.val_data_paths", "data.val_files"),
    ignore("data.num_workers", "rl reads the data in the driver"),
    ignore("data.validation_shuffle", "not read by RLinf; rl validates on the whole set in order"),
    Rule("data.", reason="a data option rl does not have (see data.* in rl config show)"),
    # actor
    Rule("actor.training_backend", "actor.strategy", convert=values.backend),
    Rule("actor.model.precision", "model.dtype", convert=values.dtype),
    Rule("actor.model.model_path", "model.path", derive=values.model_path),
    Rule("actor.seed", "trainer.seed"),
    Rule(
        "actor.enable_offload",
        "actor.fsdp_config.param_offload",
        derive=values.offload_for("fsdp", "actor.enable_offload"),
        also=(
            (
                "actor.fsdp_config.optimizer_offload",
                values.offload_for("fsdp", "actor.enable_offload"),
            ),
        ),
    ),
    *_trainer_rules("actor", "actor"),
    ignore("actor.enable_dp_load_balance", "rl balances rows over data-parallel ranks by tokens"),
    Rule("actor.calculate_flops", reason=PROFILING),
    # critic (PPO)
    ignore("critic.use_critic_model", "RLinf's critic serves adv_type gae, which is refused"),
    Rule("critic.training_backend", "critic.strategy", convert=values.backend),
    ignore("critic.model.precision", "the critic runs in model.dtype"),
    ignore("critic.model.model_path", "the critic starts from model.path in rl"),
    ignore("critic.seed", SEEDED_BY_TRAINER),
    Rule("critic.enable_offload", reason="set critic.fsdp_config offload keys"),
    *_trainer_rules("critic", "critic"),
    Rule("critic.", reason="a critic option rl does not have"),
    # reward, inference
    Rule(
        "reward.reward_type",
        "reward.custom_reward_function.path",
        convert=values.reward_function,
    ),
    Rule("reward.reward_min_val", reason=_REWARD_RANGE, convert=values.unless(-1.0)),
    Rule("reward.reward_max_val", reason=_REWARD_RANGE, convert=values.unless(1.0)),
    Rule("reward.reward_scale", "reward.reward_scale"),
    Rule(
        "reward.use_reward_model", reason="RLinf's reward model is not implemented upstream either"
    ),
    ignore("reward.tokenizer.", TOKENIZER_FROM_MODEL),
    ignore("reward.group_name", _INFRA),
    Rule("reward.", reason="a reward option rl does not have"),
    ignore("inference.", _INFERENCE),
]

REASONS: list[Rule] = []
