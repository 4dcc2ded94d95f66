"""The ChatLearn key table: each upstream key to ours, or why not (first match wins)."""

from __future__ import annotations

from rl.cli.dialects.chatlearn import values
from rl.cli.dialects.chatlearn.values import POLICY, TRAINER
from rl.cli.dialects.mapping import NULL, Rule, ignore, ignored_for, unsupported_for
from rl.cli.dialects.vocabulary import (
    PROFILING,
    REF_LAYOUT,
    ROLLOUT_TP_ONLY,
    SEEDED_BY_TRAINER,
    TOKENIZER_FROM_MODEL,
    WEIGHT_SYNC_EVERY_UPDATE,
)

_ASYNC = (
    "ChatLearn's rollout managers and agentic task types are not mapped; rl's are "
    "trainer.mode, trainer.partial_rollout and rollout.multi_turn (set them by hand)"
)
_AGENT = (
    "ChatLearn's agentic rollout (task_type agent, rollout_manager, raw_chat messages handed "
    "to its agent graphs) is not rl's rollout.multi_turn: convert the task by hand"
)
_PARTIAL = (
    "ChatLearn's partial rollout (responses spread over max_rollout_round episodes by "
    "rollout_ratio, advantages over a prompt's responses across episodes) is not rl's "
    "trainer.partial_rollout (chunked generation within one_step_off/async steps)"
)
_VLM = "vision-language models (model_type vlm) are not in rl"
_PROMPT_FIELD = (
    "another field of ChatLearn's sample as the rollout's prompt; rl generates from the "
    "templated data.prompt_key"
)
_ALLOCATOR = "CUDA memory allocator settings; rl's engines manage their own memory"
_MODEL_BUILDER = "Megatron's model-provider module; rl builds the model from model.path"
_DERIVED = "ChatLearn derives it (prompt + response length, replicas from the parallel sizes)"
_INFRA = "ChatLearn's Ray/process setup; rl's launcher decides it"
_REWARD = (
    "ChatLearn's reward is its rule-based math scorer; rl scores rows by data source "
    "(reward.*), with the reward process pool sized by reward.num_workers"
)
_NOT_READ = "ChatLearn's GRPO does not read it"
_FSDP = values.only_for("fsdp")
_MEGATRON = values.only_for("megatron")
_MEGATRON_KEYS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "virtual_pipeline_model_parallel_size",
    "sequence_parallel",
    "use_distributed_optimizer",
)
_TRANSFORMER_KEYS = (
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "recompute_modules",
    "pipeline_model_parallel_layout",
    "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers",
)

RULES: list[Rule] = [
    ignore("env_args.", "Ray's runtime environment for ChatLearn's job"),
    # an agent config (template/agent/*.yaml, named per data row by agent_cfg_path)
    Rule("max_ai_message_turn", "rollout.multi_turn.max_assistant_turns"),
    Rule("max_total_token_length", "rollout.multi_turn.max_total_tokens"),
    Rule("chat_template", "model.custom_chat_template"),
    # runtime_args
    Rule(
        "runtime_args.train_backend",
        "actor.strategy",
        convert=values.train_backend,
        also=(
            # ChatLearn's fixed choices, written out: GRPO advantages (std-normalised:
            # (r - mean) / (np.std + 1e-5), the population std; advantage_compute.py),
            # token-mean loss, bf16 (FSDP: always; megatron: `bf16`), k3 KL loss
            ("algorithm.adv_estimator", lambda flat: "grpo"),
            ("algorithm.norm_adv_by_std_in_grpo", lambda flat: True),
            ("algorithm.grpo_std", lambda flat: "population"),
            ("algorithm.grpo_std_eps", lambda flat: 1e-5),
            ("actor.loss_agg_mode", lambda flat: "token-mean"),
            ("actor.kl_loss_type", lambda flat: "low_var_kl"),
            ("model.dtype", values.dtype),
            (
                "actor.fsdp_config.mixed_precision.param_dtype",
                lambda flat: "bfloat16" if values.backend(flat) == "fsdp" else None,
            ),
            (
                "actor.optim.lr_scheduler",  # FSDP: a constant learning rate
                lambda flat: "constant" if values.backend(flat) == "fsdp" else None,
            ),
            # ChatLearn's rule reward (by data_source; not verl's scorers for the same names)
            ("reward.custom_reward_function.path", values.scorer_file),
            # its prompt pipeline drops the prompts too long for max_prompt_tokens_length
            ("data.filter_overlong_prompts", lambda flat: True),
        ),
    ),
    Rule("runtime_args.rollout_backend", "rollout.name", convert=values.rollout_backend),
    Rule("runtime_args.exp_name", "trainer.experiment_name"),
    # one colocation group of every GPU model: cluster.colocation; models apart (several
    # groups, or a model outside every group): cluster.placement, as ChatLearn places them
    Rule(
        "runtime_args.colocation",
        "cluster.colocation",
        derive=values.colocation_of,
        also=(("cluster.placement", values.placement_of),),
    ),
    Rule("runtime_args.output_dir", "trainer.output_dir"),
    Rule("runtime_args.data_path", "data.train_files", convert=values.files),
    Rule("runtime_args.eval_data_path", "data.val_files", convert=values.files),
    Rule("runtime_args.num_episode", "trainer.total_training_steps"),
    Rule(
        "runtime_args.sample_per_episode",
        "data.train_batch_size",
        derive=values.prompts("runtime_args.sample_per_episode"),
    ),
    Rule("runtime_args.num_training_epoch", "actor.ppo_epochs"),
    Rule("runtime_args.train_micro_batch_size", "actor.ppo_micro_batch_size_per_gpu"),
    Rule(
        "runtime_args.train_global_batch_size",
        "actor.ppo_mini_batch_size",
        derive=values.prompts("runtime_args.train_global_batch_size"),
    ),
    ignore(
        "runtime_args.num_inference_per_prompt",
        "ChatLearn samples models.policy.num_inference_per_prompt responses",
    ),
    Rule("runtime_args.save_episode_interval", "trainer.save_freq"),
    Rule("runtime_args.enable_resume_training", "trainer.resume_mode", convert=values.resume_mode),
    Rule("runtime_args.data_shuffle", "data.shuffle"),
    Rule("runtime_args.data_rerank", "rollout.data_rerank"),
    Rule("runtime_args.max_data_ckpt_nums", "trainer.max_ckpt_to_keep"),
    Rule("runtime_args.eval_episode_interval", "trainer.test_freq", convert=values.test_freq),
    Rule("runtime_args.enable_eval_before_training", "trainer.val_before_train"),
    Rule(
        "runtime_args.bucket_size_mb_in_memory_manager",
        "rollout.update_weights_bucket_megabytes",
    ),
    Rule("runtime_args.log_args_dict.enable_tensorboard", "trainer.logger", derive=values.loggers),
    Rule("runtime_args.log_args_dict.enable_wandb", "trainer.logger", derive=values.loggers),
    Rule("runtime_args.log_args_dict.wandb_project", "trainer.project_name"),
    ignore(
        "runtime_args.log_args_dict.wandb_name",
        "rl names the run trainer.experiment_name (runtime_args.exp_name)",
    ),
    ignore(
        "runtime_args.log_args_dict.",
        "rl writes its logs under trainer.output_dir (tensorboard/, wandb/)",
    ),
    # what ChatLearn runs; refused where it is on (`convert` gives None for "off")
    Rule("runtime_args.task_type", reason=_AGENT, convert=values.unless("chat")),
    *unsupported_for(_AGENT, "runtime_args.use_rollout_manager", "runtime_args.raw_chat"),
    Rule("runtime_args.use_partial_rollout", reason=_PARTIAL),
    Rule("runtime_args.model_type", reason=_VLM, convert=values.unless("llm")),
    Rule("runtime_args.data_ratio", reason="per-file data mixing is not in rl"),
    ignore(
        "runtime_args.data_checkpoint_path",
        "rl keeps the data sampler's state in its checkpoints under trainer.output_dir",
    ),
    Rule("runtime_args.load_data_checkpoint_iteration", reason="set trainer.resume_from_path"),
    Rule("runtime_args.consumed_samples", reason="rl's checkpoints hold the sampler state"),
    ignore(
        "runtime_args.max_replay_episode",
        "ChatLearn's GRPO computes advantages on the latest episode only "
        "(AdvantageComputer reads the last buffer of its replay window), as rl does each step",
    ),
    *unsupported_for(
        "episode replay is not in rl",
        "runtime_args.replay_episode_offset",
        "runtime_args.max_relay_episode",
    ),
    *ignored_for(
        _INFRA,
        "runtime_args.stream_data_loader_type",
        "runtime_args.concurrent_setup",
        "runtime_args.cpu_schedule_strategy",
        "runtime_args.policy_to_regroup_queue",
    ),
    ignore("runtime_args.debug", "rl logs with Python's logging levels"),
    *ignored_for(PROFILING, "runtime_args.nsys", "runtime_args.profiler_dir"),
    # models.policy: the rollout engine
    Rule(POLICY + "num_inference_per_prompt", "rollout.n"),
    Rule(POLICY + "max_prompt_tokens_length", "data.max_prompt_length"),
    Rule(POLICY + "max_response_tokens_length", "data.max_response_length"),
    Rule(POLICY + "tensor_model_parallel_size", "rollout.tensor_parallel_size"),
    Rule(POLICY + "temperature", "rollout.temperature"),
    Rule(POLICY + "top_p", "rollout.top_p"),
    Rule(POLICY + "top_k", "rollout.top_k"),
    Rule(POLICY + "repetition_penalty", "rollout.repetition_penalty"),
    Rule(POLICY + "eval_temperature", "rollout.val_kwargs.temperature"),
    Rule(POLICY + "eval_top_p", "rollout.val_kwargs.top_p"),
    Rule(POLICY + "eval_top_k", "rollout.val_kwargs.top_k"),
    Rule(POLICY + "max_num_batched_tokens", "rollout.max_num_batched_tokens"),
    Rule(POLICY + "gpu_memory_utilization", "rollout.gpu_memory_utilization"),
    Rule(POLICY + "enforce_eager", "rollout.enforce_eager"),
    Rule(POLICY + "load", "model.path", derive=values.model_path),
    Rule(POLICY + "seed", "rollout.seed"),
    Rule(POLICY + "trust_remote_code", "model.trust_remote_code"),
    ignore(POLICY + "seq_length", _DERIVED),
    ignore(POLICY + "max_seq_len_to_capture", _DERIVED),
    Rule(POLICY + "is_sync_mode", reason=_ASYNC),
    Rule(POLICY + "*_penalty", reason="rl samples with repetition_penalty only"),
    Rule(
        POLICY + "eval_*",
        reason="rl validates with rollout.val_kwargs (n, temperature, top_p, top_k)",
    ),
    Rule(POLICY + "enable_thinking", "data.apply_chat_template_kwargs.enable_thinking"),
    # the fields of ChatLearn's own sample dict its vLLM reads (prompt text, token ids): at
    # their defaults that is the templated prompt rl feeds too
    Rule(POLICY + "vllm_prompt_key", reason=_PROMPT_FIELD, convert=values.unless("prompt")),
    Rule(POLICY + "vllm_input_ids_key", reason=_PROMPT_FIELD, convert=values.unless("input_ids")),
    Rule(POLICY + "pipeline_model_parallel_size", reason=ROLLOUT_TP_ONLY),
    Rule(POLICY + "expert_model_parallel_size", reason=ROLLOUT_TP_ONLY),
    ignore(
        POLICY + "free_gpu_memory.",
        "rl frees the rollout's KV cache between phases (rollout.free_cache_engine)",
    ),
    Rule(POLICY + "enable_stage_resume", reason=_ASYNC),
    # models.policy_trainer: the actor
    Rule(TRAINER + "optimizer.lr", "actor.optim.lr"),
    Rule(TRAINER + "optimizer.min_lr", "actor.optim.min_lr_ratio", derive=values.min_lr_ratio),
    Rule(TRAINER + "optimizer.weight_decay", "actor.optim.weight_decay"),
    Rule(TRAINER + "optimizer.adam_beta1", "actor.optim.betas", derive=values.betas),
    Rule(TRAINER + "optimizer.adam_beta2", "actor.optim.betas", derive=values.betas),
    Rule(TRAINER + "optimizer.clip_grad", "actor.optim.grad_clip"),
    # FSDP: loss = pg - entropy_coef * entropy + kl_coef * k3 KL, each a token mean (the
    # terms only when their coef > 0); ChatLearn's megatron trainer back-propagates the
    # policy loss alone (train_helper.loss_func), so there they do not train
    Rule(
        TRAINER + "entropy_coef",
        "actor.entropy_coeff",
        derive=values.fsdp_only_coef("entropy_coef"),
    ),
    Rule(
        TRAINER + "kl_coef",
        "actor.kl_loss_coef",
        derive=values.fsdp_only_coef("kl_coef"),
        also=(("actor.use_kl_loss", values.kl_loss_on),),
    ),
    Rule(TRAINER + "pos_clip_ratio", "actor.clip_ratio_high"),
    Rule(TRAINER + "neg_clip_ratio", "actor.clip_ratio_low"),
    Rule(
        TRAINER + "diff_clip_ratio",
        reason="ChatLearn clamps the log-ratio before exp; rl does not",
    ),
    # loss_gallery: min(max(-A r, -A clip(r)), final_clip_ratio) per token, for either
    # sign of A and without a dual clip: rl's cap, with clip_ratio_c off
    Rule(
        TRAINER + "final_clip_ratio",
        "actor.policy_loss_cap",
        also=(("actor.clip_ratio_c", lambda flat: NULL),),
    ),
    Rule(TRAINER + "use_group_sequence_policy", "actor.policy_loss", convert=values.gspo),
    Rule(TRAINER + "train_micro_batch_size", "actor.ppo_micro_batch_size_per_gpu"),
    Rule(TRAINER + "gradient_checkpointing", "model.gradient_checkpointing"),
    Rule(TRAINER + "save_hf", "trainer.save_hf"),
    Rule(TRAINER + "trust_remote_code", "model.trust_remote_code"),
    Rule(TRAINER + "seed", "trainer.seed"),
    Rule(TRAINER + "num_gpu", "cluster.n_gpus_per_node", derive=values.total_gpus),
    Rule(
        TRAINER + "load",  # FSDP: the HF folder; megatron: an mcore checkpoint to start from
        "model.path",
        derive=values.model_path,
        also=(
            ("actor.megatron.dist_checkpointing_path", _MEGATRON(TRAINER + "load")),
            (
                "actor.megatron.use_dist_checkpointing",
                lambda flat: (
                    values.backend(flat) == "megatron" and bool(flat.get(TRAINER + "load"))
                ),
            ),
        ),
    ),
    Rule(TRAINER + "packing", "actor.use_dynamic_bsz"),
    Rule(
        TRAINER + "max_token_in_packing",
        "actor.ppo_max_token_len_per_gpu",
        also=(("rollout.log_prob_max_token_len_per_gpu", None),),
    ),
    Rule(TRAINER + "generation_batch_size", "rollout.log_prob_micro_batch_size_per_gpu"),
    Rule(
        TRAINER + "free_gpu_memory.offload_weights",
        "actor.fsdp_config.param_offload",
        derive=_FSDP(TRAINER + "free_gpu_memory.offload_weights"),
        also=(
            (
                "actor.megatron.param_offload",
                _MEGATRON(TRAINER + "free_gpu_memory.offload_weights"),
            ),
        ),
    ),
    Rule(
        TRAINER + "free_gpu_memory.offload_optimizer_states",
        "actor.fsdp_config.optimizer_offload",
        derive=_FSDP(TRAINER + "free_gpu_memory.offload_optimizer_states"),
        also=(
            (
                "actor.megatron.optimizer_offload",
                _MEGATRON(TRAINER + "free_gpu_memory.offload_optimizer_states"),
            ),
        ),
    ),
    Rule(
        TRAINER + "free_gpu_memory.free_grad_buffers",
        "actor.megatron.grad_offload",
        derive=_MEGATRON(TRAINER + "free_gpu_memory.free_grad_buffers"),
    ),
    ignore(TRAINER + "fsdp_size", "ChatLearn sets it to num_gpu (full shard, our -1)"),
    Rule(TRAINER + "ulysses_sequence_parallel_size", "actor.ulysses_sequence_parallel_size"),
    Rule(TRAINER + "meta_init", "actor.fsdp_config.meta_init"),
    ignore(TRAINER + "groupgemm", "a MoE expert kernel choice (same math)"),
    *[Rule(TRAINER + key, f"actor.megatron.{key}") for key in _MEGATRON_KEYS],
    *[
        Rule(TRAINER + key, f"actor.megatron.override_transformer_config.{key}")
        for key in _TRANSFORMER_KEYS
    ],
    ignore(TRAINER + "bf16", "read with train_backend (model.dtype)"),
    Rule(
        TRAINER + "use_checkpoint_opt_param_scheduler",
        "actor.optim.use_checkpoint_opt_param_scheduler",
    ),
    ignore(TRAINER + "calculate_per_token_loss", "rl's token-mean is per token"),
    ignore(TRAINER + "seq_length", _DERIVED),
    Rule(
        TRAINER + "megatron_model_cfg.", reason="rl reads the architecture from model.path's config"
    ),
    ignore(TRAINER + "trainable", "the trainer is trainable"),
    # models.ref_policy
    Rule("models.ref_policy.generation_batch_size", "ref.log_prob_micro_batch_size_per_gpu"),
    Rule("models.ref_policy.packing", "ref.log_prob_use_dynamic_bsz"),
    Rule("models.ref_policy.max_token_in_packing", "ref.log_prob_max_token_len_per_gpu"),
    ignore("models.ref_policy.", REF_LAYOUT),
    # models.reward and the rollout managers
    Rule("models.reward.num_cpu", "reward.num_workers"),
    ignore("models.reward.cpu_per_process", _INFRA),
    ignore(
        "models.reward.generation_batch_size",
        "the batch ChatLearn scores at once; rl scores each step's responses",
    ),
    Rule("models.reward.", reason=_REWARD),
    # read only while their switch is on (SWITCHES), and then the switch itself is refused
    ignore(
        "models.rollout_manager.",
        "part of ChatLearn's rollout manager (runtime_args.use_rollout_manager)",
    ),
    ignore(
        "models.partial_rollout_manager.",
        "part of ChatLearn's partial rollout (runtime_args.use_partial_rollout)",
    ),
    # what every model section has and rl sets elsewhere
    ignore(
        "models.*.num_gpu", "read with runtime_args.colocation into cluster.colocation / placement"
    ),
    *ignored_for(
        _INFRA, "models.*.num_cpu", "models.*.gpu_per_process", "models.*.cpu_per_process"
    ),
    ignore("models.*.use_expandable_segments", _ALLOCATOR),
    *ignored_for(TOKENIZER_FROM_MODEL, "models.*.tokenizer_type", "models.*.tokenizer_model"),
    ignore("models.*.model_provider_module", _MODEL_BUILDER),
    ignore("models.*.empty_unused_memory_level", _ALLOCATOR),
    *ignored_for(_DERIVED, "models.*.replica_dp_size", "models.*.num_replica"),
    Rule("models.*.sync_frequency", reason=WEIGHT_SYNC_EVERY_UPDATE),
    ignore(
        "models.*.generation_batch_size",
        "a forward batch size (rollout, reward or log-prob): rl's engines batch a "
        "step's work themselves",
    ),
    ignore("models.*.trainable", "rl knows which roles train"),
    Rule("models.*.packing", reason="rl packs sequences whenever use_remove_padding is on"),
    Rule("models.*.max_token_in_packing", reason="set rollout.max_num_batched_tokens"),
    Rule("models.*.free_gpu_memory.", reason=_INFRA),
    ignore("models.*.max_*_tokens_length", "rl reads the policy's lengths"),
    ignore("models.*.num_inference_per_prompt", "rl reads the policy's"),
    ignore("models.*.enable_thinking", _NOT_READ),
    ignore("models.*.load", "rl starts every role from model.path"),
    ignore("models.*.seed", SEEDED_BY_TRAINER),
    ignore("models.*.trust_remote_code", "rl reads the policy's"),
    Rule(TRAINER + "*", reason="a ChatLearn trainer option rl does not have"),
]

REASONS: list[Rule] = []
