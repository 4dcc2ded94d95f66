"""Loading models and tokenizers: Hugging Face folders, or the built-in tiny demo model."""

from rl.core.models.loading import (
    load_causal_lm,
    load_model_config,
    load_tokenizer,
    load_value_model,
    model_source,
)
from rl.core.models.tiny import TINY_CHARS, build_char_tokenizer, tiny_qwen2_config

__all__ = [
    "TINY_CHARS",
    "build_char_tokenizer",
    "load_causal_lm",
    "load_model_config",
    "load_tokenizer",
    "load_value_model",
    "model_source",
    "tiny_qwen2_config",
]
