"""Why a verl key that moved to a name rl's schema lacks is not taken over (first match).

`status="ignored"`: rl does the job itself, the run means the same (engine internals,
memory and speed options); those are reported one line per reason. Otherwise the key is
unsupported: listed one by one, because the run would differ from verl's. A `convert`
says which values are "not in use, or what rl does anyway" (it returns None for them):
those are reported as default.
"""

from __future__ import annotations

from rl.cli.dialects.mapping import Rule, ignore, ignored_for, off_when
from rl.cli.dialects.vocabulary import (
    CRITIC_WARMUP,
    ENGINE_INTERNAL,
    LORA_MERGED_SYNC,
    LORA_VARIANTS,
    MBRIDGE,
    MEGATRON_LORA,
    MEGATRON_LORA_SECTION,
    MODEL_FROM_DISK,
    MTP,
    PROFILING,
    ROLLOUT_ROUTES,
    ROUTE_FILES,
    ROUTER_REPLAY,
    SEEDED_BY_TRAINER,
    schedule_shape_rules,
)

_FSDP = (
    "an FSDP2 detail rl sets itself (wrapping per decoder layer, prefetch, dtypes from "
    "fsdp_config.mixed_precision)"
)
_PADDING = (
    "how verl's megatron engine pads or packs rows; padding is masked out, so it changes "
    "memory and speed, not the result (rl packs rows as actor.use_remove_padding says)"
)
_MULTI_MODAL = (
    "rl reads a row's images (data.image_key), not videos or audio yet: a prompt with a "
    "<video> placeholder is refused"
)


REASONS: list[Rule] = [
    *ignored_for(_FSDP, "*.*.fsdp_config.", "critic.model.fsdp_config.", "critic.fsdp."),
    Rule("*.*.mtp.", reason=MTP),
    Rule("*.*.tiled_mlp.", reason="tiled MLP is not in rl"),
    Rule(
        "actor_rollout_ref.actor.policy_loss.",
        reason="a parameter of a policy loss rl does not implement (actor.policy_loss)",
    ),
    Rule(
        "**.optim.optimizer",
        reason="rl's optimizer is torch AdamW",
        convert=off_when("AdamW", "adamw", "adam"),
    ),
    Rule(
        "**.optim.optimizer_impl",
        reason="rl's optimizer is torch AdamW",
        convert=off_when("torch.optim", "torch"),
    ),
    ignore(
        "**.optim.total_training_steps",
        "verl fills it in from trainer.total_training_steps at run time; rl's "
        "schedule reads that key",
    ),
    *schedule_shape_rules("**.optim."),
    Rule(
        "**.optim.*_dtype",
        reason="rl keeps the optimizer's moments and main gradients in fp32",
        convert=off_when("fp32", "float32", "torch.float32"),
    ),
    Rule(
        "actor_rollout_ref.actor.optim.",
        reason="rl's optimizer is torch AdamW with the schedule keys of actor.optim",
    ),
    Rule(
        "critic.optim.",
        reason="rl's optimizer is torch AdamW with the schedule keys of critic.optim",
    ),
    ignore("actor_rollout_ref.rollout.prometheus.", "rl logs rollout metrics to its own sinks"),
    ignore("actor_rollout_ref.rollout.checkpoint_engine.", ENGINE_INTERNAL),
    ignore(
        "actor_rollout_ref.*.use_torch_compile",
        "rl does not torch.compile the model (its fused kernels cover the hot path)",
    ),
    # routing replay: the actor's mode maps (verl.py); the reference's must be off
    Rule("**.router_replay.record_file", reason=ROUTE_FILES, convert=off_when(None)),
    Rule("**.router_replay.replay_file", reason=ROUTE_FILES, convert=off_when(None)),
    Rule(
        "actor_rollout_ref.**.router_replay.mode",
        reason=ROUTER_REPLAY,
        convert=off_when(None, "disabled"),
    ),
    Rule("actor_rollout_ref.**.router_replay.", reason=ROUTER_REPLAY),
    ignore("actor_rollout_ref.rollout.enable_rollout_routing_replay", ROLLOUT_ROUTES),
    ignore("**.rollout_n", "verl-internal copy of rollout.n"),
    Rule(
        "actor_rollout_ref.actor.tau_*",
        reason="a parameter of verl's sapo policy loss, which rl does not implement",
    ),
    ignore(
        "actor_rollout_ref.model.fused_kernel_options.",
        "rl picks its fused kernels itself (actor.use_fused_kernels)",
    ),
    *ignored_for(MBRIDGE, "**.megatron.use_mbridge", "**.megatron.vanilla_mbridge"),
    *ignored_for(
        _PADDING,
        "**.megatron.use_remove_padding",
        "**.megatron.pad_bshd_to_minibatch_max",
        "**.megatron.pad_to_length",
        "**.megatron.pad_to_length_bucket",
    ),
    ignore(
        "**.megatron.entropy_from_logits_*",
        "rl's fused log-prob/entropy kernel never materialises the full softmax",
    ),
    *ignored_for(
        "a layout option of megatron's distributed optimizer checkpoint; rl always writes "
        "it per parameter (megatron-core's fully_reshardable), so it resumes at other TP, "
        "PP and DP sizes",
        "**.megatron.dist_ckpt_optim_fully_reshardable",
        "**.megatron.distrib_optim_fully_reshardable_mem_efficient",
    ),
    Rule(
        "critic.**.router_replay.mode",
        reason=ROUTER_REPLAY,
        convert=off_when(None, "disabled"),
    ),
    Rule(
        "**.load_weight",
        reason="rl always starts from model.path's weights (verl's load_weight: true)",
        convert=off_when(True),
    ),
    ignore("critic.nccl_timeout", ENGINE_INTERNAL),
    # verl >= 0.9's `model.lora.` section (its megatron engine's LoRA; `merge` also its
    # engine workers' sync): rl's LoRA is lora_rank / lora_alpha / target_modules
    ignore("actor_rollout_ref.model.lora.merge", LORA_MERGED_SYNC),
    Rule("actor_rollout_ref.model.lora.rank", reason=MEGATRON_LORA, convert=lambda v: v or None),
    Rule(
        "actor_rollout_ref.model.lora.type",
        reason=LORA_VARIANTS,
        convert=lambda v: None if v in (None, "lora") else v,
    ),
    ignore("actor_rollout_ref.model.lora.", MEGATRON_LORA_SECTION),
    ignore("**.data_loader_seed", SEEDED_BY_TRAINER),
    # (lora_rank, lora_alpha, target_modules, exclude_modules, lora_adapter_path keep
    # verl's names: model.*)
    ignore(
        "actor_rollout_ref.rollout.mode",
        "rl's rollout engines run in the trainer's process (verl's sync and async "
        "servers sample the same); overlapping generation with training is trainer.mode",
    ),
    # sampling and what is generated: verl's value unless it is what rl does
    Rule(
        "actor_rollout_ref.rollout.ignore_eos",
        reason="rl stops a response at the end-of-sequence token",
        convert=off_when(False),
    ),
    ignore(
        "actor_rollout_ref.rollout.over_sample_rate",
        "verl 0.7 and later keep the key but do not read it (0.6's SGLang multi-turn rollout "
        "aborted a batch's last requests); rl waits for every response, as they do",
    ),
    Rule(
        "actor_rollout_ref.rollout.logprobs_mode",
        reason="rl's rollout log-probs are the processed ones (softmax(logits / T))",
        convert=off_when("processed_logprobs"),
    ),
    Rule(
        "actor_rollout_ref.rollout.quantization",
        reason="quantized rollout is not in rl",
        convert=off_when(None, "none"),
    ),
    Rule(
        "actor_rollout_ref.rollout.quantization_config_file",
        reason="quantized rollout is not in rl",
    ),
    Rule(
        "actor_rollout_ref.rollout.skip_rollout",
        reason="rl always generates (no dumped rollouts are replayed)",
    ),
    ignore(
        "actor_rollout_ref.rollout.",
        "a rollout-engine option rl chooses itself (engine-specific ones go in "
        "rollout.engine_kwargs.vllm / .sglang)",
    ),
    *ignored_for(_MULTI_MODAL, "data.video_*", "data.audio_*"),
    ignore(
        "data.return_multi_modal_inputs",
        "rl always carries each row's images (pixel values and grids) into every pass",
    ),
    ignore(
        "data.image_patch_size",
        "rl takes the patch size from the model folder's preprocessor_config.json",
    ),
    Rule(
        "data.*_max_samples",
        reason="rl reads every row of the data files",
        convert=lambda value: None if value is None or value < 0 else value,
    ),
    ignore("data.return_raw_chat", "rl keeps the messages and their rendered prompt itself"),
    ignore(
        "data.tool_config_path",
        "the dataset's copy of actor_rollout_ref.rollout.multi_turn.tool_config_path (for "
        "the prompt's length with its tools): rl renders the prompts with the tools of "
        "rollout.multi_turn.tool_config_path",
    ),
    ignore("data.dataloader_num_workers", "rl tokenizes the data once"),
    ignore(
        "data.continuous_token.",
        "rl never re-tokenises a trajectory (token in / token out): what verl's "
        "continuous token turns on",
    ),
    Rule("data.", reason="a data-loading option rl does not have (see data.* in rl config show)"),
    Rule(
        "trainer.critic_warmup",
        reason=CRITIC_WARMUP,
        convert=off_when(0, None),
    ),
    ignore(
        "actor_rollout_ref.actor.calculate_entropy",
        "rl always logs the entropy (the fused kernel computes it with the log-probs)",
    ),
    ignore(
        "actor_rollout_ref.actor.entropy_*",
        "rl's fused log-prob/entropy kernel never materialises the full softmax",
    ),
    *ignored_for(
        "a diagnostic rl does not compute",
        "actor_rollout_ref.actor.calculate_sum_pi_squared",
        "actor_rollout_ref.actor.sum_pi_squared_*",
    ),
    ignore("**.megatron.dist_checkpointing_prefix", "rl's dist checkpoints use mcore names"),
    ignore("**.megatron.forward_only", ENGINE_INTERNAL),
    Rule(
        "**.megatron.override_mcore_model_config",
        reason="use *.megatron.override_transformer_config",
    ),
    Rule(
        "**.ppo_micro_batch_size",
        reason="deprecated in verl for *_per_gpu, which rl takes (ppo_micro_batch_size_per_gpu)",
    ),
    *ignored_for(
        "rl's critic forward uses ppo_micro_batch_size_per_gpu rows or "
        "forward_max_token_len_per_gpu tokens",
        "critic.forward_micro_batch_size",
        "critic.forward_micro_batch_size_*",
    ),
    ignore(
        "actor_rollout_ref.model.enable_activation_offload",
        "activation offload is not in rl (model.gradient_checkpointing is)",
    ),
    Rule(
        "actor_rollout_ref.model.external_lib",
        reason="rl imports custom models through the registry (rl.core.registry), not a module name",
    ),
    Rule(
        "actor_rollout_ref.model.hf_config_path",
        reason="rl reads the model config from model.path",
    ),
    Rule(
        "actor_rollout_ref.model.override_config",
        reason="rl builds the model as model.path's config says "
        "(megatron: override_transformer_config)",
    ),
    Rule(
        "actor_rollout_ref.model.override_config.",
        reason="rl builds the model as model.path's config says (megatron: override_transformer_config)",
    ),
    ignore(
        "actor_rollout_ref.model.use_liger",
        "Liger kernels are not in rl (its own fused kernels are)",
    ),
    ignore("actor_rollout_ref.model.use_shm", MODEL_FROM_DISK),
    ignore(
        "critic.kl_ctrl.",
        "verl 0.4/0.5's megatron critic carries a kl_ctrl block it never reads (the KL "
        "controller is algorithm.kl_ctrl)",
    ),
    Rule("critic.enable", reason="rl runs a critic when algorithm.adv_estimator needs one (gae)"),
    Rule("critic.shuffle", reason="rl's critic takes the actor's mini-batch order"),
    ignore("trainer.balance_batch", "rl always balances rows over data-parallel ranks by tokens"),
    ignore("trainer.use_v1", "which of verl's trainer loops runs; rl has one"),
    Rule(
        "trainer.v1.trainer_mode",
        reason="verl's asynchronous modes are rl's trainer.mode (one_step_off | async)",
        convert=off_when("sync"),
    ),
    ignore(
        "trainer.esi_redundant_time",
        "elastic-server instance timing: rl saves on trainer.save_freq",
    ),
    *ignored_for(
        ENGINE_INTERNAL,
        "trainer.ray_wait_register_center_timeout",
        "trainer.use_legacy_worker_impl",
    ),
    *ignored_for(
        PROFILING,
        "trainer.profile_steps",
        "trainer.profile_continuous_steps",
        "trainer.*_nsight_options.",
        "trainer.npu_profile.",
        "**.profile.",
    ),
    Rule("trainer.", reason="a verl trainer/driver option with no counterpart in rl"),
    Rule("algorithm.", reason="an algorithm variant rl does not implement"),
]
