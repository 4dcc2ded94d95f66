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

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl.core.config.dialects import hydra_files
from rl.core.config.dialects.mapping import NULL, Rule, Unsupported
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
megatron, rollout_batch_size a multiple of dp).
"""
DOCUMENTED = (
    "the fields of ROLL's RLVRConfig, its WorkerConfig roles and their model, training, "
    "data, generating and strategy arguments, read from ROLL 8eb27cc2 (v0.3.0)"
)

TRAIN_ROLES = ("actor_train", "critic")
INFER_STRATEGIES = {"vllm": "vllm", "sglang": "sglang", "hf_infer": "hf"}
TRAIN_STRATEGIES = {"megatron_train": "megatron", "fsdp2_train": "fsdp"}
_ROLE = {
    "actor_train": "actor",
    "actor_infer": "rollout",
    "reference": "ref",
    "critic": "critic",
}

# ROLL's dataclass defaults (roll/configs/*.py, roll/pipeline/rlvr/rlvr_config.py) for the
# keys the mapping reads; a file's own values win.
_TRAINING_ARGS = {
    "learning_rate": 5.0e-5,
    "weight_decay": 0.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.999,
    "lr_scheduler_type": "linear",
    "warmup_steps": 0,
    "warmup_ratio": 0.0,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
}
_MODEL_ARGS = {"dtype": "bf16", "disable_gradient_checkpointing": False, "ulysses_size": 1}
_GENERATING_ARGS = {"temperature": 0.95, "top_p": 0.7, "top_k": 50, "repetition_penalty": 1.0}
DEFAULTS: dict[str, Any] = {
    "seed": 42,
    "output_dir": "./output",
    "track_with": "tensorboard",
    "max_steps": 500,
    "save_steps": 50,
    "eval_steps": 10,
    "resume_from_checkpoint": False,
    "rollout_batch_size": 128,
    "prompt_length": 1024,
    "num_return_sequences_in_group": 1,
    "num_gpus_per_node": 8,
    "adv_estimator": "gae",
    "ppo_epochs": 1,
    "max_grad_norm": 1.0,
    "gamma": 1.0,
    "lambd": 0.95,
    "pg_clip": 0.2,
    "use_pg_clip_range": False,
    "pg_clip_low": 0.2,
    "pg_clip_high": 0.2,
    "dual_clip_loss": False,
    "kl_penalty": "kl",
    "init_kl_coef": 0.2,
    "kl_horizon": 10000,
    "add_token_level_kl": False,
    "use_kl_loss": False,
    "kl_loss_coef": 0.0,
    "entropy_loss_coef": 0.0,
    "loss_agg_mode": "seq-mean-token-mean",
    "actor_train": {
        "model_args": dict(_MODEL_ARGS),
        "training_args": dict(_TRAINING_ARGS),
        "strategy_args": {"strategy_name": "fsdp2_train"},
        "infer_batch_size": 16,
    },
    "actor_infer": {"model_args": {"dtype": "bf16"}, "generating_args": dict(_GENERATING_ARGS)},
    "reference": {"infer_batch_size": 16},
}
# RLVRConfig's sections (anything else that is a mapping and interpolated is a variable)
SECTIONS = (
    "actor_train",
    "actor_infer",
    "reference",
    "critic",
    "validation",
    "rewards",
    "reward_model",
    "reward",
    "checkpoint_config",
    "tracker_kwargs",
    "system_envs",
    "train_infer_correction",
    "router_args",
    "rollout_mock",
    "transfer_backend",
    "dataset_filter",
    "teacher",
    "student_train",
    "student_infer",
)
_VARIABLES = "__interpolated_only__"  # set by compose, read (and removed) by check
_MEGATRON_DEFAULTS = {"sequence_parallel": False, "use_distributed_optimizer": False}


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
    values = _merge(DEFAULTS, {k: v for k, v in values.items() if k not in variables})
    values[_VARIABLES] = variables
    if "critic" in values:
        critic = values["critic"]
        values["critic"] = _merge(
            {
                "training_args": dict(_TRAINING_ARGS),
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
        config = _merge(_MEGATRON_DEFAULTS, config)
    filed = {"strategy_name": name, **rest}
    if config:
        filed[str(name)] = config
    return filed


# -- the batch arithmetic ------------------------------------------------------------------


def _strategy(flat: Mapping[str, Any], role: str) -> str:
    return str(flat.get(f"{role}.strategy_args.strategy_name") or "")


def _devices(flat: Mapping[str, Any], role: str) -> tuple[int, ...] | None:
    from rl.core.placement import parse_device_mapping

    value = flat.get(f"{role}.device_mapping")
    return None if value is None else parse_device_mapping(value, role)


def data_parallel_size(flat: Mapping[str, Any], role: str = "actor_train") -> int:
    """ROLL's dp of a training role: its devices over the model-parallel size (megatron:
    TP·PP·CP; fsdp2: the Ulysses size); 1 without a device_mapping."""
    devices = _devices(flat, role)
    if not devices:
        return 1
    strategy = _strategy(flat, role)
    if strategy.startswith("megatron"):
        block = f"{role}.strategy_args.{strategy}."
        model_parallel = math.prod(
            int(flat.get(block + key) or 1)
            for key in (
                "tensor_model_parallel_size",
                "pipeline_model_parallel_size",
                "context_parallel_size",
            )
        )
    else:
        model_parallel = int(flat.get(f"{role}.model_args.ulysses_size") or 1)
    return max(len(devices) // model_parallel, 1)


def _responses_per_update(flat: Mapping[str, Any], role: str) -> int:
    per_device = int(flat.get(f"{role}.training_args.per_device_train_batch_size") or 1)
    accumulation = int(flat.get(f"{role}.training_args.gradient_accumulation_steps") or 1)
    return per_device * accumulation * data_parallel_size(flat, role)


def _mini_batch(role: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        n = int(flat.get("num_return_sequences_in_group") or 1)
        return _responses_per_update(flat, role) // n

    return derive


def check(values: dict[str, Any]) -> list[str]:
    """ROLL's documented batch arithmetic, and what our prompt-based mini-batch needs."""
    from rl.core.config.dialects.mapping import flatten

    notes = [
        f"{name}: a node the file only interpolates elsewhere; dropped, as ROLL drops it"
        for name in values.pop(_VARIABLES, [])
    ]
    flat = dict(flatten(values))
    infer = _strategy(flat, "actor_infer")
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
        dp = data_parallel_size(flat, role)
        update = _responses_per_update(flat, role)
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
        if _strategy(flat, role).startswith("megatron") and dp > 1 and prompts % dp:
            raise ConfigError(
                f"rollout_batch_size = {prompts} must be divisible by {role}'s data-parallel "
                f"size {dp} (ROLL's megatron rule)"
            )
    return [*notes, f"ROLL batch: {prompts} prompts × {n} responses per step"]


# -- value conversions ---------------------------------------------------------------------

_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_DTYPES.update({name: name for name in ("bfloat16", "float16", "float32")})


def _dtype(value: Any) -> Any:
    return _DTYPES.get(str(value), Unsupported(f"dtype {value!r}: one of bf16, fp16, fp32"))


def _train_strategy(value: Any) -> Any:
    if value in TRAIN_STRATEGIES:
        return TRAIN_STRATEGIES[value]
    return Unsupported(
        f"{value!r}: rl trains with megatron_train (megatron) or fsdp2_train (fsdp); "
        "ROLL 0.3 removed deepspeed"
    )


def _infer_strategy(value: Any) -> Any:
    return INFER_STRATEGIES.get(
        value, Unsupported(f"{value!r}: rl rolls out with vllm, sglang or hf")
    )


def _scheduler(value: Any) -> Any:
    known = {"linear": "linear", "cosine": "cosine", "constant": "constant"}
    known["constant_with_warmup"] = "constant"  # ours warms up by lr_warmup_* too
    return known.get(
        value, Unsupported(f"lr_scheduler_type {value!r}: rl has constant, cosine, linear")
    )


def _reference_strategy(flat: Mapping[str, Any]) -> Any:
    """The reference runs on the actor's backend and layout in rl: fine when ROLL's does."""
    actor = _train_strategy(_strategy(flat, "actor_train"))
    reference = _strategy(flat, "reference").replace("_infer", "_train")
    if reference and _train_strategy(reference) != actor:
        return Unsupported(
            f"the reference runs on the actor's backend in rl ({actor}), not "
            f"{_strategy(flat, 'reference')}"
        )
    return actor


def _estimator(value: Any) -> Any:
    known = {"gae": "gae", "grpo": "grpo"}
    return known.get(
        value,
        Unsupported(
            f"adv_estimator {value!r}: ROLL's variant has no exact counterpart in rl (grpo, "
            "gae, rloo, remax, reinforce_plus_plus[_baseline]); set algorithm.adv_estimator"
        ),
    )


def _pg_variant(value: Any) -> Any:
    known = {"ppo": "vanilla", "cispo": "cispo"}  # ROLL's ppo is verl's vanilla PPO clip
    return known.get(
        value,
        Unsupported(
            f"pg_variant {value!r}: ROLL's unclipped/TIS/TOPR/Kimi variants are not in rl "
            "(its ppo and cispo are)"
        ),
    )


def _placement(value: Any) -> Any:
    from rl.core.placement import parse_device_mapping

    return list(parse_device_mapping(value, "device_mapping"))


def _fsdp_size(value: Any) -> Any:
    return -1 if value is None or int(value) <= 1 else int(value)  # ROLL's 1: full shard


def _loggers(value: Any) -> Any:
    known = {"tensorboard": "tensorboard", "wandb": "wandb", "stdout": "console"}
    known["swanlab"] = "swanlab"
    if value not in known:
        return Unsupported(f"track_with {value!r}: rl logs to console, tensorboard, wandb, swanlab")
    return ["console", "jsonl", known[value]] if known[value] != "console" else ["console", "jsonl"]


def _resume_mode(value: Any) -> Any:
    if isinstance(value, str):
        return "path"
    return "auto" if value else "disable"


def _resume_path(flat: Mapping[str, Any]) -> Any:
    value = flat.get("resume_from_checkpoint")
    return value if isinstance(value, str) else None


def _betas(role: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return [
            float(flat[f"{role}.training_args.adam_beta1"]),
            float(flat[f"{role}.training_args.adam_beta2"]),
        ]

    return derive


def _model_path(flat: Mapping[str, Any]) -> Any:
    """ROLL: `pretrain` fills the policy roles' paths when any of them is unset."""
    own = [
        flat.get(f"{r}.model_args.model_name_or_path")
        for r in ("actor_train", "actor_infer", "reference")
    ]
    return own[0] if all(own) else flat.get("pretrain")


def _clip(side: str) -> Any:
    def derive(flat: Mapping[str, Any]) -> Any:
        return flat.get(f"pg_clip_{side}") if flat.get("use_pg_clip_range") else None

    return derive


def _dual_clip(flat: Mapping[str, Any]) -> Any:
    """ROLL's dual clip bound is 1 + 2·pg_clip when on; off is our null."""
    return 1 + 2 * float(flat["pg_clip"]) if flat.get("dual_clip_loss") else NULL


def _kl_type(flat: Mapping[str, Any]) -> Any:
    return "adaptive" if flat.get("target_kl") is not None else "fixed"


def _rollout_is(flat: Mapping[str, Any]) -> Any:
    """ROLL's train/infer IS weights: per token or per sequence, when enabled."""
    if not flat.get("train_infer_correction.is_weight.enabled"):
        return None
    kind = flat.get("train_infer_correction.is_weight.weight_type") or "token"
    return "token" if kind == "token" else "sequence"


# -- the table -----------------------------------------------------------------------------

_INFRA = "ROLL's scheduling/infrastructure setting; rl's launcher decides it"
_MASKS = "ROLL's sample masks and loss weights are not in rl"
_DISTILL = "on-policy distillation is not in rl"
_REF = "rl runs the reference with the actor's model, dtype and parallel layout"
_REWARDS = (
    "rl scores each row by its data source with one reward (reward.custom_reward_function, "
    "or the built-in rule scorers); ROLL's per-domain reward workers are not converted: "
    "point reward.custom_reward_function at a scorer"
)
_LORA = "LoRA is not in rl yet (full-parameter only)"
_SCHEDULER = "ROLL's rollout scheduler; rl's engine generates each step's prompts in one batch"
_PROFILING = "profiling is not configured in rl's config (use the torch profiler directly)"
_UNUSED = "defined by ROLL but not read by its RLVR pipeline"
_NO_TRAINING = "an inference role: ROLL does not train it"

# WorkerConfig fields without a counterpart, under any role
WORKER_OPTIONS = {
    "model_update_frequency": "rl syncs the rollout weights after every update",
    "backend_timeout": _INFRA,
    "max_concurrency": _INFRA,
    "offload_nccl": _INFRA,
    "logits_in_fp32": "rl computes log-probs in float32 always (its fused kernel)",
    "apply_loss_scale": _INFRA,
    "router_replay.": "MoE router replay is not in rl",
    "mtp_training_mode": "multi-token prediction is not in rl",
    "topr_*": "ROLL's TOPR loss is not in rl",
    "opd_kl_coef": _DISTILL,
    "tag_included": _REWARDS,
    "use_sequence_packing": "rl packs sequences whenever use_remove_padding is on (default)",
    "sequence_packing_args.": "rl packs sequences whenever use_remove_padding is on (default)",
    "sequence_length_round_in_*": "rl pads packed micro-batches itself",
    "use_dynamic_batching_in_infer": "rl's critic forward takes forward_max_token_len_per_gpu",
    "max_tokens_per_microbatch_in_infer": "set critic.forward_max_token_len_per_gpu",
    "use_remove_padding": "a key ROLL no longer reads (rl: actor.use_remove_padding)",
    "checkpoint_config.": "rl checkpoints under trainer.output_dir/checkpoints",
    "resume_from_checkpoint": "ROLL copies the top-level value",
}

# top-level RLVRConfig / PPOConfig / BaseConfig fields without a counterpart
PIPELINE_OPTIONS = {
    "generate_opt_level": _SCHEDULER,
    "is_use_additional_prompts": _SCHEDULER,
    "max_additional_running_prompts": _SCHEDULER,
    "router_args.": _SCHEDULER,
    "user_defined_rollout_loop_cls": _SCHEDULER,
    "rollout_mock.": _SCHEDULER,
    "model_download_type": "rl reads model.path from disk (no model hub download)",
    "profiler_*": _PROFILING,
    "otlp_output_dir": _PROFILING,
    "report_length_and_rewards": _PROFILING,
    "length_profiler_dir": _PROFILING,
    "rollout_dump_dir": "rl keeps validation generations in val_generations.jsonl",
    "transfer_backend.": "rl's weight sync picks its transport (rl.core.weight_sync)",
    "is_offload_states": "set actor.fsdp_config / megatron offload keys",
    "is_offload_optimizer_states_in_train_step": "set *.optimizer_offload",
    "local_rank": _INFRA,
    "base_dir": _INFRA,
    "sequence_length": "ROLL derives it (prompt + response length)",
    "val_prompt_length": "rl validates with data.max_prompt_length",
    "val_sequence_length": "rl validates with data.max_prompt_length + max_response_length",
    "num_nodes": "derived from the device mappings (cluster.nnodes)",
    "val_greedy": _UNUSED,
    "val_n_sample": _UNUSED,
    "l2": _UNUSED,
    "use_reward_scaling": _UNUSED,
    "use_reward_norm": _UNUSED,
    "add_len_reward": _UNUSED,
    "dataset_filter.": _UNUSED,
    "save_logging_board_dir": _UNUSED,
    "reward_norm": "a ROLL 0.1 key its dataclass no longer has (norm_mean_type now)",
    "reward_shift": "a ROLL 0.1 key its dataclass no longer has",
    "reward_scale": "a ROLL 0.1 key its dataclass no longer has",
    "use_policy_loss_type": "ROLL's plain-PG switch is not in rl",
    "use_topr_loss": "ROLL's TOPR loss is not in rl",
    "use_topr_neg_loss_coef": "ROLL's TOPR loss is not in rl",
    "rl_loss_coef": "rl's policy loss has weight 1",
    "postive_loss_coef": "an SFT-on-positives term rl does not have",
    "enable_reference": "rl runs the reference when the KL loss or KL-in-reward needs it",
    "enable_old_logprobs_recompute": "rl decides when old log-probs are recomputed",
    "force_disable_old_logprobs_recompute": "rl decides when old log-probs are recomputed",
    "minibatch_data_iter_num": _UNUSED,
    "offload_nccl": _INFRA,
    "reward_system_config.": _REWARDS,
    "is_pure_opd": _DISTILL,
    "pure_opd_pipeline_type": _DISTILL,
    "use_opd": _DISTILL,
}
# megatron-core TransformerConfig fields ROLL files set in strategy_config: passed through
TRANSFORMER_CONFIG_KEYS = (
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "recompute_modules",
    "moe_token_dispatcher_type",
    "moe_grouped_gemm",
    "moe_shared_expert_overlap",
    "moe_aux_loss_coeff",
    "moe_router_dtype",
    "moe_layer_recompute",
    "apply_rope_fusion",
    "bias_activation_fusion",
    "cross_entropy_loss_fusion",
    "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout",
)


def _megatron_rules(role: str, ours: str) -> list[Rule]:
    block = f"{role}.strategy_args.megatron_*."
    parallel = (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "expert_tensor_parallel_size",
        "sequence_parallel",
        "use_distributed_optimizer",
    )
    rules = [Rule(block + key, f"{ours}.megatron.{key}") for key in parallel]
    rules += [
        Rule(block + "bf16", reason="the dtype comes from model_args.dtype", status="ignored"),
        Rule(block + "fp16", reason="the dtype comes from model_args.dtype", status="ignored"),
        Rule(
            block + "overlap_grad_reduce",
            f"{ours}.megatron.override_ddp_config.overlap_grad_reduce",
        ),
        Rule(
            block + "overlap_param_gather",
            f"{ours}.megatron.override_ddp_config.overlap_param_gather",
        ),
        Rule(
            block + "optimizer_cpu_offload",
            reason="megatron's hybrid CPU Adam is not in rl (megatron.optimizer_offload moves "
            "the optimizer state off the device between phases instead)",
        ),
        Rule(block + "optimizer_offload_fraction", reason="see optimizer_cpu_offload"),
        Rule(
            block + "ckpt_format",
            reason="rl writes torch_dist checkpoints when megatron.use_dist_checkpointing",
        ),
        Rule(block + "additional_configs.", f"{ours}.megatron.override_transformer_config."),
        Rule(
            block + "lr_scheduler_kwargs.",
            reason="rl's schedule is optim.lr_scheduler with min_lr_ratio",
        ),
        *[
            Rule(block + key, f"{ours}.megatron.override_transformer_config.{key}")
            for key in TRANSFORMER_CONFIG_KEYS
        ],
        Rule(block + "*", reason="a mcore_adapter / Hugging Face trainer option rl does not have"),
    ]
    return rules


def _fsdp_rules(role: str, ours: str) -> list[Rule]:
    block = f"{role}.strategy_args.fsdp2_*."
    return [
        Rule(block + "fsdp_size", f"{ours}.fsdp_config.fsdp_size", convert=_fsdp_size),
        Rule(
            block + "param_dtype", f"{ours}.fsdp_config.mixed_precision.param_dtype", convert=_dtype
        ),
        Rule(
            block + "reduce_dtype",
            f"{ours}.fsdp_config.mixed_precision.reduce_dtype",
            convert=_dtype,
        ),
        Rule(block + "reshard_after_forward", f"{ours}.fsdp_config.reshard_after_forward"),
        Rule(block + "offload_policy", f"{ours}.fsdp_config.offload_policy"),
        Rule(
            block + "ep_size", reason="expert parallelism under FSDP is not in rl (megatron's is)"
        ),
        Rule(
            block + "efsdp_size",
            reason="expert parallelism under FSDP is not in rl (megatron's is)",
        ),
        Rule(block + "wrap_policy.", reason="rl wraps each decoder layer itself"),
        Rule(block + "*", reason="an FSDP2 detail rl sets itself"),
    ]


def _training_rules(role: str, ours: str) -> list[Rule]:
    args = f"{role}.training_args."
    return [
        Rule(args + "learning_rate", f"{ours}.optim.lr"),
        Rule(args + "weight_decay", f"{ours}.optim.weight_decay"),
        Rule(args + "adam_beta1", f"{ours}.optim.betas", derive=_betas(role)),
        Rule(args + "adam_beta2", f"{ours}.optim.betas", derive=_betas(role)),
        Rule(args + "lr_scheduler_type", f"{ours}.optim.lr_scheduler", convert=_scheduler),
        Rule(args + "warmup_steps", f"{ours}.optim.lr_warmup_steps"),
        Rule(args + "warmup_ratio", f"{ours}.optim.lr_warmup_ratio"),
        Rule(args + "per_device_train_batch_size", f"{ours}.ppo_micro_batch_size_per_gpu"),
        Rule(
            args + "gradient_accumulation_steps",
            f"{ours}.ppo_mini_batch_size",
            derive=_mini_batch(role),
        ),
        Rule(args + "save_hf_model", "trainer.save_hf"),
        Rule(args + "max_steps", reason="ROLL derives it from max_steps", status="ignored"),
        Rule(args + "seed", reason="ROLL copies the top-level seed", status="ignored"),
        Rule(args + "output_dir", reason="ROLL copies the top-level output_dir", status="ignored"),
        Rule(args + "*", reason="a Hugging Face TrainingArguments option rl does not have"),
    ]


def _role_rules(role: str, ours: str) -> list[Rule]:
    """What actor_train and critic share: strategy, batches, training arguments."""
    return [
        Rule(f"{role}.strategy_args.strategy_name", f"{ours}.strategy", convert=_train_strategy),
        *_megatron_rules(role, ours),
        *_fsdp_rules(role, ours),
        Rule(f"{role}.strategy_args.", reason="a strategy rl does not train with"),
        *_training_rules(role, ours),
        Rule(f"{role}.device_mapping", f"cluster.placement.{ours}", convert=_placement),
        Rule(f"{role}.use_dynamic_batching_in_train", f"{ours}.use_dynamic_bsz"),
        Rule(f"{role}.max_tokens_per_microbatch_in_train", f"{ours}.ppo_max_token_len_per_gpu"),
        Rule(f"{role}.model_args.ulysses_size", f"{ours}.ulysses_sequence_parallel_size"),
    ]


RULES: list[Rule] = [
    # ROLL's plumbing
    Rule("hydra.", reason="Hydra's own run settings", status="ignored"),
    Rule("**.worker_cls", reason="ROLL's worker class path", status="ignored"),
    Rule("system_envs.", reason="set environment variables in the shell that runs rl"),
    Rule("**.system_envs.", reason="set environment variables in the shell that runs rl"),
    Rule("logging_dir", reason="rl logs under trainer.output_dir", status="ignored"),
    Rule("logging_steps", reason="rl logs every step", status="ignored"),
    Rule("checkpoint_config.", reason="rl checkpoints under trainer.output_dir/checkpoints"),
    Rule("rpc_timeout", "trainer.worker_timeout_s"),
    Rule("num_gpus_per_node", "cluster.n_gpus_per_node"),
    # run, logging, checkpoints
    Rule("exp_name", "trainer.experiment_name"),
    Rule("seed", "trainer.seed"),
    Rule("output_dir", "trainer.output_dir"),
    Rule("track_with", "trainer.logger", convert=_loggers),
    Rule("tracker_kwargs.project", "trainer.project_name"),
    Rule("tracker_kwargs.name", "trainer.experiment_name"),
    Rule(
        "tracker_kwargs.", reason="a tracker option rl does not pass (use the tracker's env vars)"
    ),
    Rule("*.name", reason="ROLL's cluster name", status="ignored"),
    Rule("max_steps", "trainer.total_training_steps"),
    Rule("save_steps", "trainer.save_freq"),
    Rule("max_ckpt_to_keep", "trainer.max_ckpt_to_keep", convert=lambda v: v or None),
    Rule("eval_steps", "trainer.test_freq"),
    Rule(
        "resume_from_checkpoint",
        "trainer.resume_mode",
        convert=_resume_mode,
        also=(("trainer.resume_from_path", _resume_path),),
    ),
    # data and generation
    Rule("pretrain", "model.path", derive=_model_path),
    Rule("actor_train.model_args.model_name_or_path", "model.path", derive=_model_path),
    Rule("actor_infer.model_args.model_name_or_path", "model.path", derive=_model_path),
    Rule("reference.model_args.model_name_or_path", "model.path", derive=_model_path),
    Rule(
        "reward_pretrain",
        reason="the critic starts from model.path in rl; ROLL's reward workers are not converted",
    ),
    Rule("rollout_batch_size", "data.train_batch_size"),
    Rule("val_batch_size", "data.val_batch_size"),
    Rule("prompt_length", "data.max_prompt_length"),
    Rule("response_length", "data.max_response_length"),
    Rule("num_return_sequences_in_group", "rollout.n"),
    Rule(
        "actor_train.data_args.file_name",
        "data.train_files",
        convert=lambda v: [v] if isinstance(v, str) else v,
    ),
    Rule(
        "validation.data_args.file_name",
        "data.val_files",
        convert=lambda v: [v] if isinstance(v, str) else v,
    ),
    Rule(
        "*.data_args.template",
        "data.chat_template",
        convert=lambda v: (
            "native"
            if v == "native"
            else Unsupported(
                f"template {v!r}: rl applies the tokenizer's own chat template (native) or none"
            )
        ),
    ),
    Rule("*.data_args.prompt", "data.prompt_key"),
    Rule("*.data_args.messages", "data.prompt_key"),
    Rule("*.data_args.preprocessing_num_workers", "data.filter_num_workers"),
    Rule(
        "*.data_args.domain_interleave_probs.",
        reason="per-domain batch mixing is not in rl: mix the data files beforehand",
    ),
    Rule(
        "*.data_args.", reason="a ROLL data option rl does not have (see data.* in rl config show)"
    ),
    Rule("actor_infer.generating_args.temperature", "rollout.temperature"),
    Rule("actor_infer.generating_args.top_p", "rollout.top_p"),
    Rule("actor_infer.generating_args.top_k", "rollout.top_k"),
    Rule("actor_infer.generating_args.repetition_penalty", "rollout.repetition_penalty"),
    Rule(
        "*.generating_args.num_return_sequences",
        reason="ROLL sets it from num_return_sequences_in_group",
        status="ignored",
    ),
    Rule(
        "*.generating_args.max_new_tokens",
        reason="ROLL sets it from response_length",
        status="ignored",
    ),
    Rule("validation.generating_args.temperature", "rollout.val_kwargs.temperature"),
    Rule("validation.generating_args.top_p", "rollout.val_kwargs.top_p"),
    Rule("validation.generating_args.top_k", "rollout.val_kwargs.top_k"),
    Rule(
        "*.generating_args.do_sample",
        reason="rl samples when the temperature is > 0 and decodes greedily at 0",
        status="ignored",
    ),
    Rule("*.generating_args.", reason="a generation option rl does not expose"),
    Rule("validation.", reason="rl validates with data.val_files and rollout.val_kwargs"),
    # algorithm
    Rule("adv_estimator", "algorithm.adv_estimator", convert=_estimator),
    Rule("ppo_epochs", "actor.ppo_epochs", also=(("critic.ppo_epochs", None),)),
    Rule("max_grad_norm", "actor.optim.grad_clip", also=(("critic.optim.grad_clip", None),)),
    Rule("gamma", "algorithm.gamma"),
    Rule("lambd", "algorithm.lam"),
    Rule("pg_clip", "actor.clip_ratio"),
    Rule("use_pg_clip_range", reason="decides whether pg_clip_low/high apply", status="ignored"),
    Rule("pg_clip_low", "actor.clip_ratio_low", derive=_clip("low")),
    Rule("pg_clip_high", "actor.clip_ratio_high", derive=_clip("high")),
    Rule("dual_clip_loss", "actor.clip_ratio_c", derive=_dual_clip),
    Rule("value_clip", "critic.cliprange_value"),
    Rule("kl_penalty", "algorithm.kl_penalty"),
    Rule("init_kl_coef", "algorithm.kl_ctrl.kl_coef"),
    Rule("target_kl", "algorithm.kl_ctrl.target_kl", also=(("algorithm.kl_ctrl.type", _kl_type),)),
    Rule("kl_horizon", "algorithm.kl_ctrl.horizon"),
    Rule("add_token_level_kl", "algorithm.use_kl_in_reward"),
    Rule("use_kl_loss", "actor.use_kl_loss"),
    Rule(
        "kl_loss_coef",
        "actor.kl_loss_coef",
        also=(("actor.kl_loss_type", lambda flat: "low_var_kl"),),  # ROLL's KL loss is k3
    ),
    Rule("entropy_loss_coef", "actor.entropy_coeff"),
    Rule("loss_agg_mode", "actor.loss_agg_mode"),
    Rule(
        "norm_mean_type",
        reason="ROLL's reward normalisation: grpo normalises per group (rl's grpo too); "
        "other estimators keep rl's own",
        status="ignored",
    ),
    Rule(
        "norm_std_type",
        reason="ROLL's reward normalisation: grpo divides by the group std (rl's "
        "algorithm.norm_adv_by_std_in_grpo, on)",
        status="ignored",
    ),
    Rule("whiten_advantages", convert=None, reason="batch whitening of advantages is not in rl"),
    Rule("whiten_rewards", reason="batch whitening of rewards is not in rl"),
    Rule("reward_clip", reason="reward clipping is not in rl"),
    Rule("advantage_clip", reason="advantage clipping is not in rl"),
    Rule("critic_warmup", reason="critic warm-up steps are not in rl yet"),
    Rule(
        "train_infer_correction.is_weight.enabled",
        "algorithm.rollout_correction.rollout_is",
        derive=_rollout_is,
    ),
    Rule(
        "train_infer_correction.is_weight.upper_bound",
        "algorithm.rollout_correction.rollout_is_threshold",
    ),
    Rule(
        "train_infer_correction.is_weight.weight_type",
        reason="read with is_weight.enabled",
        status="ignored",
    ),
    Rule(
        "train_infer_correction.",
        reason="ROLL's mismatch filters: use algorithm.rollout_correction.rollout_rs",
    ),
    Rule("actor_train.pg_variant", "actor.policy_loss", convert=_pg_variant),
    Rule("pg_variant", reason="a name ROLL files interpolate elsewhere", status="ignored"),
    Rule("max_len_mask", reason=_MASKS),
    Rule("difficulty_*", reason=_MASKS),
    Rule("error_max_len_clip", reason=_MASKS),
    Rule("error_max_len_threshold", reason=_MASKS),
    Rule("length_loss_weight", reason=_MASKS),
    Rule("mask_type", reason=_MASKS),
    Rule("balance_length", reason=_MASKS),
    Rule(
        "importance_sampling",
        "actor.policy_loss",
        convert=lambda v: None if v == "token" else "gspo",
    ),
    Rule(
        "async_generation_ratio",
        reason="asynchronous generation is not in rl yet (the agentic/async issue)",
    ),
    Rule("is_num_return_sequences_expand", reason=_INFRA, status="ignored"),
    Rule("max_running_requests", "rollout.max_num_seqs"),
    Rule("model_update_buffer_size_mb", "rollout.update_weights_bucket_megabytes"),
    Rule("global_template", reason="set data.chat_template (native uses the tokenizer's template)"),
    Rule("tag_to_template.", reason="per-tag chat templates are not in rl"),
    Rule("teacher.", reason=_DISTILL),
    Rule("student_*", reason=_DISTILL),
    Rule("*_opd*", reason=_DISTILL),
    Rule("lora_*", reason=_LORA),
    Rule("**.lora_*", reason=_LORA),
    Rule("rewards.", reason=_REWARDS),
    Rule("reward_model.", reason=_REWARDS),
    Rule("reward.", reason=_REWARDS),
    # roles
    Rule("actor_train.model_args.dtype", "model.dtype", convert=_dtype),
    Rule(
        "actor_train.model_args.disable_gradient_checkpointing",
        "model.gradient_checkpointing",
        convert=lambda v: not v,
    ),
    Rule(
        "actor_train.model_args.attn_implementation", reason="rl picks the attention kernel itself"
    ),
    Rule("actor_train.infer_batch_size", "rollout.log_prob_micro_batch_size_per_gpu"),
    Rule("actor_train.use_dynamic_batching_in_infer", "rollout.log_prob_use_dynamic_bsz"),
    Rule(
        "actor_train.max_tokens_per_microbatch_in_infer", "rollout.log_prob_max_token_len_per_gpu"
    ),
    *_role_rules("actor_train", "actor"),
    *_role_rules("critic", "critic"),
    Rule("critic.model_args.", reason="the critic shares model.* with the actor in rl"),
    Rule("*.pg_variant", reason="ROLL reads pg_variant on actor_train only", status="ignored"),
    Rule("actor_infer.training_args.", reason=_NO_TRAINING, status="ignored"),
    Rule("actor_infer.*_in_train", reason=_NO_TRAINING, status="ignored"),
    Rule("reference.training_args.", reason=_NO_TRAINING, status="ignored"),
    Rule("reference.*_in_train", reason=_NO_TRAINING, status="ignored"),
    Rule("actor_infer.strategy_args.strategy_name", "rollout.name", convert=_infer_strategy),
    Rule(
        "actor_infer.strategy_args.vllm.sleep_level",
        reason="rl frees the KV cache between phases (rollout.free_cache_engine)",
        status="ignored",
    ),
    Rule(
        "actor_infer.strategy_args.vllm.VLLM_USE_V1",
        reason="rl runs vLLM's V1 engine",
        status="ignored",
    ),
    Rule("actor_infer.strategy_args.sglang.mem_fraction_static", "rollout.gpu_memory_utilization"),
    *[
        Rule(f"actor_infer.strategy_args.*.{key}", f"rollout.{key}")
        for key in (
            "gpu_memory_utilization",
            "tensor_parallel_size",
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
            "enable_chunked_prefill",
            "enable_prefix_caching",
            "enforce_eager",
            "load_format",
        )
    ],
    Rule("actor_infer.strategy_args.vllm.", "rollout.engine_kwargs.vllm."),
    Rule("actor_infer.strategy_args.sglang.", "rollout.engine_kwargs.sglang."),
    Rule("actor_infer.strategy_args.", reason="a rollout backend rl does not have"),
    Rule("actor_infer.model_args.dtype", "rollout.dtype", convert=_dtype),
    Rule("actor_infer.device_mapping", "cluster.placement.rollout", convert=_placement),
    Rule(
        "actor_infer.num_gpus_per_worker",
        reason="rl takes it from the tensor-parallel size",
        status="ignored",
    ),
    Rule(
        "actor_infer.infer_batch_size",
        reason="rl's engine batches all prompts of a step",
        status="ignored",
    ),
    Rule("reference.infer_batch_size", "ref.log_prob_micro_batch_size_per_gpu"),
    Rule("reference.use_dynamic_batching_in_infer", "ref.log_prob_use_dynamic_bsz"),
    Rule("reference.max_tokens_per_microbatch_in_infer", "ref.log_prob_max_token_len_per_gpu"),
    Rule("reference.device_mapping", "cluster.placement.ref", convert=_placement),
    Rule("reference.strategy_args.strategy_name", "actor.strategy", derive=_reference_strategy),
    Rule("reference.strategy_args.", reason=_REF, status="ignored"),
    Rule("reference.model_args.", reason=_REF, status="ignored"),
    Rule("reference.", reason=_REF),
    Rule("*.model_args.", reason="a model option rl does not have (it reads model.path's config)"),
    Rule("*.world_size", reason="ROLL derives it from device_mapping", status="ignored"),
    Rule("*.num_gpus_per_worker", reason="ROLL derives it from the strategy", status="ignored"),
    Rule("*.infer_batch_size", reason="rl's critic forward uses its ppo_micro_batch_size_per_gpu"),
    *[Rule(f"*.{key}", reason=why) for key, why in WORKER_OPTIONS.items()],
    *[Rule(key, reason=why) for key, why in PIPELINE_OPTIONS.items()],
]

REASONS: list[Rule] = []
