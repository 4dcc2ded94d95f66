"""The model's shapes and parameter counts, from its config.json alone (no weights read).

`model_dims(config)` reads `model.path`'s config.json (the text model's, for a multi-modal
config) or, for the built-in demo model, `model.tiny`; `parameter_counts(dims)` counts a
decoder of the Llama / Qwen2 / Qwen3 / Mistral family the way transformers builds it:

    embedding       vocab × hidden
    lm head         vocab × hidden, 0 when tie_word_embeddings
    per layer       q: hidden × heads·head_dim, k and v: hidden × kv_heads·head_dim,
                    o: heads·head_dim × hidden (+ their biases: Qwen2's q/k/v always,
                    others' when attention_bias), Qwen3's q/k norms (2 × head_dim),
                    MLP gate/up/down 3 × hidden × intermediate (+ biases when mlp_bias),
                    two RMS norms (2 × hidden)
    final norm      hidden

A critic replaces the LM head with a value head (hidden + 1).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl.core.config import Config, ConfigError
from rl.core.plan.memory import Layer


class NoModelConfig(ConfigError):
    """model.path has no config.json here (a Hub id, a missing folder), or not one with a
    decoder's shapes: `rl plan` refuses, `rl train`'s preflight skips the estimate."""


BUILTIN_TINY_VOCAB = 51  # the demo tokenizer: 3 special tokens + 48 characters (models.tiny)


@dataclass(frozen=True)
class ModelDims:
    """What the memory estimate needs of a decoder-only transformer."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    tied_embeddings: bool
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values): kv_heads × head_dim."""
        return self.num_key_value_heads * self.head_dim

    def layer(self) -> Layer:
        """What the memory formulas need (`rl.core.plan.memory`)."""
        return Layer(
            layers=self.num_layers,
            hidden=self.hidden_size,
            intermediate=self.intermediate_size,
            kv_dim=self.kv_dim,
            vocab=self.vocab_size,
            q_dim=self.num_attention_heads * self.head_dim,
            qk_norm=self.qk_norm,
        )


@dataclass(frozen=True)
class ParameterCounts:
    embedding: int
    lm_head: int
    per_layer: int
    layers: int
    final_norm: int

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.per_layer * self.layers + self.final_norm

    @property
    def critic_total(self) -> int:
        """The same backbone with a value head (hidden → 1, with bias) for the LM head."""
        return self.embedding + self.per_layer * self.layers + self.final_norm + self.value_head

    @property
    def value_head(self) -> int:
        return self.final_norm + 1  # final_norm is `hidden` parameters


def dims_from_hf(hf: dict[str, Any]) -> ModelDims:
    """ModelDims of a transformers config.json (its `text_config` when it has one)."""
    if isinstance(hf.get("text_config"), dict) and "hidden_size" not in hf:
        hf = hf["text_config"]
    hidden = int(hf["hidden_size"])
    heads = int(hf["num_attention_heads"])
    model_type = str(hf.get("model_type", ""))
    return ModelDims(
        vocab_size=int(hf["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(hf["intermediate_size"]),
        num_layers=int(hf["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(hf.get("num_key_value_heads") or heads),
        head_dim=int(hf.get("head_dim") or hidden // heads),
        tied_embeddings=bool(hf.get("tie_word_embeddings", False)),
        qkv_bias=model_type == "qwen2" or bool(hf.get("attention_bias", False)),
        o_bias=bool(hf.get("attention_bias", False)),
        mlp_bias=bool(hf.get("mlp_bias", False)),
        qk_norm=model_type.startswith("qwen3"),
    )


def parameter_counts(dims: ModelDims) -> ParameterCounts:
    """The parameters of each part (see the module's docstring for the formula)."""
    h, i, hd = dims.hidden_size, dims.intermediate_size, dims.head_dim
    q, kv = dims.num_attention_heads * hd, dims.kv_dim
    attention = h * q + 2 * h * kv + q * h
    attention += (q + 2 * kv) * dims.qkv_bias + h * dims.o_bias + 2 * hd * dims.qk_norm
    mlp = 3 * h * i + (2 * i + h) * dims.mlp_bias
    embedding = dims.vocab_size * h
    return ParameterCounts(
        embedding=embedding,
        lm_head=0 if dims.tied_embeddings else embedding,
        per_layer=attention + mlp + 2 * h,
        layers=dims.num_layers,
        final_norm=h,
    )


def model_dims(config: Config) -> ModelDims:
    """The dims of `model.path`: its config.json, or `model.tiny` for the built-in model.
    A ConfigError names model.path when there is no config.json to read."""
    if config.model.path.startswith("builtin:"):  # the config the built-in model is made of
        from rl.core.models.tiny import tiny_qwen2_config

        built = tiny_qwen2_config(config.model.tiny, BUILTIN_TINY_VOCAB, 0, 0)
        return dims_from_hf({**built.to_dict(), "model_type": "qwen2"})
    from rl.core.models.loading import model_source

    source = model_source(config.model)
    file = Path(source) / "config.json" if source else None
    if file is None or not file.is_file():
        raise NoModelConfig(
            f"model.path = {config.model.path!r}: no config.json there to count the model's "
            "parameters from; point model.path at a local model folder"
        )
    try:
        return dims_from_hf(json.loads(file.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise NoModelConfig(
            f"model.path: {file} does not give a decoder's shapes ({error!r} missing or bad)"
        ) from None
