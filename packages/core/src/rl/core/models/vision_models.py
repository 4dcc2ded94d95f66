"""Which transformers class holds a model, and what a vision-language folder adds.

A vision-language folder (Qwen2-VL, Qwen2.5-VL) is an image-text-to-text model in
transformers: `AutoModelForImageTextToText` loads it (the causal-LM auto class refuses
its config), with the vision tower, the merger and the language model under one
`model`. Its images go through the folder's image processor; transformers' own
`AutoImageProcessor` picks the torchvision-backed one, whose CPU build PyPI does not
have for this torch, so the PIL-backed class of the same processor is used (the same
resizing, rescaling and normalisation, in numpy).
"""

from __future__ import annotations

from typing import Any

# model_type -> the vision-language families rl trains (multimodal rotary positions,
# the `<|image_pad|>` placeholder widened to the merged patches)
VISION_LANGUAGE_TYPES = ("qwen2_vl", "qwen2_5_vl")


def is_vision_language(config: Any) -> bool:
    """Whether a transformers config (or its model_type string) is a vision-language one
    rl knows."""
    model_type = config if isinstance(config, str) else getattr(config, "model_type", None)
    return model_type in VISION_LANGUAGE_TYPES


def model_class(config: Any) -> Any:
    """The transformers auto class that builds `config`'s model with an LM head."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    return AutoModelForImageTextToText if is_vision_language(config) else AutoModelForCausalLM


def language_model_config(config: Any) -> Any:
    """The language model's config of a vision-language config (the config itself
    otherwise): hidden size, vocabulary, layers live there in transformers 5."""
    return getattr(config, "text_config", None) or config


def load_image_processor(path: str) -> Any:
    """The image processor of a vision-language folder (its preprocessor_config.json), on
    PIL and numpy (no torchvision needed)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    return Qwen2VLImageProcessorPil.from_pretrained(path)
