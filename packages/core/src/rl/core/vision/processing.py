"""A row's prompt and images -> token ids and image inputs, as verl applies the
processor of a vision-language model.

verl splits each message's text at its `<image>` (and `<video>`) placeholders into
content parts (`{"type": "image"}`, `{"type": "text", "text": ...}`), renders the
messages with the chat template (which writes `<|vision_start|><|image_pad|>
<|vision_end|>` for an image part), processes the images (resized within the processor's
pixel bounds to multiples of patch x merge, normalised, cut into patches) and widens the
i-th `<|image_pad|>` into as many as image i has merged patches before tokenizing. The
placeholders and the images must agree in number; a row where they do not is refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rl.core.vision.inputs import ImageInputs

PLACEHOLDER = re.compile(r"(<image>|<video>)")
IMAGE_PAD = "<|image_pad|>"
VIDEO_PAD = "<|video_pad|>"


def content_parts(text: str) -> list[dict[str, Any]]:
    """A message's text as verl's content parts, split at `<image>` / `<video>`."""
    parts: list[dict[str, Any]] = []
    for segment in PLACEHOLDER.split(text):
        if segment == "<image>":
            parts.append({"type": "image"})
        elif segment == "<video>":
            parts.append({"type": "video"})
        elif segment:
            parts.append({"type": "text", "text": segment})
    return parts


def count_placeholders(messages: list[dict[str, Any]], kind: str = "<image>") -> int:
    return sum(str(m.get("content", "")).count(kind) for m in messages)


@dataclass
class VisionProcessor:
    """The image side of a vision-language model's processor: `image_processor` (the
    folder's), the image placeholder token and the merge size of its vision tower."""

    image_processor: Any
    image_token_id: int

    @classmethod
    def from_folder(
        cls,
        path: str,
        tokenizer: Any,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
    ) -> VisionProcessor:
        """The processor of a vision-language folder (its preprocessor_config.json), its
        pixel bounds replaced by `min_pixels` / `max_pixels` where given.
        transformers' `AutoImageProcessor` picks the torchvision-backed class, whose CPU
        build PyPI does not have for this torch; the PIL-backed class of the same
        processor does the same resizing, rescaling and normalisation in numpy."""
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )

        bounds: dict[str, Any] = {"min_pixels": min_pixels, "max_pixels": max_pixels}
        image_processor = Qwen2VLImageProcessorPil.from_pretrained(
            path, **{key: value for key, value in bounds.items() if value is not None}
        )
        return cls(image_processor, int(tokenizer.convert_tokens_to_ids(IMAGE_PAD)))

    @property
    def merge_size(self) -> int:
        return int(self.image_processor.merge_size)

    def process(self, images: list[Any]) -> ImageInputs:
        """The images' patches and grids, as the processor makes them."""
        out = self.image_processor(images=images, return_tensors="pt")
        return ImageInputs(out["pixel_values"].float(), out["image_grid_thw"].long())

    def widen(self, text: str, inputs: ImageInputs) -> str:
        """`text` with the i-th `<|image_pad|>` repeated for image i's merged patches."""
        counts = inputs.placeholder_tokens(self.merge_size)
        pieces = text.split(IMAGE_PAD)
        if len(pieces) - 1 != len(counts):
            raise ValueError(f"{len(pieces) - 1} image pads in the text, {len(counts)} images")
        out = [pieces[0]]
        for count, piece in zip(counts, pieces[1:], strict=True):
            out += [IMAGE_PAD * count, piece]
        return "".join(out)
