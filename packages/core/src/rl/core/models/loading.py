"""Build the policy, reference and critic models and the tokenizer from `model.*` config."""

from __future__ import annotations

from typing import Any

import torch

from rl.core.config import ConfigError, ModelConfig
from rl.core.models.tiny import build_char_tokenizer, tiny_qwen2_config

BUILTIN_TINY = "builtin:tiny-qwen2"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _check_path(config: ModelConfig) -> None:
    if config.path.startswith("builtin:") and config.path != BUILTIN_TINY:
        raise ConfigError(
            f"model.path = {config.path!r}: the only built-in model is {BUILTIN_TINY!r}"
        )


def load_tokenizer(config: ModelConfig) -> Any:
    """The tokenizer of `model.path` (left padding, a pad token always set)."""
    _check_path(config)
    if config.path == BUILTIN_TINY:
        return build_char_tokenizer()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(
        config.path, trust_remote_code=config.trust_remote_code, padding_side="left"
    )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _model_config(config: ModelConfig, tokenizer: Any) -> Any:
    if config.path == BUILTIN_TINY:
        return tiny_qwen2_config(
            config.tiny, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id
        )
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(config.path, trust_remote_code=config.trust_remote_code)


def load_causal_lm(config: ModelConfig, tokenizer: Any, seed: int = 0) -> torch.nn.Module:
    """The causal LM of `model.path`; the built-in one gets seeded random weights."""
    _check_path(config)
    from transformers import AutoModelForCausalLM

    dtype = DTYPES[config.dtype]
    if config.path == BUILTIN_TINY:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_config(_model_config(config, tokenizer), dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(
            config.path, dtype=dtype, trust_remote_code=config.trust_remote_code
        )
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model


def load_value_model(config: ModelConfig, tokenizer: Any, seed: int = 0) -> torch.nn.Module:
    """A critic: the same backbone with a one-output token-classification (value) head."""
    _check_path(config)
    from transformers import AutoModelForTokenClassification

    model_config = _model_config(config, tokenizer)
    model_config.num_labels = 1
    dtype = DTYPES[config.dtype]
    with torch.random.fork_rng():
        torch.manual_seed(seed + 1)
        if config.path == BUILTIN_TINY:
            return AutoModelForTokenClassification.from_config(model_config, dtype=dtype)
        return AutoModelForTokenClassification.from_pretrained(
            config.path,
            config=model_config,
            dtype=dtype,
            trust_remote_code=config.trust_remote_code,
        )
