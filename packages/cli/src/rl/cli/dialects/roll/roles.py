"""The ROLL rules of a training role (actor_train, critic): its strategy (megatron, FSDP2),
training arguments, batches and placement, as the role's keys of ours."""

from __future__ import annotations

from rl.cli.dialects.mapping import Rule, ignore
from rl.cli.dialects.roll import batch, values
from rl.cli.dialects.vocabulary import (
    DECODER_LAYER_WRAP,
    MEGATRON_PARALLEL_KEYS,
    ddp_overlap_rules,
)

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
    parallel = (*MEGATRON_PARALLEL_KEYS, "use_distributed_optimizer")
    rules = [Rule(block + key, f"{ours}.megatron.{key}") for key in parallel]
    rules += [
        ignore(block + "bf16", "the dtype comes from model_args.dtype"),
        ignore(block + "fp16", "the dtype comes from model_args.dtype"),
        *ddp_overlap_rules(block, ours),
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
        Rule(block + "fsdp_size", f"{ours}.fsdp_config.fsdp_size", convert=values.fsdp_size),
        Rule(
            block + "param_dtype",
            f"{ours}.fsdp_config.mixed_precision.param_dtype",
            convert=values.dtype,
        ),
        Rule(
            block + "reduce_dtype",
            f"{ours}.fsdp_config.mixed_precision.reduce_dtype",
            convert=values.dtype,
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
        Rule(block + "wrap_policy.", reason=DECODER_LAYER_WRAP),
        Rule(block + "*", reason="an FSDP2 detail rl sets itself"),
    ]


def _training_rules(role: str, ours: str) -> list[Rule]:
    args = f"{role}.training_args."
    return [
        Rule(args + "learning_rate", f"{ours}.optim.lr"),
        Rule(args + "weight_decay", f"{ours}.optim.weight_decay"),
        Rule(args + "adam_beta1", f"{ours}.optim.betas", derive=values.betas(role)),
        Rule(args + "adam_beta2", f"{ours}.optim.betas", derive=values.betas(role)),
        Rule(args + "adam_epsilon", f"{ours}.optim.eps"),
        Rule(args + "lr_scheduler_type", f"{ours}.optim.lr_scheduler", convert=values.scheduler),
        Rule(args + "warmup_steps", f"{ours}.optim.lr_warmup_steps"),
        Rule(args + "warmup_ratio", f"{ours}.optim.lr_warmup_ratio"),
        Rule(args + "per_device_train_batch_size", f"{ours}.ppo_micro_batch_size_per_gpu"),
        Rule(
            args + "gradient_accumulation_steps",
            f"{ours}.ppo_mini_batch_size",
            derive=batch.mini_batch(role),
        ),
        Rule(args + "save_hf_model", "trainer.save_hf"),
        ignore(args + "max_steps", "ROLL derives it from max_steps"),
        ignore(args + "seed", "ROLL copies the top-level seed"),
        ignore(args + "output_dir", "ROLL copies the top-level output_dir"),
        Rule(args + "*", reason="a Hugging Face TrainingArguments option rl does not have"),
    ]


def role_rules(role: str, ours: str) -> list[Rule]:
    """What actor_train and critic share: strategy, batches, training arguments."""
    return [
        Rule(
            f"{role}.strategy_args.strategy_name", f"{ours}.strategy", convert=values.train_strategy
        ),
        *_megatron_rules(role, ours),
        *_fsdp_rules(role, ours),
        Rule(f"{role}.strategy_args.", reason="a strategy rl does not train with"),
        *_training_rules(role, ours),
        Rule(f"{role}.device_mapping", f"cluster.placement.{ours}", convert=values.placement),
        Rule(f"{role}.use_dynamic_batching_in_train", f"{ours}.use_dynamic_bsz"),
        Rule(f"{role}.max_tokens_per_microbatch_in_train", f"{ours}.ppo_max_token_len_per_gpu"),
        Rule(f"{role}.model_args.ulysses_size", f"{ours}.ulysses_sequence_parallel_size"),
    ]
