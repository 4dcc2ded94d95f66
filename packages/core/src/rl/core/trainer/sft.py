"""Supervised fine-tuning on prompt -> answer pairs or multi-turn demonstrations (`rl sft`,
and the demos' warm-start)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from rl.core.config import Config, ConfigError, OptimConfig
from rl.core.data import PromptSampler
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


def sft_batch(
    items: list[Any],
    tokenizer: Any,
    width: int,
    max_length: int | None = None,
    truncation: str = "error",
) -> dict[str, torch.Tensor]:
    """Prompt + response rows: the row's `demonstration` (a multi-turn conversation whose
    tool turns are masked out of the loss) when it has one, else its answer and EOS; with
    `max_length`, prompt + response together cut to it (`fit_length`)."""
    responses, masks, prompts = [], [], []
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
        prompt, ids, mask = list(it.prompt_ids), ids[:width], mask[:width]
        if max_length is not None:
            prompt, ids, mask = fit_length(prompt, ids, mask, max_length, truncation, it.index)
            if it.images is not None and len(prompt) < len(it.prompt_ids):
                raise ConfigError(
                    f"data row {it.index}: its prompt has images, and sft.max_length = "
                    f"{max_length} with data.truncation = left would cut into their "
                    "tokens; raise sft.max_length or set data.truncation to right"
                )
        prompts.append(prompt)
        responses.append(ids)
        masks.append(mask)
    width = max([width, *(len(r) for r in responses)])
    images = [it.images for it in items]  # a vision-language model's rows show theirs
    rollouts = Rollouts(
        prompts,
        responses,
        [[0.0] * len(r) for r in responses],
        loss_masks=masks,
        images=images if any(image is not None for image in images) else [],
    )
    return build_batch(rollouts, tokenizer.pad_token_id, width)


def fit_length(
    prompt: list[int], response: list[int], mask: list[int], limit: int, how: str, row: int
) -> tuple[list[int], list[int], list[int]]:
    """Prompt + response cut to `limit` tokens as verl's SFT dataset cuts their
    concatenation: `right` keeps the first `limit` (the response's end goes first), `left`
    the last `limit` (the prompt's start goes first), `error` refuses naming the row."""
    excess = len(prompt) + len(response) - limit
    if excess <= 0:
        return prompt, response, mask
    if how == "error":
        raise ConfigError(
            f"data row {row}: prompt + answer are {len(prompt) + len(response)} tokens, more "
            f"than sft.max_length = {limit}; raise it, or set data.truncation to left or right"
        )
    if how == "right":
        kept = max(limit - len(prompt), 0)
        return prompt[:limit], response[:kept], mask[:kept]
    cut = max(excess - len(prompt), 0)  # left: the prompt's start, then the response's
    return prompt[excess:] if excess < len(prompt) else [], response[cut:], mask[cut:]


def sft_optim(config: Config) -> OptimConfig:
    """AdamW and its schedule for the SFT steps: `sft.*`, clipped at actor.optim.grad_clip."""
    sft = config.sft
    return OptimConfig(
        lr=sft.lr,
        weight_decay=sft.weight_decay,
        betas=sft.betas,
        lr_scheduler=sft.lr_scheduler,
        lr_warmup_ratio=sft.lr_warmup_ratio,
        min_lr_ratio=sft.min_lr_ratio,
        grad_clip=config.actor.optim.grad_clip,
    )


def sft_steps(config: Config, rows: int) -> int:
    """The SFT optimizer steps: `sft.steps`, or with `sft.epochs` and no steps, every full
    batch of every epoch (verl's len(dataloader) × total_epochs, drop_last)."""
    sft = config.sft
    if sft.steps > 0 or sft.epochs is None:
        return sft.steps
    per_epoch = rows // sft.batch_size
    if per_epoch == 0:
        raise ConfigError(
            f"sft.batch_size = {sft.batch_size} is more than the {rows} rows of the data: "
            "an epoch holds no full batch; lower it"
        )
    return sft.epochs * per_epoch


def sft_rows(config: Config, rows: int) -> Iterator[list[int]]:
    """The row indices of each SFT batch: drawn at random, or with `sft.epochs` a shuffled
    pass over the rows per epoch, without replacement (the last partial batch dropped)."""
    size = config.sft.batch_size
    if config.sft.epochs is not None:  # the RL prompt sampler's epochs (drop_last)
        sampler = PromptSampler(rows, size, shuffle=True, seed=config.trainer.seed)
        while True:
            yield sampler.next_batch()
    generator = torch.Generator().manual_seed(config.trainer.seed)
    while True:
        yield torch.randint(rows, (size,), generator=generator).tolist()


def run_sft_steps(
    engine: Any, data: Any, tokenizer: Any, config: Config, log: Any = None
) -> list[float]:
    """`sft_steps` optimizer steps over the batches of `sft_rows`; returns the losses."""
    width = config.data.max_response_length
    limit, how = config.sft.max_length, config.data.truncation
    losses: list[float] = []
    batches = sft_rows(config, len(data))
    for step in range(sft_steps(config, len(data))):
        items = [data[i] for i in next(batches)]
        metrics = engine.train_step(sft_batch(items, tokenizer, width, limit, how), nll_loss)
        losses.append(metrics["actor/sft_loss"])
        if log is not None:
            log({"sft/loss": losses[-1], "sft/lr": metrics["lr"]}, step + 1)
    return losses
