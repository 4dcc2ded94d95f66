"""Bash's `$(( ... ))` on 64-bit integers, evaluated by a small parser (never Python's
eval): numbers (`10`, `0x1f`, `017`, `2#101`), variables (their value is itself an
expression, as in bash), `( )`, unary `+ - ! ~`, `**`, `* / %`, `+ -`, `<< >>`,
comparisons, `& ^ |`, `&& ||`, `? :` and `,`. Assignments inside (`x += 1`) are not
evaluated: ArithmeticProblem says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable

TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+#[0-9A-Za-z@_]+|0[xX][0-9a-fA-F]+|\d+)|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>\+\+|--|\*\*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&|^!~?:(),=]))"
)
BINARY = {  # operator: (precedence, right-associative)
    ",": (1, False),
    "||": (3, False),
    "&&": (4, False),
    "|": (5, False),
    "^": (6, False),
    "&": (7, False),
    "==": (8, False),
    "!=": (8, False),
    "<": (9, False),
    ">": (9, False),
    "<=": (9, False),
    ">=": (9, False),
    "<<": (10, False),
    ">>": (10, False),
    "+": (11, False),
    "-": (11, False),
    "*": (12, False),
    "/": (12, False),
    "%": (12, False),
    "**": (13, True),
}
TERNARY = 2
BITS = 1 << 64


class ArithmeticProblem(ValueError):
    """An expression bash would refuse, or one this reader does not evaluate."""


def _wrap(value: int) -> int:
    value %= BITS
    return value - BITS if value >= BITS // 2 else value


def _number(text: str) -> int:
    try:
        if "#" in text:
            base, digits = text.split("#", 1)
            return int(digits, int(base))
        if text[:2] in ("0x", "0X"):
            return int(text, 16)
        return int(text, 8) if len(text) > 1 and text.startswith("0") else int(text)
    except ValueError:
        raise ArithmeticProblem(f"{text!r} is not a number") from None


def _divide(left: int, right: int, op: str) -> int:
    if right == 0:
        raise ArithmeticProblem("division by 0")
    quotient = abs(left) // abs(right) * (1 if (left < 0) == (right < 0) else -1)
    return quotient if op == "/" else left - right * quotient


def _apply(op: str, left: int, right: int) -> int:
    if op in ("/", "%"):
        return _divide(left, right, op)
    if op == "**":
        if right < 0:
            raise ArithmeticProblem("exponent less than 0")
        return pow(left, right, BITS)
    table: dict[str, Callable[[int, int], int]] = {
        ",": lambda a, b: b,
        "||": lambda a, b: int(bool(a) or bool(b)),
        "&&": lambda a, b: int(bool(a) and bool(b)),
        "|": lambda a, b: a | b,
        "^": lambda a, b: a ^ b,
        "&": lambda a, b: a & b,
        "==": lambda a, b: int(a == b),
        "!=": lambda a, b: int(a != b),
        "<": lambda a, b: int(a < b),
        ">": lambda a, b: int(a > b),
        "<=": lambda a, b: int(a <= b),
        ">=": lambda a, b: int(a >= b),
        "<<": lambda a, b: a << (b % 64),
        ">>": lambda a, b: a >> (b % 64),
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
    }
    return table[op](left, right)


class _Parser:
    def __init__(self, text: str, lookup: Callable[[str], str], depth: int) -> None:
        self.tokens: list[tuple[str, str]] = []
        at = 0
        while at < len(text.rstrip()):
            found = TOKEN.match(text, at)
            if not found or found.end() == at:
                raise ArithmeticProblem(f"{text.strip()!r}: cannot read {text[at:].strip()!r}")
            kind = found.lastgroup or "op"
            self.tokens.append((kind, found.group(kind)))
            at = found.end()
        self.at = 0
        self.lookup = lookup
        self.depth = depth

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise ArithmeticProblem("the expression ends too early")
        self.at += 1
        return self.tokens[self.at - 1]

    def expression(self, floor: int = 0) -> int:
        left = self.unary()
        while (op := self.peek()) is not None:
            if op == "=":
                raise ArithmeticProblem("an assignment inside $(( )) is not evaluated")
            if op == "?" and floor <= TERNARY:
                self.take()
                yes = self.expression()
                if self.take()[1] != ":":
                    raise ArithmeticProblem("`?` without `:`")
                no = self.expression(TERNARY)
                left = yes if left else no
                continue
            if op not in BINARY or BINARY[op][0] < floor:
                break
            precedence, right_assoc = BINARY[op]
            self.take()
            right = self.expression(precedence if right_assoc else precedence + 1)
            left = _wrap(_apply(op, left, right))
        return left

    def _assigns(self) -> bool:  # `x = 1`, `x += 1`, `x++`: not evaluated
        ahead = [text for _, text in self.tokens[self.at : self.at + 2]]
        return ahead[:1] in (["="], ["++"], ["--"]) or (
            len(ahead) == 2 and ahead[0] in BINARY and ahead[1] == "="
        )

    def unary(self) -> int:
        kind, text = self.take()
        if text in ("++", "--"):
            raise ArithmeticProblem(f"{text} inside $(( )) is not evaluated")
        if text in ("-", "+", "!", "~"):
            value = self.unary()
            return {"-": -value, "+": value, "!": int(not value), "~": ~value}[text]
        if text == "(":
            value = self.expression()
            if self.take()[1] != ")":
                raise ArithmeticProblem("a ( is not closed")
            return value
        if kind == "number":
            return _wrap(_number(text))
        if kind == "name":
            if self._assigns():
                raise ArithmeticProblem(f"an assignment to {text} inside $(( )) is not evaluated")
            return self.variable(text)
        raise ArithmeticProblem(f"unexpected {text!r}")

    def variable(self, name: str) -> int:
        value = self.lookup(name).strip()
        if not value:
            return 0
        if self.depth > 16:
            raise ArithmeticProblem(f"${name} refers to itself")
        return evaluate(value, self.lookup, self.depth + 1)


def evaluate(expression: str, lookup: Callable[[str], str], depth: int = 0) -> int:
    """The value of the bash arithmetic `expression`; `lookup(name)` gives a variable's
    text (it raises for one it cannot give). ArithmeticProblem when it cannot be evaluated."""
    parser = _Parser(expression, lookup, depth)
    if not parser.tokens:
        return 0
    value = parser.expression()
    if parser.peek() is not None:
        raise ArithmeticProblem(f"unexpected {parser.peek()!r} in {expression.strip()!r}")
    return value
