"""Score generated responses with the configured reward (rule-based, custom, or a model)."""

from __future__ import annotations

from typing import Any

from rl.core.engines import Rollouts


def score_rollouts(
    ctx: Any, items: list[Any], rollouts: Rollouts, n: int
) -> tuple[list[float], dict[str, float]]:
    """One score per response row (rows i*n .. i*n+n-1 answer prompt item i), from the
    text the model wrote, or an environment's episode return."""
    from rl.core.rewards import RewardRequest

    if rollouts.returns:  # played against an environment: its rewards are the scores
        returns = [float(value) for value in rollouts.returns]
        return returns, {"reward/env_return_mean": sum(returns) / max(len(returns), 1)}
    texts = ctx.tokenizer.batch_decode(model_tokens(rollouts), skip_special_tokens=True)
    requests = [
        RewardRequest(
            data_source=items[row // n].data_source,
            solution_str=text,
            ground_truth=items[row // n].ground_truth,
            extra_info=items[row // n].extra,
            prompt_str=items[row // n].prompt_text,
        )
        for row, text in enumerate(texts)
    ]
    result = ctx.reward.score(requests)
    return list(result.scores), dict(result.metrics)


def model_tokens(rollouts: Rollouts) -> list[list[int]]:
    """What the model wrote in each row: agentic rows without their tool / environment
    turns (a reward must not score what a tool printed)."""
    if not rollouts.loss_masks:
        return rollouts.response_ids
    return [
        [token for token, keep in zip(ids, mask, strict=True) if keep]
        for ids, mask in zip(rollouts.response_ids, rollouts.loss_masks, strict=True)
    ]
