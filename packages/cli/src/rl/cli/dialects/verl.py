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

from rl.cli.dialects import (
    hydra_files,
    verl_distillation,
    verl_generation,
    verl_launch,
    verl_reward_model,
    verl_sft,
)
from rl.cli.dialects import verl_placement as pools
from rl.cli.dialects import verl_values as values
from rl.cli.dialects.mapping import Rule, as_list, flatten, ignore, ignored_for, off_when
from rl.cli.dialects.record import Dialect, Table
from rl.cli.dialects.switches import value_at
from rl.cli.dialects.verl_reasons import REASONS
from rl.cli.dialects.verl_sections import SWITCHES, move_legacy_reward_keys
from rl.cli.dialects.vocabulary import DATACLASS_PATH, ENGINE_INTERNAL, PROFILING, ROUTER_REPLAY
from rl.core.config.errors import ConfigError

DESCRIPTION = """
Composed by Hydra (defaults lists, `group@package: option`, `_self_`, relative
`../group`, `hydra.searchpath`) with verl's override syntax (`key=v`, `+key=v`, `~key`,
`++key=v`); OmegaConf resolves `${oc.select:...}`, relative `${.key}` and refuses an unset
`???`.
"""
DOCUMENTED = (
    "every key of verl's `_generated_ppo_trainer.yaml` and `_generated_ppo_megatron_trainer.yaml`"
)


_CUSTOM_MANAGER = (
    "a reward-manager class loaded from a file (source: importlib) is not loaded: rl's "
    "managers are verl's naive and dapo (reward.reward_manager)"
)
_AGENT = "an option of verl's agent loop that rl's (rollout.multi_turn) does not have"
_REF_LAYOUT = "the reference model runs with the actor's layout in rl"
_SANDBOX_FUSION = (
    "verl's SandboxFusion service is not called: rl's code reward runs in its own sandbox "
    "(data sources in rl.core.rewards.code)"
)


def _reward_manager_rules(section: str) -> list[Rule]:
    """verl's reward_manager `section`: a registered manager by name, or a class loaded
    from module.path (importlib)."""
    return [
        Rule(section + "name", "reward.reward_manager", convert=values.reward_manager),
        Rule(section + "source", reason=_CUSTOM_MANAGER, convert=off_when(None, "register")),
    ]


RULES: list[Rule] = [
    # ignored: verl's own plumbing
    ignore("**._target_", DATACLASS_PATH),
    *ignored_for(PROFILING, "global_profiler.", "**.profiler."),
    ignore(
        "ray_kwargs.",
        "Ray's start-up options: rl starts Ray with its defaults, or joins trainer.ray_address",
    ),
    ignore("transfer_queue.", "verl's transfer queue: rl's controller moves batches itself"),
    ignore("actor_rollout_ref.nccl_timeout", ENGINE_INTERNAL),
    ignore("model_engine", "which actor/critic files verl composes; their strategy keys map"),
    Rule(
        "actor_rollout_ref.rollout.engine_kwargs.trtllm",
        reason="TensorRT-LLM rollout is not in rl (vllm, sglang, hf)",
    ),
    Rule(
        "actor_rollout_ref.rollout.agent.default_agent_loop",
        reason="rl's single-turn rollout is verl's single_turn_agent; multi-turn is "
        "rollout.multi_turn (actor_rollout_ref.rollout.multi_turn.enable)",
        convert=lambda value: None if value in (None, "single_turn_agent") else value,
    ),
    ignore("actor_rollout_ref.rollout.agent.num_workers", ENGINE_INTERNAL),
    Rule("actor_rollout_ref.rollout.agent.", reason=_AGENT),
    Rule("actor_rollout_ref.rollout.multi_turn.enable", "rollout.multi_turn.enable"),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns",
        "rollout.multi_turn.max_assistant_turns",
    ),
    Rule("actor_rollout_ref.rollout.multi_turn.format", "rollout.multi_turn.format"),
    # verl's tool YAML: its classes that rl has are built from it (rl.core.agent.verl_tools)
    *[
        Rule(f"actor_rollout_ref.rollout.multi_turn.{key}", f"rollout.multi_turn.{key}")
        for key in (
            "tool_config_path",
            "max_parallel_calls",
            "max_tool_response_length",
            "tool_response_truncate_side",
        )
    ],
    Rule(
        "actor_rollout_ref.rollout.multi_turn.function_tool_path",
        reason="verl's @function_tool files are not loaded; rl builds verl's tool config "
        "classes it has (tool_config_path) or runs an agent program (rollout.multi_turn.agent)",
        convert=off_when(None),
    ),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.max_user_turns",
        reason="user turns come from an interaction, which rl does not run",
        convert=off_when(None),
    ),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.num_repeat_rollouts",
        reason="repeated rollouts of an interaction are not in rl",
        convert=off_when(None),
    ),
    Rule(
        "actor_rollout_ref.rollout.multi_turn.use_inference_chat_template",
        reason="rl renders the chat with the model's template as trained (verl's default)",
        convert=off_when(False),
    ),
    ignore(
        "actor_rollout_ref.rollout.multi_turn.tokenization_sanity_check_mode",
        "rl never re-tokenises a trajectory (token in / token out)",
    ),
    Rule("actor_rollout_ref.rollout.multi_turn.", reason=_AGENT),
    *ignored_for(
        "rl's checkpoints always hold the model, optimizer and extra state",
        "actor_rollout_ref.*.checkpoint.",
        "critic.checkpoint.",
    ),
    # renames
    Rule("trainer.default_local_dir", "trainer.output_dir"),
    Rule("trainer.logger", "trainer.logger", convert=values.loggers),
    # the trainer's pool, and the one-step-off / fully-async trainers' rollout pool
    # (verl_placement): one cluster, each role on its devices
    Rule(
        "trainer.n_gpus_per_node",
        "cluster.n_gpus_per_node",
        derive=pools.n_gpus_per_node,
        also=(
            ("cluster.placement.actor", pools.trainer_devices),
            ("cluster.placement.ref", pools.ref_devices),
            ("cluster.placement.critic", pools.critic_devices),
        ),
    ),
    Rule("trainer.nnodes", "cluster.nnodes", derive=pools.nnodes),
    Rule("rollout.n_gpus_per_node", "cluster.placement.rollout", derive=pools.rollout_devices),
    Rule("rollout.nnodes", "cluster.nnodes", derive=pools.nnodes),
    Rule(
        "actor_rollout_ref.hybrid_engine",
        "cluster.hybrid_engine",
        also=(("trainer.mode", pools.mode),),
    ),
    Rule("actor_rollout_ref.actor.grad_clip", "actor.optim.grad_clip"),
    Rule("actor_rollout_ref.actor.optim.clip_grad", "actor.optim.grad_clip"),
    Rule("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", "actor.optim.lr_warmup_ratio"),
    Rule(
        "actor_rollout_ref.actor.optim.warmup_style",
        "actor.optim.lr_scheduler",
        convert=values.warmup_style,
    ),
    Rule(
        "actor_rollout_ref.actor.optim.lr_scheduler_type",
        "actor.optim.lr_scheduler",
        convert=values.warmup_style,
    ),
    Rule(
        "actor_rollout_ref.actor.optim.lr_decay_style",
        "actor.optim.lr_scheduler",
        convert=values.warmup_style,
    ),
    Rule(
        "actor_rollout_ref.actor.optim.lr_warmup_steps",
        "actor.optim.lr_warmup_steps",
        convert=values.warmup_steps,
    ),
    Rule(
        "critic.optim.lr_warmup_steps", "critic.optim.lr_warmup_steps", convert=values.warmup_steps
    ),
    Rule("critic.grad_clip", "critic.optim.grad_clip"),
    Rule("critic.optim.clip_grad", "critic.optim.grad_clip"),
    Rule("critic.optim.lr_warmup_steps_ratio", "critic.optim.lr_warmup_ratio"),
    Rule("critic.optim.warmup_style", "critic.optim.lr_scheduler", convert=values.warmup_style),
    Rule(
        "critic.optim.lr_scheduler_type", "critic.optim.lr_scheduler", convert=values.warmup_style
    ),
    Rule("critic.optim.lr_decay_style", "critic.optim.lr_scheduler", convert=values.warmup_style),
    # megatron-core OptimizerConfig fields (fp16 loss scaling, ...): the megatron engine's
    Rule(
        "actor_rollout_ref.actor.optim.override_optimizer_config.",
        "actor.megatron.override_optimizer_config.",
    ),
    Rule("critic.optim.override_optimizer_config.", "critic.megatron.override_optimizer_config."),
    Rule(
        "actor_rollout_ref.actor.optim.min_lr",
        "actor.optim.min_lr_ratio",
        derive=lambda flat: values.min_lr_ratio(flat, "actor_rollout_ref.actor.optim."),
    ),
    Rule(
        "critic.optim.min_lr",
        "critic.optim.min_lr_ratio",
        derive=lambda flat: values.min_lr_ratio(flat, "critic.optim."),
    ),
    Rule(
        "critic.model.lora.rank",
        reason="a LoRA critic is not in rl (model.lora_rank is the actor's)",
        convert=lambda v: v or None,
    ),
    Rule(
        "critic.model.lora_rank",
        reason="a LoRA critic is not in rl (model.lora_rank is the actor's)",
        convert=lambda v: v or None,
    ),
    ignore(
        "critic.model.path",
        "the actor's model.path (checked: rl's critic starts from the actor's model)",
    ),
    ignore(
        "critic.model.",
        "the critic loads the actor's model.* in rl (memory and kernel options only)",
    ),
    Rule("actor_rollout_ref.rollout.tensor_model_parallel_size", "rollout.tensor_parallel_size"),
    # verl's switch for batch-invariant (reproducible) rollouts; rl's also makes the trainer
    # batch-invariant, so the rollout's log-probs are the trainer's (true on-policy)
    Rule("actor_rollout_ref.rollout.full_determinism", "rollout.batch_invariant"),
    Rule(
        "actor_rollout_ref.rollout.load_format", "rollout.load_format", convert=values.load_format
    ),
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
    # rl's reference routes as the model does: its routing replay must be off
    *[
        Rule(key, reason=ROUTER_REPLAY, convert=lambda v: None if v in (None, "disabled") else v)
        for key in (
            "actor_rollout_ref.ref.router_replay.mode",
            "actor_rollout_ref.ref.*.router_replay.mode",
        )
    ],
    ignore("actor_rollout_ref.ref.", _REF_LAYOUT),
    *verl_distillation.RULES,  # read only while distillation.enabled (verl_sections)
    # verl <= 0.6 keeps the reward settings at the top level; 0.7+ in reward.* (the legacy
    # keys are moved there first: verl_sections.move_legacy_reward_keys). A disabled reward
    # model's section is never read (verl_sections.SWITCHES).
    Rule("custom_reward_function.", "reward.custom_reward_function."),
    Rule("reward_model.model.path", "reward.reward_model.path"),
    Rule("reward_model.max_length", "reward.reward_model.max_length"),
    Rule("reward_model.micro_batch_size_per_gpu", "reward.reward_model.batch_size"),
    ignore(
        "reward_model.enable",
        "the switch of reward_model.*: on, its model.path is rl's reward.reward_model.path",
    ),
    Rule("reward_model.reward_manager", "reward.reward_manager", convert=values.reward_manager),
    Rule(
        "reward_model.launch_reward_fn_async",
        "reward.launch_reward_fn_async",
        # verl scores in a Ray task of its own then; rl in a pool of one process at least
        also=(
            (
                "reward.num_workers",
                lambda flat: 1 if flat.get("reward_model.launch_reward_fn_async") else None,
            ),
        ),
    ),
    Rule("reward_model.sandbox_fusion.", reason=_SANDBOX_FUSION),
    # the DAPO manager's options in verl <= 0.7.0's reward_model section (read whether or
    # not a reward model scores: verl_sections)
    Rule("reward_model.reward_kwargs.overlong_buffer_cfg.", "reward.overlong_buffer."),
    Rule("reward_model.reward_kwargs.max_resp_len", "reward.overlong_buffer.max_resp_len"),
    *verl_reward_model.LEGACY,
    Rule(
        "reward_model.",
        reason="rl's reward model is a sequence classifier, or a generative model served "
        "by rl's engine (reward.reward_model.*)",
    ),
    Rule("reward.custom_reward_function.", "reward.custom_reward_function."),
    Rule("reward.reward_model.model_path", "reward.reward_model.path"),
    ignore(
        "reward.reward_model.enable",
        "the switch of reward.reward_model.*: on, its model_path is rl's reward.reward_model.path",
    ),
    *verl_reward_model.CURRENT,
    Rule(
        "reward.reward_model.",
        reason="rl's reward model is a sequence classifier, or a generative model served "
        "by rl's engine (reward.reward_model.*)",
    ),
    ignore(
        "reward.num_workers",
        "verl's reward-loop workers: rl scores in the trainer's process unless rl's "
        "reward.num_workers (a process pool) is set",
    ),
    *_reward_manager_rules("reward.reward_manager."),
    Rule("reward.reward_manager.module.", reason=_CUSTOM_MANAGER),
    Rule("reward.sandbox_fusion.", reason=_SANDBOX_FUSION),
    # the DAPO manager's options, as verl's DAPO scripts pass them (+reward_kwargs.*)
    Rule("reward.reward_kwargs.overlong_buffer_cfg.", "reward.overlong_buffer."),
    Rule("reward.reward_kwargs.max_resp_len", "reward.overlong_buffer.max_resp_len"),
    Rule("reward.reward_kwargs.", reason="reward-manager options of verl's dapo/prime managers"),
    Rule("data.gen_batch_size", "data.gen_batch_size", derive=values.gen_batch_size),
    ignore(
        "algorithm.filter_groups.max_inflight_gen_batches",
        "verl 0.9's concurrency of dynamic-sampling batches; rl generates them one at a time",
    ),
    # verl 0.7.0's top-level reward_manager section (0.7.1 moved it to reward.reward_manager)
    *_reward_manager_rules("reward_manager."),
    Rule(
        "reward_manager.",
        reason="rl has one reward manager (a process pool with timeouts, "
        "reward.num_workers / timeout_s)",
    ),
    Rule(
        "data.prompt_key",
        "data.prompt_key",
        # verl reads the ground truth from its layout's reward_model.ground_truth, always
        also=(("data.answer_key", lambda _flat: "reward_model.ground_truth"),),
    ),
    Rule("data.filter_overlong_prompts_workers", "data.filter_num_workers"),
    Rule("data.image_key", "data.image_key"),
    Rule("actor_rollout_ref.actor.freeze_vision_tower", "actor.freeze_vision_tower"),
    Rule("data.reward_fn_key", "data.data_source_key"),
    ignore("actor_rollout_ref.rollout.prompt_length", "rl takes it from data.max_prompt_length"),
    ignore(
        "actor_rollout_ref.rollout.response_length", "rl takes it from data.max_response_length"
    ),
    ignore(
        "actor_rollout_ref.rollout.do_sample",
        "rl samples when rollout.temperature > 0 and decodes greedily at 0",
    ),
    Rule(
        "actor_rollout_ref.actor.policy_loss.loss_mode",
        "actor.policy_loss",
        convert=values.policy_loss,
    ),
    Rule("data.train_files", "data.train_files", convert=as_list),
    Rule("data.val_files", "data.val_files", convert=as_list),
    # verl's FSDP (1) and FSDP2 strategies are rl's one FSDP2 engine
    Rule("actor_rollout_ref.actor.strategy", "actor.strategy", convert=values.fsdp2),
    Rule("critic.strategy", "critic.strategy", convert=values.fsdp2),
    # MoE routing replay: verl's engine sections (megatron, veomni) hold the actor's mode
    Rule("actor_rollout_ref.actor.*.router_replay.mode", "actor.router_replay.mode"),
    Rule("actor_rollout_ref.actor.router_replay.mode", "actor.router_replay.mode"),
    # sections that keep verl's names
    Rule("actor_rollout_ref.actor.", "actor."),
    Rule("actor_rollout_ref.rollout.", "rollout."),
    Rule("actor_rollout_ref.model.", "model."),
    Rule("critic.", "critic."),
    Rule("data.", "data."),
    Rule("algorithm.", "algorithm."),
    Rule("trainer.", "trainer."),
]


def compose(path: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The composed and resolved config of the verl file `path` with `overrides`; an unset
    `???` stays "???" until the sections verl does not read are gone (`SWITCHES`)."""
    return hydra_files.compose(path, overrides, "verl config", allow_missing=True)


def check(values: dict[str, Any]) -> list[str]:
    """What verl refuses about its resource pools (`verl_placement.check`), and a critic
    that would start from another model than the actor: rl's critic starts from
    model.path (with a value head), verl's from critic.model.path."""
    pools.check(dict(flatten(values)))
    verl_distillation.check(values)
    critic = value_at(values, "critic.model.path")
    actor = value_at(values, "actor_rollout_ref.model.path")
    if critic is not None and not _same_path(critic, actor):
        raise ConfigError(
            f"critic.model.path = {critic!r} is not the actor's model ({actor!r}): rl's "
            "critic starts from the actor's model.path with a value head. Pass "
            "critic.model.path=<the actor's path> (or train the critic separately)"
        )
    return []


def _same_path(first: Any, second: Any) -> bool:
    from rl.core.config.paths import user_path

    if first == second:
        return True
    try:
        return user_path(str(first)).resolve() == user_path(str(second)).resolve()
    except (OSError, RuntimeError):
        return False


TABLE = Table("verl", RULES, REASONS, description=DESCRIPTION, documented=DOCUMENTED)
VERL = Dialect(
    name="verl",
    table=TABLE,
    compose=compose,
    check=check,
    # what verl does to its config before reading it, and what it does not read
    rewrites=(move_legacy_reward_keys,),
    switches=tuple(SWITCHES),
    launch=verl_launch.LAUNCH,
    variants=(verl_sft.VARIANT, verl_generation.VARIANT),
)
