"""The check after a weight sync that the rollout engine serves the trainer's weights.

A sync that loads nothing (dropped tensors, a name the receiver skips, an adapter the
engine never activates: verl users' "vLLM keeps serving the base weights") fails
silently: generation goes on with the old policy. After each sync the probe asks the
trainer and every rollout replica for the log-probs of a few fixed short sequences
(`TrainEngine.compute_logprobs`, `ScoresTokens.score`: one forward each) and refuses the
run (`TrainingError`, naming the sync) when
- the trainer's log-probs moved since the last sync and a replica's did not (< 10 % of
  the trainer's move): the sync changed nothing it serves; or
- (at rollout.temperature = 1, where both are the same quantity) a replica's log-probs
  differ from the trainer's by more than `tolerance` nats on average.
Metrics: weight_sync/probe_trainer_moved, probe_rollout_moved, probe_gap, probe_s (its time).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from rl.core.engines import Rollouts
from rl.core.errors import TrainingError

MOVED = 1e-4  # mean |Δ log p| (nats) below which the trainer "did not move"
STILL = 0.1  # a replica that moved less than this share of the trainer's did not move


class SyncProbe:
    """Fixed sequences (prompt ids, response ids) and what trainer and replicas gave last."""

    def __init__(
        self,
        rows: Sequence[tuple[Sequence[int], Sequence[int]]],
        pad_id: int,
        temperature: float,
        tolerance: float = 0.1,
    ) -> None:
        from rl.core.trainer.rollout_batch import build_batch

        width = max(len(response) for _, response in rows)
        self.rows = [(list(p), list(r)) for p, r in rows]
        rollouts = Rollouts(
            [p for p, _ in self.rows], [r for _, r in self.rows], [[0.0] * len(r) for _, r in rows]
        )
        self.batch = build_batch(rollouts, pad_id, width)
        self.mask = self.batch["response_mask"].bool()
        self.temperature, self.tolerance = temperature, tolerance
        self.trainer: torch.Tensor | None = None
        self.replicas: list[torch.Tensor] | None = None

    def _replica_logprobs(self, rollout: Any) -> list[torch.Tensor]:
        """Each replica's log-probs of the response tokens, in row-major order."""
        per_row = [rollout.score_each(prompt + response) for prompt, response in self.rows]
        replicas = len(per_row[0])
        return [
            torch.tensor(
                [
                    v
                    for (_, response), row in zip(self.rows, per_row, strict=True)
                    for v in row[k][len(row[k]) - len(response) :]
                ],
                dtype=torch.float64,
            )
            for k in range(replicas)
        ]

    def check(self, actor: Any, rollout: Any, what: str = "the weight sync") -> dict[str, float]:
        """After a sync: compare, remember, and return the probe's metrics."""
        start = time.perf_counter()
        trainer = actor.compute_logprobs(self.batch, False).logprobs[self.mask].double()
        replicas = self._replica_logprobs(rollout)
        metrics: dict[str, float] = {"weight_sync/probe_s": time.perf_counter() - start}
        if self.trainer is not None and self.replicas is not None:
            moved = float((trainer - self.trainer).abs().mean())
            replica_moved = [
                float((now - before).abs().mean())
                for now, before in zip(replicas, self.replicas, strict=True)
            ]
            metrics["weight_sync/probe_trainer_moved"] = moved
            metrics["weight_sync/probe_rollout_moved"] = min(replica_moved)
            for k, still in enumerate(replica_moved):
                if moved > MOVED and still < STILL * moved:
                    raise TrainingError(
                        f"{what} changed nothing rollout replica {k} serves: the trainer's "
                        f"log-probs of the probe moved by {moved:.3g} nats since the last sync, "
                        f"the replica's by {still:.3g} (its weights were not loaded)"
                    )
        if self.temperature == 1.0:
            gaps = [float((r - trainer).abs().mean()) for r in replicas]
            metrics["weight_sync/probe_gap"] = max(gaps)
            for k, gap in enumerate(gaps):
                if gap > self.tolerance:
                    raise TrainingError(
                        f"after {what}, rollout replica {k} does not serve the trainer's "
                        f"weights: their log-probs of the probe differ by {gap:.3g} nats on "
                        f"average (tolerance {self.tolerance})"
                    )
        self.trainer, self.replicas = trainer, replicas
        return metrics


def probe_rows(
    items: Any, tokenizer: Any, width: int, rows: int = 2, context: int = 16
) -> list[Any]:
    """A few (prompt ids, answer ids + EOS) pairs of the training data: the probe. Only the
    last `context` prompt tokens are kept: the probe needs fixed tokens, not whole prompts,
    and a rollout engine scores every position of what it is given (over the whole
    vocabulary), so short rows keep the check cheap."""
    out = []
    for item in (items[i] for i in range(min(rows, len(items)))):
        answer = tokenizer(str(item.ground_truth), add_special_tokens=False).input_ids
        prompt = list(item.prompt_ids)[-context:]
        out.append((prompt, [*answer[: min(width, 8) - 1], tokenizer.eos_token_id]))
    return out
