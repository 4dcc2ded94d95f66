"""Packed rows: the real tokens of a micro-batch as one row, no padding.

A padded row is `[left-padded prompt | right-padded response]`. Packed, the real tokens of
all rows sit back to back in one row `[1, N]` whose `position_ids` restart at 0 for each
sequence; Hugging Face models (transformers >= 4.53) read restarting positions with no
attention mask as separate documents and attend within each only. The output that
predicts response token t of row b sits at the packed position of padded column
`P + t - 1`; `predict_index` lists those positions for the real response tokens, in
row-major order of `response_mask`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PackedInputs:
    input_ids: torch.Tensor  # int64 [1, N]
    position_ids: torch.Tensor  # int64 [1, N], restarting per sequence
    predict_index: torch.Tensor  # int64 [M]: packed position predicting each response token
    cu_seqlens: torch.Tensor  # int32 [B + 1]: where each sequence starts and ends
    max_seqlen: int

    def model_kwargs(self) -> dict[str, object]:
        """Inputs of the model call; the sequence bounds reach the attention function
        (transformers' flash-attention kwargs, read by `rl_varlen` too)."""
        return {
            "input_ids": self.input_ids,
            "position_ids": self.position_ids,
            "cu_seq_lens_q": self.cu_seqlens,
            "cu_seq_lens_k": self.cu_seqlens,
            "max_length_q": self.max_seqlen,
            "max_length_k": self.max_seqlen,
        }


def pack(batch: Mapping[str, torch.Tensor]) -> PackedInputs:
    """The packed form of a padded batch (keys input_ids, attention_mask, responses,
    response_mask)."""
    from rl.kernels import packed_layout, packed_position_ids, unpad

    mask = batch["attention_mask"]
    layout = packed_layout(mask)
    rows, width = mask.shape
    response_len = batch["responses"].shape[1]
    flat_to_packed = torch.full((rows * width,), -1, dtype=torch.long, device=mask.device)
    flat_to_packed[layout.indices] = torch.arange(layout.indices.numel(), device=mask.device)
    first = width - response_len - 1  # the column predicting the first response token
    columns = torch.arange(rows, device=mask.device)[:, None] * width + first
    columns = columns + torch.arange(response_len, device=mask.device)[None]
    predict_index = flat_to_packed[columns[batch["response_mask"].bool()]]
    if (predict_index < 0).any():
        raise ValueError("a response token follows padding: rows must be [prompt | response]")
    return PackedInputs(
        unpad(batch["input_ids"], layout)[None],
        packed_position_ids(layout)[None],
        predict_index,
        layout.cu_seqlens,
        layout.max_seqlen,
    )
