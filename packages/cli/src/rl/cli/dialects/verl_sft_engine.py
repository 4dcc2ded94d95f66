"""verl's engine-based SFT trainer config (`sft_trainer_engine.yaml`, verl 0.6.0 on; the only
SFT config of 0.7.1 and later, run by `verl.trainer.sft_trainer`) as ours for `rl sft`: the
keys it adds to the older `sft_trainer.yaml` (whose table, `verl_sft.RULES`, maps the rest).
Its data is whole conversations (`data.messages_key`): each row's messages up to the first
assistant turn become the prompt and the rest the demonstration, assistant turns learned
(`rl.core.data.conversation`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, off_when
from rl.cli.dialects.vocabulary import (
    ENGINE_INTERNAL,
    MEGATRON_LORA,
    MEGATRON_LORA_SECTION,
    PROFILING,
    SEEDED_BY_TRAINER,
    TOKENIZER_FROM_MODEL,
)

_FSDP_DETAIL = "an FSDP detail rl sets itself (prefetch, wrapping, compilation, padding)"
_PER_ROW = (
    "a per-row column verl hands to the chat template; rl refuses a row that has it "
    "(data.messages_key rows are rendered without per-row tools or thinking flags)"
)
_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def dtype(value: Any) -> Any:
    """verl's dtype names (fp32, bf16, fp16, or torch's) as ours."""
    name = _DTYPES.get(str(value), str(value))
    if name in ("float32", "bfloat16", "float16"):
        return name
    return Unsupported(f"dtype {value!r}: fp32, bf16 or fp16")


def _fsdp_strategy(value: Any) -> Any:
    if value in ("fsdp", "fsdp2"):
        return "fsdp"
    return Unsupported(f"engine.strategy {value!r}: rl's SFT runs on FSDP2")


RULES: list[Rule] = [
    Rule("model.path", "model.path", also=(("sft.enable", lambda flat: True),)),
    Rule("model.use_remove_padding", "actor.use_remove_padding"),
    Rule("model.use_fused_kernels", "actor.use_fused_kernels"),
    Rule(
        "model.fused_kernel_options.",
        reason="rl picks its fused kernels itself (actor.use_fused_kernels)",
        status="ignored",
    ),
    Rule("model.custom_chat_template", "model.custom_chat_template"),
    Rule("model.exclude_modules", "model.exclude_modules"),
    Rule("model.lora_adapter_path", "model.lora_adapter_path"),
    Rule("model.lora.rank", reason=MEGATRON_LORA, convert=lambda v: v or None),
    Rule("model.lora.", reason=MEGATRON_LORA_SECTION, status="ignored"),
    Rule("model.tokenizer_path", reason=TOKENIZER_FROM_MODEL, convert=off_when(None)),
    Rule(
        "model.hf_config_path",
        reason="rl reads the model config from model.path",
        convert=off_when(None),
    ),
    Rule(
        "model.override_config",
        reason="rl builds the model as model.path's config says",
        convert=off_when(None, {}),
    ),
    Rule("model.override_config.", reason="rl builds the model as model.path's config says"),
    Rule(
        "model.enable_activation_offload",
        reason="activation offload is not in rl (model.gradient_checkpointing is)",
        status="ignored",
    ),
    Rule("engine.strategy", "actor.strategy", convert=_fsdp_strategy),
    Rule("engine.model_dtype", "model.dtype", convert=dtype),
    # the compute dtype: FSDP's mixed precision (parameters gathered in it)
    Rule("engine.dtype", "actor.fsdp_config.mixed_precision.param_dtype", convert=dtype),
    Rule("engine.fsdp_size", "actor.fsdp_config.fsdp_size"),
    Rule("engine.param_offload", "actor.fsdp_config.param_offload"),
    Rule("engine.optimizer_offload", "actor.fsdp_config.optimizer_offload"),
    Rule("engine.offload_policy", "actor.fsdp_config.offload_policy"),
    Rule("engine.reshard_after_forward", "actor.fsdp_config.reshard_after_forward"),
    Rule("engine.ulysses_sequence_parallel_size", "actor.ulysses_sequence_parallel_size"),
    Rule("engine.seed", reason=SEEDED_BY_TRAINER, status="ignored"),
    Rule(
        "engine.full_determinism",
        reason="rl seeds every run; torch's deterministic algorithms are not switched on",
        convert=off_when(False, None),
    ),
    Rule("engine.forward_only", reason=ENGINE_INTERNAL, status="ignored"),
    Rule("engine.", reason=_FSDP_DETAIL, status="ignored"),
    Rule(
        "optim.override_optimizer_config",
        reason="megatron's optimizer fields: rl's SFT runs on FSDP",
        convert=off_when(None, {}),
    ),
    Rule("data.messages_key", "data.messages_key"),
    Rule("data.tools_key", reason=_PER_ROW, status="ignored"),
    Rule("data.enable_thinking_key", reason=_PER_ROW, status="ignored"),
    Rule(
        "data.enable_thinking_default",
        reason="a thinking flag for every row: set data.apply_chat_template_kwargs",
        convert=off_when(None, "none"),
    ),
    Rule(
        "data.ignore_input_ids_mismatch",
        reason="rl lays out the conversation's tokens once (no re-tokenisation to compare)",
        status="ignored",
    ),
    Rule(
        "data.pad_mode",
        reason="padding is masked out: rl packs rows as actor.use_remove_padding says",
        status="ignored",
    ),
    Rule("data.max_token_len_per_gpu", "actor.ppo_max_token_len_per_gpu"),
    Rule("data.use_dynamic_bsz", "actor.use_dynamic_bsz"),
    Rule("data.num_workers", reason="rl tokenizes the data once", status="ignored"),
    Rule(
        "checkpoint.",
        reason="rl's SFT saves the final model as a Hugging Face folder",
        status="ignored",
    ),
    Rule("profiler.", reason=PROFILING, status="ignored"),
    Rule("global_profiler.", reason=PROFILING, status="ignored"),
    Rule("trainer.profile_interval", reason=PROFILING, status="ignored"),
    Rule(
        "trainer.balance_batch",
        reason="rl always balances rows over data-parallel ranks by tokens",
        status="ignored",
    ),
]


def is_engine_sft(values: Mapping[str, Any]) -> bool:
    """verl's engine SFT config: an `engine` section and conversations (`messages_key`)."""
    data = values.get("data")
    return "engine" in values and isinstance(data, dict) and "messages_key" in data
