"""Vision-language model folders shaped like the released Qwen2-VL / Qwen2.5-VL ones,
built in code, offline (the vision-language sibling of `shapes`).

`build_vl_model_folder("qwen2.5-vl-3b", path)` writes what a released instruct folder
holds: config.json in the release's flat layout (language keys at the top, the vision
tower's under `vision_config`, multimodal rotary sections under `rope_scaling`),
generation_config.json, preprocessor_config.json (the image processor: 14-pixel
patches, 2 x 2 merge, the pixel bounds and CLIP's normalisation), the full-size Qwen2.5
tokenizer (the vision tokens are its added tokens, at their real ids) with the VL chat
template (an image part of a message renders as `<|vision_start|><|image_pad|>
<|vision_end|>`), chat_template.json, and seeded random weights. Fewer layers and
narrower widths shrink it; the head dimensions (128 for the language model, 80 for the
vision tower), the patch and merge sizes, the vocabulary and the token ids stay real.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.core.models.random_weights import write_random_weights
from rl.core.models.shapes import staged_folder, write_json
from rl.core.models.tokenizer_files import write_tokenizer_files

# The Qwen2-VL / Qwen2.5-VL instruct template (their documented prompt format: ChatML, a
# default system message, each image part as a vision-start / image-pad / vision-end run
# that the processor widens to the image's merged patches).
QWEN_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture "
    "{{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video "
    "{{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# token ids the Qwen2.5 tokenizer gives the vision tokens (its added tokens)
VISION_TOKEN_IDS = {
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "vision_token_id": 151654,
    "image_token_id": 151655,
    "video_token_id": 151656,
}
IMAGE_PROCESSOR = {
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "image_processor_type": "Qwen2VLImageProcessor",
}
VISION_HEAD_DIM = 80  # 1280 / 16 in both families' vision towers


@dataclass(frozen=True)
class VLShape:
    """One released vision-language model's architecture, as its config.json states it."""

    name: str
    description: str
    architecture: str
    model_type: str
    processor_class: str
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    released_layers: int
    tie_word_embeddings: bool
    vision: Mapping[str, Any]  # the released vision_config
    vision_width_keys: tuple[str, str]  # (width, MLP width) keys of that vision_config


_QWEN2_5_VISION = {
    "depth": 32,
    "hidden_act": "silu",
    "hidden_size": 1280,
    "intermediate_size": 3420,
    "num_heads": 16,
    "in_chans": 3,
    "out_hidden_size": 2048,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "spatial_patch_size": 14,
    "window_size": 112,
    "fullatt_block_indexes": [7, 15, 23, 31],
    "tokens_per_second": 2,
    "temporal_patch_size": 2,
}
_QWEN2_VISION = {
    "depth": 32,
    "embed_dim": 1280,
    "mlp_ratio": 4,
    "num_heads": 16,
    "in_chans": 3,
    "hidden_size": 1536,
    "hidden_act": "quick_gelu",
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}

VL_SHAPES = {
    "qwen2.5-vl-3b": VLShape(
        name="qwen2.5-vl-3b",
        description="Qwen2.5-VL-3B-Instruct: 2048 hidden, 16/2 heads, tied embeddings, a "
        "32-block 1280-wide windowed vision tower merged 2 x 2 into the language model",
        architecture="Qwen2_5_VLForConditionalGeneration",
        model_type="qwen2_5_vl",
        processor_class="Qwen2_5_VLProcessor",
        hidden_size=2048,
        intermediate_size=11008,
        num_attention_heads=16,
        num_key_value_heads=2,
        released_layers=36,
        tie_word_embeddings=True,
        vision=_QWEN2_5_VISION,
        vision_width_keys=("hidden_size", "intermediate_size"),
    ),
    "qwen2-vl-2b": VLShape(
        name="qwen2-vl-2b",
        description="Qwen2-VL-2B-Instruct: 1536 hidden, 12/2 heads, tied embeddings, a "
        "32-block 1280-wide vision tower merged 2 x 2 into the language model",
        architecture="Qwen2VLForConditionalGeneration",
        model_type="qwen2_vl",
        processor_class="Qwen2VLProcessor",
        hidden_size=1536,
        intermediate_size=8960,
        num_attention_heads=12,
        num_key_value_heads=2,
        released_layers=28,
        tie_word_embeddings=True,
        vision=_QWEN2_VISION,
        vision_width_keys=("embed_dim", "mlp_ratio"),
    ),
}


def vl_shape(name: str) -> VLShape:
    """The shape called `name`; a ValueError names the known ones."""
    if name not in VL_SHAPES:
        raise ValueError(f"unknown vision-language shape {name!r}; known: {', '.join(VL_SHAPES)}")
    return VL_SHAPES[name]


def _heads(total: int, per_head: int, what: str) -> int:
    if total <= 0 or total % per_head:
        raise ValueError(f"{what} must be a positive multiple of {per_head}, not {total}")
    return total // per_head


def _vision_config(
    shape: VLShape, depth: int, width: int | None, mlp_width: int | None, out: int
) -> dict[str, Any]:
    if depth < 1:
        raise ValueError(f"vision_depth must be at least 1, not {depth}")
    vision = copy.deepcopy(dict(shape.vision))
    width_key, mlp_key = shape.vision_width_keys
    released_width = vision[width_key]
    vision["depth"] = depth
    vision[width_key] = width or released_width
    vision["num_heads"] = _heads(vision[width_key], VISION_HEAD_DIM, "vision_hidden_size")
    if mlp_width is not None:
        if mlp_key == "mlp_ratio":  # Qwen2-VL states its MLP as a whole ratio of the width
            if mlp_width % vision[width_key]:
                raise ValueError(
                    f"{shape.name}: vision_intermediate_size must be a multiple of the "
                    f"vision width {vision[width_key]}, not {mlp_width}"
                )
            vision[mlp_key] = mlp_width // vision[width_key]
        else:
            vision[mlp_key] = mlp_width
    if "fullatt_block_indexes" in vision:  # the last block of each quarter attends fully
        vision["fullatt_block_indexes"] = sorted({max(0, depth * q // 4 - 1) for q in (1, 2, 3, 4)})
    vision["out_hidden_size" if "out_hidden_size" in vision else "hidden_size"] = out
    return vision


def vl_config(
    shape: VLShape,
    *,
    num_layers: int = 2,
    vision_depth: int = 2,
    dtype: str = "float32",
    hidden_size: int | None = None,
    intermediate_size: int | None = None,
    vision_hidden_size: int | None = None,
    vision_intermediate_size: int | None = None,
) -> dict[str, Any]:
    """config.json of `shape` with fewer layers and blocks (narrower if asked)."""
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, not {num_layers}")
    hidden = hidden_size or shape.hidden_size
    per_head = shape.hidden_size // shape.num_attention_heads
    heads = _heads(hidden, per_head, "hidden_size")
    group = shape.num_attention_heads // shape.num_key_value_heads
    kv_heads = max(1, heads // group)
    while heads % kv_heads:
        kv_heads -= 1
    vision = _vision_config(
        shape, vision_depth, vision_hidden_size, vision_intermediate_size, hidden
    )
    return {
        "architectures": [shape.architecture],
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        **VISION_TOKEN_IDS,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size or shape.intermediate_size,
        "max_position_embeddings": 32768 if shape.model_type == "qwen2_vl" else 128000,
        "max_window_layers": shape.released_layers,
        "model_type": shape.model_type,
        "num_attention_heads": heads,
        "num_hidden_layers": num_layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "torch_dtype": dtype,
        "transformers_version": "4.41.2",
        "use_cache": True,
        "use_sliding_window": False,
        "vision_config": vision,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vocab_size": 151936,
    }


def _write_chat_template(folder: Path) -> None:
    """The VL template in tokenizer_config.json and chat_template.json (both, as released)."""
    config_file = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_file.read_text(encoding="utf-8"))
    tokenizer_config["chat_template"] = QWEN_VL_CHAT_TEMPLATE
    write_json(config_file, tokenizer_config)
    write_json(folder / "chat_template.json", {"chat_template": QWEN_VL_CHAT_TEMPLATE})


def build_vl_model_folder(
    shape: str,
    path: str | os.PathLike[str],
    *,
    num_layers: int = 2,
    vision_depth: int = 2,
    seed: int = 0,
    dtype: str = "float32",
    hidden_size: int | None = None,
    intermediate_size: int | None = None,
    vision_hidden_size: int | None = None,
    vision_intermediate_size: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """Write a vision-language folder shaped like `shape` (see `VL_SHAPES`) at `path`.

    `path` must not exist or be empty; the folder appears whole or not at all."""
    spec = vl_shape(shape)
    config = vl_config(
        spec,
        num_layers=num_layers,
        vision_depth=vision_depth,
        dtype=dtype,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        vision_hidden_size=vision_hidden_size,
        vision_intermediate_size=vision_intermediate_size,
    )
    with staged_folder(path) as staging:
        write_json(staging / "config.json", config)
        write_json(
            staging / "generation_config.json",
            {
                "bos_token_id": 151643,
                "pad_token_id": 151643,
                "do_sample": True,
                "eos_token_id": [151645, 151643],
                "repetition_penalty": 1.05,
                "temperature": 0.1,
                "top_p": 0.001,
                "top_k": 1,
            },
        )
        write_json(
            staging / "preprocessor_config.json",
            {**IMAGE_PROCESSOR, "processor_class": spec.processor_class},
        )
        write_tokenizer_files("qwen2.5", staging, cache_dir)
        _write_chat_template(staging)
        write_random_weights(staging, seed, dtype)
    return Path(path)
