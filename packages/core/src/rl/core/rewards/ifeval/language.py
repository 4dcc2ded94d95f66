"""Language instruction of ROLL's ifeval data: the response is in a given language, as the
`langdetect` package detects it (ROLL uses it too; install it to score this instruction)."""

from __future__ import annotations

LIBRARY = "langdetect"


def is_in_language(text: str, language: str) -> bool:
    """langdetect's language code for the text (e.g. "en") is `language`; a text langdetect
    cannot read (no letters) is not followed. langdetect is seeded (0) so that a text gets
    the same answer every time (ROLL leaves it unseeded, random on short texts)."""
    import langdetect
    from langdetect.lang_detect_exception import LangDetectException

    langdetect.DetectorFactory.seed = 0
    try:
        return bool(langdetect.detect(text) == language)
    except LangDetectException:
        return False
