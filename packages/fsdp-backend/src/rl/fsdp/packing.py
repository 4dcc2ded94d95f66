"""Packed rows: the real tokens of a micro-batch as one row, no padding.

A padded row is `[left-padded prompt | right-padded response]`. Packed, the real tokens of
all rows sit back to back in one row `[1, N]` whose `position_ids` restart at 0 for each
sequence; Hugging Face models (transformers >= 4.53) read restarting positions with no
attention mask as separate documents and attend within each only. The output that
predicts response token t of row b sits at the packed position of padded column
`P + t - 1`; `predict_index` lists those positions for the real response tokens, in
row-major order of `response_mask`.

With `share_prompts` (verl's `use_prefix_grouper`), rows whose prompts are equal (GRPO's n
responses of a prompt) share one copy of it: the packed row holds each distinct prompt
once, followed by the responses of its rows. Every position-wise layer (projections, MLP,
norms: nearly all of a forward and backward) then runs on fewer tokens; attention still
sees each row's whole sequence, gathered through `sequence_index`. A prompt's outputs do
not depend on what follows it (causal attention), so the outputs and gradients are those
of the unshared rows, to rounding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class PackedInputs:
    input_ids: torch.Tensor  # int64 [1, N]
    position_ids: torch.Tensor  # int64 [1, N], restarting per sequence
    predict_index: torch.Tensor  # int64 [M]: packed position predicting each response token
    cu_seqlens: torch.Tensor  # int [B + 1]: where each sequence starts and ends
    max_seqlen: int
    # shared prompts: each row's whole sequence as packed positions, rows back to back
    # (`cu_seqlens` bound them), and which of those positions the row owns (writes the
    # attention output of): its response, and its prompt if it is the prompt's first row
    sequence_index: torch.Tensor | None = None  # int64 [sum of row lengths]
    owned: torch.Tensor | None = None  # bool, like sequence_index
    # shared prompts: a prompt's last position predicts the first response token of each of
    # its rows, so `predict_index` repeats it; `distinct_predict` lists each predicting
    # position once (sorted) and `predict_rows` maps `predict_index` onto that list
    distinct_predict: torch.Tensor | None = None  # int64 [M' <= M]
    predict_rows: torch.Tensor | None = None  # int64 [M]
    # each padded position's packed position (-1: padding), row-major; a shared prompt's
    # copies all point at the one packed copy (per-token inputs such as MoE routes)
    flat_to_packed: torch.Tensor | None = None  # int64 [B * S]

    def model_kwargs(self) -> dict[str, object]:
        """Inputs of the model call; the sequence bounds reach the attention function
        (transformers' flash-attention kwargs, read by `rl_varlen` too; with shared
        prompts also `rl_sequence_index` and `rl_owned`)."""
        kwargs: dict[str, object] = {
            "input_ids": self.input_ids,
            "position_ids": self.position_ids,
            "cu_seq_lens_q": self.cu_seqlens,
            "cu_seq_lens_k": self.cu_seqlens,
            "max_length_q": self.max_seqlen,
            "max_length_k": self.max_seqlen,
        }
        if self.sequence_index is not None:
            kwargs |= {"rl_sequence_index": self.sequence_index, "rl_owned": self.owned}
        return kwargs


def pack(batch: Mapping[str, torch.Tensor], share_prompts: bool = False) -> PackedInputs:
    """The packed form of a padded batch (keys input_ids, attention_mask, responses,
    response_mask); with `share_prompts`, each distinct prompt once."""
    prompt_width = batch["attention_mask"].shape[1] - batch["responses"].shape[1]
    if share_prompts:
        owner = _owners(batch, prompt_width)
        if bool((owner != torch.arange(owner.numel(), device=owner.device)).any()):
            return _pack_shared(batch, owner, prompt_width)
    return _pack_rows(batch, prompt_width)


def prefix_grouping(
    setting: bool | None, packed: bool, sp: Any, section: str, images: bool = False
) -> bool:
    """Whether to share prompts: `setting` (`{section}.use_prefix_grouper`; null = wherever
    it applies: packed rows without Ulysses sequence parallelism, of a text model)."""
    if setting is None:
        return packed and sp is None and not images
    if setting and images:
        from rl.core.config import ConfigError

        raise ConfigError(
            f"{section}.use_prefix_grouper = true with a vision-language model: a shared "
            "prompt's images are not shared yet (each row shows its own); set it to null "
            "or false"
        )
    if setting and not (packed and sp is None):
        from rl.core.config import ConfigError

        raise ConfigError(
            f"{section}.use_prefix_grouper = true needs {section}.use_remove_padding=true and "
            f"{section}.ulysses_sequence_parallel_size=1 (it shares prompts within a packed "
            "row); set it to null or false"
        )
    return setting


def shared_prompt_fraction(batch: Mapping[str, torch.Tensor]) -> float:
    """The share of a batch's real tokens that shared prompts leave out of the forward."""
    mask = batch["attention_mask"]
    prompt_width = mask.shape[1] - batch["responses"].shape[1]
    owner = _owners(batch, prompt_width)
    repeated = owner != torch.arange(owner.numel(), device=owner.device)
    return float(mask[:, :prompt_width][repeated].sum() / mask.sum().clamp(min=1))


def _owners(batch: Mapping[str, torch.Tensor], prompt_width: int) -> torch.Tensor:
    """`prompt_owners` of a padded batch whose prompts fill its first `prompt_width` columns."""
    return prompt_owners(
        batch["input_ids"][:, :prompt_width], batch["attention_mask"][:, :prompt_width]
    )


def prompt_owners(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> torch.Tensor:
    """For each row, the first row whose prompt (real tokens, and where they sit) is the
    same: int64 [B]."""
    rows = prompt_ids.shape[0]
    keys = torch.where(prompt_mask.bool(), prompt_ids, -1)
    _, group = torch.unique(keys, dim=0, return_inverse=True)
    arange = torch.arange(rows, device=keys.device)
    first = torch.full((rows,), rows, device=keys.device)
    return first.scatter_reduce(0, group, arange, "amin")[group]


def _predict_index(
    batch: Mapping[str, torch.Tensor], flat_to_packed: torch.Tensor, prompt_width: int
) -> torch.Tensor:
    """The packed position of padded column `P + t - 1` for each real response token t."""
    mask = batch["attention_mask"]
    rows, width = mask.shape
    response_len = width - prompt_width
    columns = torch.arange(rows, device=mask.device)[:, None] * width + prompt_width - 1
    columns = columns + torch.arange(response_len, device=mask.device)[None]
    predict_index = flat_to_packed[columns[batch["response_mask"].bool()]]
    if (predict_index < 0).any():
        raise ValueError("a response token follows padding: rows must be [prompt | response]")
    return predict_index


def _pack_rows(batch: Mapping[str, torch.Tensor], prompt_width: int) -> PackedInputs:
    from rl.kernels import packed_layout, packed_position_ids, unpad

    mask = batch["attention_mask"]
    layout = packed_layout(mask)
    flat_to_packed = torch.full((mask.numel(),), -1, dtype=torch.long, device=mask.device)
    flat_to_packed[layout.indices] = torch.arange(layout.indices.numel(), device=mask.device)
    return PackedInputs(
        unpad(batch["input_ids"], layout)[None],
        packed_position_ids(layout)[None],
        _predict_index(batch, flat_to_packed, prompt_width),
        layout.cu_seqlens,
        layout.max_seqlen,
        flat_to_packed=flat_to_packed,
    )


def _pack_shared(
    batch: Mapping[str, torch.Tensor], owner: torch.Tensor, prompt_width: int
) -> PackedInputs:
    """Groups of rows with one prompt: the prompt (from the group's first row), then each
    row's response; `owner` [B] names each row's first row."""
    mask = batch["attention_mask"]
    rows, width = mask.shape
    device = mask.device
    real = mask.bool()
    arange = torch.arange(rows, device=device)
    # the tokens a row puts in the packed row (and writes the attention output of): its
    # response, and its prompt if it is the prompt's first row
    kept = real.clone()
    kept[:, :prompt_width] &= (owner == arange)[:, None]
    # groups back to back (by their first row), rows within a group in their order
    order = torch.argsort(owner * rows + arange)
    kept_rows, columns = kept[order].nonzero(as_tuple=True)
    source_rows = order[kept_rows]
    flat = source_rows * width + columns  # each packed token's padded position
    flat_to_packed = torch.full((rows, width), -1, dtype=torch.long, device=device)
    flat_to_packed.view(-1)[flat] = torch.arange(flat.numel(), device=device)
    flat_to_packed[:, :prompt_width] = flat_to_packed[owner, :prompt_width]
    positions = mask.long().cumsum(1) - 1  # a token's place among its row's real tokens
    lengths = real.sum(1)
    cu_seqlens = torch.zeros(rows + 1, dtype=torch.int32, device=device)
    cu_seqlens[1:] = lengths.cumsum(0)
    predict_index = _predict_index(batch, flat_to_packed.view(-1), prompt_width)
    distinct_predict, predict_rows = torch.unique(predict_index, return_inverse=True)
    return PackedInputs(
        batch["input_ids"].reshape(-1)[flat][None],
        positions[source_rows, columns][None],
        predict_index,
        cu_seqlens,
        int(lengths.max()),
        sequence_index=flat_to_packed[real],
        owned=kept[real],
        distinct_predict=distinct_predict,
        predict_rows=predict_rows,
        flat_to_packed=flat_to_packed.view(-1),
    )
