"""rl's `crossthinkqa` scorer against ROLL's CrossThinkQA rule, case by case from reading
roll/pipeline/rlvr/rewards/crossthinkqa_rule_reward_worker.py (ROLL 8eb27cc2):

- `crossthinkqa_reward_fn` (lines 92-141): the last `\\boxed{...}` without `}` inside, else
  the text after the last "answer is", else everything; the first upper-case character
  against `ground_truth[0]`; the loose / soft / strict table;
- `extract_after_last_think` (69-89): after the last `</think>`, leading newlines dropped;
- `get_repetition_penalty_reward(3, -0.5)` (37-66) on the whole response, added to the rule
  reward (239-243); `scores` is 1 when the rule reward is > 0 (200-203);
- the special tokens dropped before all of it (189-191).

The expected numbers are worked out by hand from those lines (ROLL cannot be imported here).
"""

from __future__ import annotations

import pytest

from rl.core.rewards.crossthinkqa import crossthinkqa
from rl.core.rewards.roll_text import answer_after_think, repetition_penalty

SOFT = {"reward_type": "soft"}


def score(response: str, truth: str = "B", **options: object) -> dict[str, float]:
    return crossthinkqa(response, truth, {"tag": "crossthinkqa"}, **({**SOFT, **options}))


@pytest.mark.parametrize(
    ("reward_type", "response", "reward"),
    [
        # right and boxed: 1 in every table
        ("loose", "so \\boxed{B}", 1.0),
        ("soft", "so \\boxed{B}", 1.0),
        ("strict", "so \\boxed{B}", 1.0),
        # right, not boxed (read after "answer is")
        ("loose", "the answer is B", 1.0),
        ("soft", "the answer is B", 0.5),
        ("strict", "the answer is B", -1.0),
        # wrong, boxed
        ("loose", "\\boxed{C}", -1.0),
        ("soft", "\\boxed{C}", -0.5),
        ("strict", "\\boxed{C}", -1.0),
        # wrong, not boxed
        ("loose", "the answer is C", -1.0),
        ("soft", "the answer is C", -1.0),
        ("strict", "the answer is C", -1.0),
    ],
)
def test_reward_table(reward_type: str, response: str, reward: float) -> None:
    result = score(response, reward_type=reward_type)
    assert result["score"] == reward  # short responses: no repeated 3-gram
    assert result["acc"] == float(reward > 0)


def test_acc_follows_the_rule_reward_not_the_correctness() -> None:
    """strict: right but unboxed is -1, so `scores` is 0 although the letter is right."""
    result = score("The answer is B", reward_type="strict")
    assert result["correct"] == 1.0 and result["format"] == 0.0
    assert result["acc"] == 0.0


def test_the_last_box_wins_and_a_box_with_a_brace_inside_does_not_count() -> None:
    assert score("\\boxed{B} then \\boxed{C}")["correct"] == 0.0
    assert score("\\boxed{C} then \\boxed{B}")["correct"] == 1.0
    # `\\boxed{\\text{B}}` holds a `}`: the regex takes `\\text{B` (its first capital: B)
    assert score("\\boxed{\\text{B}}") == score("\\boxed{B}")
    # an empty box is no box: unboxed, and (no "answer is") the whole text is read
    result = score("\\boxed{} B")
    assert (result["format"], result["correct"], result["score"]) == (0.0, 1.0, 0.5)


def test_option_letter_is_the_first_capital() -> None:
    """The first upper-case character decides, even one that is not an option letter."""
    assert score("\\boxed{(B) Paris}")["correct"] == 1.0
    assert score("\\boxed{Option B}")["correct"] == 0.0  # "O" first
    assert score("\\boxed{b}")["correct"] == 0.0  # lower case: no letter, wrong
    assert score("\\boxed{É}", truth="É")["correct"] == 1.0  # str.isupper: any script


def test_without_a_box_the_text_after_the_last_answer_is() -> None:
    assert score("I think the answer is C. No, the Answer Is B")["correct"] == 1.0
    # without "answer is", the whole answer: its first capital
    assert score("Because of Bernoulli")["correct"] == 1.0
    assert score("because of Bernoulli", truth="C")["correct"] == 0.0


def test_ground_truth_first_character_only() -> None:
    assert score("\\boxed{B}", truth="B. Paris")["correct"] == 1.0
    assert score("\\boxed{B}", truth="(B)")["correct"] == 0.0


def test_answer_is_read_after_the_last_think() -> None:
    assert score("<think>\\boxed{C}</think>\n\nThe answer is B")["correct"] == 1.0
    assert score("<think>maybe B</think>\\boxed{C}")["correct"] == 0.0
    assert answer_after_think("a</think>b</think>\n\n c") == " c"
    assert answer_after_think("no think") == "no think"


def test_special_tokens_are_dropped() -> None:
    assert score("\\boxed{B}<|im_end|><pad><|endoftext|>") == score("\\boxed{B}")
    # dropped before the think split, too
    assert score("<think>x</<pad>think>\\boxed{B}")["format"] == 1.0


def test_repetition_penalty_is_added_over_the_whole_response() -> None:
    """'<think> a*10 </think>\\boxed{B}': 12 words, 10 trigrams, 3 distinct."""
    result = score("<think>" + " a" * 10 + " </think>\\boxed{B}")
    assert result["repetition_penalty"] == pytest.approx(-0.5 * (1 - 3 / 10))
    assert result["score"] == pytest.approx(1.0 - 0.35)
    assert result["acc"] == 1.0
    assert repetition_penalty("a " * 10, -0.5) == pytest.approx(-0.5 * (1 - 1 / 8))
    assert repetition_penalty("A a", -0.5) == 0.0  # fewer than 3 words
    assert repetition_penalty("A a a A", -0.5) == -0.5 * (1 - 1 / 2)  # lower-cased


def test_options_and_rows_refused() -> None:
    with pytest.raises(ValueError, match="reward_type"):
        crossthinkqa("\\boxed{B}", "B", {})  # ROLL's default None: a KeyError in ROLL
    with pytest.raises(ValueError, match="reward_type"):
        crossthinkqa("\\boxed{B}", "B", {}, reward_type="hard")
    with pytest.raises(ValueError, match="response_length_penalty_coef"):
        score("\\boxed{B}", response_length_penalty_coef=0.1)
    assert score("\\boxed{B}", response_length_penalty_coef=0.0)["score"] == 1.0
    for truth in ("", None, ["B"]):
        with pytest.raises(ValueError, match="ground truth"):
            crossthinkqa("\\boxed{B}", truth, {}, reward_type="soft")
