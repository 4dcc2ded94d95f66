"""The tokenizer families of the model shapes: special tokens at their real ids, bos/eos/pad,
pre-tokenizer, chat template and the `tokenizer_config.json` a real folder carries.

Ids as in the released tokenizers: Qwen2.5 and Qwen3 have 151,643 regular tokens, then
`<|endoftext|>` (151643), `<|im_start|>`, `<|im_end|>`, ... `<|file_sep|>` (151664);
Qwen3 adds `<tool_response>`, `</tool_response>`, `<think>`, `</think>` (151665-151668).
Llama-3.2 has 128,000 regular tokens, then 256 special ones from `<|begin_of_text|>`
(128000) to `<|reserved_special_token_247|>` (128255).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rl.core.models.bpe import LLAMA3_SPLIT, QWEN2_SPLIT
from rl.core.models.chat_templates import (
    LLAMA32_CHAT_TEMPLATE,
    QWEN3_CHAT_TEMPLATE,
    QWEN25_CHAT_TEMPLATE,
)


@dataclass(frozen=True)
class TokenizerFamily:
    """One family's tokenizer as its released folders define it.

    `added_tokens`: (content, special) in id order, from id `regular_tokens` on; a token
    with special=False (`<tool_call>`, `<think>`) is kept when decoding with
    `skip_special_tokens=True`, as in the real tokenizers.
    """

    name: str
    split_regex: str
    regular_tokens: int
    added_tokens: tuple[tuple[str, bool], ...]
    bos_token: str | None
    eos_token: str
    pad_token: str
    chat_template: str
    digit_run: int = 1  # longest digit run the split regex keeps in one piece
    prepends_bos: bool = False  # the tokenizer itself adds the BOS to every encoding
    nfc: bool = False  # NFC normalisation (Qwen)
    ignore_merges: bool = False  # a pre-token in the vocabulary is taken whole (Llama-3)
    config: dict[str, Any] = field(default_factory=dict)  # tokenizer_config.json extras

    def token_id(self, token: str) -> int:
        """The id of an added (special) token."""
        contents = [content for content, _ in self.added_tokens]
        return self.regular_tokens + contents.index(token)

    @property
    def size(self) -> int:
        """`len(tokenizer)`: regular plus added tokens."""
        return self.regular_tokens + len(self.added_tokens)


_QWEN_SPECIAL = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
_QWEN_PLAIN = (
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
_QWEN3_PLAIN = ("<tool_response>", "</tool_response>", "<think>", "</think>")
QWEN25_ADDED = tuple((token, True) for token in _QWEN_SPECIAL) + tuple(
    (token, False) for token in _QWEN_PLAIN
)
QWEN3_ADDED = QWEN25_ADDED + tuple((token, False) for token in _QWEN3_PLAIN)

_LLAMA3_NAMED = {
    0: "<|begin_of_text|>",
    1: "<|end_of_text|>",
    4: "<|finetune_right_pad_id|>",
    6: "<|start_header_id|>",
    7: "<|end_header_id|>",
    8: "<|eom_id|>",
    9: "<|eot_id|>",
    10: "<|python_tag|>",
}


def _llama3_added() -> tuple[tuple[str, bool], ...]:
    """The 256 special tokens: the named ones at their offsets, reserved ones between."""
    tokens, reserved = [], 0
    for offset in range(256):
        if offset in _LLAMA3_NAMED:
            tokens.append(_LLAMA3_NAMED[offset])
        else:
            tokens.append(f"<|reserved_special_token_{reserved}|>")
            reserved += 1
    return tuple((token, True) for token in tokens)


_QWEN_CONFIG = {
    "add_prefix_space": False,
    "clean_up_tokenization_spaces": False,
    "errors": "replace",
    "model_max_length": 131072,
    "split_special_tokens": False,
    "tokenizer_class": "Qwen2Tokenizer",
    "unk_token": None,
    "additional_special_tokens": list(_QWEN_SPECIAL[1:]),
}


def _qwen(
    name: str, added_tokens: tuple[tuple[str, bool], ...], chat_template: str
) -> TokenizerFamily:
    """Qwen2.5 and Qwen3 share the vocabulary, split, bos/eos/pad and tokenizer_config;
    they differ in the added tokens (Qwen3's four more) and the chat template."""
    return TokenizerFamily(
        name=name,
        split_regex=QWEN2_SPLIT,
        regular_tokens=151643,
        added_tokens=added_tokens,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=chat_template,
        nfc=True,
        config=_QWEN_CONFIG,
    )


FAMILIES = {
    "qwen2.5": _qwen("qwen2.5", QWEN25_ADDED, QWEN25_CHAT_TEMPLATE),
    "qwen3": _qwen("qwen3", QWEN3_ADDED, QWEN3_CHAT_TEMPLATE),
    "llama-3.2": TokenizerFamily(
        name="llama-3.2",
        split_regex=LLAMA3_SPLIT,
        regular_tokens=128000,
        added_tokens=_llama3_added(),
        bos_token="<|begin_of_text|>",
        eos_token="<|eot_id|>",
        # the released folders set none; Llama 3.1+ reserve this one for padding
        pad_token="<|finetune_right_pad_id|>",
        chat_template=LLAMA32_CHAT_TEMPLATE,
        digit_run=3,
        prepends_bos=True,
        ignore_merges=True,
        config={
            # the released files say true, which transformers 5 ignores for BPE tokenizers
            # (with a warning on every load): false decodes the same, quietly
            "clean_up_tokenization_spaces": False,
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 131072,
            "tokenizer_class": "PreTrainedTokenizerFast",
        },
    ),
}


def tokenizer_family(name: str) -> TokenizerFamily:
    """The family called `name`; a ValueError names the known ones."""
    if name not in FAMILIES:
        raise ValueError(f"unknown tokenizer family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def tokenizer_config(family: TokenizerFamily) -> dict[str, Any]:
    """`tokenizer_config.json` as the family's released (instruct) folders write it."""
    decoder = {
        str(family.regular_tokens + i): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for i, (content, special) in enumerate(family.added_tokens)
    }
    return {
        "added_tokens_decoder": decoder,
        "bos_token": family.bos_token,
        "chat_template": family.chat_template.strip(),
        "eos_token": family.eos_token,
        "pad_token": family.pad_token,
        **family.config,
    }
