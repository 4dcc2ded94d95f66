"""A loaded model's rotary frequencies come from its config, never from memory that
transformers left unwritten (its `_init_weights` skips a buffer it believes initialised:
seen as garbage `inv_freq` and NaN logits in an HF rollout built after a megatron actor)."""

from __future__ import annotations

import torch

from rl.core.config import ModelConfig
from rl.core.models import load_causal_lm
from rl.core.models.loading import load_tokenizer
from rl.core.models.rope import reset_rotary_buffers


def _rotary(model):
    return next(m for m in model.modules() if "RotaryEmbedding" in type(m).__name__)


def test_garbage_rotary_frequencies_are_rewritten_from_the_config():
    config = ModelConfig(path="builtin:tiny-qwen2")
    model = load_causal_lm(config, load_tokenizer(config))
    rotary = _rotary(model)
    expected = rotary.inv_freq.clone()
    dim = model.config.hidden_size // model.config.num_attention_heads
    assert torch.allclose(
        expected,
        1.0 / model.config.rope_parameters["rope_theta"] ** (torch.arange(0, dim, 2) / dim),
    )
    rotary.inv_freq.fill_(3e38)  # what unwritten memory may hold
    rotary.original_inv_freq.zero_()
    assert reset_rotary_buffers(model) == 1
    assert torch.equal(rotary.inv_freq, expected)
    assert torch.equal(rotary.original_inv_freq, expected)


def test_loading_writes_the_buffers_even_when_transformers_skips_them(tmp_path, monkeypatch):
    """A folder loaded with transformers' buffer write skipped (its guarded `copy_`): without
    rl's rewrite the frequencies are whatever the memory held."""
    import transformers.initialization as init

    builtin = ModelConfig(path="builtin:tiny-qwen2")
    tokenizer = load_tokenizer(builtin)
    load_causal_lm(builtin, tokenizer).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    monkeypatch.setattr(init, "copy_", lambda tensor, other: tensor)  # the skipped write
    config = ModelConfig(path=str(tmp_path))
    model = load_causal_lm(config, load_tokenizer(config))
    dim = model.config.hidden_size // model.config.num_attention_heads
    theta = model.config.rope_parameters["rope_theta"]
    assert torch.allclose(_rotary(model).inv_freq, 1.0 / theta ** (torch.arange(0, dim, 2) / dim))
