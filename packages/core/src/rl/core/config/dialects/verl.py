"""verl's configs as they are: Hydra composes the file (its `defaults:` list with group
files and `group@package: option` entries, `_self_` ordering, relative `../group`
entries, `hydra.searchpath`) and applies the overrides exactly as verl's shell scripts
write them (`key=value`, `+key=value`, `~key`, `++key=value`, list literals); OmegaConf
resolves `${oc.select:path,default}`, relative `${.key}` interpolations and refuses a
`???` left unset. Hydra and OmegaConf do all of that themselves; this module only maps
the composed keys to ours (`RULES`) and turns their errors into one line.

Our schema takes verl's names, so most keys map by moving their section
(`actor_rollout_ref.actor.*` -> `actor.*`); the renames and the keys we do not support
are listed below, each with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.core.config.dialects import hydra_files
from rl.core.config.dialects.mapping import Rule, Unsupported, as_list


def _warmup_steps(value: Any) -> Any:
    """verl's -1 (or null): "use lr_warmup_steps_ratio", which is our 0."""
    return 0 if value is None or value < 0 else value


def loggers(value: Any) -> Any:
    """verl's logger names as ours ("file" is verl's JSONL, which rl always writes)."""
    from rl.core.config.schema import LOGGERS

    names = [value] if isinstance(value, str) else list(value or [])
    names = ["jsonl" if name == "file" else name for name in names]
    unknown = [name for name in names if name not in LOGGERS]
    if unknown:
        return Unsupported(f"logger {unknown}: rl logs to {', '.join(LOGGERS)}")
    return names


def _warmup_style(value: Any) -> Any:
    """verl's `warmup_style` / `lr_scheduler_type` -> our `lr_scheduler` names."""
    return {"constant": "constant", "cosine": "cosine", "linear": "linear"}.get(value, value)


DESCRIPTION = """
Composed by Hydra (defaults lists, `group@package: option`, `_self_`, relative
`../group`, `hydra.searchpath`) with verl's override syntax (`key=v`, `+key=v`, `~key`,
`++key=v`); OmegaConf resolves `${oc.select:...}`, relative `${.key}` and refuses an unset
`???`.
"""
DOCUMENTED = (
    "every key of verl's `_generated_ppo_trainer.yaml` and `_generated_ppo_megatron_trainer.yaml`"
)

_PROFILING = "profiling is not configured in rl's config (use the torch profiler directly)"
_AGENT = "an option of verl's agent loop that rl's (rollout.multi_turn) does not have"
_ENGINE = "an engine-internal setting rl chooses itself"
_REF_LAYOUT = "the reference model runs with the actor's layout in rl"
_MBRIDGE = "rl converts HF <-> megatron weights itself (rl.core.layouts)"

RULES: list[Rule] = [
    # ignored: verl's own plumbing
    Rule("**._target_", reason="verl's dataclass class path", status="ignored"),
    Rule("global_profiler.", reason=_PROFILING),
    Rule("**.profiler.", reason=_PROFILING),
    Rule(
        "ray_kwargs.",
        reason="Ray's start-up options: rl starts Ray with its defaults, or "
        "joins trainer.ray_address",
    ),
    Rule("transfer_queue.", reason="verl's transfer queue: rl's controller moves batches itself"),
    Rule("actor_rollout_ref.nccl_timeout", reason=_ENGINE),
    Rule(
        "actor_rollout_ref.rollout.engine_kwargs.trtllm",
        reason="TensorRT-LLM rollout is not in rl (vllm, sglang, hf)",
    ),
    Rule("actor_rollout_ref.rollout.agent.", reason=_AGENT),
    Rule("actor_rollout_ref.rollout.multi_turn.enable", "rollout.multi_turn.enable"),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns",
        "rollout.multi_turn.max_assistant_turns",
    ),
    Rule("actor_rollout_ref.rollout.multi_turn.format", "rollout.multi_turn.format"),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.tool_config_path",
        reason="verl's tool classes are not loaded; rl's built-in tools are named in "
        "rollout.multi_turn.tools (calculator, python)",
        convert=lambda value: value,
    ),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length",
        reason="rl cuts tool output at 2000 characters",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode",
        reason="rl never re-tokenises a trajectory (token in / token out)",
        status="ignored",
    ),
    Rule("actor_rollout_ref.rollout.multi_turn.", reason=_AGENT),
    Rule(
        "actor_rollout_ref.*.checkpoint.",
        reason="rl's checkpoints always hold the model, optimizer and extra state",
    ),
    Rule(
        "critic.checkpoint.",
        reason="rl's checkpoints always hold the model, optimizer and extra state",
    ),
    # renames
    Rule("trainer.default_local_dir", "trainer.output_dir"),
    Rule("trainer.logger", "trainer.logger", convert=loggers),
    Rule("trainer.n_gpus_per_node", "cluster.n_gpus_per_node"),
    Rule("trainer.nnodes", "cluster.nnodes"),
    Rule("actor_rollout_ref.hybrid_engine", "cluster.hybrid_engine"),
    Rule("actor_rollout_ref.actor.grad_clip", "actor.optim.grad_clip"),
    Rule("actor_rollout_ref.actor.optim.clip_grad", "actor.optim.grad_clip"),
    Rule("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", "actor.optim.lr_warmup_ratio"),
    Rule(
        "actor_rollout_ref.actor.optim.warmup_style",
        "actor.optim.lr_scheduler",
        convert=_warmup_style,
    ),
    Rule(
        "actor_rollout_ref.actor.optim.lr_scheduler_type",
        "actor.optim.lr_scheduler",
        convert=_warmup_style,
    ),
    Rule(
        "actor_rollout_ref.actor.optim.lr_decay_style",
        "actor.optim.lr_scheduler",
        convert=_warmup_style,
    ),
    Rule(
        "actor_rollout_ref.actor.optim.lr_warmup_steps",
        "actor.optim.lr_warmup_steps",
        convert=_warmup_steps,
    ),
    Rule("critic.optim.lr_warmup_steps", "critic.optim.lr_warmup_steps", convert=_warmup_steps),
    Rule("critic.grad_clip", "critic.optim.grad_clip"),
    Rule("critic.optim.clip_grad", "critic.optim.grad_clip"),
    Rule("critic.optim.lr_warmup_steps_ratio", "critic.optim.lr_warmup_ratio"),
    Rule("critic.optim.warmup_style", "critic.optim.lr_scheduler", convert=_warmup_style),
    Rule("critic.optim.lr_scheduler_type", "critic.optim.lr_scheduler", convert=_warmup_style),
    Rule(
        "critic.model.path",
        reason="the critic starts from model.path in rl (one backbone for all roles)",
    ),
    Rule("critic.model.", reason="the critic shares model.* with the actor in rl"),
    Rule("actor_rollout_ref.rollout.tensor_model_parallel_size", "rollout.tensor_parallel_size"),
    Rule("actor_rollout_ref.model.enable_gradient_checkpointing", "model.gradient_checkpointing"),
    Rule("actor_rollout_ref.model.use_fused_kernels", "actor.use_fused_kernels"),
    Rule("actor_rollout_ref.model.use_remove_padding", "actor.use_remove_padding"),
    Rule(
        "actor_rollout_ref.actor.use_prefix_grouper",
        "actor.use_prefix_grouper",
        # verl's default false becomes rl's null: rl's grouping is exact (and runs with packed
        # rows and fused kernels), so it stays on wherever it applies
        convert=lambda value: True if value else None,
    ),
    Rule(
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
        "ref.log_prob_micro_batch_size_per_gpu",
    ),
    Rule("actor_rollout_ref.ref.log_prob_use_dynamic_bsz", "ref.log_prob_use_dynamic_bsz"),
    Rule(
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", "ref.log_prob_max_token_len_per_gpu"
    ),
    Rule("actor_rollout_ref.ref.", reason=_REF_LAYOUT),
    Rule("custom_reward_function.", "reward.custom_reward_function."),
    Rule("reward_model.model.path", "reward.reward_model.path"),
    Rule("reward_model.max_length", "reward.reward_model.max_length"),
    Rule("reward_model.micro_batch_size_per_gpu", "reward.reward_model.batch_size"),
    Rule(
        "reward_model.enable",
        reason="rl uses a reward model when reward.reward_model.path is set",
        status="ignored",
    ),
    Rule(
        "reward_model.",
        reason="rl's reward model is one HF sequence classifier "
        "(reward.reward_model.*); no separate engine settings",
    ),
    Rule(
        "reward_manager.",
        reason="rl has one reward manager (a process pool with timeouts, "
        "reward.num_workers / timeout_s)",
    ),
    Rule("data.filter_overlong_prompts_workers", "data.filter_num_workers"),
    Rule("data.reward_fn_key", "data.data_source_key"),
    Rule(
        "actor_rollout_ref.rollout.prompt_length",
        reason="rl takes it from data.max_prompt_length",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.rollout.response_length",
        reason="rl takes it from data.max_response_length",
        status="ignored",
    ),
    Rule(
        "actor_rollout_ref.rollout.do_sample",
        reason="rl samples when rollout.temperature > 0 and decodes greedily at 0",
        status="ignored",
    ),
    Rule("data.train_files", "data.train_files", convert=as_list),
    Rule("data.val_files", "data.val_files", convert=as_list),
    # sections that keep verl's names
    Rule("actor_rollout_ref.actor.", "actor."),
    Rule("actor_rollout_ref.rollout.", "rollout."),
    Rule("actor_rollout_ref.model.", "model."),
    Rule("critic.", "critic."),
    Rule("data.", "data."),
    Rule("algorithm.", "algorithm."),
    Rule("trainer.", "trainer."),
]


# why a key that moved to a name our schema lacks is not supported (first match)
REASONS: list[Rule] = [
    Rule(
        "*.*.fsdp_config.",
        reason="an FSDP2 detail rl sets itself (wrapping per decoder "
        "layer, prefetch, dtypes from fsdp_config.mixed_precision)",
    ),
    Rule("critic.model.fsdp_config.", reason="an FSDP2 detail rl sets itself"),
    Rule("*.*.mtp.", reason="multi-token prediction is not in rl"),
    Rule("*.*.tiled_mlp.", reason="tiled MLP is not in rl"),
    Rule(
        "actor_rollout_ref.actor.policy_loss.",
        reason="rl picks the policy loss by name (actor.policy_loss) with its clip keys",
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
        "actor_rollout_ref.rollout.prometheus.", reason="rl logs rollout metrics to its own sinks"
    ),
    Rule("actor_rollout_ref.rollout.checkpoint_engine.", reason=_ENGINE),
    Rule(
        "actor_rollout_ref.*.use_torch_compile",
        reason="rl does not torch.compile the model (its fused kernels cover the hot path)",
    ),
    Rule("actor_rollout_ref.*.router_replay.", reason="MoE router replay is not in rl"),
    Rule("**.rollout_n", reason="verl-internal copy of rollout.n"),
    Rule(
        "actor_rollout_ref.actor.tau_*",
        reason="a parameter of a policy-loss variant rl does not implement",
    ),
    Rule(
        "actor_rollout_ref.model.fused_kernel_options.",
        reason="rl picks its fused kernels itself (actor.use_fused_kernels)",
    ),
    Rule("**.megatron.use_mbridge", reason=_MBRIDGE),
    Rule("**.megatron.vanilla_mbridge", reason=_MBRIDGE),
    Rule("*.*.megatron.use_remove_padding", reason="set actor.use_remove_padding"),
    Rule("critic.megatron.use_remove_padding", reason="set critic.use_remove_padding"),
    Rule("**.load_weight", reason="rl always starts from model.path's weights"),
    Rule("critic.nccl_timeout", reason=_ENGINE),
    Rule("actor_rollout_ref.model.lora.", reason="LoRA is not in rl yet (full-parameter only)"),
    Rule("**.data_loader_seed", reason="rl seeds every role from trainer.seed"),
    Rule("actor_rollout_ref.model.lora_*", reason="LoRA is not in rl yet (full-parameter only)"),
    Rule("actor_rollout_ref.model.target_modules", reason="LoRA is not in rl yet"),
    Rule(
        "actor_rollout_ref.rollout.mode",
        reason="rl's rollout engines run in process; overlapping generation with "
        "training is trainer.mode (one_step_off | async)",
    ),
    Rule(
        "actor_rollout_ref.rollout.",
        reason="a rollout-engine option rl does not expose "
        "(set engine-specific ones in rollout.engine_kwargs.vllm / .sglang)",
    ),
    Rule("data.image_*", reason="multi-modal data is not in rl yet"),
    Rule("data.video_*", reason="multi-modal data is not in rl yet"),
    Rule("data.return_multi_modal_inputs", reason="multi-modal data is not in rl yet"),
    Rule("data.", reason="a data-loading option rl does not have (see data.* in rl config show)"),
    Rule("trainer.critic_warmup", reason="critic warm-up steps are not in rl yet"),
    Rule(
        "actor_rollout_ref.actor.calculate_entropy",
        reason="rl always logs the entropy (the fused kernel computes it with the log-probs)",
    ),
    Rule(
        "actor_rollout_ref.actor.entropy_*",
        reason="rl's fused log-prob/entropy kernel never materialises the full softmax",
    ),
    Rule(
        "actor_rollout_ref.actor.calculate_sum_pi_squared",
        reason="a diagnostic rl does not compute",
    ),
    Rule("actor_rollout_ref.actor.sum_pi_squared_*", reason="a diagnostic rl does not compute"),
    Rule("actor_rollout_ref.actor.freeze_vision_tower", reason="multi-modal models are not in rl"),
    Rule("**.megatron.dist_checkpointing_prefix", reason="rl's dist checkpoints use mcore names"),
    Rule("**.megatron.forward_only", reason=_ENGINE),
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
    ),
    Rule(
        "critic.forward_micro_batch_size_*",
        reason="rl's critic forward uses ppo_micro_batch_size_per_gpu rows or forward_max_token_len_per_gpu tokens",
    ),
    Rule("actor_rollout_ref.model.custom_chat_template", reason="set data.chat_template"),
    Rule(
        "actor_rollout_ref.model.enable_activation_offload",
        reason="activation offload is not in rl (model.gradient_checkpointing is)",
    ),
    Rule("actor_rollout_ref.model.exclude_modules", reason="LoRA is not in rl yet"),
    Rule(
        "actor_rollout_ref.model.external_lib",
        reason="rl imports custom models through the registry (rl.core.registry), not a module name",
    ),
    Rule(
        "actor_rollout_ref.model.hf_config_path",
        reason="rl reads the model config from model.path",
    ),
    Rule(
        "actor_rollout_ref.model.tokenizer_path",
        reason="rl reads the tokenizer from model.path",
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
    ),
    Rule("actor_rollout_ref.model.use_shm", reason="rl reads model.path from disk"),
    Rule("critic.enable", reason="rl runs a critic when algorithm.adv_estimator needs one (gae)"),
    Rule("critic.shuffle", reason="rl's critic takes the actor's mini-batch order"),
    Rule(
        "trainer.balance_batch", reason="rl always balances rows over data-parallel ranks by tokens"
    ),
    Rule("trainer.", reason="a verl trainer/driver option with no counterpart in rl"),
    Rule("algorithm.", reason="an algorithm variant rl does not implement"),
]


def compose(path: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The composed and resolved config of the verl file `path` with `overrides`."""
    return hydra_files.compose(path, overrides, "verl config")


def check(values: dict[str, Any]) -> list[str]:
    """Nothing to check beyond our schema's own validation."""
    return []
