"""RLinf's math reward (`reward.reward_type: math`), written from its rules: the response
is right when the answer it gives equals one of the references, by the answer extraction,
normalisation and comparison of Qwen2.5-Math's evaluation (which RLinf's math verifier
follows). Right scores +1, wrong -1; `reward.reward_scale` scales both, as RLinf's
`reward_scale` does (its reward_min_val -1 and reward_max_val 1).

- the answer: after the last `boxed` (the braces' content, or up to a `$`), else after
  "he answer is" / "final answer is" (also Minerva's "final answer is $...$. I hope");
  none of these: no answer (wrong). A reference is read the same way, and is taken whole
  when it has no such marker.
- both are normalised (`normalise`): units, `\\text{}`, `\\left`/`\\right`, dollars,
  percent signs, `x=`, number words, trailing zeros, spaces, `\\frac12` and `a/b` forms.
- equal when: the same text (case-insensitive); a choice letter; numbers within a
  relative 1e-4 (also the reference ×100 and /100); the same text without brackets;
  tuples or matrices equal element by element; equations equal up to sign; and last the
  same sympy expression, parsed as RLinf does (sympy's LaTeX parser, `parse_expr`, then
  `latex2sympy2` where each is installed), with what cannot be parsed compared as text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

# the unit words Qwen2.5-Math's normaliser removes (its list, in its order; "|" apart),
# each also with an "s"
_UNITS = (
    "east|degree|mph|kmph|ft|m square| m east|sq m|deg|mile|q .|monkey|prime|ratio|"
    "profit of rs|rd|o|gm|p . m|lb|tile|per|dm|lt|gain|ab|way|west|a .|b .|c .|d .|"
    "e .|f .|g .|h .|t|a|h|no change|men|soldier|pie|bc|excess|st|inches|noon|"
    "percent|by|gal|kmh|c|acre|rise|a . m|th|π r 2|sq|mark|l|toy|coin|sq . m|gallon|"
    "° f|profit|minw|yr|women|feet|am|pm|hr|cu cm|square|v â € ™|are|rupee|rounds|"
    "cubic|cc|mtr|s|ohm|number|kmph|day|hour|minute|min|second|man|woman|sec|cube|mt|"
    "sq inch|mp|∏ cm ³|hectare|more|sec|unit|cu . m|cm 2|rs .|rs|kg|g|month|km|m|cm|"
    "mm|apple|liter|loss|yard|pure|year|increase|decrease|d|less|Surface|litre|"
    "pi sq m|s .|metre|meter|inch"
)
UNIT_WORDS = [*_UNITS.split("|"), *(w + "s" for w in _UNITS.split("|"))]
_SMALL = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate(
        ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2
    )
}
_SCALES = {"thousand": 1000, "million": 10**6, "billion": 10**9}


def word_number(text: str) -> str:
    """Number words as digits, as the `word2number` package reads them: the text's number
    words (others are passed over; "and" too) make one number; digits alone lose leading
    zeros; text without number words, or with a scale word twice, is left as it is."""
    cleaned = text.replace("-", " ").lower()
    if cleaned.isdigit():
        return str(int(cleaned))
    words = [
        w for w in cleaned.split() if w in _SMALL or w in _TENS or w in _SCALES or w == "hundred"
    ]
    if not words or any(words.count(scale) > 1 for scale in _SCALES):
        return text
    total, current = 0, 0
    for word in words:
        if word in _SMALL:
            current += _SMALL[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        else:
            total += max(current, 1) * _SCALES[word]
            current = 0
    return str(total + current)


def _fix_fracs(text: str) -> str:
    head, *parts = text.split("\\frac")
    out = head
    for part in parts:
        out += "\\frac"
        if part.startswith("{"):
            out += part
        elif len(part) < 2:
            return text
        elif part[1] == "{":
            out += "{" + part[0] + "}" + part[1:]
        else:
            out += "{" + part[0] + "}{" + part[1] + "}" + part[2:]
    return out


def _fix_slash(text: str) -> str:
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        a = parts[0] if "sqrt" in parts[0] else int(parts[0])
        b = parts[1] if "sqrt" in parts[1] else int(parts[1])
    except ValueError:
        return text
    return f"\\frac{{{a}}}{{{b}}}" if text == f"{a}/{b}" else text


def normalise(text: str, skip_unit: bool = False) -> str:
    """An answer's normal form (Qwen2.5-Math's `strip_string`, as RLinf runs it)."""
    s = str(text).strip().replace("\n", "").rstrip(".").replace("\\!", "")
    s = re.sub(r"\\begin\{array\}\{.*?\}", r"\\begin{pmatrix}", s)
    s = re.sub(r"\\end\{array\}", r"\\end{pmatrix}", s).replace("bmatrix", "pmatrix")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\neq", "\\ne").replace("\\leq", "\\le").replace("\\geq", "\\ge")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\{", "{").replace("\\}", "}")
    stripped = re.sub(r"\\text{.*?}$", "", s).strip()
    if stripped and stripped != s:
        s = stripped
    if not skip_unit:
        for _ in range(2):
            for unit in UNIT_WORDS:
                without = re.sub(r"(^|\W)" + unit + r"($|\W)", r"\1\2", s)
                if without:
                    s = without
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "").replace("$", "").replace("\\(", "").replace("\\)", "")
    s = word_number(s)
    s = re.sub(r"\\text\{(.*?)\}", r"\1", s)
    for key in ("x=", "y=", "z=", "x\\in", "y\\in", "z\\in", "x\\to", "y\\to", "z\\to"):
        s = s.replace(key, "")
    s = s.replace("\\emptyset", "{}").replace("(-\\infty,\\infty)", "\\mathbb{R}")
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    s = s.replace("infinity", "\\infty")
    if "\\infty" not in s:
        s = s.replace("inf", "\\infty")
    s = s.replace("+\\inity", "\\infty").replace("and", "").replace("\\mathbf", "")
    s = re.sub(r"\\mbox{.*?}", "", s)
    if "j" in s and "i" not in s:
        s = s.replace("j", "i")
    s = re.sub(r"(\d+)\.0*([^\d])", r"\1\2", s)
    s = re.sub(r"(\d+)\.0*$", r"\1", s)
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        s = sides[1]
    s = re.sub(r"\\sqrt(\w+)", r"\\sqrt{\1}", s).replace(" ", "")
    return _fix_slash(_fix_fracs(s))


def _braced(after: str) -> str:
    depth, out = 1, []
    for char in after:
        depth += (char == "{") - (char == "}")
        if depth == 0:
            break
        out.append(char)
    return "".join(out)


def extract(text: str, whole_when_unmarked: bool = False) -> str:
    """The answer a text gives, normalised; "" when it gives none."""
    text = text.replace("\u043a\u0438", "")
    if "final answer is $" in text and "$. I hope" in text:
        answer = text.split("final answer is $", 1)[1].split("$. I hope", 1)[0].strip()
    elif "boxed" in text:
        after = text.split("boxed")[-1]
        if not after:
            return ""
        answer = _braced(after[1:]) if after[0] == "{" else after.split("$")[0].strip()
    elif "he answer is" in text:
        answer = text.split("he answer is")[-1].strip()
    elif "final answer is" in text:
        answer = text.split("final answer is")[-1].strip()
    elif "答案是" in text:
        answer = text.split("答案是")[1].strip().split("\n\n")[0].strip()
    else:
        answer = text if whole_when_unmarked else ""
    answer = re.sub(r"\n\s*", "", answer)
    for edge, at in ((":", 0), (".", -1), ("/", -1)):
        if answer and answer[at] == edge:
            answer = answer[1:] if at == 0 else answer[:-1]
    return normalise(answer)


def _number(text: Any) -> float | None:
    s = re.sub(",", "", str(text))
    try:
        return float(s)
    except ValueError:
        pass
    if s.endswith("%"):
        s = s[:-1].removesuffix("\\")
        try:
            return float(s) / 100
        except ValueError:
            return None
    return None


def _choice(text: str) -> str:
    s = text.strip("\n").rstrip(".").rstrip("/").strip(" ").lstrip(":")
    letters = re.findall(r"\b(A|B|C|D|E)\b", s.upper())
    return (letters[-1] if letters else s.strip().strip(".")).rstrip(".").rstrip("/")


def _parsers() -> list[Callable[[str], Any]]:
    """RLinf's order: sympy's LaTeX parser, parse_expr, latex2sympy2 (each where it loads)."""
    found: list[Callable[[str], Any]] = []
    try:
        from sympy.parsing.latex import parse_latex

        found.append(parse_latex)
    except Exception:
        pass
    try:
        from sympy.parsing.sympy_parser import parse_expr

        found.append(parse_expr)
    except Exception:
        pass
    try:
        from latex2sympy2 import latex2sympy

        found.append(latex2sympy)
    except Exception:
        pass
    return found


def _parse(text: str) -> Any:
    for parser in _parsers():
        try:
            return parser(text.replace("\\\\", "\\"))
        except Exception:
            try:
                return parser(text)
            except Exception:
                pass
    return text


def _symbolic_equal(a_text: str, b_text: str) -> bool:
    a, b = _parse(a_text), _parse(b_text)
    checks: list[Callable[[], bool]] = [
        lambda: str(a) == str(b) or a == b,
        lambda: a.equals(b) or _simplify(a - b) == 0,
        lambda: (abs(a.lhs - a.rhs)).equals(abs(b.lhs - b.rhs)),
        lambda: _close(float(_numeric(a)), float(_numeric(b))),
        lambda: a.shape == b.shape and a.applyfunc(_round3).equals(b.applyfunc(_round3)),
    ]
    for check in checks:
        try:
            if check():
                return True
        except Exception:
            pass
    return False


def _simplify(value: Any) -> Any:
    from sympy import simplify

    return simplify(value)


def _numeric(value: Any) -> Any:
    from sympy import N

    return N(value)


def _round3(value: Any) -> Any:
    return round(value, 3)


def _close(prediction: float, reference: float) -> bool:
    return math.isclose(reference, prediction, rel_tol=1e-4)


def _pmatrix(text: str) -> str:
    rows = [m.strip("{}") for m in re.findall(r"\{.*,.*\}", text.strip())]
    return ", ".join("\\begin{pmatrix}" + m.replace(",", "\\") + "\\end{pmatrix}" for m in rows)


def _matrix_rows(text: str) -> list[list[str]]:
    inner = text[len("\\begin{pmatrix}") : -len("\\end{pmatrix}")]
    return [line.strip().split("&") for line in inner.split("\\\\") if line.strip()]


def _is_matrix(text: str) -> bool:
    starts = text.startswith(("\\begin{pmatrix}", "\\begin{bmatrix}"))
    return starts and text.endswith(("\\end{pmatrix}", "\\end{bmatrix}"))


def _defines(text: str) -> bool:
    """`x = ...`: one `=` after at most two characters."""
    return text.count("=") == 1 and len(text.split("=")[0].strip()) <= 2


def answers_equal(prediction: str, reference: str) -> bool:
    """Whether two normalised answers are the same (Qwen2.5-Math's `math_equal`)."""
    if prediction.strip().lower() == reference.strip().lower():
        return True
    if reference in ("A", "B", "C", "D", "E") and _choice(prediction) == reference:
        return True
    p_number, r_number = _number(prediction), _number(reference)
    if p_number is not None and r_number is not None:
        return any(_close(p_number, r) for r in (r_number / 100, r_number, r_number * 100))
    if not prediction:
        return False
    reference, prediction = reference.strip(), prediction.strip()
    if "pmatrix" in prediction and "pmatrix" not in reference:
        reference = _pmatrix(reference)
    p_text, r_text = prediction, reference
    if (p_text[:1] == "[" and p_text[-1:] == "]" and r_text[:1] != "(") or (
        p_text[:1] == "(" and p_text[-1:] == ")" and r_text[:1] != "["
    ):
        p_text, r_text = p_text.strip("[]()"), r_text.strip("[]()")
    for bracket in "{}()":
        p_text, r_text = p_text.replace(bracket, ""), r_text.replace(bracket, "")
    if p_text.lower() == r_text.lower():
        return True
    interval = r"(\(|\[).+(\)|\])"
    if re.match(interval, prediction) and re.match(interval, reference):
        p_parts, r_parts = prediction[1:-1].split(","), reference[1:-1].split(",")
        if len(p_parts) == len(r_parts) and all(map(answers_equal, p_parts, r_parts)):
            return True
    if _is_matrix(prediction) and _is_matrix(reference):
        p_rows, r_rows = _matrix_rows(prediction), _matrix_rows(reference)
        if len(p_rows) == len(r_rows) and all(
            len(p) == len(r) and all(map(answers_equal, p, r))
            for p, r in zip(p_rows, r_rows, strict=True)
        ):
            return True
    if prediction.count("=") == 1 and reference.count("=") == 1:
        p_left, p_right = prediction.split("=")
        r_left, r_right = reference.split("=")
        p_eq = f"{p_left.strip()} - ({p_right.strip()})"
        r_eq = f"{r_left.strip()} - ({r_right.strip()})"
        if _symbolic_equal(p_eq, r_eq) or _symbolic_equal(f"-({p_eq})", r_eq):
            return True
    # (the two below exclude each other: one has the `=` the other lacks)
    elif _defines(prediction) and "=" not in reference:
        if answers_equal(prediction.split("=")[1], reference):
            return True
    elif (_defines(reference) and "=" not in prediction) and answers_equal(
        prediction, reference.split("=")[1]
    ):
        return True
    return _symbolic_equal(prediction, reference)


def is_correct(response: str, reference: str) -> bool:
    """Whether `response` answers as `reference` does (a reference without a marker is
    the answer itself)."""
    try:
        answer = extract(response)
        expected = extract(reference, whole_when_unmarked=True)
        if answer.strip() in ("None", "none", "") or expected.strip() in ("None", "none", ""):
            return False
        return answers_equal(answer, expected)
    except Exception:
        return False


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None
) -> float:
    """+1 when the response matches any of the references (one string or a list), else -1."""
    references = ground_truth if isinstance(ground_truth, (list, tuple)) else [ground_truth]
    right = any(is_correct(solution_str, str(reference)) for reference in references)
    return 1.0 if right else -1.0
