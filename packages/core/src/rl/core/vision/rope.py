"""Multimodal rotary positions (M-RoPE) of Qwen2-VL / Qwen2.5-VL rows, as the model
computes them (transformers' `get_rope_index`, for images; the test holds this to it).

Each token has three positions: time, height, width. A text token has the same value in
all three, one more than the token before. An image's run of `<|image_pad|>` tokens (its
merged patches, row-major over an h x w grid, t frames) takes, from the current position
p, time p + frame, height p + row, width p + column; the text after it continues from
p + max(h, w) (the widest of the grid's sides, which is why positions of a row with
images end below its length). Padding takes position 0; only real tokens count.
"""

from __future__ import annotations

import torch


def _row_positions(
    ids: torch.Tensor, grids: torch.Tensor, image_token_id: int, merge_size: int
) -> torch.Tensor:
    """[3, len(ids)] positions of one row's real tokens, its images' grids in order."""
    out = torch.empty(3, ids.shape[0], dtype=torch.long)
    is_image = (ids == image_token_id).tolist()
    position, index, image = 0, 0, 0
    while index < len(is_image):
        if not is_image[index]:
            out[:, index] = position
            position, index = position + 1, index + 1
            continue
        if image >= grids.shape[0]:
            raise ValueError(f"more image placeholder runs than the {grids.shape[0]} images")
        t, h, w = (int(v) for v in grids[image])
        h, w = h // merge_size, w // merge_size
        size = t * h * w
        frames, rows, columns = torch.meshgrid(
            torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij"
        )
        block = torch.stack([frames, rows, columns]).reshape(3, -1) + position
        if index + size > len(is_image) or not all(is_image[index : index + size]):
            raise ValueError(f"image {image} has {size} merged patches but fewer placeholders")
        out[:, index : index + size] = block
        position, index, image = position + max(h, w), index + size, image + 1
    if image != grids.shape[0]:
        raise ValueError(f"{grids.shape[0]} images, {image} placeholder runs")
    return out


def mrope_positions(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    grids_per_row: list[torch.Tensor],
    image_token_id: int,
    merge_size: int,
) -> torch.Tensor:
    """int64 [3, B, L] positions of the rows `input_ids` [B, L] (real tokens where
    `attention_mask` is 1; 0 elsewhere); `grids_per_row[b]` int64 [images, 3] are row b's
    images' (t, h, w) patch grids, in the order of its placeholder runs."""
    batch, length = input_ids.shape
    out = torch.zeros(3, batch, length, dtype=torch.long)
    ids, mask = input_ids.cpu(), attention_mask.cpu().bool()
    for row in range(batch):
        out[:, row, mask[row]] = _row_positions(
            ids[row][mask[row]], grids_per_row[row].cpu(), image_token_id, merge_size
        )
    return out.to(input_ids.device)


def row_grids(image_grid_thw: torch.Tensor) -> list[torch.Tensor]:
    """Each row's real grids of the batch key `image_grid_thw` [B, most images, 3]."""
    return [grids[grids.prod(-1) > 0] for grids in image_grid_thw]
