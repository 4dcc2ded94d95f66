"""Whether a parallel layout fits the model and the world, and megatron's process groups.

`check_layout` runs before any process group starts (preflight and the engine both call
it) and names the config key at fault. Ranks are ordered tp-cp-ep-pp-dp: the
`replica_size` = TP × CP × PP consecutive ranks hold one copy of the model between them
and take the same rows; data parallelism is over those groups.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import torch.distributed as dist

from rl.core.config import ConfigError
from rl.megatron.config import MegatronConfig

ORDER = "tp-cp-ep-pp-dp"


def check_layout(
    hf_config: Any, m: MegatronConfig, world_size: int, section: str = "actor", packed: bool = True
) -> None:
    """ConfigError for a layout megatron-core would refuse (or silently pad) later."""
    from rl.megatron.model import SUPPORTED

    key = f"{section}.megatron"
    if hf_config.model_type not in SUPPORTED:
        raise ConfigError(
            f"model.path is a {hf_config.model_type!r} model, which the megatron engine does not "
            f"support yet (supported: {', '.join(SUPPORTED)}); use {section}.strategy=fsdp"
        )
    tp, pp, cp = (
        m.tensor_model_parallel_size,
        m.pipeline_model_parallel_size,
        m.context_parallel_size,
    )
    heads, groups = hf_config.num_attention_heads, hf_config.num_key_value_heads
    for name, count in (("num_attention_heads", heads), ("num_key_value_heads", groups)):
        if count % tp:
            raise ConfigError(
                f"{key}.tensor_model_parallel_size = {tp} does not divide the model's {name} "
                f"({count}): use a divisor of {count}"
            )
    if hf_config.vocab_size % tp:
        raise ConfigError(
            f"{key}.tensor_model_parallel_size = {tp} does not divide the vocabulary "
            f"({hf_config.vocab_size} tokens): the output layer is split by rows over TP"
        )
    _check_layers(hf_config.num_hidden_layers, m, key)
    if cp > 1 and not packed:
        raise ConfigError(f"{key}.context_parallel_size = {cp} needs {section}.use_remove_padding")
    if cp > 1 and importlib.util.find_spec("transformer_engine") is None:
        raise ConfigError(
            f"{key}.context_parallel_size = {cp} needs TransformerEngine's attention "
            "(pip install 'rl-megatron[te]'); the local spec has no context-parallel attention"
        )
    if world_size % m.model_parallel_size:
        raise ConfigError(
            f"{key}: TP {tp} × PP {pp} × CP {cp} = {m.model_parallel_size} ranks per model "
            f"copy does not divide the world of {world_size} ranks"
        )
    _check_experts(hf_config, m, world_size, key)
    if m.use_dist_checkpointing and not (Path(str(m.dist_checkpointing_path)) / "dist").is_dir():
        raise ConfigError(
            f"{key}.dist_checkpointing_path = {m.dist_checkpointing_path!r} is not a megatron "
            "checkpoint (no dist/ inside): write one with `rl convert-ckpt --to megatron`"
        )


def _check_layers(layers: int, m: MegatronConfig, key: str) -> None:
    pp, vpp = m.pipeline_model_parallel_size, m.virtual_pipeline_model_parallel_size
    override = m.override_transformer_config
    first = override.get("num_layers_in_first_pipeline_stage")
    last = override.get("num_layers_in_last_pipeline_stage")
    if vpp is not None and pp < 3:
        # with two stages the previous and the next stage are the same rank, and the
        # interleaved schedule's batched exchange (activations one way, gradients the
        # other) then paired a micro-batch with another's activations (gloo, CPU test)
        raise ConfigError(
            f"{key}.virtual_pipeline_model_parallel_size = {vpp} needs "
            f"pipeline_model_parallel_size >= 3 (it is {pp}): with 2 stages the interleaved "
            "schedule's exchanges with the one neighbour mix up (set VPP to null)"
        )
    if first is None and last is None:
        chunks = pp * (vpp or 1)
        if layers % chunks:
            what = f"PP {pp}" + (f" × VPP {vpp}" if vpp else "")
            raise ConfigError(
                f"{key}.pipeline_model_parallel_size: {what} = {chunks} stages do not divide the "
                f"model's {layers} layers (or set override_transformer_config."
                "num_layers_in_first/last_pipeline_stage)"
            )
        return
    middle = layers - (first or 0) - (last or 0)
    inner = pp - (first is not None) - (last is not None)
    if middle < 0 or (inner and middle % (inner * (vpp or 1))) or (not inner and middle):
        raise ConfigError(
            f"{key}.override_transformer_config: num_layers_in_first_pipeline_stage = {first} "
            f"and num_layers_in_last_pipeline_stage = {last} leave {middle} of {layers} layers "
            f"for {inner} middle stages"
        )


def _check_experts(hf_config: Any, m: MegatronConfig, world_size: int, key: str) -> None:
    ep = m.expert_model_parallel_size
    etp = m.expert_tensor_parallel_size or m.tensor_model_parallel_size
    experts = getattr(hf_config, "num_experts", None)
    if ep == 1 and etp == m.tensor_model_parallel_size:
        return
    if not experts:
        raise ConfigError(f"{key}.expert_model_parallel_size = {ep}: the model has no experts")
    if experts % ep:
        raise ConfigError(
            f"{key}.expert_model_parallel_size = {ep} does not divide the model's {experts} experts"
        )
    per_stage = world_size // m.pipeline_model_parallel_size
    if per_stage % (ep * etp):
        raise ConfigError(
            f"{key}: EP {ep} × expert TP {etp} does not divide the {per_stage} ranks of a "
            "pipeline stage"
        )
    if m.pipeline_model_parallel_size > 1 and ep * etp != m.tensor_model_parallel_size * (
        m.context_parallel_size
    ):
        raise ConfigError(
            f"{key}: with PP > 1, EP × expert TP ({ep * etp}) must equal TP × CP "
            f"({m.tensor_model_parallel_size * m.context_parallel_size}) (megatron-core's rank "
            "order keeps a model copy's ranks together)"
        )


def fit_world(m: MegatronConfig, world: int, key: str) -> dict[str, Any]:
    """The overrides (`key`.name -> value) that shrink `m` to a layout of `world` ranks:
    each size to its largest divisor that still fits (so what divided the model's heads,
    layers and experts still does), TP first, then CP, PP, expert TP and EP; VPP and the
    uneven first/last stages are dropped when PP changes under them. {} when `m` fits."""
    tp = math.gcd(m.tensor_model_parallel_size, world)
    cp = math.gcd(m.context_parallel_size, world // tp)
    pp = math.gcd(m.pipeline_model_parallel_size, world // (tp * cp))
    per_stage = world // pp
    sizes: dict[str, Any] = {
        "tensor_model_parallel_size": tp,
        "context_parallel_size": cp,
        "pipeline_model_parallel_size": pp,
    }
    etp = m.expert_tensor_parallel_size
    if etp is not None:
        etp = sizes["expert_tensor_parallel_size"] = math.gcd(etp, per_stage)
    sizes["expert_model_parallel_size"] = math.gcd(
        m.expert_model_parallel_size, per_stage // (etp or tp)
    )
    overrides = {f"{key}.{name}": v for name, v in sizes.items() if getattr(m, name) != v}
    if m.virtual_pipeline_model_parallel_size is not None and pp < 3:
        overrides[f"{key}.virtual_pipeline_model_parallel_size"] = None
    if pp != m.pipeline_model_parallel_size:
        for name in ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"):
            if m.override_transformer_config.get(name) is not None:
                overrides[f"{key}.override_transformer_config.{name}"] = None
    return overrides


def replica_size(m: MegatronConfig) -> int:
    """Consecutive ranks that share one model copy and its rows."""
    return m.model_parallel_size


def init_model_parallel(m: MegatronConfig, seed: bool = True) -> None:
    """megatron-core's process groups for `m` (once per process; a second engine with
    another layout is an error naming the keys), and (`seed`) its model-parallel RNG."""
    from megatron.core import parallel_state as ps

    sizes = (
        m.tensor_model_parallel_size,
        m.pipeline_model_parallel_size,
        m.context_parallel_size,
        m.expert_model_parallel_size,
    )
    if ps.model_parallel_is_initialized():
        have = (
            ps.get_tensor_model_parallel_world_size(),
            ps.get_pipeline_model_parallel_world_size(),
            ps.get_context_parallel_world_size(),
            ps.get_expert_model_parallel_world_size(),
        )
        if have != sizes:
            raise ConfigError(
                f"megatron is already set up with TP/PP/CP/EP {have}; the actor, reference and "
                f"critic on one worker must share a layout (this one asks for {sizes})"
            )
        return
    assert dist.is_initialized(), "torch.distributed must be initialised first"
    ps.initialize_model_parallel(
        tensor_model_parallel_size=m.tensor_model_parallel_size,
        pipeline_model_parallel_size=m.pipeline_model_parallel_size,
        virtual_pipeline_model_parallel_size=m.virtual_pipeline_model_parallel_size,
        context_parallel_size=m.context_parallel_size,
        expert_model_parallel_size=m.expert_model_parallel_size,
        expert_tensor_parallel_size=m.expert_tensor_parallel_size,
        order=ORDER,
    )
    if seed:
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(m.seed)
