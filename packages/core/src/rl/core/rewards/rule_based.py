"""rl's own rule-based rewards, which verl does not have: lenient GSM8K (`gsm8k_lenient`),
`\\boxed{}` compared by math-verify (`math_verify`), and the demos' `arithmetic` and
`calculator`. verl's scorers, reproduced exactly, are in `gsm8k_rule`, `math_rule` and
`dapo_rule`.

Each scorer is `(solution_str, ground_truth) -> float` with 1.0 for correct, 0.0 otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from rl.core.imports import is_installed

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")


def _clean_number(text: str) -> str:
    text = text.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value == int(value) else str(value)


def lenient_gsm8k_answer(solution: str, strict: bool = True) -> str | None:
    """The last `#### <number>` (strict), or else the last number in the text (flexible)."""
    marked = re.findall(r"####\s*(-?[\d,.$]+)", solution)
    if marked:
        return _clean_number(marked[-1])
    if strict:
        return None
    numbers = _NUMBER.findall(solution)
    return _clean_number(numbers[-1]) if numbers else None


def gsm8k_lenient(solution: str, ground_truth: Any, strict: bool = True) -> float:
    """GSM8K read leniently, unlike verl's rule (`gsm8k_rule`): `####42`, `#### $42`,
    `#### 42.`, `42.0` and `042` all match 42, anywhere in the response, and a ground truth
    may be a number; `strict=False` takes the last number when there is no `####`."""
    answer = lenient_gsm8k_answer(solution, strict)
    return float(answer is not None and answer == _clean_number(str(ground_truth)))


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` (nested braces handled), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for position in range(brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            return text[brace + 1 : position]
    return None


def normalize_math(answer: str) -> str:
    """A light normal form for comparing final answers when math-verify is absent."""
    text = answer.strip().strip("$")
    for old, new in (
        ("\\left", ""),
        ("\\right", ""),
        ("\\dfrac", "\\frac"),
        ("\\tfrac", "\\frac"),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        (" ", ""),
        ("^{\\circ}", ""),
        ("^\\circ", ""),
        ("\\%", ""),
        ("%", ""),
    ):
        text = text.replace(old, new)
    text = re.sub(r"\\text\{(.*?)\}", r"\1", text)
    text = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", text)
    if re.fullmatch(r"-?\d+\.0+", text):
        text = text.split(".")[0]
    return text


def math_verify(solution: str, ground_truth: Any) -> float:
    """Compare the last \\boxed{} answer with the ground truth (a `\\boxed{}` in it is read
    too): symbolically with math-verify when it is installed (`rl-core[math]`), else by the
    light normal form of `normalize_math`."""
    predicted = last_boxed(solution)
    if predicted is None:
        return 0.0
    truth = str(ground_truth)
    truth = last_boxed(truth) or truth
    if is_installed("math_verify"):
        from math_verify import parse, verify

        return float(verify(parse(f"${truth}$"), parse(f"${predicted}$")))
    return float(normalize_math(predicted) == normalize_math(truth))


def arithmetic(solution: str, ground_truth: Any) -> float:
    """The demo task: the response's first integer must equal the answer."""
    match = re.search(r"-?\d+", solution)
    return float(match is not None and int(match.group()) == int(str(ground_truth)))


def judge_verdict(solution: str, ground_truth: Any) -> float:
    """The judge demo's grades (`builtin:judge_grades`): the judge's verdict, read as the
    llm_judge scorer reads it (yes / no), must be the label."""
    from rl.core.rewards.judge_prompts import parse_verdict

    score, parsed = parse_verdict(solution, "yes_no")
    return float(parsed and score == float(str(ground_truth).strip().lower() == "yes"))


def calculator(solution: str, ground_truth: Any) -> float:
    """The agentic calculator demo: the model's final answer (its text after its last tool
    call `name(...)`, tool results are not in `solution`) must be exactly the integer."""
    final = solution.rsplit(")", 1)[-1].strip()
    return float(re.fullmatch(r"-?\d+", final) is not None and int(final) == int(str(ground_truth)))
