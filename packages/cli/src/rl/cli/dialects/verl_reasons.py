"""Why a verl key that moved to a name rl's schema lacks is not taken over (first match).

`status="ignored"`: rl does the job itself, the run means the same (engine internals,
memory and speed options); those are reported one line per reason. Otherwise the key is
unsupported: listed one by one, because the run would differ from verl's. A `convert`
says which values are "not in use, or what rl does anyway" (it returns None for them):
those are reported as default.
"""

from __future__ import annotations

from rl.cli.dialects.mapping import Rule, off_when
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
)

_FSDP = (
    "an FSDP2 detail rl sets itself (wrapping per decoder layer, prefetch, dtypes from "
    "fsdp_config.mixed_precision)"
)
_PADDING = (
    "how verl's megatron engine pads or packs rows; padding is masked out, so it changes "
    "memory and speed, not the result (rl packs rows as actor.use_remove_padding says)"
)
_MULTI_MODAL = "multi-modal data is not in rl yet (an image/video/audio column is not read)"


REASONS: list[Rule] = [
    Rule("*.*.fsdp_config.", reason=_FSDP, status="ignored"),
    Rule("critic.model.fsdp_config.", reason=_FSDP, status="ignored"),
    Rule("critic.fsdp.", reason=_FSDP, status="ignored"),
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
    Rule(
        "**.optim.total_training_steps",
        reason="verl fills it in from trainer.total_training_steps at run time; rl's "
        "schedule reads that key",
        status="ignored",
    ),
    Rule(
        "**.optim.num_cycles",
        reason="rl's cosine schedule is the half cosine (num_cycles 0.5)",
        convert=off_when(0.5),
    ),
    Rule(
        "**.optim.zero_indexed_step",
        reason="rl's schedule counts steps from 0, as verl's default",
        convert=off_when(True),
    ),
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
    Rule(
        "actor_rollout_ref.rollout.prometheus.",
        reason="rl logs rollout metrics to its own sinks",
        status="ignored",
    ),
    Rule("actor_rollout_ref.rollout.checkpoint_engine.", reason=ENGINE_INTERNAL, status="ignored"),
    Rule(
        "actor_rollout_ref.*.use_torch_compile",
        reason="rl does not torch.compile the model (its fused kernels cover the hot path)",
        status="ignored",
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
    Rule(
        "actor_rollout_ref.rollout.enable_rollout_routing_replay",
        reason=ROLLOUT_ROUTES,
        status="ignored",
    ),
    Rule("**.rollout_n", reason="verl-internal copy of rollout.n", status="ignored"),
    Rule(
        "actor_rollout_ref.actor.tau_*",
        reason="a parameter of verl's sapo policy loss, which rl does not implement",
    ),
    Rule(
        "actor_rollout_ref.model.fused_kernel_options.",
        reason="rl picks its fused kernels itself (actor.use_fused_kernels)",
        status="ignored",
    ),
    Rule("**.megatron.use_mbridge", reason=MBRIDGE, status="ignored"),
    Rule("**.megatron.vanilla_mbridge", reason=MBRIDGE, status="ignored"),
    Rule("**.megatron.use_remove_padding", reason=_PADDING, status="ignored"),
    Rule("**.megatron.pad_bshd_to_minibatch_max", reason=_PADDING, status="ignored"),
    Rule("**.megatron.pad_to_length", reason=_PADDING, status="ignored"),
    Rule("**.megatron.pad_to_length_bucket", reason=_PADDING, status="ignored"),
    Rule(
        "**.megatron.entropy_from_logits_*",
        reason="rl's fused log-prob/entropy kernel never materialises the full softmax",
        status="ignored",
    ),
    Rule(
        "**.megatron.dist_ckpt_optim_fully_reshardable",
        reason="a layout option of megatron's distributed optimizer checkpoint; rl writes its "
        "own checkpoint format",
        status="ignored",
    ),
    Rule(
        "**.megatron.distrib_optim_fully_reshardable_mem_efficient",
        reason="a layout option of megatron's distributed optimizer checkpoint; rl writes its "
        "own checkpoint format",
        status="ignored",
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
    Rule("critic.nccl_timeout", reason=ENGINE_INTERNAL, status="ignored"),
    # verl >= 0.9's `model.lora.` section (its megatron engine's LoRA; `merge` also its
    # engine workers' sync): rl's LoRA is lora_rank / lora_alpha / target_modules
    Rule("actor_rollout_ref.model.lora.merge", reason=LORA_MERGED_SYNC, status="ignored"),
    Rule("actor_rollout_ref.model.lora.rank", reason=MEGATRON_LORA, convert=lambda v: v or None),
    Rule(
        "actor_rollout_ref.model.lora.type",
        reason=LORA_VARIANTS,
        convert=lambda v: None if v in (None, "lora") else v,
    ),
    Rule("actor_rollout_ref.model.lora.", reason=MEGATRON_LORA_SECTION, status="ignored"),
    Rule(
        "**.data_loader_seed",
        reason=SEEDED_BY_TRAINER,
        status="ignored",
    ),
    # (lora_rank, lora_alpha, target_modules, exclude_modules, lora_adapter_path keep
    # verl's names: model.*)
    Rule(
        "actor_rollout_ref.rollout.mode",
        reason="rl's rollout engines run in the trainer's process (verl's sync and async "
        "servers sample the same); overlapping generation with training is trainer.mode",
        status="ignored",
    ),
    # sampling and what is generated: verl's value unless it is what rl does
    Rule(
        "actor_rollout_ref.rollout.ignore_eos",
        reason="rl stops a response at the end-of-sequence token",
        convert=off_when(False),
    ),
    Rule(
        "actor_rollout_ref.rollout.over_sample_rate",
        reason="rl waits for every response of a batch",
        convert=off_when(0, 0.0),
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
    Rule(
        "actor_rollout_ref.rollout.",
        reason="a rollout-engine option rl chooses itself (engine-specific ones go in "
        "rollout.engine_kwargs.vllm / .sglang)",
        status="ignored",
    ),
    Rule("data.image_*", reason=_MULTI_MODAL, status="ignored"),
    Rule("data.video_*", reason=_MULTI_MODAL, status="ignored"),
    Rule("data.audio_*", reason=_MULTI_MODAL, status="ignored"),
    Rule("data.return_multi_modal_inputs", reason=_MULTI_MODAL, status="ignored"),
    Rule(
        "data.*_max_samples",
        reason="rl reads every row of the data files",
        convert=lambda value: None if value is None or value < 0 else value,
    ),
    Rule(
        "data.return_raw_chat",
        reason="rl keeps the messages and their rendered prompt itself",
        status="ignored",
    ),
    Rule("data.dataloader_num_workers", reason="rl tokenizes the data once", status="ignored"),
    Rule(
        "data.continuous_token.",
        reason="rl never re-tokenises a trajectory (token in / token out): what verl's "
        "continuous token turns on",
        status="ignored",
    ),
    Rule("data.", reason="a data-loading option rl does not have (see data.* in rl config show)"),
    Rule(
        "trainer.critic_warmup",
        reason=CRITIC_WARMUP,
        convert=off_when(0, None),
    ),
    Rule(
        "actor_rollout_ref.actor.calculate_entropy",
        reason="rl always logs the entropy (the fused kernel computes it with the log-probs)",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.actor.entropy_*",
        reason="rl's fused log-prob/entropy kernel never materialises the full softmax",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.actor.calculate_sum_pi_squared",
        reason="a diagnostic rl does not compute",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.actor.sum_pi_squared_*",
        reason="a diagnostic rl does not compute",
        status="ignored",
    ),
    Rule("actor_rollout_ref.actor.freeze_vision_tower", reason="multi-modal models are not in rl"),
    Rule(
        "**.megatron.dist_checkpointing_prefix",
        reason="rl's dist checkpoints use mcore names",
        status="ignored",
    ),
    Rule("**.megatron.forward_only", reason=ENGINE_INTERNAL, status="ignored"),
    Rule(
        "**.megatron.override_mcore_model_config",
        reason="use *.megatron.override_transformer_config",
    ),
    Rule(
        "**.ppo_micro_batch_size",
        reason="deprecated in verl for *_per_gpu, which rl takes (ppo_micro_batch_size_per_gpu)",
    ),
    Rule(
        "critic.forward_micro_batch_size",
        reason="rl's critic forward uses ppo_micro_batch_size_per_gpu rows or "
        "forward_max_token_len_per_gpu tokens",
        status="ignored",
    ),
    Rule(
        "critic.forward_micro_batch_size_*",
        reason="rl's critic forward uses ppo_micro_batch_size_per_gpu rows or "
        "forward_max_token_len_per_gpu tokens",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.model.enable_activation_offload",
        reason="activation offload is not in rl (model.gradient_checkpointing is)",
        status="ignored",
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
    Rule(
        "actor_rollout_ref.model.use_liger",
        reason="Liger kernels are not in rl (its own fused kernels are)",
        status="ignored",
    ),
    Rule("actor_rollout_ref.model.use_shm", reason=MODEL_FROM_DISK, status="ignored"),
    Rule(
        "critic.kl_ctrl.",
        reason="verl 0.4/0.5's megatron critic carries a kl_ctrl block it never reads (the KL "
        "controller is algorithm.kl_ctrl)",
        status="ignored",
    ),
    Rule("critic.enable", reason="rl runs a critic when algorithm.adv_estimator needs one (gae)"),
    Rule("critic.shuffle", reason="rl's critic takes the actor's mini-batch order"),
    Rule(
        "trainer.balance_batch",
        reason="rl always balances rows over data-parallel ranks by tokens",
        status="ignored",
    ),
    Rule(
        "trainer.use_v1",
        reason="which of verl's trainer loops runs; rl has one",
        status="ignored",
    ),
    Rule(
        "trainer.v1.trainer_mode",
        reason="verl's asynchronous modes are rl's trainer.mode (one_step_off | async)",
        convert=off_when("sync"),
    ),
    Rule(
        "trainer.esi_redundant_time",
        reason="elastic-server instance timing: rl saves on trainer.save_freq",
        status="ignored",
    ),
    Rule("trainer.ray_wait_register_center_timeout", reason=ENGINE_INTERNAL, status="ignored"),
    Rule("trainer.use_legacy_worker_impl", reason=ENGINE_INTERNAL, status="ignored"),
    Rule("trainer.profile_steps", reason=PROFILING, status="ignored"),
    Rule("trainer.profile_continuous_steps", reason=PROFILING, status="ignored"),
    Rule("trainer.*_nsight_options.", reason=PROFILING, status="ignored"),
    Rule("trainer.npu_profile.", reason=PROFILING, status="ignored"),
    Rule("**.profile.", reason=PROFILING, status="ignored"),
    Rule("trainer.", reason="a verl trainer/driver option with no counterpart in rl"),
    Rule("algorithm.", reason="an algorithm variant rl does not implement"),
]
