"""A prompt's images as the vision tower takes them, and their place in a batch.

The processor turns a prompt's images into `pixel_values` [patches, C * T * P * P]
(float32) and `image_grid_thw` [images, 3] (each image's grid of patches: time, height,
width). Rows of a batch have different numbers of images and patches, so the batch keeps
them per row, zero-padded: `pixel_values` [B, most patches, D] and `image_grid_thw`
[B, most images, 3], where a (0, 0, 0) grid is no image. `images_of_rows` gives back what
the model takes for any selection of rows (a micro-batch): their patches and grids back to
back, in row order, which is the order of their `<|image_pad|>` runs in `input_ids`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

IMAGE_KEYS = ("pixel_values", "image_grid_thw")


@dataclass(frozen=True)
class ImageInputs:
    """One prompt's images: `pixel_values` float32 [patches, D], `image_grid_thw` int64
    [images, 3] (the patches of image i are the next t*h*w rows of `pixel_values`)."""

    pixel_values: torch.Tensor
    image_grid_thw: torch.Tensor

    def __post_init__(self) -> None:
        patches = int(self.image_grid_thw.prod(-1).sum()) if self.image_grid_thw.numel() else 0
        if patches != self.pixel_values.shape[0]:
            raise ValueError(
                f"image grids {self.image_grid_thw.tolist()} hold {patches} patches, "
                f"pixel_values has {self.pixel_values.shape[0]} rows"
            )

    def placeholder_tokens(self, merge_size: int) -> list[int]:
        """How many `<|image_pad|>` tokens each image fills: its merged patches."""
        return [int(g.prod()) // merge_size**2 for g in self.image_grid_thw]

    @staticmethod
    def concat(items: Sequence[ImageInputs]) -> ImageInputs:
        """The images of several prompts, back to back, in order."""
        return ImageInputs(
            torch.cat([it.pixel_values for it in items]),
            torch.cat([it.image_grid_thw for it in items]),
        )


def image_batch(rows: Sequence[ImageInputs | None]) -> dict[str, torch.Tensor]:
    """The batch keys of each row's images (None: a row without images): `pixel_values`
    float32 [B, most patches, D] and `image_grid_thw` int64 [B, most images, 3], zeros
    past a row's own."""
    present = [r for r in rows if r is not None]
    if not present:
        raise ValueError("no row has images")
    width = present[0].pixel_values.shape[1]
    patches = max(r.pixel_values.shape[0] for r in present)
    images = max(r.image_grid_thw.shape[0] for r in present)
    pixel_values = torch.zeros(len(rows), patches, width, dtype=present[0].pixel_values.dtype)
    grids = torch.zeros(len(rows), images, 3, dtype=torch.long)
    for row, item in enumerate(rows):
        if item is not None:
            pixel_values[row, : item.pixel_values.shape[0]] = item.pixel_values
            grids[row, : item.image_grid_thw.shape[0]] = item.image_grid_thw
    return {"pixel_values": pixel_values, "image_grid_thw": grids}


def images_of_rows(batch: Mapping[str, torch.Tensor]) -> ImageInputs | None:
    """The images of all rows of `batch` (`image_batch`'s keys), back to back in row order,
    as the model takes them; None when no row has any."""
    grids = batch["image_grid_thw"]
    real = grids.prod(-1) > 0  # [B, images]
    if not bool(real.any()):
        return None
    counts = grids.prod(-1).sum(-1)  # each row's patches
    pixel_values = batch["pixel_values"]
    columns = torch.arange(pixel_values.shape[1], device=pixel_values.device)
    taken = columns[None] < counts[:, None].to(pixel_values.device)
    return ImageInputs(pixel_values[taken], grids[real])
