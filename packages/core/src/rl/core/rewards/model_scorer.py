"""A discriminative reward model (a sequence classifier) behind the reward interface: what
it reads for each response, and transformers' classifier that scores the texts (an engine
may serve another: `rl.core.engines.ServesClassifier`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rl.core.rewards.types import RewardRequest, RewardResult

# torch is imported where it is used: reward pool workers import this package, and with torch
# each would take a second longer to start and hold a few hundred MB more.


class RewardModelScorer:
    """Scores responses with a classifier's raw score (`classify`: texts -> scores).

    A chat prompt is scored as verl's reward loop scores it: the prompt's messages and the
    response as the assistant's turn, rendered by the reward model's own chat template
    (its leading BOS dropped, since the tokenizer adds it again). A plain-text prompt, or a
    reward model without a chat template: the prompt's text followed by the response's."""

    def __init__(
        self,
        tokenizer: Any,
        classify: Callable[[list[str]], list[float]],
        close: Callable[[], None] | None = None,
    ) -> None:
        self.tokenizer, self.classify, self._close = tokenizer, classify, close

    def score(self, requests: Sequence[RewardRequest]) -> RewardResult:
        scores = [float(s) for s in self.classify([self.text(r) for r in requests])]
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

    def close(self) -> None:
        if self._close is not None:
            self._close()


class HFClassifier:
    """transformers' sequence classifier: each text's last label's logit (vLLM's classify
    without its activation, what verl's reward loop reads), in batches of `batch_size`,
    each text cut to `max_length` tokens."""

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
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @classmethod
    def from_folder(
        cls, path: str, dtype: Any, batch_size: int, max_length: int, device: str
    ) -> HFClassifier:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(path, dtype=dtype)
        return cls(model, tokenizer, batch_size, max_length, device)

    def __call__(self, texts: list[str]) -> list[float]:
        import torch

        scores: list[float] = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                encoded = self.tokenizer(
                    texts[start : start + self.batch_size],
                    return_tensors="pt",
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                ).to(self.device)
                logits = self.model(**encoded).logits
                scores += logits[:, -1].float().cpu().tolist()
        return scores
