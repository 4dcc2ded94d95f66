import string

import pytest


def printable_tokenizer():
    """One token per printable ASCII character, <eos> / <pad> specials, and a chat template
    with roles, tools and a generation prompt: text <-> ids is one-to-one, so rendering a
    whole conversation and tokenising it is an independent reference for the agent loop."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for char in string.printable:
        vocab.setdefault(char, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", padding_side="left"
    )
    tokenizer.chat_template = (
        "{% if tools %}tools:{% for t in tools %}{{ t['function']['name'] }};{% endfor %}"
        "\n{% endif %}"
        "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }}<eos>{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    return tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return printable_tokenizer()
