"""Supervised fine-tuning on prompt -> answer pairs or multi-turn demonstrations (`rl sft`,
and the demos' warm-start)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from rl.core.config import Config, OptimConfig
from rl.core.engines import LogprobOutput, Rollouts
from rl.core.trainer.demonstration import COLUMN, demonstration_tokens
from rl.core.trainer.rollout_batch import build_batch


def nll_loss(
    output: LogprobOutput, micro: Mapping[str, torch.Tensor], mini: Mapping[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-mean negative log-likelihood, normalised by the tokens of the whole mini-batch."""
    mask = micro["response_mask"]
    token_sum = -(output.logprobs * mask).sum()
    loss = token_sum / mini["response_mask"].sum().clamp(min=1)
    return loss, {"sft_loss": float(token_sum.detach()) / max(float(mask.sum()), 1.0)}


def sft_batch(items: list[Any], tokenizer: Any, width: int) -> dict[str, torch.Tensor]:
    """Prompt + response rows: the row's `demonstration` (a multi-turn conversation whose
    tool turns are masked out of the loss) when it has one, else its answer and EOS."""
    responses, masks = [], []
    for it in items:
        if COLUMN in it.extra:
            where = f"data row {it.index}"
            ids, mask = demonstration_tokens(it.extra[COLUMN], tokenizer, where)
        else:
            ids = [
                *tokenizer(str(it.ground_truth), add_special_tokens=False).input_ids[: width - 1],
                tokenizer.eos_token_id,
            ]
            mask = [1] * len(ids)
        responses.append(ids[:width])
        masks.append(mask[:width])
    rollouts = Rollouts(
        [it.prompt_ids for it in items],
        responses,
        [[0.0] * len(r) for r in responses],
        loss_masks=masks,
    )
    return build_batch(rollouts, tokenizer.pad_token_id, width)


def sft_optim(config: Config) -> OptimConfig:
    return OptimConfig(lr=config.sft.lr, grad_clip=config.actor.optim.grad_clip)


def run_sft_steps(
    engine: Any, data: Any, tokenizer: Any, config: Config, log: Any = None
) -> list[float]:
    """`sft.steps` optimizer steps over random batches of `data`; returns the losses."""
    generator = torch.Generator().manual_seed(config.trainer.seed)
    width = config.data.max_response_length
    losses = []
    for step in range(config.sft.steps):
        rows = torch.randint(len(data), (config.sft.batch_size,), generator=generator).tolist()
        metrics = engine.train_step(sft_batch([data[i] for i in rows], tokenizer, width), nll_loss)
        losses.append(metrics["actor/sft_loss"])
        if log is not None:
            log({"sft/loss": losses[-1]}, step + 1)
    return losses
