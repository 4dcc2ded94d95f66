"""A reward model (AutoModelForSequenceClassification, one output) behind the same interface."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rl.core.rewards.types import RewardRequest, RewardResult

# torch is imported where it is used: reward pool workers import this package, and with torch
# each would take a second longer to start and hold a few hundred MB more.


class RewardModelScorer:
    """Scores responses with a sequence-classification model's single logit.

    A chat prompt is scored as verl's reward loop scores it: the prompt's messages and the
    response as the assistant's turn, rendered by the reward model's own chat template
    (its leading BOS dropped, since the tokenizer adds it again). A plain-text prompt, or a
    reward model without a chat template: the prompt's text followed by the response's."""

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
            scores = self._logits([self.text(r) for r in requests])
        mean = sum(scores) / max(len(scores), 1)
        metrics = {
            "reward/mean": mean,
            "reward/errors": 0.0,
            "reward/timeouts": 0.0,
            "reward/error_rate": 0.0,
        }
        return RewardResult(scores, metrics, [""] * len(scores))

    def text(self, request: RewardRequest) -> str:
        """What the reward model reads for `request`."""
        template = getattr(self.tokenizer, "chat_template", None)
        if request.chat is None or template is None:
            return request.prompt_str + request.solution_str
        turn = {"role": "assistant", "content": request.solution_str}
        text = str(
            self.tokenizer.apply_chat_template(
                [*request.chat, turn], add_generation_prompt=False, tokenize=False
            )
        )
        bos = self.tokenizer.bos_token
        return text[len(bos) :] if bos and text.startswith(bos) else text

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
