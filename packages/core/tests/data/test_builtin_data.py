"""The built-in arithmetic task follows data.builtin_max_operand."""

import re

from rl.core.config import load_config
from rl.core.models import build_char_tokenizer
from rl.core.trainer.build import build_dataset


def largest_operand(max_operand):
    config = load_config(overrides=[f"data.builtin_max_operand={max_operand}"])
    rows = build_dataset(config, ("builtin:arithmetic",), 200, 1, build_char_tokenizer())
    return max(int(n) for item in rows for n in re.findall(r"\d+", item.prompt_text))


def test_builtin_max_operand_sets_the_operand_range():
    assert largest_operand(9) == 9
    assert 50 < largest_operand(99) <= 99
