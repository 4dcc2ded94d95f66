"""The instructions ROLL's ifeval rule knows, by the id its data names them with
(`func_name`), with the ground-truth keys each check reads, in the check's argument order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rl.core.rewards.ifeval import (
    case,
    content,
    detectable_format,
    keywords,
    language,
    length,
    punctuation,
    startend,
)


@dataclass(frozen=True)
class Instruction:
    """A check `check(text, *values)`, the row's keys giving its values, and the package it
    needs beyond the standard library (None: none)."""

    check: Callable[..., bool]
    keys: tuple[str, ...] = ()
    library: str | None = None


INSTRUCTIONS: dict[str, Instruction] = {
    # keywords
    "verify_keywords": Instruction(keywords.has_all_keywords, ("keyword_list",)),
    "verify_keyword_frequency": Instruction(keywords.keyword_frequency, ("word", "N")),
    "validate_forbidden_words": Instruction(keywords.has_no_forbidden_words, ("forbidden_words",)),
    "verify_letter_frequency": Instruction(keywords.letter_frequency, ("letter", "N")),
    # language
    "validate_response_language": Instruction(
        language.is_in_language, ("language",), library=language.LIBRARY
    ),
    # length constraints
    "verify_paragraph_count": Instruction(length.divided_paragraph_count, ("N",)),
    "validate_word_constraint": Instruction(length.word_count, ("N", "quantifier")),
    "verify_sentence_constraint": Instruction(length.sentence_count, ("N", "quantifier")),
    "validate_paragraphs": Instruction(length.paragraphs_with_first_word, ("N", "first_word", "i")),
    # detectable content
    "verify_postscript": Instruction(content.has_postscript, ("postscript_marker",)),
    "validate_placeholders": Instruction(content.placeholder_count, ("N",)),
    "validate_choice": Instruction(content.is_one_of, ("options",)),
    "validate_repeat_prompt": Instruction(content.repeats_prompt, ("original_prompt",)),
    "validate_two_responses": Instruction(content.two_different_responses),
    # detectable format
    "verify_bullet_points": Instruction(detectable_format.bullet_point_count, ("N",)),
    "validate_title": Instruction(detectable_format.has_title),
    "validate_highlighted_sections": Instruction(
        detectable_format.highlighted_section_count, ("N",)
    ),
    "validate_sections": Instruction(detectable_format.section_count, ("N", "section_splitter")),
    "validate_json_format": Instruction(detectable_format.is_json),
    # case
    "validate_uppercase": Instruction(case.is_uppercase),
    "validate_lowercase": Instruction(case.is_lowercase),
    "validate_frequency_capital_words": Instruction(case.capital_word_count, ("N", "quantifier")),
    # start / end
    "validate_end": Instruction(startend.ends_with_phrase, ("end_phrase",)),
    "validate_quotation": Instruction(startend.is_quoted),
    # punctuation
    "validate_no_commas": Instruction(punctuation.has_no_commas),
}
