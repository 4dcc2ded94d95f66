"""The built-in demo model: a tiny Qwen2 made from a config, with a tokenizer made in code.

No download is needed: the weights are random (seeded) and the tokenizer is a
character-level vocabulary over digits and arithmetic symbols.
"""

from __future__ import annotations

from typing import Any

from rl.core.demo.characters import TINY_CHARS

__all__ = ["TINY_CHARS", "build_char_tokenizer", "tiny_qwen2_config"]
SPECIAL_TOKENS = {"pad": "<pad>", "eos": "<eos>", "bos": "<bos>"}


def build_char_tokenizer() -> Any:
    """A `PreTrainedTokenizerFast` with one token per character of `TINY_CHARS`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS.values())}
    for char in TINY_CHARS:
        vocab[char] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["pad"]))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=SPECIAL_TOKENS["pad"],
        eos_token=SPECIAL_TOKENS["eos"],
        bos_token=SPECIAL_TOKENS["bos"],
        padding_side="left",
    )
    # A minimal chat template so that `chat_template: native` works with the demo too: a
    # prompt renders as its text; in a conversation the assistant's turns end in <eos> and a
    # tool's result is written between '#' marks (the agentic calculator demo).
    tokenizer.chat_template = (
        "{% for m in messages %}"
        "{% if m['role'] == 'tool' %}#{{ m['content'] }}#{% else %}{{ m['content'] }}{% endif %}"
        "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}"
        "{% endfor %}"
    )
    return tokenizer


def tiny_qwen2_config(tiny: Any, vocab_size: int, pad_token_id: int, eos_token_id: int) -> Any:
    """A `Qwen2Config` from `model.tiny` (head_dim 64 by default, which vLLM's CPU build serves)."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=tiny.hidden_size,
        intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.num_hidden_layers,
        num_attention_heads=tiny.num_attention_heads,
        num_key_value_heads=tiny.num_key_value_heads,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=eos_token_id,
    )
