"""ROLL's math rule (its MathRuleRewardWorker): the response's final answer compared with the
ground truth by math-verify; 1 when equal, else 0, as both the reward and the accuracy.

The answer is read from the part of the response after its thinking:

- when the prompt ends (newlines aside) with `<think>`, the response must hold no `<think>`
  and at most one `</think>`; otherwise at most one `</think>`, and a `<think>` only at its
  very start. A response that breaks this has no answer (0);
- that part is what follows the last `</think>`, else what follows the last blank line
  (`\\n\\n`), stripped; with neither, the response has no answer (0);
- in it, the content of the last `\\boxed\\{` (the escaped form, looked for first) or else
  the last `\\boxed{`, up to its closing brace (braces between double quotes are not
  counted), is parsed as `$content$`; when there is no box, or it is not closed, the whole
  part is parsed. math-verify's first parse is the answer (none: 0);
- the ground truth is parsed as `$ground_truth$` and compared, its first parse against the
  answer, by math-verify's `verify` with its default settings.

ROLL gives the whole comparison 5 seconds (a slower one scores 0): so does this scorer, in
the main thread, unless the caller's own per-response alarm is due first. ROLL also computes
format, repetition, long-word and length values for each response and drops them: none
reaches its reward, so none is computed here.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rl.core.imports import require

START_THINK, END_THINK = "<think>", "</think>"
# ROLL's math worker drops these two from the decoded prompt and response (not `<|im_end|>`)
MATH_DROPPED_TOKENS = ("<|endoftext|>", "<pad>")
BOX_OPENERS = ("\\boxed\\{", "\\boxed{")  # the escaped opener is looked for first
VERIFY_SECONDS = 5


def final_part(response: str, prompt: str) -> str:
    """The part of the response that holds its answer, "" when it has none (see the module's
    docstring for the rules on `<think>` / `</think>`)."""
    closes = response.count(END_THINK)
    if prompt.rstrip("\n").endswith(START_THINK):
        if START_THINK in response or closes > 1:
            return ""
    elif closes > 1 or (START_THINK in response and not response.startswith(START_THINK)):
        return ""
    for separator in (END_THINK, "\n\n"):
        _, found, after = response.rpartition(separator)
        if found:
            return after.strip()
    return ""


def boxed_content(text: str) -> tuple[bool, str]:
    """(closed, content) of the last box: its content up to the matching `}` (a `"` toggles
    a quoted stretch whose braces are not counted), or everything after the opener when the
    box is never closed; (False, "") when there is no box."""
    for opener in BOX_OPENERS:
        position = text.rfind(opener)
        if position >= 0:
            start = position + len(opener)
            break
    else:
        return False, ""
    depth, quoted = 0, False
    for index in range(start, len(text)):
        char = text[index]
        if char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return True, text[start:index]
            depth -= 1
    return False, text[start:]


class _VerifyTimeout(BaseException):
    """The comparison ran past its limit (a BaseException, so that math-verify's own
    `except Exception` cannot swallow it)."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _VerifyTimeout


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise _VerifyTimeout in the body after `seconds`, when SIGALRM can be used here (POSIX,
    main thread). An alarm already set (the scoring pool's per-response limit) is kept when
    it is due first, and set again for its remaining time afterwards otherwise."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if 0 < outer_left <= seconds:
        yield
        return
    began = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        if outer_left > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - began), 1e-3))


def _quiet_timeout_warnings() -> None:
    """math-verify warns, once per process, that its own time limits are off: here the
    caller's alarm and `time_limit` bound the time instead."""
    import importlib

    for module in ("math_verify.parser", "math_verify.grader"):
        vars(importlib.import_module(module))["TIMEOUT_WARNING_SHOWN"] = True


def answers_match(response: str, ground_truth: str, prompt: str) -> bool:
    """Whether the response's answer equals the ground truth by math-verify (rules in the
    module's docstring); any failure to parse or compare is a mismatch."""
    math_verify = require("math_verify", "rl-core[math]", "ROLL's math_rule scorer")
    _quiet_timeout_warnings()
    # the caller's alarm, and ours, bound the time: math-verify's own (signal-based) limits
    # would cancel them, and fail outside the main thread
    try:
        with time_limit(VERIFY_SECONDS):
            part = final_part(response, prompt)
            closed, content = boxed_content(part)
            parsed = math_verify.parse(
                f"${content}$" if closed else part,
                fallback_mode="no_fallback",
                parsing_timeout=None,
            )
            if not parsed:
                return False
            gold = math_verify.parse(f"${ground_truth}$", parsing_timeout=None)
            return bool(gold) and bool(math_verify.verify(gold[0], parsed[0], timeout_seconds=None))
    except (_VerifyTimeout, Exception):
        return False


def math_rule(
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any],
    *,
    format_pattern: str | None = None,
) -> dict[str, float]:
    """ROLL's math reward of one response: 1.0 when its answer equals the ground truth (see the
    module's docstring), else 0.0, for both `score` and `acc`.

    `extra_info["prompt_str"]` (the rendered prompt) decides the `<think>` rule.
    `format_pattern` is taken as ROLL takes it, and, as in ROLL, changes no reward.
    """
    if ground_truth is None or (isinstance(ground_truth, str) and not ground_truth.strip()):
        raise ValueError(f"math_rule: the row has no ground truth ({ground_truth!r})")
    if "prompt_str" not in extra_info:
        raise ValueError(
            "math_rule: extra_info has no 'prompt_str' (the rendered prompt): ROLL reads the "
            "response's thinking by whether the prompt ends with <think>"
        )
    prompt, response = str(extra_info["prompt_str"]), solution_str
    for token in MATH_DROPPED_TOKENS:
        prompt, response = prompt.replace(token, ""), response.replace(token, "")
    right = float(answers_match(response, str(ground_truth), prompt))
    return {"score": right, "acc": right}
