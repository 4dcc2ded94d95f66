"""rl's `ifeval` scorer against ROLL's ifeval rule, case by case from reading
roll/pipeline/rlvr/rewards/ifeval_rule_reward_worker.py (ROLL 8eb27cc2):

- the 25 ids of `IF_FUNCTIONS_MAP` (lines 668-694), each check's rule (94-459), called with
  the ground truth's keys that it takes (`call_ifeval_function`, 462-481), a check that
  raises scoring 0 (626-631);
- the answer after the last `</think>` (`extract_after_last_think`, 523-551), the special
  tokens dropped first (600-602), only `tag == "ifeval"` rows scored (604);
- `scores` = followed (1/0), `response_level_rewards` = that + the repetition penalty
  (3-grams, -0.5) of the whole response (640-654).

Every id has a response that follows it and one that does not; the ground truths have the
layout of ROLL's ifeval data (allenai's RLVR-IFeval: `func_name` and every parameter key,
null when unused). Expected values are worked out by hand from those lines.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rl.core.rewards.ifeval import INSTRUCTIONS, ifeval
from rl.core.rewards.ifeval import scorer as ifeval_scorer

ROW = {"tag": "ifeval", "prompt_str": "<|im_start|>user\n...<|im_end|>\n"}
KEYS = (
    "N",
    "quantifier",
    "end_phrase",
    "keyword_list",
    "word",
    "forbidden_words",
    "letter",
    "i",
    "first_word",
    "postscript_marker",
    "options",
    "section_splitter",
    "original_prompt",
)


def truth(func_name: str, **params: Any) -> str:
    """A ground truth as ROLL's data has it: JSON, every key present, unused ones null."""
    return json.dumps({"func_name": func_name, **dict.fromkeys(KEYS), **params})


def followed(response: str, func_name: str, **params: Any) -> float:
    return ifeval(response, truth(func_name, **params), ROW, reward_type="soft")["acc"]


# (func_name, params, a response that follows, one that does not)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("verify_keywords", {"keyword_list": ["Paris", "river"]}, "The RIVER of paris.", "Paris."),
    # ROLL counts every word (its count compares each word with itself): N words in all
    ("verify_keyword_frequency", {"word": "cat", "N": 3}, "dog dog dog", "cat cat cat dog"),
    ("validate_forbidden_words", {"forbidden_words": ["bad", "ugly"]}, "fine", "Not BAD."),
    ("verify_letter_frequency", {"letter": "a", "N": 2}, "a cat, An Apple", "banana"),
    ("verify_paragraph_count", {"N": 2}, "one\n  * * *  \ntwo", "one * * * * * * three"),
    (
        "validate_word_constraint",
        {"N": 10, "quantifier": "around"},
        "w " * 11,  # within max(round(1.0), 1) = 1
        "w " * 12,
    ),
    (
        "verify_sentence_constraint",
        {"N": 2, "quantifier": "at most"},
        "I met Mr. Smith. He said e.g. this! And left",  # splits only after "Smith."
        "One. Two? Three.",
    ),
    (
        "validate_paragraphs",
        {"N": 2, "first_word": "Second", "i": 2},
        "First part.\n\n  Second part.",
        "First part.\n\nThird part.",
    ),
    (
        "verify_postscript",
        {"postscript_marker": "P.S."},
        "Hi.\nP.S. see you",
        "Hi.\nP.S.   \n",
    ),
    (
        "validate_placeholders",
        {"N": 2},
        "[name] lives at [address]",
        "[name] lives at\n[add\nress]",
    ),
    ("validate_choice", {"options": ["My answer is yes.", "My answer is no."]}, "is yes", "yes!"),
    (
        "validate_repeat_prompt",
        {"original_prompt": "Write a poem."},
        "Write a poem. Roses...",
        " Write a poem. Roses...",
    ),
    ("validate_two_responses", {}, "first ****** second", "same ******\nsame"),
    ("verify_bullet_points", {"N": 2}, "Intro\n* one\n  - two", "* one\n* two\n* three"),
    ("validate_title", {}, "<<Ode to Joy>>\ntext", "<<Ode\nto Joy>>"),
    ("validate_highlighted_sections", {"N": 2}, "*one* and *two*", "*one* and two"),
    (
        "validate_sections",
        {"N": 2, "section_splitter": "SECTION"},
        "SECTION 1 a SECTION 2 b",
        "intro SECTION 1 a SECTION 2 b",  # the text before the first splitter counts
    ),
    ("validate_json_format", {}, '{"a": [1, 2]}', '```json\n{"a": 1}\n```'),
    ("validate_uppercase", {}, "ALL CAPS, 123!", "ALL CAPs"),
    ("validate_lowercase", {}, "all lower, 123!", "all Lower"),
    (
        "validate_frequency_capital_words",
        {"N": 2, "quantifier": "around"},  # "around": exactly N here
        "NASA and ESA, not Nasa",
        "NASA, ESA and JAXA",
    ),
    ("validate_end", {"end_phrase": "Any questions?"}, "Done. Any questions?", "Any questions? "),
    ("validate_quotation", {}, '"quoted"', '"quoted" '),
    ("validate_no_commas", {}, "no commas here", "one, two"),
]


def test_every_instruction_id_of_roll_is_covered() -> None:
    assert {case[0] for case in CASES} | {"validate_response_language"} == set(INSTRUCTIONS)
    assert len(INSTRUCTIONS) == 25


@pytest.mark.parametrize(
    ("func_name", "params", "good", "bad"), CASES, ids=[case[0] for case in CASES]
)
def test_instruction_followed_or_not(
    func_name: str, params: dict[str, Any], good: str, bad: str
) -> None:
    assert followed(good, func_name, **params) == 1.0
    assert followed(bad, func_name, **params) == 0.0


@pytest.mark.parametrize(
    ("quantifier", "count", "words", "expected"),
    [
        ("at least", 3, 3, 1.0),
        ("at least", 3, 2, 0.0),
        ("at most", 3, 3, 1.0),
        ("at most", 3, 4, 0.0),
        ("around", 25, 27, 1.0),  # round(2.5) = 2 (half to even)
        ("around", 25, 28, 0.0),
        ("around", 35, 31, 1.0),  # round(3.5) = 4
        ("exactly", 3, 3, 0.0),  # no such quantifier: not followed
    ],
)
def test_word_constraint_quantifiers(
    quantifier: str, count: int, words: int, expected: float
) -> None:
    response = " ".join(["w"] * words)
    assert (
        followed(response, "validate_word_constraint", N=count, quantifier=quantifier) == expected
    )


def test_sentence_and_capital_word_quantifiers() -> None:
    three = "One. Two? Three"
    for quantifier, count, expected in (
        ("at least", 3, 1.0),
        ("at least", 4, 0.0),
        ("around", 4, 1.0),  # within 1
        ("around", 5, 0.0),
        ("at most", 2, 0.0),
    ):
        assert (
            followed(three, "verify_sentence_constraint", N=count, quantifier=quantifier)
            == expected
        )
    caps = "AB CD ef"
    for quantifier, count, expected in (
        ("at least", 2, 1.0),
        ("at least", 3, 0.0),
        ("at most", 2, 1.0),
        ("at most", 1, 0.0),
        ("around", 3, 0.0),
    ):
        assert (
            followed(caps, "validate_frequency_capital_words", N=count, quantifier=quantifier)
            == expected
        )


def test_roll_quirks_are_kept() -> None:
    # options given as one string (as allenai's data has them) are its characters
    assert followed("y", "validate_choice", options="yes/no/maybe") == 1.0
    assert followed("yes", "validate_choice", options="yes/no/maybe") == 0.0
    # keyword frequency: the keyword is not even needed in the text
    assert followed("a b", "verify_keyword_frequency", word="zebra", N=2) == 1.0
    # a letter of two characters raises in ROLL (scored 0)
    assert followed("aa", "verify_letter_frequency", letter="aa", N=1) == 0.0
    # validate_paragraphs: i=0 is the last paragraph (Python indexing); past the end: 0
    assert followed("x\n\nEnd", "validate_paragraphs", N=2, first_word="End", i=0) == 1.0
    assert followed("x\n\nEnd", "validate_paragraphs", N=2, first_word="End", i=3) == 0.0
    # `**` is an empty highlighted section
    assert followed("**bold**", "validate_highlighted_sections", N=2) == 1.0
    # a divider line "* * *" is a bullet point too; so is "---"
    assert followed("a\n* * *\n---", "verify_bullet_points", N=2) == 1.0
    # a lone double quote both starts and ends the text
    assert followed('"', "validate_quotation") == 1.0
    # an empty paragraph between dividers fails the count
    assert followed("a * * * * * * b", "verify_paragraph_count", N=3) == 0.0
    # an empty section splitter raises in ROLL (scored 0)
    assert followed("a", "validate_sections", N=1, section_splitter="") == 0.0


def test_check_that_fails_on_its_input_scores_zero() -> None:
    """ROLL catches the check's exception (e.g. a non-list keyword_list of numbers)."""
    assert followed("1 2", "verify_keywords", keyword_list=[1, 2]) == 0.0
    assert followed("yes", "validate_choice", options=[1]) == 0.0


def test_answer_after_think_and_special_tokens() -> None:
    response = "<think>Let me think, carefully.</think>\n\nall lower<|im_end|>"
    assert followed(response, "validate_no_commas") == 1.0  # the comma is in the thinking
    assert followed(response, "validate_lowercase") == 1.0  # only the answer is read
    # no </think>: all of it is the answer
    assert followed("<think>x, y", "validate_no_commas") == 0.0
    # leading newlines only are dropped after </think>, not spaces
    assert followed("</think>\n\nEnd", "validate_paragraphs", N=1, first_word="End", i=1) == 1.0
    assert followed("</think>\n\n Hi", "validate_repeat_prompt", original_prompt="Hi") == 0.0


def test_score_adds_the_repetition_penalty_of_the_whole_response() -> None:
    """'<think> a*10 </think>x': 12 words, 10 trigrams, 3 distinct: -0.35."""
    response = "<think>" + " a" * 10 + " </think>x"
    result = ifeval(response, truth("validate_no_commas"), ROW, reward_type="soft")
    assert result["acc"] == 1.0
    assert result["repetition_penalty"] == pytest.approx(-0.35)
    assert result["score"] == pytest.approx(0.65)
    failed = ifeval("a, a, a, a, a", truth("validate_no_commas"), ROW)
    assert failed["acc"] == 0.0
    assert failed["score"] == pytest.approx(-0.5 * (1 - 2 / 3))  # 3 trigrams, 2 distinct


def test_reward_type_changes_nothing() -> None:
    soft = ifeval("x", truth("validate_no_commas"), ROW, reward_type="soft")
    assert ifeval("x", truth("validate_no_commas"), ROW, reward_type="hard") == soft
    assert ifeval("x", truth("validate_no_commas"), ROW) == soft


def test_ground_truth_as_a_mapping() -> None:
    constraint = json.loads(truth("verify_bullet_points", N=1))
    assert ifeval("* one", constraint, ROW)["acc"] == 1.0
    assert constraint["func_name"] == "verify_bullet_points"  # not consumed


def test_rows_that_cannot_be_scored_are_refused() -> None:
    good = truth("validate_no_commas")
    with pytest.raises(ValueError, match="tag"):
        ifeval("x", good, {"tag": "crossthinkqa"})
    with pytest.raises(ValueError, match="tag"):
        ifeval("x", good, {})
    with pytest.raises(ValueError, match="not JSON"):
        ifeval("x", "{func_name: oops", ROW)
    with pytest.raises(ValueError, match="JSON object"):
        ifeval("x", json.dumps(["validate_no_commas"]), ROW)
    with pytest.raises(ValueError, match="not an instruction"):
        ifeval("x", truth("validate_haiku"), ROW)
    with pytest.raises(ValueError, match="not an instruction"):
        ifeval("x", json.dumps({"N": 3}), ROW)
    with pytest.raises(ValueError, match=r"needs \['N'\]"):
        ifeval("x", truth("verify_bullet_points"), ROW)  # N null
    with pytest.raises(ValueError, match=r"needs \['language'\]"):
        ifeval("x", truth("validate_response_language"), ROW)  # no such key in the data


def test_language_needs_langdetect(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ifeval_scorer, "is_installed", lambda module: False)
    with pytest.raises(ValueError, match="validate_response_language needs the langdetect"):
        followed("Hello there", "validate_response_language", language="en")


def test_response_language() -> None:
    pytest.importorskip("langdetect", reason="langdetect is not installed")
    english = "The weather is lovely today and we are going for a long walk in the park."
    french = "Il fait très beau aujourd'hui et nous allons faire une longue promenade au parc."
    assert followed(english, "validate_response_language", language="en") == 1.0
    assert followed(french, "validate_response_language", language="en") == 0.0
    assert followed("12345", "validate_response_language", language="en") == 0.0  # no letters
