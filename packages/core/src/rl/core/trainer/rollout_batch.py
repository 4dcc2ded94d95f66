"""Turn generated rollouts into the padded training batch.

Row layout: `[left-padded prompt | right-padded response]`, so every response
starts at the same column and per-token tensors are `[B, R]`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl.core.batch import Batch
from rl.core.engines import Rollouts


def _pad_right(
    rows: Sequence[Sequence[float]], width: int, value: float, dtype: torch.dtype
) -> torch.Tensor:
    """[B, width]: each row, then `value` (one tensor built from one padded list)."""
    padded = [[*row, *[value] * (width - len(row))] for row in rows]
    return torch.tensor(padded, dtype=dtype).reshape(len(rows), width)


def _pad_left(rows: Sequence[Sequence[int]], width: int, value: int) -> torch.Tensor:
    padded = [[*[value] * (width - len(row)), *row] for row in rows]
    return torch.tensor(padded, dtype=torch.long).reshape(len(rows), width)


def _lengths_mask(lengths: Sequence[int], width: int, left: bool = False) -> torch.Tensor:
    """[B, width] 1 where a row of that length has a token (right-padded, or left-padded)."""
    lengths_ = torch.tensor(lengths, dtype=torch.long)[:, None]
    columns = torch.arange(width)[None]
    return columns >= width - lengths_ if left else columns < lengths_


def build_batch(rollouts: Rollouts, pad_token_id: int, response_width: int | None = None) -> Batch:
    """The training batch of `rollouts`.

    Keys: prompts [B, P], responses [B, R], input_ids / attention_mask /
    position_ids [B, P + R], response_mask [B, R] (float32, 1 on the response tokens the
    model sampled: all real ones, or the loss mask of an agentic rollout, whose tool
    tokens are attended to but not trained on), rollout_logprobs [B, R] float32; with
    the rollout engine's MoE routes (routing replay R3) routed_experts int16 [B, P + R, L, K];
    with images (a vision-language model), pixel_values and image_grid_thw
    (`rl.core.vision.inputs.image_batch`).
    """
    prompt_width = max(len(p) for p in rollouts.prompt_ids)
    width = response_width or max(max((len(r) for r in rollouts.response_ids), default=1), 1)
    prompts = _pad_left(rollouts.prompt_ids, prompt_width, pad_token_id)
    prompt_mask = _lengths_mask([len(p) for p in rollouts.prompt_ids], prompt_width, left=True)
    responses = _pad_right(rollouts.response_ids, width, pad_token_id, torch.long)
    real = _lengths_mask([len(r) for r in rollouts.response_ids], width).float()
    response_mask = real
    if rollouts.loss_masks:
        response_mask = _pad_right(rollouts.loss_masks, width, 0.0, torch.float32)
    attention_mask = torch.cat([prompt_mask.long(), real.long()], dim=1)
    batch: Batch = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(1) - 1).clamp(min=0),
        "response_mask": response_mask,
        "rollout_logprobs": _pad_right(rollouts.logprobs, width, 0.0, torch.float32),
    }
    if rollouts.routed_experts:
        batch["routed_experts"] = _routes(rollouts, prompt_width, width)
    if any(image is not None for image in rollouts.images):
        from rl.core.vision.inputs import image_batch

        batch.update(image_batch(rollouts.images))
    return batch


def _routes(rollouts: Rollouts, prompt_width: int, width: int) -> torch.Tensor:
    """The rollout engine's routes laid out like `input_ids`: int16 [B, P + R, L, K], -1 at
    padding (a row's routes cover its prompt, then its response)."""
    first = rollouts.routed_experts[0]
    out = torch.full((len(rollouts.routed_experts), prompt_width + width, *first.shape[1:]), -1)
    out = out.to(torch.int16)
    for row, (prompt, response, routes) in enumerate(
        zip(rollouts.prompt_ids, rollouts.response_ids, rollouts.routed_experts, strict=True)
    ):
        if routes.shape[0] != len(prompt) + len(response):
            raise ValueError(
                f"row {row}: routes for {routes.shape[0]} tokens, "
                f"{len(prompt)} + {len(response)} tokens"
            )
        out[row, prompt_width - len(prompt) : prompt_width] = routes[: len(prompt)]
        out[row, prompt_width : prompt_width + len(response)] = routes[len(prompt) :]
    return out


def scores_to_token_level(scores: Sequence[float], response_mask: torch.Tensor) -> torch.Tensor:
    """Outcome reward on the last trained (model) token of each row: float32 [B, R]."""
    token_scores = torch.zeros_like(response_mask)
    if len(scores) != response_mask.shape[0]:
        raise ValueError(f"{len(scores)} scores for {response_mask.shape[0]} rows")
    columns = torch.arange(response_mask.shape[1], dtype=torch.long)
    last = torch.where(response_mask.bool().cpu(), columns, -1).max(dim=1).values
    rows = (last >= 0).nonzero().flatten()
    values = torch.tensor(scores, dtype=token_scores.dtype)[rows]
    token_scores[rows, last[rows]] = values.to(token_scores.device)
    return token_scores
