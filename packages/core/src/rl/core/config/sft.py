"""The `sft` section: the supervised warm-start (`rl sft`, and before RL in `rl train`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rl.core.config.rules import (
    BETAS,
    FRACTION,
    NON_NEGATIVE,
    POSITIVE,
    POSITIVE_INT,
    PROBABILITY,
    check,
    optional,
)


@dataclass(frozen=True)
class SFTConfig:
    """Supervised warm-start (`rl sft`, and `enable` before RL in `rl train`)."""

    enable: bool = False
    steps: int = 0  # 0 with `epochs`: epochs × (rows // batch_size)
    batch_size: int = 32
    lr: float = 1e-3
    # AdamW's and the LR schedule's settings over the SFT steps (verl's SFT trainer optim.*;
    # the defaults are the plain warm-start: constant LR, no weight decay)
    weight_decay: float = 0.0
    betas: tuple[float, ...] = (0.9, 0.999)
    lr_scheduler: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    lr_warmup_ratio: float = 0.0
    min_lr_ratio: float = 0.0
    # null: `steps` batches of rows drawn at random; N: N epochs, each a shuffled pass over
    # the rows without replacement (the last partial batch dropped), as verl's SFT trainer
    epochs: int | None = None
    # null: the prompt and the answer bounded apart (data.max_prompt_length /
    # max_response_length); N: prompt + answer tokens together at most N, cut as
    # data.truncation says (verl's SFT data.max_length: error, left or right)
    max_length: int | None = None

    def __post_init__(self) -> None:
        check(
            self,
            steps=NON_NEGATIVE,
            batch_size=POSITIVE_INT,
            lr=POSITIVE,
            weight_decay=NON_NEGATIVE,
            betas=BETAS,
            lr_warmup_ratio=FRACTION,
            min_lr_ratio=PROBABILITY,
            epochs=optional(POSITIVE_INT),
            max_length=optional(POSITIVE_INT),
        )
