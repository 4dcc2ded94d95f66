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
    Checked,
    optional,
    setting,
)


@dataclass(frozen=True)
class SFTConfig(Checked):
    """Supervised warm-start (`rl sft`, and `enable` before RL in `rl train`)."""

    enable: bool = False
    steps: int = setting(0, NON_NEGATIVE)  # 0 with `epochs`: epochs × (rows // batch_size)
    batch_size: int = setting(32, POSITIVE_INT)
    lr: float = setting(1e-3, POSITIVE)
    # AdamW's and the LR schedule's settings over the SFT steps (verl's SFT trainer optim.*;
    # the defaults are the plain warm-start: constant LR, no weight decay)
    weight_decay: float = setting(0.0, NON_NEGATIVE)
    betas: tuple[float, ...] = setting((0.9, 0.999), BETAS)
    lr_scheduler: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    lr_warmup_ratio: float = setting(0.0, FRACTION)
    min_lr_ratio: float = setting(0.0, PROBABILITY)
    # null: `steps` batches of rows drawn at random; N: N epochs, each a shuffled pass over
    # the rows without replacement (the last partial batch dropped), as verl's SFT trainer
    epochs: int | None = setting(None, optional(POSITIVE_INT))
    # null: the prompt and the answer bounded apart (data.max_prompt_length /
    # max_response_length); N: prompt + answer tokens together at most N, cut as
    # data.truncation says (verl's SFT data.max_length: error, left or right)
    max_length: int | None = setting(None, optional(POSITIVE_INT))
