"""A micro-batch of `[left-padded prompt | right-padded response]` rows as megatron inputs.

Packed (THD, `use_remove_padding`): the real tokens of all rows back to back in one row,
each sequence padded at its end to a multiple of `align` (the TP size under sequence
parallelism, 2 × CP × TP under context parallelism) as `PackedSeqParams` wants; the
bounds are the padded ones, so rotary positions restart at 0 for each sequence and a
sequence's padding is never attended by its real tokens (causal).
Padded (BSHD): each row's real tokens moved to its start, padded at the end to the
longest (times `align`); causal attention then needs no mask.
Either way `predict_index` lists, in row-major order of `response_mask`, the flat
position (in [batch × sequence] order) of the output that predicts each response token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ModelInputs:
    input_ids: torch.Tensor  # [B, S] (packed: [1, T])
    position_ids: torch.Tensor  # same shape
    predict_index: torch.Tensor  # int64 [M], into the flattened [B * S]
    packed_seq_params: Any = None  # megatron PackedSeqParams when packed


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _row_layout(batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(first column, count) of each row's real tokens, which are one contiguous run."""
    mask = batch["attention_mask"].bool()
    return mask.int().argmax(1), mask.sum(1)


def _predicting_columns(batch: Mapping[str, torch.Tensor], starts: torch.Tensor) -> torch.Tensor:
    """Per real response token (row-major), its row and its offset within the row's real
    tokens of the output that predicts it."""
    width = batch["attention_mask"].shape[1]
    response_len = batch["responses"].shape[1]
    first = width - response_len - 1  # the padded column predicting response token 0
    rows, steps = batch["response_mask"].bool().nonzero(as_tuple=True)
    offsets = first + steps - starts[rows]
    if bool((offsets < 0).any()):
        raise ValueError("a response token follows padding: rows must be [prompt | response]")
    return torch.stack([rows, offsets])


def model_inputs(batch: Mapping[str, torch.Tensor], packed: bool, align: int = 1) -> ModelInputs:
    """The megatron inputs of a padded micro-batch (keys input_ids, attention_mask,
    responses, response_mask), on the batch's device."""
    ids, device = batch["input_ids"], batch["input_ids"].device
    starts, lengths = _row_layout(batch)
    rows, offsets = _predicting_columns(batch, starts)
    real = batch["attention_mask"].bool()
    tokens = ids[real]  # row-major real tokens
    if packed:
        padded = [_round_up(int(n), align) for n in lengths.tolist()]
        bounds = torch.tensor([0, *padded], device=device).cumsum(0)
        total = int(bounds[-1])
        row_of = torch.repeat_interleave(torch.arange(len(padded), device=device), lengths)
        step = torch.arange(tokens.numel(), device=device) - torch.repeat_interleave(
            lengths.cumsum(0) - lengths, lengths
        )
        flat = torch.zeros(total, dtype=ids.dtype, device=device)
        flat[bounds[row_of] + step] = tokens
        positions = torch.arange(total, device=device) - torch.repeat_interleave(
            bounds[:-1], torch.tensor(padded, device=device)
        )
        from megatron.core.packed_seq_params import PackedSeqParams

        cu = bounds.to(torch.int32)
        longest = max(padded) if padded else 0
        params = PackedSeqParams(
            qkv_format="thd",
            cu_seqlens_q=cu,
            cu_seqlens_kv=cu,
            cu_seqlens_q_padded=cu,
            cu_seqlens_kv_padded=cu,
            max_seqlen_q=longest,
            max_seqlen_kv=longest,
        )
        return ModelInputs(flat[None], positions[None], bounds[rows] + offsets, params)
    width = _round_up(int(lengths.max()) if lengths.numel() else 1, align)
    left = torch.zeros(ids.shape[0], width, dtype=ids.dtype, device=device)
    keep = torch.arange(width, device=device)[None] < lengths[:, None]
    left[keep] = tokens
    positions = torch.arange(width, device=device).expand(ids.shape[0], width)
    return ModelInputs(left, positions.contiguous(), rows * width + offsets)
