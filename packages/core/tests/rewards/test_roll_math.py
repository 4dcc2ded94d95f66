"""rl's `math_rule` scorer against ROLL's math rule, case by case from reading
roll/pipeline/rlvr/rewards/math_rule_reward_worker.py (ROLL 8eb27cc2):

- `_extract_after_last_end_think` (lines 74-124): the `<think>` / `</think>` rules by the
  prompt's end, after the last `</think>`, else after the last blank line, else nothing;
- `check_and_extract_within_boxed` (40-72): the escaped opener first, quotes hide braces,
  an unclosed box parses the whole part;
- `_hf_verify_math_sample` (126-181): `parse(..., fallback_mode="no_fallback")`, the gold
  `parse("$gt$")`, `verify(gold[0], answer[0])`, any failure 0;
- `compute_rewards` (261-320): `<|endoftext|>` / `<pad>` dropped, a 5 s limit scoring 0,
  the 0/1 verdict as both `scores` and `response_level_rewards`.

The extraction cases need nothing; the verdicts need math-verify (`rl-core[math]`) and are
skipped without it. Expected values are worked out by hand from those lines.
"""

from __future__ import annotations

import signal
import sys
import time

import pytest

from rl.core.imports import MissingDependencyError
from rl.core.rewards import roll_math
from rl.core.rewards.roll_math import boxed_content, final_part, math_rule, time_limit

PLAIN = "<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n"
THINKING = PLAIN + "<think>\n"  # a template that opens the thinking itself


@pytest.mark.parametrize(
    ("response", "prompt", "part"),
    [
        # after the last (only) </think>, stripped
        ("<think>hm</think>\n The answer \n", PLAIN, "The answer"),
        ("hm</think>ok", PLAIN, "ok"),
        # a <think> not at the start, or two </think>: nothing
        (" <think>hm</think>ok", PLAIN, ""),
        ("<think>a</think>b</think>ok", PLAIN, ""),
        # the prompt opened the thinking: the response may hold no <think> at all
        ("<think>hm</think>ok", THINKING, ""),
        ("hm</think>ok", THINKING, "ok"),
        ("hm</think>ok", PLAIN.rstrip("\n") + "<think>\n\n\n", "ok"),
        # no </think>: after the last blank line; no blank line either: nothing
        ("step 1\n\nstep 2\n\n answer ", PLAIN, "answer"),
        ("The answer is \\boxed{2}", PLAIN, ""),
        ("The answer is \\boxed{2}", THINKING, ""),
    ],
)
def test_final_part(response: str, prompt: str, part: str) -> None:
    assert final_part(response, prompt) == part


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{2}.", (True, "2")),
        ("\\boxed{1} or \\boxed{\\frac{1}{2}} x", (True, "\\frac{1}{2}")),
        # the escaped opener is looked for first, even before a later plain one
        ("\\boxed\\{3} then \\boxed{4}", (True, "3")),
        # braces between double quotes are not counted
        ('\\boxed{"}"}', (True, '"}"')),
        ('\\boxed{"{"} tail', (True, '"{"')),
        # never closed: everything after the opener, and "not closed"
        ("\\boxed{1 + {2", (False, "1 + {2")),
        ("no box", (False, "")),
    ],
)
def test_boxed_content(text: str, expected: tuple[bool, str]) -> None:
    assert boxed_content(text) == expected


def test_time_limit_raises_and_keeps_the_callers_alarm() -> None:
    """A pool's per-response alarm due later is set again for what remains of it; one due
    first is left alone; the body is cut at the limit."""
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with time_limit(5):
            assert 4.9 < signal.getitimer(signal.ITIMER_REAL)[0] <= 5
        assert 29 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
        signal.setitimer(signal.ITIMER_REAL, 2)
        with time_limit(5):
            assert 1.9 < signal.getitimer(signal.ITIMER_REAL)[0] <= 2
        with pytest.raises(roll_math._VerifyTimeout):
            signal.setitimer(signal.ITIMER_REAL, 0)
            with time_limit(0.05):
                time.sleep(1)
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_rows_refused() -> None:
    with pytest.raises(ValueError, match="ground truth"):
        math_rule("\\boxed{2}", None, {"prompt_str": PLAIN})
    with pytest.raises(ValueError, match="ground truth"):
        math_rule("\\boxed{2}", "  ", {"prompt_str": PLAIN})
    with pytest.raises(ValueError, match="prompt_str"):
        math_rule("\\boxed{2}", "2", {})


def test_without_math_verify_the_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)
    with pytest.raises(MissingDependencyError, match=r"rl-core\[math\]"):
        math_rule("a\n\n\\boxed{2}", "2", {"prompt_str": PLAIN})


def verdict(response: str, truth: object, prompt: str = PLAIN) -> float:
    pytest.importorskip("math_verify", reason="math-verify is not installed: rl-core[math]")
    result = math_rule(response, truth, {"prompt_str": prompt})
    assert result["score"] == result["acc"]  # ROLL's scores and rewards are the same 0/1
    return result["score"]


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("<think>1+1</think>\\boxed{2}", "2", 1.0),
        ("<think>1+1</think>\\boxed{3}", "2", 0.0),
        ("<think>x</think>So it is \\boxed{\\frac{1}{2}}.", "0.5", 1.0),
        ("<think>x</think>\\boxed{\\dfrac12}", "\\frac{1}{2}", 1.0),
        ("<think>x</think>\\boxed{(1,2)}", "(1, 2)", 1.0),
        ("<think>x</think>\\boxed{\\sqrt{2}}", "2^{1/2}", 1.0),
        ("<think>x</think>\\boxed{2}", 2, 1.0),  # a number as ground truth: "$2$"
        # without a box the whole part is parsed (its answer found by math-verify)
        ("<think>x</think>The answer is $2$.", "2", 1.0),
        ("Working.\n\nThe answer is $2$.", "2", 1.0),
        # an unclosed box: the whole part parsed
        ("<think>x</think>$3$ \\boxed{2", "3", 1.0),
        # no </think> and no blank line: nothing is read, even a right box
        ("The answer is \\boxed{2}", "2", 0.0),
        # a <think> not at the start
        ("Hmm <think>x</think>\\boxed{2}", "2", 0.0),
        # nothing parseable
        ("<think>x</think>no idea", "2", 0.0),
        # special tokens ROLL drops before reading
        ("<think>x</<pad>think>\\boxed{2}<|endoftext|>", "2", 1.0),
    ],
)
def test_verdict(response: str, truth: object, expected: float) -> None:
    assert verdict(response, truth) == expected


def test_prompt_that_opens_the_thinking() -> None:
    assert verdict("1+1</think>\\boxed{2}", "2", THINKING) == 1.0
    assert verdict("<think>1+1</think>\\boxed{2}", "2", THINKING) == 0.0
    # `<pad>` in the prompt is dropped before its end is read
    assert verdict("<think>1+1</think>\\boxed{2}", "2", THINKING + "<pad>") == 0.0


def test_a_comparison_past_the_limit_scores_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("math_verify", reason="math-verify is not installed: rl-core[math]")
    import math_verify

    def slow_verify(*args: object, **kwargs: object) -> bool:
        time.sleep(1)
        return True

    monkeypatch.setattr(roll_math, "VERIFY_SECONDS", 0.05)
    monkeypatch.setattr(math_verify, "verify", slow_verify)
    assert verdict("<think>x</think>\\boxed{2}", "2") == 0.0
