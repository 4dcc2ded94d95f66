"""ROLL's RLVR configs as they are. ROLL composes its YAML with Hydra (a `defaults:` list of
`../config/fragment@_here_` entries merged at the root, the file itself last), resolves
interpolations (whole nodes too: `strategy_config: ${deepspeed_zero3}`) and fills the rest
from its dataclasses; so here Hydra composes the file, `DEFAULTS` (ROLL's dataclass
defaults that our mapping needs, several unlike ours: a linear LR decay, seq-mean-token-mean,
bf16, top_p 0.7, init_kl_coef 0.2, ...) go under it, and each role's
`strategy_args.strategy_config` is filed under its `strategy_name`
(`actor_train.strategy_args.megatron_train.tensor_model_parallel_size`), so that a key
maps by the backend it configures. `device_mapping` strings (`list(range(0,16))`) are
parsed, never evaluated. The global batch arithmetic ROLL documents is checked (`check`).

Batch sizes: ROLL counts optimizer batches in responses on each data-parallel rank
(`per_device_train_batch_size * gradient_accumulation_steps`); ours in prompts over all
ranks (verl's `ppo_mini_batch_size`): ours = per_device * GA * dp / n.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl.cli.dialects import hydra_files
from rl.cli.dialects.record import Dialect, Table
from rl.cli.dialects.roll import batch, distillation, reward_domains
from rl.cli.dialects.roll.defaults import (
    DEFAULTS,
    INFER_STRATEGIES,
    MEGATRON_DEFAULTS,
    SECTIONS,
    TRAIN_ROLES,
    TRAINING_ARGS,
    VARIABLES_KEY,
)
from rl.cli.dialects.roll.launch import LAUNCH
from rl.cli.dialects.roll.rules import REASONS, RULES
from rl.core.config.errors import ConfigError

DESCRIPTION = """
Composed by Hydra (`defaults: [../config/fragment@_here_]` merged at the root with the file
last, whole-node interpolations such as `strategy_config: ${deepspeed_zero3}`); ROLL's
dataclass defaults that differ from ours are filled in first (they are listed in the report
as if the file had them). Each role's `strategy_args.strategy_config` is reported under its
`strategy_name` (`actor_train.strategy_args.megatron_train.*`), so that a key maps by the
backend it configures; `device_mapping` strings (`list(range(0,16))`, `[0, 1]`) are parsed,
never evaluated, into `cluster.placement`. ROLL counts batches in responses per
data-parallel rank, we in prompts: `actor.ppo_mini_batch_size` = per_device_train_batch_size
× gradient_accumulation_steps × dp / num_return_sequences_in_group, and the divisibility
ROLL documents is checked first (rollout_batch_size × n a multiple of that batch; with
megatron, rollout_batch_size a multiple of dp). Walkthrough: [coming from ROLL](coming-from-roll.md).
"""
DOCUMENTED = (
    "the fields of ROLL's RLVRConfig, its WorkerConfig roles and their model, training, "
    "data, generating and strategy arguments, read from ROLL 8eb27cc2 (v0.3.0)"
)


def compose(path: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The file composed by Hydra over ROLL's defaults, strategy configs filed by name."""
    raw = hydra_files.compose_unresolved(path, overrides, "ROLL config")
    values = hydra_files.resolve(raw, path)
    # Nodes that only exist to be interpolated (a fragment's `deepspeed_zero3:`): ROLL's
    # dataclass drops them; the report says so (`check`) instead of listing their keys.
    variables = sorted(
        key
        for key in hydra_files.interpolated_roots(raw)
        if isinstance(values.get(key), dict) and key not in SECTIONS
    )
    distillation.rename_students(values)  # pure OPD: student_* are actor_* (ROLL does so)
    values = _merge(DEFAULTS, {k: v for k, v in values.items() if k not in variables})
    values[VARIABLES_KEY] = variables
    if "critic" in values:
        critic = values["critic"]
        values["critic"] = _merge(
            {
                "training_args": dict(TRAINING_ARGS),
                "strategy_args": {"strategy_name": "fsdp2_train"},
            },
            critic if isinstance(critic, dict) else {},
        )
    for role in ("actor_train", "actor_infer", "reference", "critic"):
        section = values.get(role)
        if isinstance(section, dict) and isinstance(section.get("strategy_args"), dict):
            section["strategy_args"] = _file_strategy(section["strategy_args"], role, path)
    return values


def _merge(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _file_strategy(args: dict[str, Any], role: str, path: Path) -> dict[str, Any]:
    """`{strategy_name: x, strategy_config: {...}}` -> `{strategy_name: x, x: {...}}`."""
    name = args.get("strategy_name")
    config = args.get("strategy_config") or {}
    if not isinstance(config, dict):
        raise ConfigError(
            f"{path}: {role}.strategy_args.strategy_config is {config!r}, not a mapping"
        )
    rest = {k: v for k, v in args.items() if k not in ("strategy_name", "strategy_config")}
    if str(name).startswith("megatron"):
        config = _merge(MEGATRON_DEFAULTS, config)
        # mcore_adapter's default for full recompute: every layer, uniformly
        full = config.get("recompute_granularity") == "full"
        if (
            full
            and config.get("recompute_method") is None
            and not config.get("recompute_num_layers")
        ):
            config.update(recompute_method="uniform", recompute_num_layers=1)
    filed = {"strategy_name": name, **rest}
    if config:
        filed[str(name)] = config
    return filed


def check(values: dict[str, Any]) -> list[str]:
    """ROLL's documented batch arithmetic, and what our prompt-based mini-batch needs."""
    from rl.cli.dialects.mapping import flatten

    notes = [
        f"{name}: a node the file only interpolates elsewhere; dropped, as ROLL drops it"
        for name in values.pop(VARIABLES_KEY, [])
    ]
    flat = dict(flatten(values))
    distillation.check(flat)
    infer = batch.strategy_of(flat, "actor_infer")
    if infer not in INFER_STRATEGIES:
        raise ConfigError(
            f"actor_infer.strategy_args.strategy_name = {infer or None!r}: ROLL's actor_infer "
            f"needs one of {', '.join(INFER_STRATEGIES)}"
        )
    prompts = int(flat["rollout_batch_size"])
    n = int(flat["num_return_sequences_in_group"])
    for role in TRAIN_ROLES:
        if role == "critic" and "critic" not in values:
            continue
        dp = batch.data_parallel_size(flat, role)
        update = batch.responses_per_update(flat, role)
        sizes = (
            f"{role}.training_args.per_device_train_batch_size × gradient_accumulation_steps "
            f"× dp ({dp})"
        )
        if (prompts * n) % update:
            raise ConfigError(
                f"rollout_batch_size × num_return_sequences_in_group = {prompts} × {n} is "
                f"not a multiple of {sizes} = {update} (ROLL's batch rule): change "
                "gradient_accumulation_steps or per_device_train_batch_size"
            )
        if update % n:
            raise ConfigError(
                f"{sizes} = {update} responses is not a whole number of prompts of {n} "
                "responses each; rl updates on whole groups: make it a multiple of "
                "num_return_sequences_in_group"
            )
        if batch.strategy_of(flat, role).startswith("megatron") and dp > 1 and prompts % dp:
            raise ConfigError(
                f"rollout_batch_size = {prompts} must be divisible by {role}'s data-parallel "
                f"size {dp} (ROLL's megatron rule)"
            )
    return [*notes, f"ROLL batch: {prompts} prompts × {n} responses per step"]


TABLE = Table("roll", RULES, REASONS, description=DESCRIPTION, documented=DOCUMENTED)
ROLL = Dialect(
    "roll",
    TABLE,
    compose,
    check,
    rewrites=(reward_domains.drop_rule_worker_plumbing,),
    launch=LAUNCH,
)
