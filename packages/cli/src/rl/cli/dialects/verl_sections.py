"""How verl reads its own config before any key means anything: which sections a switch
turns off (`SWITCHES`), and the legacy reward keys verl 0.7+ moves into `reward.*`
(`move_legacy_reward_keys`).

verl's `ppo_trainer.yaml` holds the defaults of every role and feature. verl builds a
critic only for GAE (or `critic.enable`), a reference model only for a KL loss or KL
penalty, a reward model only when it is enabled, and ignores profilers, LoRA at rank 0 and
the rest of a disabled feature. Those sections are not read here either, so their
mandatory `???` keys (`reward_model.rollout.name`), paths that need not exist
(`~/models/FsfairX-LLaMA3-RM-v0.1`) and values never change an rl run.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from rl.cli.dialects.switches import Switch, Values, flag, own_flag, truthy, value_at


def _needs_critic(values: Values, _section: str) -> bool:
    """verl's `need_critic`: `critic.enable` when set, else whether the estimator is GAE."""
    enable = value_at(values, "critic.enable")
    if enable is not None:
        return truthy(enable)
    return value_at(values, "algorithm.adv_estimator") == "gae"


def _needs_reference(values: Values, _section: str) -> bool:
    """verl's `need_reference_policy`: a KL loss or a KL penalty in the reward."""
    return truthy(value_at(values, "actor_rollout_ref.actor.use_kl_loss")) or truthy(
        value_at(values, "algorithm.use_kl_in_reward")
    )


def _lora_on(values: Values, _section: str) -> bool:
    return any(
        (value_at(values, key) or 0) > 0
        for key in ("actor_rollout_ref.model.lora_rank", "actor_rollout_ref.model.lora.rank")
    )


def _critic_lora_on(values: Values, _section: str) -> bool:
    return any(
        (value_at(values, key) or 0) > 0
        for key in ("critic.model.lora_rank", "critic.model.lora.rank")
    )


def _global_profiler_on(values: Values, _section: str) -> bool:
    return value_at(values, "global_profiler.tool") is not None


def _loss_mode(*modes: str) -> Callable[[Values, str], bool]:
    """On while verl's policy loss is one of `modes` (its parameters mean nothing else)."""
    return lambda values, _section: (
        value_at(values, "actor_rollout_ref.actor.policy_loss.loss_mode") in modes
    )


def _trainer_mode(mode: str) -> Callable[[Values, str], bool]:
    return lambda values, _section: value_at(values, "trainer.v1.trainer_mode") == mode


def _sandbox_url(values: Values, section: str) -> bool:
    return value_at(values, section + "url") is not None


_LORA_KEYS = ("lora_alpha", "target_modules", "exclude_modules", "lora_adapter_path", "lora.")
_POLICY_LOSS = "actor_rollout_ref.actor.policy_loss."

SWITCHES: list[Switch] = [
    # verl <= 0.6: the reward model's section; the reward manager and its options are read
    # whether or not a model scores (rule-based scoring goes through them)
    Switch(
        ("reward_model.",),
        "reward_model.enable",
        flag("reward_model.enable"),
        always_read=(
            "enable",
            "reward_manager",
            "launch_reward_fn_async",
            "reward_kwargs",
            "sandbox_fusion",
        ),
    ),
    # verl >= 0.7
    Switch(
        ("reward.reward_model.",), "reward.reward_model.enable", own_flag("enable"), ("enable",)
    ),
    Switch(
        ("critic.",),
        "the critic (critic.enable, or algorithm.adv_estimator=gae when it is null)",
        _needs_critic,
        ("enable",),
    ),
    Switch(
        ("actor_rollout_ref.ref.",),
        "the reference model (actor_rollout_ref.actor.use_kl_loss or algorithm.use_kl_in_reward)",
        _needs_reference,
    ),
    Switch(
        ("algorithm.kl_ctrl.",), "algorithm.use_kl_in_reward", flag("algorithm.use_kl_in_reward")
    ),
    Switch(("algorithm.pf_ppo.",), "algorithm.use_pf_ppo", flag("algorithm.use_pf_ppo")),
    Switch(
        ("actor_rollout_ref.rollout.multi_turn.",),
        "actor_rollout_ref.rollout.multi_turn.enable",
        own_flag("enable"),
        ("enable",),
    ),
    Switch(
        ("algorithm.filter_groups.",),
        "algorithm.filter_groups.enable",
        own_flag("enable"),
        ("enable",),
    ),
    Switch(("distillation.",), "distillation.enabled", own_flag("enabled"), ("enabled",)),
    Switch(("transfer_queue.",), "transfer_queue.enable", own_flag("enable"), ("enable",)),
    Switch(("skip.*.",), "each skip.<phase>.enable", own_flag("enable"), ("enable",)),
    Switch(
        tuple(f"actor_rollout_ref.model.{key}" for key in _LORA_KEYS),
        "LoRA (actor_rollout_ref.model.lora_rank > 0)",
        _lora_on,
    ),
    Switch(
        tuple(f"critic.model.{key}" for key in _LORA_KEYS),
        "the critic's LoRA (critic.model.lora_rank > 0)",
        _critic_lora_on,
    ),
    Switch(
        tuple(_POLICY_LOSS + key for key in ("clip_cov_ratio", "clip_cov_lb", "clip_cov_ub")),
        "policy_loss.loss_mode=clip_cov",
        _loss_mode("clip_cov"),
    ),
    Switch(
        tuple(_POLICY_LOSS + key for key in ("kl_cov_ratio", "ppo_kl_coef")),
        "policy_loss.loss_mode=kl_cov",
        _loss_mode("kl_cov"),
    ),
    Switch(("actor_rollout_ref.actor.tau_*",), "policy_loss.loss_mode=sapo", _loss_mode("sapo")),
    Switch(
        ("algorithm.rollout_correction.loss_type",),
        "algorithm.rollout_correction.bypass_mode",
        flag("algorithm.rollout_correction.bypass_mode"),
    ),
    # verl 0.6.0's rollout importance sampling: rollout_is_threshold null turns it off
    Switch(
        tuple(
            f"algorithm.rollout_is{key}"
            for key in ("", "_threshold_lower", "_level", "_mode", "_veto_threshold")
        ),
        "algorithm.rollout_is_threshold (verl 0.6.0)",
        lambda values, _section: value_at(values, "algorithm.rollout_is_threshold") is not None,
    ),
    Switch(
        ("data.continuous_token.",), "data.continuous_token.enable", own_flag("enable"), ("enable",)
    ),
    # a reward-manager class from a file: verl reads module.* only for source=importlib
    Switch(
        ("reward_manager.module.", "reward.reward_manager.module."),
        "reward_manager.source=importlib",
        lambda values, section: (
            value_at(values, section[: -len("module.")] + "source") == "importlib"
        ),
    ),
    # megatron's optimizer: the muon_* keys are read only when the optimizer is muon
    Switch(
        ("**.optim.muon_*",),
        "optim.optimizer=muon",
        lambda values, section: (
            "muon" in str(value_at(values, section.rsplit(".", 1)[0] + ".optimizer") or "").lower()
        ),
    ),
    Switch(
        ("**.megatron.pad_to_length_bucket",),
        "megatron.pad_to_length",
        lambda values, section: truthy(
            value_at(values, section.rsplit(".", 1)[0] + ".pad_to_length")
        ),
    ),
    Switch(("**.sandbox_fusion.",), "each sandbox_fusion.url", _sandbox_url, ("url",)),
    Switch(
        ("trainer.v1.colocate_async.",),
        "trainer.v1.trainer_mode=colocate_async",
        _trainer_mode("colocate_async"),
    ),
    Switch(
        ("trainer.v1.separate_async.",),
        "trainer.v1.trainer_mode=separate_async",
        _trainer_mode("separate_async"),
    ),
    Switch(
        ("trainer.v1.sampler.", "trainer.v1.sync."),
        "verl's v1 trainer loop (trainer.use_v1)",
        lambda values, _section: False,  # rl's own loop samples; see trainer.v1.trainer_mode
    ),
    # verl <= 0.5's profilers: nsight and NPU options are read for trainer.profile_steps,
    # megatron's per-role profile section for its use_profile
    Switch(
        (
            "trainer.controller_nsight_options.",
            "trainer.worker_nsight_options.",
            "trainer.npu_profile.",
        ),
        "trainer.profile_steps",
        flag("trainer.profile_steps"),
    ),
    Switch(("**.profile.",), "each profile.use_profile", own_flag("use_profile"), ("use_profile",)),
    Switch(("global_profiler.",), "global_profiler.tool", _global_profiler_on, ("tool",)),
    Switch(("**.profiler.",), "each profiler's enable", own_flag("enable"), ("enable",)),
    Switch(("**.qat.",), "each qat.enable", own_flag("enable"), ("enable",)),
    Switch(("**.mtp.",), "each mtp.enable", own_flag("enable"), ("enable",)),
    Switch(("**.tiled_mlp.",), "each tiled_mlp.enabled", own_flag("enabled"), ("enabled",)),
    Switch(
        ("**.disaggregation.",), "each disaggregation.enabled", own_flag("enabled"), ("enabled",)
    ),
    Switch(("**.prometheus.",), "each prometheus.enable", own_flag("enable"), ("enable",)),
]


def move_legacy_reward_keys(values: MutableMapping[str, Any]) -> list[str]:
    """verl 0.7+ keeps the reward settings in `reward.*`; the old top-level keys
    (`reward_model.*`, `custom_reward_function.*`, `sandbox_fusion.*`, null by default)
    still work there, moved as verl 0.7's `migrate_legacy_reward_impl` moves them (verl
    0.9 dropped the move and ignores them: rl keeps honouring them, and says so). Files of
    verl <= 0.6 have no `reward` section and are left as they are."""
    reward = values.get("reward")
    if not isinstance(reward, MutableMapping) or "reward_model" not in reward:
        return []
    moved: list[str] = []

    def move(old: str, new: str) -> None:
        value = value_at(values, old)
        if isinstance(value, MutableMapping):
            value = {k: v for k, v in value.items() if v is not None}
        if value is None or value == {}:
            return
        node: Any = values
        *parents, last = new.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        if isinstance(value, MutableMapping) and isinstance(node.get(last), MutableMapping):
            node[last].update({k: v for k, v in value.items() if v is not None})
        else:
            node[last] = value
        moved.append(f"{old} -> {new}")

    legacy = values.get("reward_model") or {}
    move("reward_model.num_workers", "reward.num_workers")
    move("reward_model.reward_manager", "reward.reward_manager.name")
    move("reward_model.reward_loop_source", "reward.reward_manager.source")
    move("reward_model.reward_loop_module_path", "reward.reward_manager.module.path")
    move("reward_model.reward_loop_class_name", "reward.reward_manager.module.name")
    if any(v is not None for v in (values.get("custom_reward_function") or {}).values()):
        move("custom_reward_function", "reward.custom_reward_function")
    for key in ("enable", "enable_resource_pool", "n_gpus_per_node", "nnodes"):
        move(f"reward_model.{key}", f"reward.reward_model.{key}")
    move("reward_model.model.path", "reward.reward_model.model_path")
    move("reward_model.reward_kwargs", "reward.reward_kwargs")
    if isinstance(legacy.get("rollout"), MutableMapping):
        move("reward_model.rollout", "reward.reward_model.rollout")
    if any(v is not None for v in (values.get("sandbox_fusion") or {}).values()):
        move("sandbox_fusion", "reward.sandbox_fusion")
    for section in ("reward_model", "custom_reward_function", "sandbox_fusion"):
        values.pop(section, None)
    if not moved:
        return []
    return ["legacy reward keys moved into reward.* as verl 0.7+ reads them: " + ", ".join(moved)]
