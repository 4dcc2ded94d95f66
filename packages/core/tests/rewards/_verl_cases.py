"""Responses and ground truths built combinatorially from answer formats, to hold rl's
rule-based scorers to verl's: every (response, ground truth) pair is scored by both.

Each generator returns a list of `(solution_str, ground_truth)`; ground truths are mostly
strings (as verl's data preparation writes them), some ints and None.
"""

from __future__ import annotations

import itertools
from typing import Any

Case = tuple[str, Any]

REASONING = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May. Altogether she sold 48+24 = <<48+24=72>>72 "
    "clips in April and May, that is 1,234.5 - 1,162.5 = 72 and not 0.5 or -3."
)

# ---------------------------------------------------------------- GSM8K (`#### N`)

GSM8K_NUMBERS = (
    "42",
    "-42",
    "1,234",
    "1234",
    "1,234.5",
    "3.14",
    "0.5",
    ".5",
    "042",
    "42.",
    "42.0",
    "0",
    "-0",
    "1,000,000",
    "12,34",
    "..",
    ".",
    "-",
    "-.",
    "\u0664\u0662",  # Arabic-Indic 42: a digit to `\d`, not to [0-9]
    "4 2",
    "1e3",
)
GSM8K_FORMATS = (
    "#### {n}",
    "####{n}",
    "#### ${n}",
    "#### $ {n}",
    "####  {n}",
    "#### {n}.",
    "#### {n}!",
    "#### **{n}**",
    "####\t{n}",
    "##### {n}",
    "# {n}",
    "The answer is {n}",
    "\\boxed{{{n}}}",
    "#### {n} dollars",
    "#### 1\n#### {n}",
    "#### {n}\n#### 7",
    "#### {n}, then #### {n}0",
)
# (before, after) the answer; the fillers put it inside, across and outside the last
# 300 characters
GSM8K_CONTEXTS = (
    ("", ""),
    (REASONING + "\n", ""),
    ("", "\n"),
    (REASONING * 3, " Done."),
    *(("", " " * k) for k in (280, 290, 293, 294, 295, 296, 297, 298, 300, 301)),
    *(("", "x" * k) for k in (250, 299, 350)),
    ("", "\n#### 99" + " " * 200),
)
GSM8K_TRUTHS = ("42", "-42", "1234", "1,234", "0.5", "3.14", "042", "42.", "0", "99", "7")


def gsm8k_cases() -> list[Case]:
    cases: list[Case] = []
    for number, form, (before, after) in itertools.product(
        GSM8K_NUMBERS, GSM8K_FORMATS, GSM8K_CONTEXTS
    ):
        solution = before + form.format(n=number) + after
        truths: list[Any] = [number, number.replace(",", ""), *GSM8K_TRUTHS[:3]]
        cases.extend((solution, truth) for truth in truths)
    # ground truths that are not strings (verl compares with a str: never equal)
    cases += [("#### 42", 42), ("#### 42", 42.0), ("#### 42", None), ("#### -1", -1)]
    cases += [
        (solution, truth) for solution in ("", "####", "#### ", "42") for truth in GSM8K_TRUTHS
    ]
    return cases


# ---------------------------------------------------------------- MATH (`\boxed{}`)

MATH_ANSWERS = (
    "\\frac{1}{2}",
    "\\dfrac{1}{2}",
    "\\tfrac12",
    "\\frac12",
    "\\frac1{2}",
    "1/2",
    "0.5",
    ".5",
    "0.50",
    "2/4",
    "-1/2",
    "01/2",
    "\\frac{\\sqrt{3}}{2}",
    "\\frac{\\sqrt3}{2}",
    "\\sqrt3",
    "\\sqrt{3}",
    "\\sqrt 3",
    "3",
    "3.0",
    "03",
    "-3",
    " 3 ",
    "x = 3",
    "k=3",
    "xyz=3",
    "y=2x+1",
    "10\\%",
    "10%",
    "10",
    "90^\\circ",
    "90^{\\circ}",
    "90",
    "5 \\text{ cm}",
    "5\\text{ cm}",
    "5 \\text{ cm} and 6 \\text{ cm}",
    "\\text{(A)}",
    "\\text{A}",
    "(1, 2)",
    "\\left( 1, 2 \\right)",
    "(1,2)",
    "[0, 1)",
    "(-\\infty, 3]",
    "\\$5",
    "5",
    "1,000",
    "1000",
    "\\!1,\\!000",
    "\\frac{x}{y}",
    "\\frac{a+b}{c}",
    "\\pi",
    "2\\pi",
    "\\sqrt{2}/2",
    "",
    "{}",
    "\\sqrt",
    "\\frac",
    "\\frac1",
    "\\frac{1}",
    "a\\\\b",
    "1\n2",
    "\\{1,2\\}",
    "\\begin{pmatrix}1\\\\2\\end{pmatrix}",
    "{.5}",
    "x .5",
)
MATH_WRAPPERS = (
    "\\boxed{{{a}}}",
    "So the answer is $\\boxed{{{a}}}$.",
    "\\boxed {a}$ done",
    "\\boxed {a}",
    "\\fbox{{{a}}}",
    "The answer is {a}",
    "\\boxed{{{a}}} and then \\boxed{{7}}",
    "\\boxed{{7}} and then \\boxed{{{a}}}",
    "\\boxed{{{a}",
    "\\[\\boxed{{{a}}}\\]",
    "\\boxed{{\\boxed{{{a}}}}}",
    "\\boxed}}{{{a}}}",
    "\\boxedx{{{a}}}",
)
MATH_TRUTHS = (
    "\\frac{1}{2}",
    "3",
    "\\sqrt{3}",
    "10",
    "90",
    "5",
    "(1,2)",
    "1000",
    "\\text{(A)}",
    "y=2x+1",
    "\\frac{\\sqrt{3}}{2}",
)

SLASH_SIDES = ("1", "01", "-1", "-0", "+1", "1_0", "\u0663", "x", "", "10")


def math_cases() -> list[Case]:
    cases: list[Case] = []
    for answer, wrapper in itertools.product(MATH_ANSWERS, MATH_WRAPPERS):
        solution = REASONING + " " + wrapper.format(a=answer)
        cases.extend((solution, truth) for truth in (answer, *MATH_TRUTHS))
    cases += [("\\boxed{3}", 3), ("\\boxed{3}", None), ("\\boxed{0.5}", 0.5), ("no box", None)]
    # `a/b` becomes `\frac{a}{b}` only for integers written as Python writes them
    for numerator, denominator in itertools.product(SLASH_SIDES, repeat=2):
        slash = f"{numerator}/{denominator}"
        frac = f"\\frac{{{numerator}}}{{{denominator}}}"
        cases += [(f"\\boxed{{{slash}}}", frac), (f"\\boxed{{{frac}}}", slash)]
    cases += [("\\boxed{3}", truth) for truth in MATH_ANSWERS]
    return cases


# ---------------------------------------------------------------- DAPO (`Answer: ...`)

DAPO_ANSWERS = (
    "42",
    "1,234",
    "1234",
    "-5",
    "\\frac{1}{2}",
    "\\frac12",
    "\\dfrac{1}{2}",
    "0.5",
    "3\\sqrt{2}",
    "3\\sqrt2",
    "10\\%",
    "90^\\circ",
    "90 degrees",
    "5 cm",
    "5\\text{ cm}",
    "\\text{5 cm}",
    "\\textbf{7}",
    "\\overline{AB}",
    "an apple",
    "a b",
    "$7$",
    "7.$",
    "\\$7",
    "1,2,3",
    "2\\text{ and }3",
    "2,\\text{and}3",
    "\\mbox{7}",
    "5\\text{m}",
    "\\pi",
    "(1, 2)",
    "\\{1\\}",
    "x = 7",
    "2=3=4",
    "\\boxed{7}",
    "\\boxed{\\frac{1}{2}}",
    "",
    "\u0664\u0662",
    "12\\mathrm{th}",
    "1{,}000",
    "\\ldots",
    "[INVALID]",
)
DAPO_LINES = (
    "Answer: {a}",
    "answer:{a}",
    "ANSWER : {a}",
    "Final Answer: {a}",
    "Answer:\n{a}",
    "**Answer:** {a}",
    "Answer: ${a}$",
    "Answer: The answer is {a}.",
    "Answer: x = {a}",
    "Answer: {a} \\text{{ cm}}",
    "Answer: \\boxed{{{a}}}",
    "\\boxed{{{a}}}",
    "The answer is $\\boxed{{{a}}}$.",
    "Answer: 1\nAnswer: {a}",
    "Answer: {a}\nAnswer: 1",
    "Answer: {a}\n\\boxed{{9}}",
    "{a}",
)
DAPO_CONTEXTS = (
    ("", ""),
    (REASONING + "\n", ""),
    ("", "\n" + "x" * 85),  # a box at the edge of the 100-character window
    ("", "\n" + "x" * 92),
    (REASONING * 3, ""),
    ("", " " * 285),  # the answer line across the edge of the 300-character window
    ("", " " * 293),
    ("", " " * 310),  # outside it
)
DAPO_TRUTHS = ("42", "1234", "\\frac{1}{2}", "7", "5", "90", "(1,2)", "3\\sqrt{2}")


def dapo_cases() -> list[Case]:
    cases: list[Case] = []
    for answer, line, (before, after) in itertools.product(DAPO_ANSWERS, DAPO_LINES, DAPO_CONTEXTS):
        solution = before + line.format(a=answer) + after
        cases.extend((solution, truth) for truth in (answer, *DAPO_TRUTHS[:4]))
    cases += [("Answer: 42", 42), ("\\boxed{42}", 42), ("Answer: 42", None), ("", "")]
    return cases


def dapo_strict_box_cases() -> list[Case]:
    """A sample for `strict_box_verify`, where verl compares the box alone."""
    return [
        case for index, case in enumerate(dapo_cases()) if index % 7 == 0 or "boxed" in case[0]
    ] + [("\\boxed{42}", 42), ("no box", None)]


PAUSE_INDICES = ((0, 0, 0, 150), (1, 2, 3, 40), (0, 0, 0, 1000), (5, 5, 5, -20))
