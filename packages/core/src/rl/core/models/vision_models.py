"""Which transformers class holds a model, and what a vision-language folder adds.

A vision-language folder (Qwen2-VL, Qwen2.5-VL) is an image-text-to-text model in
transformers: `AutoModelForImageTextToText` loads it (the causal-LM auto class refuses
its config), with the vision tower, the merger and the language model under one
`model`. Its images go through the folder's image processor
(`rl.core.vision.processing`).
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


def vision_tower(model: Any) -> Any:
    """The vision tower (with its merger) of a transformers vision-language model."""
    inner = getattr(model, "model", model)
    tower = getattr(inner, "visual", None) or getattr(model, "visual", None)
    if tower is None:
        raise ValueError(f"{type(model).__name__} has no vision tower (`visual`)")
    return tower
