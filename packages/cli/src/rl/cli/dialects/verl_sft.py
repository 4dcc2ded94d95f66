"""verl's SFT trainer config (`verl/trainer/config/sft_trainer.yaml`, run by
`verl.trainer.fsdp_sft_trainer`) as ours for `rl sft`: composed by Hydra like verl's other
configs (`verl.compose`), mapped by this table. rl's SFT trains the full model (or LoRA's
adapter, `model.lora_rank` > 0) with torch AdamW at `sft.lr` (weight decay, betas) and
verl's LR schedule over its steps, for `trainer.total_epochs` shuffled passes over the rows
(or `trainer.total_training_steps`), prompt + answer cut to `data.max_length` together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rl.cli.dialects import verl_sft_engine
from rl.cli.dialects.mapping import Rule, Unsupported, as_list, ignore, off_when
from rl.cli.dialects.record import Table, Variant
from rl.cli.dialects.verl_values import loggers as verl_loggers
from rl.cli.dialects.vocabulary import (
    DATACLASS_PATH,
    DECODER_LAYER_WRAP,
    MODEL_FROM_DISK,
    schedule_shape_rules,
)

DESCRIPTION = """
verl's SFT trainer configs become ours for `rl sft` (`rl sft --from verl FILE`): the older
`sft_trainer.yaml` (verl 0.4.1 - 0.7.0, recognised by `model.partial_pretrain`) and the
engine one, `sft_trainer_engine.yaml` (0.6.0 on; the only one from 0.7.1; recognised by its
`engine` section and `data.messages_key`). Hydra composes them as verl's other configs. The
optimizer and schedule (`optim.*`: lr, betas, weight decay, warm-up ratio, cosine/constant,
min_lr_ratio) are `sft.*`; the epochs (`trainer.total_epochs`: shuffled passes over the
rows, the last partial batch dropped) `sft.epochs`, capped by `trainer.total_training_steps`;
`data.max_length` (prompt and answer together, cut as `data.truncation` says)
`sft.max_length`. Conversations (`data.messages_key`, or `data.multiturn.*` in the older
file) are split at the first assistant turn into the prompt and the demonstration, whose
assistant turns are learned; a row with per-row `tools` or `enable_thinking` is refused.
"""
DOCUMENTED = "every key of verl's `sft_trainer.yaml`, composed with its optim/fsdp default"

_SCHEDULE = "rl's SFT runs torch AdamW (sft.lr, weight_decay, betas, lr_scheduler, ...)"
_MULTITURN = (
    "a per-row column verl hands to the chat template; rl refuses a row that has it "
    "(data.messages_key rows are rendered without per-row tools or thinking flags)"
)


def _steps(value: Any) -> Any:
    """null: the steps of trainer.total_epochs (rl's sft.steps 0 with sft.epochs)."""
    return None if value is None else int(value)


def _schedule(value: Any) -> Any:
    """verl's SFT LR schedules (constant, cosine; wsd and linear in later releases)."""
    if value in (None, "constant", "cosine", "linear", "wsd"):
        return value
    return Unsupported(f"lr_scheduler {value!r}: constant, cosine, linear or wsd")


RULES: list[Rule] = [
    ignore("**._target_", DATACLASS_PATH),
    *verl_sft_engine.RULES,  # the keys of the engine SFT config (verl >= 0.6.0)
    Rule("data.train_batch_size", "sft.batch_size"),
    Rule("data.micro_batch_size_per_gpu", "actor.ppo_micro_batch_size_per_gpu"),
    Rule(
        "data.micro_batch_size",
        reason="deprecated in verl for micro_batch_size_per_gpu",
        convert=off_when(None),
    ),
    Rule("data.train_files", "data.train_files", convert=as_list),
    Rule("data.val_files", "data.val_files", convert=as_list),
    Rule("data.prompt_key", "data.prompt_key"),
    Rule("data.response_key", "data.answer_key"),
    Rule("data.truncation", "data.truncation"),
    # prompt + response together (verl's SFT dataset cuts their concatenation); the
    # separate bounds of rl's data loading set to it, so that they never cut first
    Rule(
        "data.max_length",
        "sft.max_length",
        also=(
            ("data.max_prompt_length", lambda flat: flat.get("data.max_length")),
            ("data.max_response_length", lambda flat: flat.get("data.max_length")),
        ),
    ),
    Rule("data.*_max_samples", reason="rl reads every row", convert=off_when(-1, None)),
    Rule("data.*_dict_keys", reason="rl reads flat prompt/answer columns", convert=off_when(None)),
    # conversations (verl's multi-turn SFT): rows split into prompt and demonstration
    Rule(
        "data.multiturn.enable",
        "data.messages_key",
        derive=lambda flat: (
            (flat.get("data.multiturn.messages_key") or "messages")
            if flat.get("data.multiturn.enable")
            else None
        ),
    ),
    ignore("data.multiturn.messages_key", "read with multiturn.enable"),
    ignore("data.multiturn.", _MULTITURN),
    Rule(
        "data.chat_template",
        reason="set data.chat_template (native: the tokenizer's)",
        convert=off_when(None),
    ),
    Rule(
        "data.custom_cls.",
        reason="rl reads its own dataset (rl.core.data)",
        convert=off_when(None),
    ),
    Rule("data.balance_dp_token", reason="rl's SFT draws random rows", convert=off_when(False)),
    Rule(
        "data.use_shm",
        reason="rl reads the data from disk",
        convert=off_when(False),
        status="ignored",
    ),
    Rule(
        "data.apply_chat_template_kwargs",
        reason="rl applies the template without kwargs",
        convert=off_when({}),
    ),
    Rule("model.partial_pretrain", "model.path", also=(("sft.enable", lambda flat: True),)),
    Rule("model.enable_gradient_checkpointing", "model.gradient_checkpointing"),
    Rule("model.trust_remote_code", "model.trust_remote_code"),
    Rule("model.fsdp_config.model_dtype", "model.dtype", convert=verl_sft_engine.dtype),
    Rule("model.fsdp_config.cpu_offload", "actor.fsdp_config.offload_policy"),
    Rule("model.fsdp_config.offload_params", "actor.fsdp_config.param_offload"),
    ignore("model.fsdp_config.wrap_policy.", DECODER_LAYER_WRAP),
    Rule(
        "model.strategy",
        "actor.strategy",
        convert=lambda v: (
            "fsdp"
            if v in ("fsdp", "fsdp2")
            else Unsupported(f"strategy {v!r}: rl's SFT runs on FSDP2")
        ),
    ),
    # LoRA: verl's names (rl sft trains the adapter; the export is it in PEFT's format)
    Rule("model.lora_rank", "model.lora_rank"),
    Rule("model.lora_alpha", "model.lora_alpha"),
    Rule("model.target_modules", "model.target_modules"),
    Rule("model.use_liger", reason="Liger kernels are not in rl", convert=off_when(False)),
    Rule("model.use_shm", reason=MODEL_FROM_DISK, convert=off_when(False), status="ignored"),
    Rule(
        "model.external_lib",
        reason="rl imports custom models through its registry",
        convert=off_when(None),
    ),
    Rule("optim.lr", "sft.lr"),
    Rule("optim.clip_grad", "actor.optim.grad_clip"),
    Rule("optim.optimizer", reason=_SCHEDULE, convert=off_when("AdamW")),
    Rule("optim.optimizer_impl", reason=_SCHEDULE, convert=off_when("torch.optim")),
    Rule("optim.lr_warmup_steps", reason=_SCHEDULE, convert=off_when(-1, 0, None)),
    # AdamW and the schedule over the SFT steps: verl's names of each release
    Rule("optim.lr_warmup_steps_ratio", "sft.lr_warmup_ratio"),
    Rule("optim.warmup_steps_ratio", "sft.lr_warmup_ratio"),
    ignore("optim.total_training_steps", "verl's own copy"),
    Rule("optim.weight_decay", "sft.weight_decay"),
    Rule("optim.betas", "sft.betas"),
    Rule("optim.lr_scheduler", "sft.lr_scheduler", convert=_schedule),
    Rule("optim.warmup_style", "sft.lr_scheduler", convert=_schedule),
    Rule("optim.lr_scheduler_type", "sft.lr_scheduler", convert=_schedule),
    Rule("optim.min_lr_ratio", "sft.min_lr_ratio"),
    *schedule_shape_rules("optim."),
    Rule("optim.", reason=_SCHEDULE),
    Rule("ulysses_sequence_parallel_size", "actor.ulysses_sequence_parallel_size"),
    Rule("use_remove_padding", "actor.use_remove_padding"),
    # verl runs total_epochs shuffled passes over the rows, stopping early at
    # total_training_steps when that is set
    Rule("trainer.total_training_steps", "sft.steps", convert=_steps),
    Rule("trainer.total_epochs", "sft.epochs"),
    Rule("trainer.default_local_dir", "trainer.output_dir"),
    Rule(
        "trainer.default_hdfs_dir",
        reason="rl writes to trainer.output_dir only",
        convert=off_when(None),
        status="ignored",
    ),
    Rule("trainer.n_gpus_per_node", "cluster.n_gpus_per_node"),
    Rule("trainer.nnodes", "cluster.nnodes"),
    ignore("trainer.checkpoint.", "rl's SFT saves the final model as a Hugging Face folder"),
    Rule(
        "trainer.test_freq",
        reason="rl's SFT does not validate (rl eval --model scores the result)",
        convert=off_when(-1, None),
        status="ignored",
    ),
    Rule(
        "trainer.save_freq",
        reason="rl's SFT saves the final model only",
        convert=off_when(-1, None),
        status="ignored",
    ),
    ignore("trainer.resume_*", "rl's SFT runs start to end (no checkpoints to resume)"),
    ignore("trainer.max_ckpt_to_keep", "rl's SFT saves the final model only"),
    Rule("trainer.logger", "trainer.logger", convert=verl_loggers),
    Rule("trainer.", "trainer."),
]

REASONS: list[Rule] = [
    Rule("trainer.", reason="a verl SFT trainer option with no counterpart in rl"),
]


def is_sft(values: Mapping[str, Any]) -> bool:
    """verl's SFT trainer config, not its PPO one."""
    model = values.get("model")
    if "actor_rollout_ref" in values or not isinstance(model, dict):
        return False
    return "partial_pretrain" in model or verl_sft_engine.is_engine_sft(values)


VARIANT = Variant(
    Table("verl_sft", RULES, REASONS, "verl's SFT trainer", DESCRIPTION, DOCUMENTED),
    job="sft",
    applies=is_sft,
    note="verl's SFT trainer config: run it with `rl sft --from verl`",
)
