"""Responses to every prompt of a table (`rl generate`, verl's `main_generation`): the model
of `config` samples `rollout.val_kwargs.n` responses per prompt of `data.val_files` through
the configured rollout engine, nothing scored."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rl.core.config import Config


def run_generation(config: Config) -> tuple[list[Any], list[list[str]]]:
    """The prompts (`PromptItem`s, in file order) and each one's responses."""
    from rl.core.rng import seed_everything
    from rl.core.trainer.build import build_context
    from rl.core.trainer.preflight import preflight
    from rl.core.trainer.validate import generate_scored, val_sampling

    sampling = val_sampling(config)
    seed_everything(config.trainer.seed)
    preflight(config)
    with tempfile.TemporaryDirectory(prefix="rl-generate-") as scratch:
        ctx = build_context(config, Path(scratch), trains=False)
        try:
            ctx.sync_weights(0)
            items, _, texts = generate_scored(ctx, sampling, score=False)
        finally:
            ctx.close()
    n = sampling.n
    return items, [texts[row * n : (row + 1) * n] for row in range(len(items))]
