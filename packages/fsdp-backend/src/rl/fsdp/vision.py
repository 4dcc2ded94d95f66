"""A vision-language model's inputs in the FSDP engine's passes: each row's images
(`pixel_values` / `image_grid_thw` of the batch) and the multimodal rotary positions of
its tokens, computed from its ids and image grids as the model computes them
(`rl.core.vision.rope`), for padded rows ([3, B, L]) and for packed ones ([4, 1, N]: the
restarting text positions first, which bound the packed sequences for attention, then the
three rotary sections of each real token)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from rl.core.vision.inputs import images_of_rows
from rl.core.vision.rope import mrope_positions, row_grids


@dataclass(frozen=True)
class VisionInputs:
    pixel_values: torch.Tensor  # [patches, D], the micro-batch's rows back to back
    image_grid_thw: torch.Tensor  # int64 [images, 3]
    positions: torch.Tensor  # int64 [3, B, L] of the padded rows

    def model_inputs(self, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        return {
            "pixel_values": self.pixel_values.to(dtype),
            "image_grid_thw": self.image_grid_thw,
        }

    def packed_positions(self, text_positions: torch.Tensor, flat_to_packed: torch.Tensor) -> Any:
        """[4, 1, N]: `text_positions` [1, N] (restarting per packed sequence), then each
        real token's three rotary positions at its packed place."""
        flat = self.positions.reshape(3, -1)
        real = flat_to_packed >= 0
        packed = torch.zeros(3, text_positions.shape[1], dtype=torch.long, device=flat.device)
        packed[:, flat_to_packed[real]] = flat[:, real]
        return torch.cat([text_positions, packed], 0)[:, None]


def vision_inputs(model: torch.nn.Module, batch: Mapping[str, torch.Tensor]) -> VisionInputs | None:
    """The micro-batch's images and positions (None for text rows)."""
    if "image_grid_thw" not in batch:
        return None
    images = images_of_rows(batch)
    if images is None:
        return None
    config = model.config
    positions = mrope_positions(
        batch["input_ids"],
        batch["attention_mask"],
        row_grids(batch["image_grid_thw"]),
        config.image_token_id,
        config.vision_config.spatial_merge_size,
    )
    return VisionInputs(images.pixel_values, images.image_grid_thw, positions)


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype
