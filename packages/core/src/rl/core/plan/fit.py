"""The fit: each device's estimated peak against its memory, and the KV cache a
preallocating rollout engine leaves against one sequence; each refusal names the part
that dominates and the key that shrinks it. `check_plan` runs every refusal of the plan
(the preflight of `rl train` calls it)."""

from __future__ import annotations

from rl.core.config import Config, ConfigError
from rl.core.placement.ranks import format_ranks
from rl.core.plan.build import DeviceGroup, Plan, check_divisions, make_plan
from rl.core.plan.device_memory import GIB, kv_cache_space
from rl.core.plan.memory import DTYPE_BYTES, kv_cache_bytes
from rl.core.plan.model_dims import NoModelConfig
from rl.core.role_spec import KINDS, section_name


def check_plan(config: Config) -> Plan | None:
    """Refuse (ConfigError naming the key) a batch split that cannot be even, a rollout TP
    that does not divide its devices, or a device the estimate does not fit; the plan, or
    None when the model's config.json is not here to estimate from (a Hub id)."""
    check_divisions(make_plan(config, memory=False))
    try:
        plan = make_plan(config)
    except NoModelConfig:
        return None  # a Hub id: the model loader reports a bad path by name
    check_fit(config, plan)
    return plan


def check_fit(config: Config, plan: Plan) -> None:
    """Refuse a device whose estimated peak is above its memory, and a preallocated KV
    cache that cannot hold one sequence, naming the key to change."""
    if plan.device_bytes is None or plan.dims is None:
        return
    if config.trainer.device == "cpu":
        _check_ram(config, plan)
        return
    for group in plan.devices:
        if group.peak > plan.device_bytes:
            raise ConfigError(_too_big(config, plan, group))
    _check_kv(config, plan)


def _check_ram(config: Config, plan: Plan) -> None:
    """On CPU every worker process shares this machine's RAM."""
    workers = sum(len(group.devices) for group in plan.devices)
    total = sum(group.peak * len(group.devices) for group in plan.devices)
    if total > (plan.device_bytes or 0):
        worst = max(plan.devices, key=lambda group: group.peak)
        shared = {"workers": workers, "total": total} if workers > 1 else {}
        raise ConfigError(_too_big(config, plan, worst, **shared))


def _check_kv(config: Config, plan: Plan) -> None:
    if plan.dims is None:
        return
    rollout = config.rollout
    memory = next(g.phases["rollout"] for g in plan.devices if "rollout" in g.phases)
    space = kv_cache_space(config, plan.device_bytes)
    if space is None:
        return
    data = config.data
    seq = rollout.max_model_len or data.max_prompt_length + data.max_response_length
    layer = plan.dims.layer()
    b = DTYPE_BYTES[config.model.dtype if rollout.dtype == "auto" else rollout.dtype]
    one = kv_cache_bytes(layer, seq, b, rollout.tensor_parallel_size)
    if memory.kv_cache < one:
        raise ConfigError(
            f"rollout.gpu_memory_utilization = {rollout.gpu_memory_utilization}: "
            f"{gib(space)} GiB of {gib(plan.device_bytes or 0)} leaves {gib(memory.kv_cache)} "
            f"GiB for the KV cache after {gib(memory.parameters)} GiB of weights, less than "
            f"one sequence of {seq} tokens needs ({gib(one)} GiB): raise "
            "rollout.gpu_memory_utilization or rollout.tensor_parallel_size"
        )


def gib(value: int) -> str:
    return f"{value / GIB:.2f}"


# the largest part of a role's memory -> the keys that shrink it ({shard}: the engine's)
_FIXES = {
    "parameters": "{shard}, or model.dtype=bfloat16 if it is float32",
    "gradients": "{shard}",
    "optimizer": "{shard}",
    "activations": "lower {owner}.ppo_micro_batch_size_per_gpu (or "
    "ppo_max_token_len_per_gpu with use_dynamic_bsz), or model.gradient_checkpointing=true",
    "logits": "actor.use_fused_kernels=true (the fused log-prob never builds the logits), or "
    "lower actor.ppo_micro_batch_size_per_gpu",
    "kv_cache": "lower rollout.gpu_memory_utilization or rollout.max_num_seqs",
}
_SHARD = {
    "fsdp": "more devices to shard over (cluster.n_gpus_per_node with trainer.launcher=ray), "
    "or {owner}.fsdp_config.offload_policy=true (FSDP2 keeps the shards and the optimizer "
    "on CPU)",
    "megatron": "a larger {owner}.megatron.tensor_model_parallel_size or "
    "pipeline_model_parallel_size, or more devices (cluster.n_gpus_per_node)",
}
_PARTS = ("parameters", "gradients", "optimizer", "activations", "logits", "kv_cache")


def _too_big(
    config: Config, plan: Plan, group: DeviceGroup, *, workers: int = 0, total: int = 0
) -> str:
    """The refusal: who needs how much where, of what, and the key that shrinks the most."""
    role = group.peak_role
    memory = group.phases[role]
    parts = ", ".join(
        f"{name} {gib(getattr(memory, name))}" for name in _PARTS if getattr(memory, name)
    )
    has = f"{gib(plan.device_bytes or 0)} GiB ({plan.device_source})"
    fix = _fix(config, group)
    if workers:  # trainer.device=cpu: the worker processes share the machine's memory
        return (
            f"the {workers} worker process(es) need ~{gib(total)} GiB together on "
            f"trainer.device=cpu, the largest {role} on device(s) {format_ranks(group.devices)} "
            f"~{gib(group.peak)} GiB ({parts}), but this machine has {has}: {fix} "
            "(`rl plan` shows the estimate)"
        )
    return (
        f"{role} needs ~{gib(group.peak)} GiB on device(s) {format_ranks(group.devices)} ({parts}; "
        f"plus what colocated roles keep) but a device has {has}: {fix} "
        "(`rl plan` shows the estimate)"
    )


def _fix(config: Config, group: DeviceGroup) -> str:
    """The keys that shrink the largest part of the running role's memory."""
    role = group.peak_role
    memory = group.phases[role]
    part = max(_PARTS, key=lambda name: getattr(memory, name))
    owner = section_name(role)
    if not KINDS[role].trains:  # the reference: a forward pass, no optimizer
        return "lower ref.log_prob_micro_batch_size_per_gpu, or actor.use_fused_kernels=true"
    strategy = "megatron" if getattr(config, owner).strategy == "megatron" else "fsdp"
    fix = _FIXES[part].format(owner=owner, shard=_SHARD[strategy].format(owner=owner))
    kept = [r for r in group.phases if r != role and group.phases[r].resident]
    if "rollout" in kept and not config.rollout.free_cache_engine:
        fix += "; or rollout.free_cache_engine=true (the rollout keeps its cache meanwhile)"
    return fix
