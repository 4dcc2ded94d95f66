"""`make_plan(config)`: placement, batch arithmetic and memory estimate of a run, before any
worker starts; `check_divisions(plan)` refuses a split that cannot be even (the fit is
`rl.core.plan.fit`'s).

Nothing here loads weights: the model's shapes come from its config.json (`model_dims`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rl.core.config import Config
from rl.core.config.schema import cpu_vllm_kv_rows, fused_log_probs
from rl.core.micro_batches import Rows
from rl.core.plan.batches import (
    RolloutBatches,
    TrainBatches,
    check_batches,
    check_rollout,
)
from rl.core.plan.device_memory import device_memory, kv_cache_space
from rl.core.plan.layout import Layout, layout
from rl.core.plan.memory import (
    DTYPE_BYTES,
    Layer,
    RoleMemory,
    Sharding,
    activation_bytes,
    device_peak,
    forward_only_bytes,
    kv_cache_bytes,
    logits_bytes,
    state_bytes,
)
from rl.core.plan.model_dims import ModelDims, ParameterCounts, model_dims, parameter_counts
from rl.core.role_spec import KINDS, role_section, section_name


@dataclass(frozen=True)
class DeviceGroup:
    devices: tuple[int, ...]
    roles: tuple[str, ...]
    phases: dict[str, RoleMemory]
    peak: int
    peak_role: str


@dataclass(frozen=True)
class Plan:
    layout: Layout
    train: dict[str, TrainBatches]  # actor (and critic)
    rollout: RolloutBatches
    dims: ModelDims | None = None
    params: ParameterCounts | None = None
    devices: tuple[DeviceGroup, ...] = ()
    device_bytes: int | None = None
    device_source: str = ""


def make_plan(config: Config, *, memory: bool = True) -> Plan:
    """The plan of `config` (a ConfigError for what cannot divide; the fit is `check_fit`'s).
    `memory=False` skips the estimate (no config.json to read)."""
    from rl.core.workers.launch import cluster_placement, needed_roles, replica_size

    roles = needed_roles(config)
    where = layout(config, cluster_placement(config), roles)
    train: dict[str, TrainBatches] = {
        role: _train_batches(config, role, where.train_ranks, replica_size(config, role))
        for role in ("actor", "critic")
        if role in roles
    }
    rollout = RolloutBatches(
        where.rollout_devices,
        config.rollout.tensor_parallel_size,
        generation_prompts(config),
        config.rollout.n,
        config.rollout.data_rerank,
    )
    plan = Plan(where, train, rollout)
    if not memory:
        return plan
    dims = model_dims(config)
    return _with_memory(config, plan, dims)


def generation_prompts(config: Config) -> int:
    """Prompts one generation draws: `data.gen_batch_size` under dynamic sampling
    (`algorithm.filter_groups.enable`: each draw generates that many, perhaps several draws
    a step), else `data.train_batch_size`."""
    data = config.data
    if config.algorithm.filter_groups.enable and data.gen_batch_size:
        return data.gen_batch_size
    return data.train_batch_size


def check_divisions(plan: Plan) -> None:
    """Refuse a batch split that cannot be even or a rollout TP that does not divide the
    rollout's devices (a ConfigError naming the key)."""
    for train in plan.train.values():
        check_batches(train)
    check_rollout(plan.rollout)


def _train_batches(config: Config, role: str, ranks: int, per_copy: int) -> TrainBatches:
    section: Any = role_section(config, role)
    data = config.data
    rows = Rows.of(config, section)
    return TrainBatches(
        rows.prompts,
        rows.n,
        rows.mini_batch_size,
        role=role,
        ranks=ranks,
        ranks_per_copy=per_copy,
        micro_batch_size=section.ppo_micro_batch_size_per_gpu,
        epochs=section.ppo_epochs,
        seq_len=data.max_prompt_length + data.max_response_length,
        response_len=data.max_response_length,
        token_budget=section.ppo_max_token_len_per_gpu if section.use_dynamic_bsz else None,
    )


def _with_memory(config: Config, plan: Plan, dims: ModelDims) -> Plan:
    params = parameter_counts(dims)
    device_bytes, source = device_memory(config)
    phases = _role_memory(config, plan, dims, params, device_bytes)
    groups = []
    for devices, roles in plan.layout.groups:
        on_device = {role: phases[role] for role in roles if role in phases}
        peak, who = device_peak(on_device)
        groups.append(DeviceGroup(devices, roles, on_device, peak, who))
    return replace(
        plan,
        dims=dims,
        params=params,
        devices=tuple(groups),
        device_bytes=device_bytes,
        device_source=source,
    )


def _role_memory(
    config: Config,
    plan: Plan,
    dims: ModelDims,
    params: ParameterCounts,
    device_bytes: int | None,
) -> dict[str, RoleMemory]:
    layer = dims.layer()
    memory = {"actor": _train_memory(config, plan, "actor", layer, params)}
    if "ref" in plan.layout.roles:
        memory["ref"] = _ref_memory(config, plan, layer, params)
    if "critic" in plan.train:
        memory["critic"] = _train_memory(config, plan, "critic", layer, params)
    memory["rollout"] = _rollout_memory(config, plan, layer, params, device_bytes)
    return memory


def _backend(config: Config, role: str, name: str) -> Any:
    section: Any = role_section(config, role)
    return section.backends.get(name)


def _sharding(config: Config, role: str, ranks: int, params: ParameterCounts) -> Sharding:
    section: Any = role_section(config, role)
    if section.strategy == "megatron":
        m = _backend(config, role, "megatron")
        tp, pp = m.tensor_model_parallel_size, m.pipeline_model_parallel_size
        dp = max(1, ranks // (tp * pp * m.context_parallel_size))
        return Sharding("megatron", tp * pp, dp, bool(m.use_distributed_optimizer))
    fsdp = _backend(config, role, "fsdp_config")
    size = getattr(fsdp, "fsdp_size", -1)
    shards = ranks if size in (-1, None) else min(size, ranks)
    gathered = params.embedding + params.lm_head + 2 * params.per_layer if shards > 1 else 0
    return Sharding("fsdp", shards, ranks, gathered=gathered)


def _sequence_split(config: Config, role: str) -> int:
    """Ranks one row's tokens are split over: Ulysses, or megatron's TP × CP (sequence
    parallel)."""
    section: Any = role_section(config, role)
    if section.strategy == "megatron":
        m = _backend(config, role, "megatron")
        return m.tensor_model_parallel_size * m.context_parallel_size
    return max(1, section.ulysses_sequence_parallel_size)


def _offloads(config: Config, role: str) -> tuple[bool, bool]:
    """(parameters, optimizer) moved off the device between phases."""
    owner = section_name(role)
    section: Any = getattr(config, owner)
    name = "megatron" if section.strategy == "megatron" else "fsdp_config"
    backend = _backend(config, owner, name)
    policy = bool(getattr(backend, "offload_policy", False))
    return (
        policy or bool(getattr(backend, "param_offload", False)),
        policy or bool(getattr(backend, "optimizer_offload", False)),
    )


def _offload_policy(config: Config, role: str) -> bool:
    section: Any = role_section(config, role)
    if section.strategy == "megatron":
        return False
    return bool(getattr(_backend(config, role, "fsdp_config"), "offload_policy", False))


def _fused(config: Config, vocab: int) -> bool:
    if config.actor.strategy == "megatron":
        return True
    return fused_log_probs(config.actor.use_fused_kernels, config.trainer.device, vocab)


def _train_memory(
    config: Config, plan: Plan, role: str, layer: Layer, params: ParameterCounts
) -> RoleMemory:
    b = DTYPE_BYTES[config.model.dtype]
    values = KINDS[role].values  # the critic: a value head, no vocabulary logits
    total = params.critic_total if values else params.total
    sharding = _sharding(config, role, plan.layout.train_ranks, params)
    weights, grads, optim = state_bytes(total, b, sharding, with_optimizer=True)
    if _offload_policy(config, role) and config.trainer.device == "cuda":
        # FSDP2's CPUOffloadPolicy: shards, gradients and optimizer on CPU, layers moved in
        weights = b * (params.embedding + params.lm_head + 2 * params.per_layer)
        grads = optim = 0
    batches = plan.train[role]
    split = _sequence_split(config, role)
    tokens = -(-batches.micro_tokens // split)
    acts = activation_bytes(layer, tokens, b, config.model.gradient_checkpointing)
    logits = 0
    if not values:
        response = -(-batches.micro_response_tokens // split)
        logits = logits_bytes(
            layer.vocab, response, fused=_fused(config, layer.vocab), training=True
        )
    off_params, off_optim = _offloads(config, role)
    sharded = weights - b * sharding.gathered  # the gathered layers are freed after use
    if config.trainer.device == "cpu":  # offloading to CPU frees nothing there
        off_params = off_optim = False
    resident = (0 if off_params else sharded) + (0 if off_optim else optim)
    return RoleMemory(role, weights, grads, optim, acts, logits, resident=resident)


def _ref_memory(config: Config, plan: Plan, layer: Layer, params: ParameterCounts) -> RoleMemory:
    b = DTYPE_BYTES[config.model.dtype]
    sharding = _sharding(config, "actor", plan.layout.train_ranks, params)
    weights, _, _ = state_bytes(params.total, b, sharding, with_optimizer=False)
    ref, data = config.ref, config.data
    seq = data.max_prompt_length + data.max_response_length
    if ref.log_prob_use_dynamic_bsz:
        tokens, response = ref.log_prob_max_token_len_per_gpu, ref.log_prob_max_token_len_per_gpu
    else:
        rows = min(ref.log_prob_micro_batch_size_per_gpu, plan.train["actor"].rows_per_rank)
        tokens, response = rows * seq, rows * data.max_response_length
    split = _sequence_split(config, "actor")
    acts = forward_only_bytes(layer, -(-tokens // split), b)
    logits = logits_bytes(
        layer.vocab, -(-response // split), fused=_fused(config, layer.vocab), training=False
    )
    off_params, _ = _offloads(config, "ref")
    sharded = weights - b * sharding.gathered
    resident = 0 if off_params and config.trainer.device == "cuda" else sharded
    return RoleMemory("ref", weights, 0, 0, acts, logits, resident=resident)


def _rollout_memory(
    config: Config, plan: Plan, layer: Layer, params: ParameterCounts, device_bytes: int | None
) -> RoleMemory:
    rollout, data = config.rollout, config.data
    b = DTYPE_BYTES[config.model.dtype if rollout.dtype == "auto" else rollout.dtype]
    tp = rollout.tensor_parallel_size
    weights = b * params.total // tp
    seq = rollout.max_model_len or data.max_prompt_length + data.max_response_length
    in_flight = _sequences_in_flight(config, plan.rollout.samples_per_replica) * seq
    space = kv_cache_space(config, device_bytes)
    if space is not None and config.trainer.device == "cuda":
        kv = max(0, space - weights)  # vLLM / SGLang claim the fraction whole
    elif space is not None:
        kv = space
    elif rollout.name == "vllm" and config.trainer.device == "cpu":
        # rl.rollout's vLLM on CPU reserves room for one generation's full-length rows
        kv = max(kv_cache_bytes(layer, cpu_vllm_kv_rows(config) * seq, b, tp), VLLM_CPU_MIN_KV)
    else:
        kv = kv_cache_bytes(layer, in_flight, b, tp)
    peak = RoleMemory("rollout", weights, kv_cache=kv)
    sleeps = rollout.free_cache_engine and config.trainer.device == "cuda"
    return RoleMemory("rollout", weights, kv_cache=kv, resident=0 if sleeps else peak.peak)


HF_MAX_BATCH = 256  # rl.rollout.hf.HFRolloutEngine's max_batch_size: rows per generate chunk
VLLM_CPU_MIN_KV = 64 << 20  # rl.rollout.vllm.options.engine_args: the CPU KV cache's floor


def _sequences_in_flight(config: Config, samples: int) -> int:
    """Sequences a replica generates at once: vLLM / SGLang up to rollout.max_num_seqs, the
    HF engine in chunks of whole groups of at most HF_MAX_BATCH rows."""
    n = config.rollout.n
    if config.rollout.name == "hf":
        return min(samples, max(1, HF_MAX_BATCH // n) * n)
    return min(config.rollout.max_num_seqs, samples)
