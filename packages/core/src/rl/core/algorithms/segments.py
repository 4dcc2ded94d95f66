"""Per-sequence reductions that work on padded and on packed (varlen) batches alike.

Two layouts carry the same tokens:

- padded: `values` [B, R] with `response_mask` [B, R]; row b is sequence b.
- packed: `values` [T] with `response_mask` [T] and `seq_ids` [T] (long), the index of
  each token's sequence, dense in 0..S-1; tokens of one sequence appear in order but
  need not be contiguous. The mask is 0 on tokens that are not response tokens
  (prompts inside a packed row, padding at the end of a bin).

Functions here take `seq_ids=None` for the padded layout, so every algorithm that
reduces per sequence is reachable from the packed path without padding.
"""

from __future__ import annotations

import torch


def num_sequences(seq_ids: torch.Tensor) -> int:
    """S, the number of sequences named by dense `seq_ids` [T] (0 for no tokens)."""
    return int(seq_ids.max()) + 1 if seq_ids.numel() else 0


def sequence_sums(
    values: torch.Tensor, response_mask: torch.Tensor, seq_ids: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sequence sum of the valid `values` and count of valid tokens.

    Args:
        values: float [B, R] (padded) or [T] (packed).
        response_mask: same shape as `values`, bool or 0/1.
        seq_ids: long [T] for the packed layout, None for padded.

    Returns:
        (sums, counts): two tensors [S] in the dtype of `values`.
    """
    valid = response_mask.bool()
    selected = torch.where(valid, values, torch.zeros_like(values))
    counts = valid.to(values.dtype)
    if seq_ids is None:
        return selected.sum(-1), counts.sum(-1)
    from rl.kernels import segment_sum  # the packed reductions live with the varlen ops

    size = num_sequences(seq_ids)
    return segment_sum(selected, seq_ids, size), segment_sum(counts, seq_ids, size)


def per_token(
    per_sequence: torch.Tensor, like: torch.Tensor, seq_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """Broadcast one value per sequence [S] to every token: the shape of `like`.

    `like` is [B, R] (padded; S == B) or [T] with `seq_ids` [T] (packed).
    """
    if seq_ids is None:
        return per_sequence.unsqueeze(-1).expand(like.shape)
    return per_sequence[seq_ids]


def _positions(seq_ids: torch.Tensor, size: int) -> torch.Tensor:
    """Index of each token within its own sequence, in order of appearance: long [T]."""
    order = torch.argsort(seq_ids, stable=True)
    lengths = torch.bincount(seq_ids, minlength=size)
    starts = torch.cumsum(lengths, 0) - lengths
    ranks = torch.arange(seq_ids.numel(), device=seq_ids.device) - starts[seq_ids[order]]
    positions = torch.empty_like(seq_ids)
    positions[order] = ranks
    return positions


def pad_packed(flat: torch.Tensor, seq_ids: torch.Tensor) -> torch.Tensor:
    """Scatter packed tokens [T] into a zero-padded [S, L_max] tensor, row s = sequence s.

    Used by the recursive estimators (GAE, discounted returns), whose reverse scans
    run over a padded time axis; `unpad_packed` is the exact inverse.
    """
    size = num_sequences(seq_ids)
    positions = _positions(seq_ids, size)
    width = int(positions.max()) + 1 if positions.numel() else 0
    padded = flat.new_zeros(size, width)
    padded[seq_ids, positions] = flat
    return padded


def unpad_packed(padded: torch.Tensor, seq_ids: torch.Tensor) -> torch.Tensor:
    """Gather [S, L_max] back into the packed order [T] given by `seq_ids`."""
    return padded[seq_ids, _positions(seq_ids, padded.shape[0])]
