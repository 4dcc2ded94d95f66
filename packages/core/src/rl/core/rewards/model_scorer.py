"""A reward model (AutoModelForSequenceClassification, one output) behind the same interface."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.rewards.types import RewardRequest, RewardResult

# torch is imported where it is used: reward pool workers import this package, and with torch
# each would take a second longer to start and hold a few hundred MB more.


class RewardModelScorer:
    """Scores prompt + response texts with a sequence-classification model's single logit."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = 16,
        max_length: int = 2048,
        device: str = "cpu",
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer, self.batch_size = tokenizer, batch_size
        self.max_length, self.device = max_length, device

    def score(self, requests: Sequence[RewardRequest]) -> RewardResult:
        import torch

        with torch.no_grad():
            scores = self._logits([r.prompt_str + r.solution_str for r in requests])
        mean = sum(scores) / max(len(scores), 1)
        metrics = {
            "reward/mean": mean,
            "reward/errors": 0.0,
            "reward/timeouts": 0.0,
            "reward/error_rate": 0.0,
        }
        return RewardResult(scores, metrics, [""] * len(scores))

    def _logits(self, texts: list[str]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(texts), self.batch_size):
            encoded = self.tokenizer(
                texts[start : start + self.batch_size],
                return_tensors="pt",
                padding=True,
                truncation=True,
                max_length=self.max_length,
            ).to(self.device)
            logits = self.model(**encoded).logits
            scores += logits[:, 0].float().cpu().tolist()
        return scores
