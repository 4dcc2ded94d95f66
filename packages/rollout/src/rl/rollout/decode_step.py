"""The HF engine's decode step for the common decoder families, without transformers'
per-call machinery.

A decode step of `model(...)` goes through the model's output-capturing wrappers, its
mask and rotary set-up and a `DynamicCache` that concatenates every layer's keys and
values anew at each token. On a small model that machinery is a good share of the time:
the HF engine's sampling loop at the demo's 2-layer Qwen2 (32 rows, one prefill, 7 decode
steps) takes 0.85x its time through `model(...)` with this decode step (`python -m
rl.rollout.bench.hf_sampling`, `benchmarks/hf_sampling/`). Here each step calls the
model's own modules (its norms, projections, MLPs and rotary embedding) in the order its
decoder layer does, keeps the keys and values in buffers made once for the whole response,
written in place, and attends with SDPA, grouped queries reading their key head in place
(transformers repeats the keys and values for each query head when there is a mask).

Only where that order is the model's own: Llama, Qwen2, Qwen3 and Mistral, on SDPA (the
step's boolean mask is read as it is), no sliding window. Any other model
(vision-language, mixture-of-experts, batch-invariant attention) keeps `model(...)`:
`DecodeStep.of(model)` answers None for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

# decoder layers built as: norm, attention (q/k/v projections, an optional per-head q/k
# norm, rotary, attention, o projection), residual, norm, MLP, residual
FAMILIES = frozenset({"llama", "qwen2", "qwen3", "mistral"})


class DecodeStep:
    """Decode steps of `rows` sequences after a prefill held in a `DynamicCache`: the
    prefill's keys and values (each prompt's `repeat` times) are copied once into buffers
    with room for `new_tokens` more."""

    def __init__(self, model: torch.nn.Module, rotate: Callable[..., Any]) -> None:
        self.model, self.rotate = model, rotate
        self.body = model.model  # type: ignore[union-attr]
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.length = 0

    @classmethod
    def of(cls, model: torch.nn.Module) -> DecodeStep | None:
        """The decode step for `model`, or None where its layers are not the families'
        plain decoder layers (then `model(...)` decodes)."""
        config = getattr(model, "config", None)
        body = getattr(model, "model", None)
        if (
            config is None
            or body is None
            or getattr(config, "model_type", None) not in FAMILIES
            or getattr(config, "_attn_implementation", None) != "sdpa"
            or not hasattr(model, "lm_head")
            or not hasattr(body, "rotary_emb")
            or model.training
        ):
            return None
        layers = list(body.layers)
        # a layer's window is its attention's (Qwen2, Qwen3) or the config's (Mistral)
        window = getattr(config, "sliding_window", None)
        if any(getattr(layer.self_attn, "sliding_window", window) for layer in layers):
            return None
        rotate = getattr(
            sys.modules[type(layers[0].self_attn).__module__], "apply_rotary_pos_emb", None
        )
        return None if rotate is None else cls(model, rotate)

    def start(self, cache: Any, repeat: int, new_tokens: int) -> None:
        """Take the prefill's keys and values from `cache` (a `DynamicCache` of the
        prompts), each prompt's rows `repeat` times, with room for `new_tokens` more."""
        self.keys, self.values = [], []
        for layer in cache.layers:
            for held, into in ((layer.keys, self.keys), (layer.values, self.values)):
                rows, heads, length, dim = held.shape
                buffer = held.new_empty(rows * repeat, heads, length + new_tokens, dim)
                # row r's prompt is row r // repeat's: written in place, no repeated copy
                buffer.view(rows, repeat, heads, -1, dim)[:, :, :, :length] = held[:, None]
                into.append(buffer)
        self.length = cache.layers[0].keys.shape[2]

    @torch.no_grad()
    def __call__(
        self, token: torch.Tensor, position: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """The next logits [rows, V] after `token` [rows, 1] at `position` [rows, 1]
        (each row's rotary position), attending to the keys `mask` [rows, 1, 1, length+1]
        keeps (boolean: this token and every real key before it)."""
        x = self.body.embed_tokens(token)
        cosine, sine = self.body.rotary_emb(x, position)
        at = self.length
        for index, layer in enumerate(self.body.layers):
            attention = layer.self_attn
            h = layer.input_layernorm(x)
            shape = (*h.shape[:-1], -1, attention.head_dim)
            query = attention.q_proj(h).view(shape)
            key = attention.k_proj(h).view(shape)
            value = attention.v_proj(h).view(shape).transpose(1, 2)
            if hasattr(attention, "q_norm"):  # Qwen3: each head's query and key normed
                query, key = attention.q_norm(query), attention.k_norm(key)
            query, key = self.rotate(query.transpose(1, 2), key.transpose(1, 2), cosine, sine)
            self.keys[index][:, :, at : at + 1] = key
            self.values[index][:, :, at : at + 1] = value
            # grouped queries read their key head in place (no repeated keys and values)
            out = F.scaled_dot_product_attention(
                query,
                self.keys[index][:, :, : at + 1],
                self.values[index][:, :, : at + 1],
                attn_mask=mask,
                scale=attention.scaling,
                enable_gqa=True,
            ).transpose(1, 2)
            x = x + attention.o_proj(out.reshape(*h.shape[:-1], -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        self.length = at + 1
        return self.model.lm_head(self.body.norm(x))[:, -1]  # type: ignore[union-attr,operator]
