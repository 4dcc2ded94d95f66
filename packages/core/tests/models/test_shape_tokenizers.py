"""The full-size tokenizers: sizes, special ids as released, BOS rules, realistic pieces,
lossless round trips, and the build cache."""

import pytest

from rl.core.models.tokenizer_families import FAMILIES
from rl.core.models.tokenizer_files import build_tokenizer, tokenizer_folder

FAMILY_NAMES = sorted(FAMILIES)
# The released tokenizers' ids (tokenizer.json `added_tokens`).
QWEN_IDS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|file_sep|>": 151664,
}
QWEN3_IDS = {
    **QWEN_IDS,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}
LLAMA_IDS = {
    "<|begin_of_text|>": 128000,
    "<|end_of_text|>": 128001,
    "<|reserved_special_token_0|>": 128002,
    "<|finetune_right_pad_id|>": 128004,
    "<|start_header_id|>": 128006,
    "<|end_header_id|>": 128007,
    "<|eom_id|>": 128008,
    "<|eot_id|>": 128009,
    "<|python_tag|>": 128010,
    "<|reserved_special_token_3|>": 128011,
    "<|reserved_special_token_247|>": 128255,
}
RELEASED = {
    # family: (len(tokenizer), ids, bos, eos, pad)
    "qwen2.5": (151665, QWEN_IDS, None, "<|im_end|>", "<|endoftext|>"),
    "qwen3": (151669, QWEN3_IDS, None, "<|im_end|>", "<|endoftext|>"),
    "llama-3.2": (
        128256,
        LLAMA_IDS,
        "<|begin_of_text|>",
        "<|eot_id|>",
        "<|finetune_right_pad_id|>",
    ),
}
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
    "clips in May. How many clips did Natalia sell altogether in April and May?",
    "Let x = 12345. Then 3x + 7 = 37042, and x^2 - 4x = 152345205; 1/3 ≈ 0.333.",
    "It’s 30 °C in the café — “naïve” résumé, 東京, emoji 🙂, tabs\tand\nnew lines.\n\n",
    "def reward(prompt, response):\n    return 1.0 if response.strip() else 0.0\n",
    "  leading and trailing spaces  ",
]


@pytest.fixture(scope="module", params=FAMILY_NAMES)
def family(request):
    return request.param


@pytest.fixture(scope="module")
def tokenizer(family):
    return build_tokenizer(family)


def test_size_special_ids_and_bos_eos_pad_are_the_released_ones(family, tokenizer):
    size, ids, bos, eos, pad = RELEASED[family]
    assert len(tokenizer) == size
    assert {token: tokenizer.convert_tokens_to_ids(token) for token in ids} == ids
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (bos, eos, pad)
    regular = FAMILIES[family].regular_tokens
    assert tokenizer.convert_ids_to_tokens(0) == "!"
    assert tokenizer.convert_ids_to_tokens(regular) == ("<|endoftext|>" if bos is None else bos)


def test_only_llama_prepends_a_bos(family, tokenizer):
    ids = tokenizer("Hello world").input_ids
    if family == "llama-3.2":
        assert ids[0] == 128000 and ids.count(128000) == 1
    else:
        assert 151643 not in ids and ids[0] < 151643


@pytest.mark.parametrize("text", TEXTS)
def test_text_round_trips_through_encode_and_decode(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False).input_ids
    assert tokenizer.decode(ids) == text
    with_bos = tokenizer(text).input_ids
    assert tokenizer.decode(with_bos, skip_special_tokens=True) == text


def test_ordinary_text_splits_into_realistic_pieces(family, tokenizer):
    # as the released tokenizers split it
    assert tokenizer.tokenize(TEXTS[0]) == [
        "The", "Ġquick", "Ġbrown", "Ġfox", "Ġjumps", "Ġover", "Ġthe", "Ġlazy", "Ġdog", ".",
    ]  # fmt: skip
    pieces = tokenizer.tokenize(TEXTS[1])
    for word in ("Ġsold", "Ġfriends", "ĠApril", "Ġhalf", "Ġmany", "ĠHow", "Ġaltogether"):
        assert word in pieces
    assert len(pieces) < 1.4 * len(TEXTS[1].split())  # real ones: ~1.2 per English word
    digits = tokenizer.tokenize("12345")
    assert digits == (["123", "45"] if family == "llama-3.2" else ["1", "2", "3", "4", "5"])


def test_tool_and_think_tags_survive_skip_special_tokens(family, tokenizer):
    text = "<tool_call>\n{}\n</tool_call>"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    if family == "llama-3.2":
        return  # plain text there
    assert ids[0] == 151657 and ids[-1] == 151658
    assert tokenizer.decode([*ids, 151645], skip_special_tokens=True) == text
    if family == "qwen3":
        assert tokenizer("<think>\n</think>", add_special_tokens=False).input_ids[0] == 151667


def test_tokenizer_files_are_built_once_then_cached(family, tmp_path, monkeypatch):
    from rl.core.models import tokenizer_files

    folder = tokenizer_folder(family, tmp_path)
    built = {path.name: path.read_bytes() for path in folder.iterdir()}

    def rebuilt(spec):
        raise AssertionError(f"the cached {spec.name} tokenizer was built again")

    monkeypatch.setattr(tokenizer_files, "backend_tokenizer", rebuilt)
    assert tokenizer_folder(family, tmp_path) == folder
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == built
    assert sorted(path.name for path in tmp_path.iterdir()) == [folder.name]
