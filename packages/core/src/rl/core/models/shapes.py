"""Hugging Face model folders shaped like the ones users train, built in code, offline.

`build_model_folder("qwen2.5-0.5b", path)` writes what a released instruct folder holds:
config.json (the released keys and figures, fewer layers), generation_config.json,
model.safetensors (random weights from a seed, `random_weights`; the tied LM head is not
stored, as in the released files), and a full-size byte-level BPE tokenizer with the
family's special tokens at their real ids and its chat template (`tokenizer_files`).
Transformers' `AutoTokenizer` / `AutoModelForCausalLM` and vLLM load the folder as they
load the real one. `hidden_size` / `intermediate_size` shrink a model for cheap tests; the vocabulary,
the tokenizer and the head dimension stay real.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rl.core.models.random_weights import write_random_weights
from rl.core.models.tokenizer_files import write_tokenizer_files


@dataclass(frozen=True)
class ModelShape:
    """One released model's architecture, as its config.json states it."""

    name: str
    description: str
    tokenizer_family: str
    architecture: str
    model_type: str
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    released_layers: int
    vocab_size: int
    max_position_embeddings: int
    config_extras: Mapping[str, Any]  # the released config's other keys (ids, rope, norm eps)
    generation_config: Mapping[str, Any]
    tie_word_embeddings: bool = True
    # mixture of experts: the config key of the expert count (qwen3_moe "num_experts",
    # mixtral "num_local_experts"); None for a dense model
    experts_key: str | None = None


def _frozen(mapping: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(mapping)


# What the released Qwen2.5 Instruct configs (0.5B, 1.5B) share beyond their sizes.
QWEN2_5_EXTRAS = _frozen(
    {
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "use_sliding_window": False,
        "max_window_layers": 21,
        "transformers_version": "4.43.1",
    }
)
QWEN2_5_GENERATION = _frozen(
    {
        "bos_token_id": 151643,
        "pad_token_id": 151643,
        "do_sample": True,
        "eos_token_id": [151645, 151643],
        "repetition_penalty": 1.1,
        "temperature": 0.7,
        "top_p": 0.8,
        "top_k": 20,
    }
)

# The released Qwen3 generation_config.json (0.6B and 30B-A3B alike).
QWEN3_GENERATION = _frozen(
    {
        "bos_token_id": 151643,
        "do_sample": True,
        "eos_token_id": [151645, 151643],
        "pad_token_id": 151643,
        "temperature": 0.6,
        "top_k": 20,
        "top_p": 0.95,
    }
)
# Llama-3.2-1B-Instruct's generation_config.json; the Mixtral shape takes it with the
# Llama-3.2 tokenizer whose ids it names.
LLAMA_3_2_GENERATION = _frozen(
    {
        "bos_token_id": 128000,
        "do_sample": True,
        "eos_token_id": [128001, 128008, 128009],
        "temperature": 0.6,
        "top_p": 0.9,
    }
)


SHAPES: dict[str, ModelShape] = {
    "qwen2.5-0.5b": ModelShape(
        name="qwen2.5-0.5b",
        description="Qwen2.5-0.5B-Instruct: Qwen2ForCausalLM, 896 hidden, 14/2 heads, "
        "tied embeddings, 151,936-row vocabulary, ChatML with a default system message",
        tokenizer_family="qwen2.5",
        architecture="Qwen2ForCausalLM",
        model_type="qwen2",
        hidden_size=896,
        intermediate_size=4864,
        num_attention_heads=14,
        num_key_value_heads=2,
        head_dim=64,  # derived (896 / 14); the released config.json does not list it
        released_layers=24,
        vocab_size=151936,
        max_position_embeddings=32768,
        config_extras=QWEN2_5_EXTRAS,
        generation_config=QWEN2_5_GENERATION,
    ),
    "qwen2.5-1.5b": ModelShape(
        name="qwen2.5-1.5b",
        description="Qwen2.5-1.5B-Instruct: Qwen2ForCausalLM, 1536 hidden, 12/2 heads of 128, "
        "tied embeddings, 151,936-row vocabulary, ChatML with a default system message",
        tokenizer_family="qwen2.5",
        architecture="Qwen2ForCausalLM",
        model_type="qwen2",
        hidden_size=1536,
        intermediate_size=8960,
        num_attention_heads=12,
        num_key_value_heads=2,
        head_dim=128,  # derived (1536 / 12); the released config.json does not list it
        released_layers=28,
        vocab_size=151936,
        max_position_embeddings=32768,
        config_extras=QWEN2_5_EXTRAS,
        generation_config=QWEN2_5_GENERATION,
    ),
    "qwen3-0.6b": ModelShape(
        name="qwen3-0.6b",
        description="Qwen3-0.6B: Qwen3ForCausalLM, 1024 hidden, 16/8 heads of 128, q/k norm, "
        "tied embeddings, 151,936-row vocabulary, ChatML with <think> blocks",
        tokenizer_family="qwen3",
        architecture="Qwen3ForCausalLM",
        model_type="qwen3",
        hidden_size=1024,
        intermediate_size=3072,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        released_layers=28,
        vocab_size=151936,
        max_position_embeddings=40960,
        config_extras=_frozen(
            {
                "bos_token_id": 151643,
                "eos_token_id": 151645,
                "head_dim": 128,
                "attention_bias": False,
                "rms_norm_eps": 1e-06,
                "rope_scaling": None,
                "rope_theta": 1000000,
                "sliding_window": None,
                "use_sliding_window": False,
                "max_window_layers": 28,
                "transformers_version": "4.51.0",
            }
        ),
        generation_config=QWEN3_GENERATION,
    ),
    "llama-3.2-1b": ModelShape(
        name="llama-3.2-1b",
        description="Llama-3.2-1B-Instruct: LlamaForCausalLM, 2048 hidden, 32/8 heads, "
        "tied embeddings, 128,256-token vocabulary, llama3 RoPE scaling (factor 32)",
        tokenizer_family="llama-3.2",
        architecture="LlamaForCausalLM",
        model_type="llama",
        hidden_size=2048,
        intermediate_size=8192,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        released_layers=16,
        vocab_size=128256,
        max_position_embeddings=131072,
        config_extras=_frozen(
            {
                "bos_token_id": 128000,
                "eos_token_id": [128001, 128008, 128009],
                "head_dim": 64,
                "attention_bias": False,
                "mlp_bias": False,
                "pretraining_tp": 1,
                "rms_norm_eps": 1e-05,
                "rope_scaling": {
                    "factor": 32.0,
                    "high_freq_factor": 4.0,
                    "low_freq_factor": 1.0,
                    "original_max_position_embeddings": 8192,
                    "rope_type": "llama3",
                },
                "rope_theta": 500000.0,
                "transformers_version": "4.45.0.dev0",
            }
        ),
        generation_config=LLAMA_3_2_GENERATION,
    ),
    "qwen3-moe": ModelShape(
        name="qwen3-moe",
        description="Qwen3-30B-A3B: Qwen3MoeForCausalLM, 2048 hidden, 32/4 heads of 128, "
        "128 experts of 768 (8 per token, top-k weights renormalised), untied embeddings, "
        "151,936-row vocabulary, Qwen3's ChatML with <think> blocks",
        tokenizer_family="qwen3",
        architecture="Qwen3MoeForCausalLM",
        model_type="qwen3_moe",
        hidden_size=2048,
        intermediate_size=6144,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        released_layers=48,
        vocab_size=151936,
        max_position_embeddings=40960,
        config_extras=_frozen(
            {
                "bos_token_id": 151643,
                "eos_token_id": 151645,
                "head_dim": 128,
                "attention_bias": False,
                "decoder_sparse_step": 1,
                "mlp_only_layers": [],
                "moe_intermediate_size": 768,
                "norm_topk_prob": True,
                "num_experts": 128,
                "num_experts_per_tok": 8,
                "output_router_logits": False,
                "router_aux_loss_coef": 0.001,
                "rms_norm_eps": 1e-06,
                "rope_scaling": None,
                "rope_theta": 1000000.0,
                "sliding_window": None,
                "use_sliding_window": False,
                "max_window_layers": 48,
                "transformers_version": "4.51.0",
            }
        ),
        generation_config=QWEN3_GENERATION,
        tie_word_embeddings=False,
        experts_key="num_experts",
    ),
    # No Mistral tokenizer is built here: the Mixtral architecture at its released figures
    # (8 experts, 2 per token, untied head) carries the Llama-3.2 tokenizer and vocabulary
    "mixtral": ModelShape(
        name="mixtral",
        description="Mixtral-8x7B-Instruct: MixtralForCausalLM, 4096 hidden, 32/8 heads of "
        "128, 8 experts of 14336 (2 per token), untied embeddings; with the Llama-3.2 "
        "tokenizer (128,256 tokens) instead of Mistral's 32,000",
        tokenizer_family="llama-3.2",
        architecture="MixtralForCausalLM",
        model_type="mixtral",
        hidden_size=4096,
        intermediate_size=14336,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        released_layers=32,
        vocab_size=128256,
        max_position_embeddings=32768,
        config_extras=_frozen(
            {
                "bos_token_id": 128000,
                "eos_token_id": [128001, 128008, 128009],
                "head_dim": 128,
                "num_experts_per_tok": 2,
                "num_local_experts": 8,
                "output_router_logits": False,
                "router_aux_loss_coef": 0.02,
                "router_jitter_noise": 0.0,
                "rms_norm_eps": 1e-05,
                "rope_theta": 1000000.0,
                "sliding_window": None,
                "transformers_version": "4.36.0.dev0",
            }
        ),
        generation_config=LLAMA_3_2_GENERATION,
        tie_word_embeddings=False,
        experts_key="num_local_experts",
    ),
}
DTYPES = ("float32", "bfloat16", "float16")


def model_shape(name: str) -> ModelShape:
    """The shape called `name`; a ValueError names the known ones."""
    if name not in SHAPES:
        raise ValueError(f"unknown model shape {name!r}; known: {', '.join(SHAPES)}")
    return SHAPES[name]


def scaled_heads(shape: ModelShape, hidden_size: int) -> tuple[int, int]:
    """(attention heads, KV heads) for `hidden_size`, in the released proportions.

    The head dimension stays the released one, so `hidden_size` must be a multiple of
    hidden/heads of the release (64 for the dense shapes and Qwen3-MoE, 128 for Mixtral).
    """
    per_head = shape.hidden_size // shape.num_attention_heads
    if hidden_size <= 0 or hidden_size % per_head:
        raise ValueError(f"{shape.name}: hidden_size must be a positive multiple of {per_head}")
    heads = hidden_size // per_head
    group = shape.num_attention_heads // shape.num_key_value_heads
    kv_heads = max(1, heads // group)
    while heads % kv_heads:
        kv_heads -= 1
    return heads, kv_heads


def shape_config(
    shape: ModelShape,
    *,
    num_layers: int = 2,
    dtype: str = "float32",
    hidden_size: int | None = None,
    intermediate_size: int | None = None,
    num_experts: int | None = None,
    experts_per_token: int | None = None,
    moe_intermediate_size: int | None = None,
) -> dict[str, Any]:
    """config.json of `shape` with `num_layers` layers (and smaller widths if given).

    A mixture-of-experts shape takes fewer experts (`num_experts`), fewer per token
    (`experts_per_token`) and narrower ones (`moe_intermediate_size`, Qwen3-MoE's key;
    Mixtral's experts are `intermediate_size` wide); a dense shape refuses them.

    It keeps the release's `transformers_version`: transformers 5 takes a local folder
    whose config lacks one for a Mistral folder and warns about its tokenizer's regex.
    """
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, not {num_layers}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    hidden = hidden_size or shape.hidden_size
    heads, kv_heads = scaled_heads(shape, hidden)
    experts = _expert_keys(shape, num_experts, experts_per_token, moe_intermediate_size)
    return {
        "architectures": [shape.architecture],
        "attention_dropout": 0.0,
        "hidden_act": "silu",
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size or shape.intermediate_size,
        "max_position_embeddings": shape.max_position_embeddings,
        "model_type": shape.model_type,
        "num_attention_heads": heads,
        "num_hidden_layers": num_layers,
        "num_key_value_heads": kv_heads,
        # a copy: transformers' configs edit nested values (rope_scaling) in place
        **copy.deepcopy(dict(shape.config_extras)),
        **experts,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "torch_dtype": dtype,
        "use_cache": True,
        "vocab_size": shape.vocab_size,
    }


def _expert_keys(
    shape: ModelShape,
    num_experts: int | None,
    experts_per_token: int | None,
    moe_intermediate_size: int | None,
) -> dict[str, Any]:
    """The expert figures asked for, under `shape`'s config keys (ValueError if none fit)."""
    asked = {"num_experts": num_experts, "experts_per_token": experts_per_token}
    asked["moe_intermediate_size"] = moe_intermediate_size
    if shape.experts_key is None:
        given = [name for name, value in asked.items() if value is not None]
        if given:
            raise ValueError(f"{shape.name} is a dense model: {', '.join(given)} do not apply")
        return {}
    extras = shape.config_extras
    total = num_experts or extras[shape.experts_key]
    per_token = experts_per_token or min(extras["num_experts_per_tok"], total)
    if not 1 <= per_token <= total:
        raise ValueError(f"{shape.name}: experts_per_token must be in 1..{total}, not {per_token}")
    keys = {shape.experts_key: total, "num_experts_per_tok": per_token}
    if moe_intermediate_size is not None:
        if "moe_intermediate_size" not in extras:
            raise ValueError(
                f"{shape.name}: no moe_intermediate_size (its experts are intermediate_size wide)"
            )
        keys["moe_intermediate_size"] = moe_intermediate_size
    return keys


def write_json(path: Path, content: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(dict(content), indent=2) + "\n", encoding="utf-8")


def build_model_folder(
    shape: str,
    path: str | os.PathLike[str],
    *,
    num_layers: int = 2,
    seed: int = 0,
    dtype: str = "float32",
    hidden_size: int | None = None,
    intermediate_size: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    num_experts: int | None = None,
    experts_per_token: int | None = None,
    moe_intermediate_size: int | None = None,
) -> Path:
    """Write a Hugging Face folder shaped like `shape` (see `SHAPES`) at `path`; return it.

    `path` must not exist or be empty; the folder appears whole or not at all.
    `cache_dir` holds the built tokenizer files (`tokenizer_files.default_cache_dir()`).
    `num_experts`, `experts_per_token`, `moe_intermediate_size`: an MoE shape's experts.
    """
    spec = model_shape(shape)
    config = shape_config(
        spec,
        num_layers=num_layers,
        dtype=dtype,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_experts=num_experts,
        experts_per_token=experts_per_token,
        moe_intermediate_size=moe_intermediate_size,
    )
    with staged_folder(path) as staging:
        write_json(staging / "config.json", config)
        write_json(staging / "generation_config.json", spec.generation_config)
        write_tokenizer_files(spec.tokenizer_family, staging, cache_dir)
        write_random_weights(staging, seed, dtype)
    return Path(path)


@contextmanager
def staged_folder(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A private folder to write a model folder into, renamed to `path` (which must not
    exist or be empty) when the block ends without an error: the folder appears whole or
    not at all, readable by all."""
    target = Path(path)
    if target.exists() and any(target.iterdir()):
        raise FileExistsError(f"{target} exists and is not empty")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        yield staging
        staging.chmod(0o755)  # mkdtemp made it private; a model folder is not
        for file in staging.iterdir():
            file.chmod(0o644)
        if target.exists():
            target.rmdir()
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
