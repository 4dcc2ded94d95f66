"""Tied word embeddings: one tensor in megatron, `lm_head.weight` exported only when asked."""

from __future__ import annotations

import torch

from rl.megatron.layouts import converter_for


def test_tied_import_keeps_one_tensor(tiny_hf):
    config, model, checkpoint = tiny_hf("qwen3", tie_word_embeddings=True)
    assert config.tie_word_embeddings
    with_head = {**checkpoint, "lm_head.weight": model.lm_head.weight.detach()}
    mcore = dict(converter_for(config).from_hf(with_head.items()))
    assert "output_layer.weight" not in mcore
    assert torch.equal(
        mcore["embedding.word_embeddings.weight"], checkpoint["model.embed_tokens.weight"]
    )


def test_tied_export_omits_lm_head_unless_asked(tiny_hf):
    config, _, checkpoint = tiny_hf("qwen3", tie_word_embeddings=True)
    mcore = dict(converter_for(config).from_hf(checkpoint.items()))
    mcore["output_layer.weight"] = mcore[
        "embedding.word_embeddings.weight"
    ]  # a last PP stage's copy
    plain = dict(converter_for(config).to_hf(mcore.items()))
    assert "lm_head.weight" not in plain
    assert sorted(plain) == sorted(k for k in checkpoint if k != "lm_head.weight")

    full = dict(converter_for(config, emit_tied_lm_head=True).to_hf(mcore.items()))
    assert torch.equal(full["lm_head.weight"], checkpoint["model.embed_tokens.weight"])


def test_tied_export_loads_into_hf_strictly(tiny_hf):
    config, model, checkpoint = tiny_hf("llama", tie_word_embeddings=True)
    converter = converter_for(config, emit_tied_lm_head=True)
    hf = dict(converter.to_hf(converter.from_hf(checkpoint.items())))
    fresh = type(model)(config)
    fresh.load_state_dict(hf, strict=True)
    ids = torch.randint(0, 256, (1, 8))
    with torch.no_grad():
        assert torch.equal(fresh(ids).logits, model(ids).logits)
