"""The byte-level BPE assembled in code: exact size, unique tokens, valid merges."""

import pytest

from rl.core.models.bpe import (
    LLAMA3_SPLIT,
    QWEN2_SPLIT,
    byte_alphabet,
    byte_level_vocab,
    learn_merges,
)


def test_byte_alphabet_is_gpt2s_order():
    alphabet = byte_alphabet()
    assert len(set(alphabet)) == 256
    assert alphabet[0] == "!"  # id 0 of Qwen's and Llama-3's vocabularies
    assert alphabet[:3] == ["!", '"', "#"]
    assert "Ġ" in alphabet and "Ċ" in alphabet  # the space and the newline bytes


@pytest.mark.parametrize("split", [QWEN2_SPLIT, LLAMA3_SPLIT])
def test_the_corpus_teaches_a_few_thousand_merges(split):
    merges = learn_merges(split)
    assert 2000 < len(merges) < 6000
    learned = {left + right for left, right in merges}
    assert {"Ġthe", "Ġanswer", "Ġnumber", "Ġreturn"} <= learned


@pytest.mark.parametrize("size", [300, 5000, 20000])
def test_vocab_has_exactly_the_size_asked_and_every_merge_is_valid(size):
    vocab, merges = byte_level_vocab(LLAMA3_SPLIT, size, digit_run=3)
    assert len(vocab) == size
    assert sorted(vocab.values()) == list(range(size))
    assert len(merges) == size - 256
    assert len(set(merges)) == len(merges)
    for rank, (left, right) in enumerate(merges):
        # both parts exist before the merge, and it makes the token of the next id
        assert vocab[left] < 256 + rank and vocab[right] < 256 + rank
        assert vocab[left + right] == 256 + rank


def test_llama3s_vocab_has_every_number_below_1000():
    vocab, _ = byte_level_vocab(LLAMA3_SPLIT, 8000, digit_run=3)
    assert all(str(n) in vocab for n in range(1000))
    assert "007" in vocab


def test_a_vocab_smaller_than_the_bytes_is_refused():
    with pytest.raises(ValueError, match="at least 256"):
        byte_level_vocab(QWEN2_SPLIT, 100)
