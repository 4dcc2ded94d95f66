"""The log-probs of chosen tokens under softmax(logits / temperature): the trainer's plain
path (`rl.fsdp.forward.response_logprobs`), which a batch-invariant rollout engine also
takes so that its numbers are the trainer's (`rollout.batch_invariant`)."""

from __future__ import annotations

import torch


def logprobs_and_entropy(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(token) and entropy (float32) of softmax(logits / temperature); `logits` [..., V],
    `tokens` [...]."""
    scaled = logits.float() / (temperature if temperature > 0 else 1.0)
    log_probs = torch.log_softmax(scaled, dim=-1)
    chosen = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return chosen, None
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen, entropy
