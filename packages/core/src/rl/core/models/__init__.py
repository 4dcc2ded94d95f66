"""Loading models and tokenizers: Hugging Face folders, or the built-in tiny demo model;
and building folders shaped like released ones (`shapes`) for tests and demos."""

from rl.core.models.loading import (
    load_causal_lm,
    load_model_config,
    load_tokenizer,
    load_value_model,
    model_source,
)
from rl.core.models.shapes import SHAPES, ModelShape, build_model_folder
from rl.core.models.tiny import TINY_CHARS, build_char_tokenizer, tiny_qwen2_config
from rl.core.models.tokenizer_files import build_tokenizer

__all__ = [
    "SHAPES",
    "TINY_CHARS",
    "ModelShape",
    "build_char_tokenizer",
    "build_model_folder",
    "build_tokenizer",
    "load_causal_lm",
    "load_model_config",
    "load_tokenizer",
    "load_value_model",
    "model_source",
    "tiny_qwen2_config",
]
