"""verl's engine-based SFT trainer config (`sft_trainer_engine.yaml`, verl 0.6.0 on; the only
SFT config of 0.7.1 and later, run by `verl.trainer.sft_trainer`) as ours for `rl sft`: the
keys it adds to the older `sft_trainer.yaml` (whose table, `verl_sft.RULES`, maps the rest).
Its data is whole conversations (`data.messages_key`): each row's messages up to the first
assistant turn become the prompt and the rest the demonstration, assistant turns learned
(`rl.core.data.conversation`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects.mapping import Rule, Unsupported, ignore, ignored_for, off_when
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
    ignore(
        "model.fused_kernel_options.", "rl picks its fused kernels itself (actor.use_fused_kernels)"
    ),
    Rule("model.custom_chat_template", "model.custom_chat_template"),
    Rule("model.exclude_modules", "model.exclude_modules"),
    Rule("model.lora_adapter_path", "model.lora_adapter_path"),
    Rule("model.lora.rank", reason=MEGATRON_LORA, convert=lambda v: v or None),
    ignore("model.lora.", MEGATRON_LORA_SECTION),
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
    ignore(
        "model.enable_activation_offload",
        "activation offload is not in rl (model.gradient_checkpointing is)",
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
    ignore("engine.seed", SEEDED_BY_TRAINER),
    Rule(
        "engine.full_determinism",
        reason="rl seeds every run; torch's deterministic algorithms are not switched on",
        convert=off_when(False, None),
    ),
    ignore("engine.forward_only", ENGINE_INTERNAL),
    ignore("engine.", _FSDP_DETAIL),
    Rule(
        "optim.override_optimizer_config",
        reason="megatron's optimizer fields: rl's SFT runs on FSDP",
        convert=off_when(None, {}),
    ),
    Rule("data.messages_key", "data.messages_key"),
    *ignored_for(_PER_ROW, "data.tools_key", "data.enable_thinking_key"),
    Rule(
        "data.enable_thinking_default",
        reason="a thinking flag for every row: set data.apply_chat_template_kwargs",
        convert=off_when(None, "none"),
    ),
    ignore(
        "data.ignore_input_ids_mismatch",
        "rl lays out the conversation's tokens once (no re-tokenisation to compare)",
    ),
    ignore(
        "data.pad_mode", "padding is masked out: rl packs rows as actor.use_remove_padding says"
    ),
    Rule("data.max_token_len_per_gpu", "actor.ppo_max_token_len_per_gpu"),
    Rule("data.use_dynamic_bsz", "actor.use_dynamic_bsz"),
    ignore("data.num_workers", "rl tokenizes the data once"),
    ignore("checkpoint.", "rl's SFT saves the final model as a Hugging Face folder"),
    *ignored_for(PROFILING, "profiler.", "global_profiler.", "trainer.profile_interval"),
    ignore("trainer.balance_batch", "rl always balances rows over data-parallel ranks by tokens"),
]


def is_engine_sft(values: Mapping[str, Any]) -> bool:
    """verl's engine SFT config: an `engine` section and conversations (`messages_key`)."""
    data = values.get("data")
    return "engine" in values and isinstance(data, dict) and "messages_key" in data
