"""The distillation teacher's engine: a reference engine (frozen, log-probs only) of the
teacher's own model folder, built by the train backend like the reference and placed with
it on the actor's devices (taking turns; offloaded with the other train roles)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.config.schema import ModelConfig, RefConfig

KEY = "distillation.teacher_model.model_path"


def teacher_model_config(config: Config) -> ModelConfig:
    """`model` with the teacher's folder and dtype (the student's tiny shape, trust flag)."""
    teacher = config.distillation.teacher_model
    assert teacher.model_path is not None, "checked by DistillationConfig"
    return replace(
        config.model,
        path=teacher.model_path,
        dtype=teacher.dtype or config.model.dtype,
        tokenizer_path=None,
        custom_chat_template=None,
        gradient_checkpointing=False,
    )


def check_same_vocabulary(config: Config, tokenizer: Any) -> None:
    """The teacher's tokenizer must give every token of the student's the same id (the
    teacher scores the student's token ids; tokens it has beyond them do no harm: a
    folder's Qwen2 tokenizer adds `<|endoftext|>` after the built-in model's 51);
    ConfigError naming the key otherwise."""
    from rl.core.models import load_tokenizer

    model = teacher_model_config(config)
    try:
        teacher = load_tokenizer(model)
    except ConfigError as error:
        raise ConfigError(
            f"{KEY} = {model.path!r}: its tokenizer does not load ({error})"
        ) from None
    ours, theirs = tokenizer.get_vocab(), teacher.get_vocab()
    # every token the student has, under the same id (a teacher may have more after them)
    differ = sorted(
        (token, i, theirs.get(token)) for token, i in ours.items() if theirs.get(token) != i
    )
    if differ:
        raise ConfigError(
            f"{KEY} = {model.path!r}: the teacher's vocabulary differs from the student's "
            f"({len(differ)} of the student's {len(ours)} tokens have another id or none: "
            f"e.g. (token, student id, teacher id) {differ[:3]}): on-policy distillation "
            "scores the student's token ids with the teacher, so both need the same tokenizer"
        )


def teacher_config(config: Config, tokenizer: Any) -> Config:
    """The config a reference engine reads to be the teacher: its model, and the
    teacher's log-prob micro-batching in `ref`'s keys."""
    check_same_vocabulary(config, tokenizer)
    teacher = config.distillation.teacher_model
    return replace(
        config,
        model=teacher_model_config(config),
        ref=RefConfig(
            log_prob_micro_batch_size_per_gpu=teacher.log_prob_micro_batch_size_per_gpu,
            log_prob_use_dynamic_bsz=teacher.log_prob_use_dynamic_bsz,
            log_prob_max_token_len_per_gpu=teacher.log_prob_max_token_len_per_gpu,
        ),
    )
