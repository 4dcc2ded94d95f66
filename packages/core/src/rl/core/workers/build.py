"""Build a role's engine from the config, through the engine registry (which checks the
engine class against its contract when it loads it)."""

from __future__ import annotations

from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.engine_contract import declares
from rl.core.engines import (
    Preflighted,
    RecordsRoutes,
    ReplaysRoutes,
    RolloutEngine,
    SeesImages,
    TrainEngine,
    TrainsOnImages,
)
from rl.core.micro_batches import MicroBatching, Rows
from rl.core.models.lora import LoraSettings
from rl.core.models.routing_replay import RoutingReplayError
from rl.core.registry import load_engine_class
from rl.core.role_spec import KINDS, RoleSpec, role_section, section_name


def train_engine_class(config: Config, role: str) -> Any:
    """The class of the `role` engine ("actor", "ref", "critic"): `actor.strategy`'s, the
    critic's `critic.strategy`'s."""
    section = section_name(role)
    strategy = role_section(config, role).strategy
    return load_engine_class(strategy, "train", key=f"{section}.strategy")


def role_spec(
    config: Config,
    role: str,
    total_steps: int = 1,
    *,
    settings: Any = None,
    responses_per_prompt: int | None = None,
    temperature: float | None = None,
) -> RoleSpec:
    """What the `role` engine ("actor", "ref", "critic") is built from, out of the config:
    its section's keys (`settings` in their place: SFT's), mini-batches of
    `ppo_mini_batch_size` × `responses_per_prompt` rows (`rollout.n` by default), log-probs
    at `rollout.temperature` unless `temperature` is given."""
    section = role_section(config, role)  # the role's own keys (SFT's `settings` replace some)
    if settings is None:
        settings = section
    kind = KINDS[role]
    rows = Rows.of(config, settings, responses_per_prompt)
    train, forward = micro_batching(config, role, settings)
    return RoleSpec(
        role=role,  # type: ignore[arg-type]
        model=config.model,
        device=config.trainer.device,
        dtype=config.model.dtype,
        seed=config.trainer.seed,
        optim=settings.optim if kind.trains else None,
        total_steps=total_steps,
        mini_batch_size=rows.rows_per_mini,
        micro_batch_size=settings.ppo_micro_batch_size_per_gpu,
        ppo_epochs=settings.ppo_epochs,
        shuffle=getattr(settings, "shuffle", False),
        temperature=config.rollout.temperature if temperature is None else temperature,
        use_fused_kernels=getattr(settings, "use_fused_kernels", None),
        use_remove_padding=settings.use_remove_padding,
        use_prefix_grouper=settings.use_prefix_grouper,
        train_batching=train,
        forward_batching=forward,
        sequence_parallel_size=section.ulysses_sequence_parallel_size,
        router_replay=config.actor.router_replay.mode,
        lora=LoraSettings.of(config.model) if kind.policy else None,
        lora_save_merged=config.model.lora_save_merged,
        freeze_vision_tower=kind.policy and getattr(settings, "freeze_vision_tower", False),
        backends=dict(section.backends),
        batch_invariant=config.rollout.batch_invariant and not kind.values,
    )


def micro_batching(config: Config, role: str, section: Any) -> tuple[MicroBatching, MicroBatching]:
    """(updates, forward-only passes) micro-batching of `role` from its config keys (verl's
    names: `ppo_max_token_len_per_gpu`, `log_prob_max_token_len_per_gpu`, ...)."""
    if role == "critic":
        critic = config.critic
        rows = critic.ppo_micro_batch_size_per_gpu
        if not critic.use_dynamic_bsz:
            return MicroBatching(rows), MicroBatching(rows)
        return (
            MicroBatching(
                rows, critic.ppo_max_token_len_per_gpu, "critic.ppo_max_token_len_per_gpu"
            ),
            MicroBatching(
                rows, critic.forward_max_token_len_per_gpu, "critic.forward_max_token_len_per_gpu"
            ),
        )
    log_prob = config.ref if role == "ref" else config.rollout
    prefix = "ref" if role == "ref" else "rollout"
    forward = MicroBatching(
        log_prob.log_prob_micro_batch_size_per_gpu,
        log_prob.log_prob_max_token_len_per_gpu if log_prob.log_prob_use_dynamic_bsz else None,
        f"{prefix}.log_prob_max_token_len_per_gpu",
    )
    budget = section.ppo_max_token_len_per_gpu if section.use_dynamic_bsz else None
    train = MicroBatching(
        section.ppo_micro_batch_size_per_gpu, budget, "actor.ppo_max_token_len_per_gpu"
    )
    return train, forward


def build_train_engine(config: Config, role: str, tokenizer: Any, total_steps: int) -> TrainEngine:
    """An actor/ref/critic engine of `actor.strategy` (the critic's: `critic.strategy`); the
    distillation teacher is a reference engine of its own model (`teacher.teacher_engine`)."""
    if role == "actor":
        _check_router_replay(config, train_engine_class(config, role))
    if role == "teacher":
        from rl.core.workers.teacher import teacher_config

        config, role = teacher_config(config, tokenizer), "ref"
    spec = role_spec(config, role, total_steps)
    engine_class = train_engine_class(config, role)
    key = "critic.strategy" if role == "critic" else "actor.strategy"
    _check_images(config, spec.model, tokenizer, engine_class, TrainsOnImages, key)
    engine: TrainEngine = engine_class.from_spec(spec, tokenizer)
    return engine


def _check_images(
    config: Config, model: Any, tokenizer: Any, engine_class: Any, ability: type, key: str
) -> None:
    """Refuse, by name, an engine that would drop a vision-language model's images (the
    built-in models read text only)."""
    from rl.core.models import load_model_config
    from rl.core.models.vision_models import is_vision_language

    if declares(engine_class, ability) or str(model.path).startswith("builtin:"):
        return
    if not is_vision_language(load_model_config(model, tokenizer)):
        return
    section = {"rollout.name": config.rollout.name, "critic.strategy": config.critic.strategy}
    value = section.get(key, config.actor.strategy)
    raise ConfigError(
        f"{key} = {value} with the vision-language model {model.path}: that engine "
        "does not show the model the prompts' images, so the policy would train blind. "
        "The hf rollout engine and the fsdp train engine do (rl's vllm engine does not "
        "pass images yet; vLLM's CPU build cannot load Qwen2-VL models without torchvision)"
    )


def preflight_train_engine(config: Config, role: str) -> Any:
    """The `role` train engine's own checks of its settings (a parallel layout against the
    model's shapes and the world) when its class declares `Preflighted`; returns the class."""
    engine_class = train_engine_class(config, role)
    if declares(engine_class, Preflighted):
        world = 1
        if config.trainer.launcher == "ray":
            from rl.core.workers.launch import ray_world

            world = ray_world(config)[0]
        engine_class.preflight(role_spec(config, role), world)
    return engine_class


def build_rollout_engine(config: Config, tokenizer: Any) -> RolloutEngine:
    """The rollout engine `rollout.name`."""
    engine_class = load_engine_class(config.rollout.name, "rollout", key="rollout.name")
    _check_images(config, config.model, tokenizer, engine_class, SeesImages, "rollout.name")
    records = config.actor.router_replay.mode == "R3"
    if records and not declares(engine_class, RecordsRoutes):
        raise RoutingReplayError(
            f"actor.router_replay.mode=R3 replays the routes the rollout engine records; "
            f"rollout.name={config.rollout.name} does not record them (rollout.name=hf does; "
            "or mode R2 records them in the old-log-prob pass)"
        )
    engine: RolloutEngine = engine_class.from_config(config, tokenizer)
    if records:
        engine.record_routes(True)  # type: ignore[attr-defined]
    return engine


def _check_router_replay(config: Config, engine_class: Any) -> None:
    """Refuse, by name, a routing replay the actor's engine or the algorithm cannot run."""
    mode = config.actor.router_replay.mode
    if mode == "disabled":
        return
    if not declares(engine_class, ReplaysRoutes):
        raise RoutingReplayError(
            f"actor.router_replay.mode={mode}: actor.strategy={config.actor.strategy} does "
            "not replay MoE routes (actor.strategy=fsdp does)"
        )
    if mode == "R3" and (config.rollout.multi_turn.enable or config.trainer.partial_rollout):
        key = "rollout.multi_turn.enable" if config.rollout.multi_turn.enable else "trainer."
        key += "" if config.rollout.multi_turn.enable else "partial_rollout"
        raise RoutingReplayError(
            f"actor.router_replay.mode=R3 with {key}=true: those rollouts are put together "
            "from several generate calls, and their routes are not carried yet (use R2)"
        )
    if mode == "R2" and config.algorithm.rollout_correction.bypass_mode:
        raise RoutingReplayError(
            "actor.router_replay.mode=R2 records the routes in the old-log-prob pass, which "
            "algorithm.rollout_correction.bypass_mode=true skips (as verl refuses it)"
        )
