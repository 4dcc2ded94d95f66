"""Per-token outputs of a causal LM over the response part of a batch.

A batch row is `[left-padded prompt | right-padded response]`; position t of
the response is predicted by the logits at position P + t - 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def _run(model: torch.nn.Module, batch: Mapping[str, torch.Tensor], **options: Any) -> Any:
    """One forward pass over the whole rows (prompt + response), without a KV cache."""
    return model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        use_cache=False,
        **options,
    )


def response_logits(model: torch.nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Logits that predict each response token: [B, R, V] in the model's dtype."""
    response_len = batch["responses"].shape[1]
    return _run(model, batch).logits[:, -response_len - 1 : -1]


def logprobs_and_entropy(
    logits: torch.Tensor, tokens: torch.Tensor, temperature: float, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(token) [B, R] and entropy [B, R] (float32) of softmax(logits / temperature)."""
    scaled = logits.float() / (temperature if temperature > 0 else 1.0)
    log_probs = torch.log_softmax(scaled, dim=-1)
    chosen = log_probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return chosen, None
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen, entropy


def response_values(model: torch.nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Critic values V(s_t) of the state before each response token: [B, R] float32."""
    response_len = batch["responses"].shape[1]
    return _run(model, batch).logits[:, -response_len - 1 : -1, 0].float()


def _full(weight: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a (possibly FSDP-sharded DTensor) parameter, differentiably."""
    return weight.full_tensor() if hasattr(weight, "full_tensor") else weight


def fused_logprobs_and_entropy(
    model: torch.nn.Module,
    batch: Mapping[str, torch.Tensor],
    temperature: float,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Like `logprobs_and_entropy(response_logits(...))` without [B, R, V] logits.

    The model returns its final hidden states (logits only for the last position),
    and `rl.kernels.fused_logprob_entropy` takes them with the LM head's weight;
    only real response tokens are computed, padding comes back as 0.
    """
    from rl.kernels import fused_logprob_entropy

    responses, mask = batch["responses"], batch["response_mask"].bool()
    output = _run(model, batch, output_hidden_states=True, logits_to_keep=1)
    hidden = output.hidden_states[-1][:, -responses.shape[1] - 1 : -1]
    weight = _full(model.get_output_embeddings().weight)
    logprob, entropy = fused_logprob_entropy(
        hidden[mask],
        weight,
        responses[mask],
        temperature if temperature > 0 else 1.0,
        entropy=with_entropy,
    )
    out_lp = torch.zeros(responses.shape, dtype=torch.float32, device=logprob.device)
    out_lp = out_lp.masked_scatter(mask, logprob)
    if entropy is None:
        return out_lp, None
    out_ent = torch.zeros(responses.shape, dtype=torch.float32, device=entropy.device)
    return out_lp, out_ent.masked_scatter(mask, entropy)
