"""`rl plan CONFIG [OVERRIDES]`: what a run will do before any worker starts — where each
role runs, the batch arithmetic per rank and the estimated peak memory per device — and
whether it divides and fits (exit 0), or an `error:` naming the key to change (exit 2).

It takes exactly what `rl train` takes: our YAML (or the demo with none) and overrides,
or another system's config with --from (verl, roll, chatlearn, rlinf).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rl.cli.convert_cmd import ALLOW_OPTION, REPORT_OPTION
from rl.cli.errors import exit_on_error
from rl.cli.train import (
    CONFIG_AND_OVERRIDES,
    CONFIG_OPTION,
    FROM_OPTION,
    _refuse_allow_without_from,
    _run_converted,
    config_and_overrides,
)

if TYPE_CHECKING:
    from rl.core.config import Config
    from rl.core.plan import Plan, RoleMemory

GIB = 1024**3

MEMORY_OPTION = typer.Option(
    None,
    "--device-memory-gb",
    help="Memory of one device in GiB to check the estimate against (cluster.device_memory_gb; "
    "by default the GPU's, or this machine's RAM on trainer.device=cpu): for planning a GPU "
    "run on a machine without those GPUs, whatever the config's dialect.",
)


def plan(
    arguments: list[str] | None = typer.Argument(
        None,
        metavar=CONFIG_AND_OVERRIDES,
        help="The config file and/or dotted overrides `rl train` would get (none: the demo).",
    ),
    config: Path | None = CONFIG_OPTION,
    dialect: str | None = FROM_OPTION,
    allow: list[str] = ALLOW_OPTION,
    report: str = REPORT_OPTION,
    memory_gb: float | None = MEMORY_OPTION,
) -> None:
    """Print the placement, the batch arithmetic per rank and each role's estimated peak
    memory per device; exit 2 naming the key when the batches cannot divide or a device
    cannot fit (the same checks `rl train` runs before any worker starts)."""
    with exit_on_error():
        from rl.core.config import load_config
        from rl.core.demo import DEMO_CONFIG

        _refuse_allow_without_from(dialect, allow)

        def run(loaded: Config) -> None:
            show_plan(with_device_memory(loaded, memory_gb))

        if dialect is not None:
            _run_converted(run, dialect, config, arguments, "train", allow, report)
            return
        path, overrides = config_and_overrides(config, arguments)
        run(load_config(path or DEMO_CONFIG, overrides))


def with_device_memory(config: Config, memory_gb: float | None) -> Config:
    """`config` with cluster.device_memory_gb = --device-memory-gb when given."""
    if memory_gb is None:
        return config
    from dataclasses import replace

    from rl.core.config import ConfigError

    if memory_gb <= 0:
        raise ConfigError(f"--device-memory-gb = {memory_gb:g}: give a positive number of GiB")
    return replace(config, cluster=replace(config.cluster, device_memory_gb=memory_gb))


def show_plan(config: Config) -> None:
    """Print the plan of `config`, then refuse (ConfigError) what cannot divide or fit."""
    from rl.core.plan import make_plan
    from rl.core.plan.build import check_divisions
    from rl.core.plan.fit import check_fit

    whole = make_plan(config, memory=False)
    typer.echo(render_placement(config, whole))
    typer.echo(render_batches(whole))
    check_divisions(whole)  # before the model is read: the divisions need none
    full = make_plan(config)
    typer.echo(render_memory(config, full))
    check_fit(config, full)
    typer.echo("fits: the batches divide and every device fits the estimate")


def render_placement(config: Config, plan: Plan) -> str:
    from rl.core.placement.ranks import format_ranks as ranges

    layout = plan.layout
    placement = layout.placement
    trainer = config.trainer
    head = f"placement (trainer.launcher={trainer.launcher}, trainer.device={trainer.device})"
    lines = [head]
    if layout.one_device:
        lines.append(f"  {', '.join(layout.roles)}: one process, one device; they take turns")
    else:
        shape = f"{placement.nnodes} node(s) × {placement.n_gpus_per_node} device(s)"
        lines.append(f"  cluster: {shape}")
        for devices, roles in layout.groups:
            nodes = sorted({placement.node_of(d) for d in devices})
            turns = "; they take turns" if len(roles) > 1 else ""
            lines.append(
                f"  {_devices(devices)} (node {ranges(tuple(nodes))}): {', '.join(roles)}{turns}"
            )
    groups = [", ".join(roles) for _, roles in layout.groups if len(roles) > 1]
    if groups and not layout.one_device:
        lines.append(f"  colocation groups: {'; '.join(groups)}")
    return "\n".join(lines)


def render_batches(plan: Plan) -> str:
    lines = ["batches per step"]
    for role, t in plan.train.items():
        per_copy = f", {t.ranks_per_copy} ranks per model copy" if t.ranks_per_copy > 1 else ""
        lines.append(
            f"  {role}: {t.prompts} prompts × {t.n} = {t.rows} rows over {t.dp} data-parallel "
            f"rank(s){per_copy}: {t.rows_per_rank} per {'data-parallel ' if per_copy else ''}rank"
        )
        lines.append(
            f"    {t.optimizer_steps} optimizer step(s) of ppo_mini_batch_size {t.mini_batch_size}"
            f" × {t.n} = {t.mini_batch_size * t.n} rows, {t.rows_per_mini_per_rank} per rank"
            + (f" (× {t.epochs} epochs)" if t.epochs > 1 else "")
        )
        if t.token_budget is None:
            micro = (
                f"    {t.micro_per_mini} micro-batch(es) per optimizer step of at most {t.micro_rows} rows"
                f" (ppo_micro_batch_size_per_gpu {t.micro_batch_size}), at most "
                f"{t.micro_tokens} tokens each"
            )
        else:
            micro = (
                f"    micro-batches of at most {t.token_budget} tokens "
                f"(ppo_max_token_len_per_gpu): up to {t.micro_per_mini} per optimizer step "
                "when every row is full length"
            )
        lines.append(micro)
    r = plan.rollout
    lines.append(
        f"  rollout: {r.replicas} replica(s) ({r.devices} device(s) ÷ tensor_parallel_size "
        f"{r.tensor_parallel_size}), each draws "
        + (
            f"{r.samples_per_replica} single samples (data_rerank)"
            if r.rerank
            else f"{r.prompts_per_replica} prompts × {r.n} = {r.samples_per_replica} samples"
        )
    )
    return "\n".join(lines)


def render_memory(config: Config, plan: Plan) -> str:

    params, dims = plan.params, plan.dims
    assert params is not None and dims is not None
    head = "tied" if dims.tied_embeddings else _count(params.lm_head)
    lines = [
        f"model: {_count(params.total)} parameters (embedding {_count(params.embedding)}, LM "
        f"head {head}, {params.layers} layers × {_count(params.per_layer)})",
        "memory per device (an estimate: docs/plan.md has the formulas)"
        + (
            f"; each device has {_size(plan.device_bytes)} ({plan.device_source})"
            if plan.device_bytes is not None
            else f"; the device's memory is unknown ({plan.device_source})"
        ),
    ]
    for group in plan.devices:
        lines.append(
            f"  {_devices(group.devices)}: peak {_size(group.peak)} while {group.peak_role} runs"
        )
        for role, memory in group.phases.items():
            kept = f"; keeps {_size(memory.resident)} while another role runs"
            lines.append(f"    {role:<8}{_parts(memory)}" + (kept if len(group.phases) > 1 else ""))
    workers = sum(len(group.devices) for group in plan.devices)
    if config.trainer.device == "cpu" and workers > 1:  # the fit is checked on the sum
        total = sum(group.peak * len(group.devices) for group in plan.devices)
        lines.append(
            f"  all {workers} worker processes together: {_size(total)} (trainer.device=cpu: "
            "they share this machine's memory)"
        )
    return "\n".join(lines)


_NAMES = (
    ("parameters", "params"),
    ("gradients", "grads"),
    ("optimizer", "optimizer"),
    ("activations", "activations"),
    ("logits", "logits"),
    ("kv_cache", "KV cache"),
)


def _parts(memory: RoleMemory) -> str:
    shown = [f"{label} {_size(getattr(memory, name))}" for name, label in _NAMES]
    shown = [part for (name, _), part in zip(_NAMES, shown, strict=True) if getattr(memory, name)]
    return f"{_size(memory.peak)} = " + " + ".join(shown)


def _size(value: int) -> str:
    from rl.core.plan.device_memory import human_bytes

    return human_bytes(value)


def _count(value: int) -> str:
    """A parameter count: 494.0 M, 309.1 K."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return str(value)


def _devices(devices: tuple[int, ...]) -> str:
    from rl.core.placement.ranks import format_ranks as ranges

    return f"device{'s' if len(devices) > 1 else ''} {ranges(devices)}"
