"""Bash's conditions `[ ... ]`, `test ...` and `[[ ... ]]`, decided from what the reader
knows: string (`=` `==` `!=` `-z` `-n`, `[[ == pattern ]]`, `=~`), integer (`-eq` ...)
and file (`-e` `-f` `-d` ...) tests with `!`, `-a`/`&&`, `-o`/`||` and parentheses. The
answer is True, False, or the `Missing` that keeps it from being known."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from rl.cli.dialects.bash_arith import ArithmeticProblem, evaluate
from rl.cli.dialects.bash_expand import Missing, Value, glob_regex
from rl.cli.dialects.bash_lexer import skip_quoted

Status = bool | Missing
FILES: dict[str, Callable[[str], bool]] = {
    "-e": os.path.exists,
    "-a": os.path.exists,
    "-f": os.path.isfile,
    "-d": os.path.isdir,
    "-L": os.path.islink,
    "-h": os.path.islink,
    "-s": lambda path: os.path.isfile(path) and os.path.getsize(path) > 0,
    "-r": lambda path: os.access(path, os.R_OK),
    "-w": lambda path: os.access(path, os.W_OK),
    "-x": lambda path: os.access(path, os.X_OK),
}
STRINGS = ("=", "==", "!=", "<", ">", "=~")
INTEGERS = {
    "-eq": lambda a, b: a == b,
    "-ne": lambda a, b: a != b,
    "-lt": lambda a, b: a < b,
    "-le": lambda a, b: a <= b,
    "-gt": lambda a, b: a > b,
    "-ge": lambda a, b: a >= b,
}


def _all(statuses: list[Status], want: bool) -> Status:
    """`and` (want False decides) or `or` (want True decides) in three values."""
    if any(status is want for status in statuses):
        return want
    return next((s for s in statuses if isinstance(s, Missing)), not want)


class _Condition:
    def __init__(self, words: list[tuple[str, Value]], double: bool, cwd: Value) -> None:
        self.words = words  # (as written, expanded)
        self.at = 0
        self.double = double  # [[ ]]: &&, ||, patterns
        self.cwd = cwd

    def peek(self, ahead: int = 0) -> str | None:
        at = self.at + ahead
        return self.words[at][0] if at < len(self.words) else None

    def take(self) -> tuple[str, Value]:
        self.at += 1
        return self.words[self.at - 1]

    def either(self) -> Status:
        statuses = [self.both()]
        while self.peek() == ("||" if self.double else "-o"):
            self.take()
            statuses.append(self.both())
        return _all(statuses, True)

    def both(self) -> Status:
        statuses = [self.negated()]
        while self.peek() == ("&&" if self.double else "-a") and self.peek(1) is not None:
            self.take()
            statuses.append(self.negated())
        return _all(statuses, False)

    def negated(self) -> Status:
        if self.peek() == "!" and self.peek(1) is not None:
            self.take()
            status = self.negated()
            return status if isinstance(status, Missing) else not status
        return self.primary()

    def primary(self) -> Status:
        if self.peek() == "(":
            self.take()
            status = self.either()
            if self.peek() == ")":
                self.take()
            return status
        following = self.peek(1)
        if following in STRINGS or following in INTEGERS:
            left, (op, _), right = self.take(), self.take(), self.take()
            return self.binary(left[1], op, right)
        if self.peek() in (*FILES, "-z", "-n", "-v") and following is not None:
            op, operand = self.take()[0], self.take()[1]
            return self.unary(op, operand)
        if self.peek() is None:
            return False
        operand = self.take()[1]
        return operand.missing[0] if operand.missing else operand.text != ""

    def unary(self, op: str, operand: Value) -> Status:
        if op in ("-z", "-n") and _absent_arguments(operand):
            return op == "-z"  # `[ -z "$1" ]` with no argument 1: bash reads it as ""
        if operand.missing:
            return operand.missing[0]
        if op in ("-z", "-n"):
            return (operand.text == "") == (op == "-z")
        if op == "-v":
            return Missing(f"-v {operand.text}", "a test this reader does not evaluate")
        if self.cwd.missing and not operand.text.startswith("/"):
            return self.cwd.missing[0]
        return FILES[op](os.path.join(self.cwd.text, operand.text))

    def binary(self, left: Value, op: str, right: tuple[str, Value]) -> Status:
        written, value = right
        unknown = left.missing + value.missing
        if unknown:
            return unknown[0]
        if op in INTEGERS:
            try:
                a, b = self.integer(left.text), self.integer(value.text)
            except (ArithmeticProblem, ValueError):
                return False  # bash: "integer expression expected", status 2
            return bool(INTEGERS[op](a, b))
        if op == "=~":
            return re.search(value.text, left.text) is not None
        if op in ("<", ">"):
            return left.text < value.text if op == "<" else left.text > value.text
        pattern = self.double and not _quoted(written)
        equal = (
            re.fullmatch(glob_regex(value.text), left.text, re.S) is not None
            if pattern
            else left.text == value.text
        )
        return equal if op in ("=", "==") else not equal

    def integer(self, text: str) -> int:
        if not self.double:
            return int(text.strip())

        def no_variables(name: str) -> str:
            raise ArithmeticProblem(f"${name}")

        return evaluate(text, no_variables)


def _quoted(written: str) -> bool:
    return len(written) >= 2 and written[0] == written[-1] and written[0] in "'\""


def evaluate_words(words: list[Value], cwd: Value) -> Status:
    """`[ WORDS ]` / `test WORDS`, the words expanded (the closing `]` dropped)."""
    if words and words[-1].text == "]" and not words[-1].missing:
        words = words[:-1]
    condition = _Condition([(w.text, w) for w in words], double=False, cwd=cwd)
    status = condition.either()
    return status


def split_double(raw: str) -> list[str]:
    """The words of what stands between `[[` and `]]` (quotes kept)."""
    words: list[str] = []
    at = 0
    while at < len(raw):
        if raw[at] in " \t\n":
            at += 1
        elif raw[at : at + 2] in ("&&", "||"):
            words.append(raw[at : at + 2])
            at += 2
        elif raw[at] in "()":
            words.append(raw[at])
            at += 1
        else:
            start = at
            while (
                at < len(raw) and raw[at] not in " \t\n()" and raw[at : at + 2] not in ("&&", "||")
            ):
                at = skip_quoted(raw, at)
            words.append(raw[start:at])
    return words


def evaluate_double(raw: str, expand: Callable[[str], Value], cwd: Value) -> Status:
    """`[[ raw ]]`; `expand` gives an operand's value (no word splitting in [[ ]])."""
    operators = ("&&", "||", "(", ")", "!", *STRINGS, *INTEGERS, *FILES, "-z", "-n", "-v")
    words = [(w, Value(w) if w in operators else expand(w)) for w in split_double(raw)]
    return _Condition(words, double=True, cwd=cwd).either()


def _absent_arguments(operand: Value) -> bool:
    """Whether `operand` is nothing but script arguments that were not given (`"$1"`,
    `"$1$2"`): empty in bash, so that `-z` / `-n` of it is known."""
    if not operand.missing:
        return False
    absent = all(m.what[1:].isdigit() and not m.exportable for m in operand.missing)
    return absent and operand.text == "".join(m.what for m in operand.missing)
