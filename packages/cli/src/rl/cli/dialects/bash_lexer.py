"""Bash's tokens, as far as a launch script needs them: words with their quotes kept (the
expander removes them), operators, redirections, `name=( ... )` array literals, `[[ ... ]]`
tests and `(( ... ))` arithmetic commands; comments, line continuations and here-document
bodies are dropped. Read, never run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from rl.core.config.errors import ConfigError

OPERATORS = ("&&", "||", ";;&", ";;", ";&", ";", "&", "|&", "|", "(", ")")
REDIRECT = re.compile(r"\d*(?:<<<|<<-|<<|&>>|&>|>>|>&|<&|>\||<>|>|<)")
ARRAY_START = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=$")
SPACE = " \t"
ENDS_WORD = SPACE + "\n;&|<>()"
Fail = Callable[[str], ConfigError]


@dataclass(frozen=True)
class Token:
    """`kind`: word, op, newline, redirect, array (`text` is `name=`, `items` the raw
    element words), test (`[[ ... ]]`'s inside) or arith (`(( ... ))`'s inside)."""

    kind: str
    text: str
    line: int
    items: tuple[str, ...] = ()


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.line = 1
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs) pending

    def fail(self, what: str) -> ConfigError:
        return ConfigError(f"line {self.line}: {what}")

    def peek(self, size: int = 1) -> str:
        return self.text[self.at : self.at + size]

    def tokens(self) -> list[Token]:
        out: list[Token] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if char in SPACE:
                self.at += 1
            elif self.peek(2) == "\\\n":
                self.at += 2
                self.line += 1
            elif char == "#":
                end = self.text.find("\n", self.at)
                self.at = len(self.text) if end < 0 else end
            elif char == "\n":
                out.append(Token("newline", "\n", self.line))
                self.at += 1
                self.line += 1
                self._skip_heredocs()
            elif self.peek(2) == "((" and _command_starts(out):
                start = self.at + 2
                self.at = _close_parens(self.text, self.at + 1, self.fail) + 1
                inner = self.text[start : self.at - 2]
                out.append(Token("arith", inner, self.line))
            elif redirect := REDIRECT.match(self.text, self.at):
                self.at = redirect.end()
                out.append(Token("redirect", redirect.group(0), self.line))
                if redirect.group(0).lstrip("0123456789") in ("<<", "<<-"):
                    self._heredoc(out, strip=redirect.group(0).endswith("-"))
            elif any(self.text.startswith(op, self.at) for op in OPERATORS):
                op = next(op for op in OPERATORS if self.text.startswith(op, self.at))
                self.at += len(op)
                out.append(Token("op", op, self.line))
            else:
                out.append(self._word())
        return out

    def _heredoc(self, out: list[Token], strip: bool) -> None:
        while self.peek() in SPACE and self.at < len(self.text):
            self.at += 1
        word = self._word()
        out.append(word)
        self.heredocs.append((re.sub(r"[\"'\\]", "", word.text), strip))

    def _skip_heredocs(self) -> None:
        for delimiter, strip in self.heredocs:
            while self.at < len(self.text):
                end = self.text.find("\n", self.at)
                end = len(self.text) if end < 0 else end
                body = self.text[self.at : end]
                self.at = min(end + 1, len(self.text))
                self.line += 1
                if (body.lstrip("\t") if strip else body) == delimiter:
                    break
        self.heredocs = []

    def _word(self) -> Token:
        line, start = self.line, self.at
        parts: list[str] = []
        while self.at < len(self.text):
            char = self.text[self.at]
            if self.peek(2) == "\\\n":
                self.at += 2
                self.line += 1
                continue
            if char in ENDS_WORD:
                if char == "(" and ARRAY_START.match("".join(parts)):
                    return self._array("".join(parts), line)
                break
            end = _skip_quoted(self.text, self.at, self.fail)
            self.line += self.text.count("\n", self.at, end)
            parts.append(self.text[self.at : end])
            self.at = end
        if self.at == start:
            raise self.fail(f"unexpected {self.text[self.at]!r}")
        word = "".join(parts)
        if word == "[[":
            return self._test(line)
        return Token("word", word, line)

    def _array(self, name: str, line: int) -> Token:
        self.at += 1  # the "("
        items: list[str] = []
        while True:
            if self.at >= len(self.text):
                raise self.fail(f"the array {name}( ... ) is not closed")
            char = self.text[self.at]
            if char == ")":
                self.at += 1
                return Token("array", name, line, tuple(items))
            if self.peek(2) == "\\\n":
                self.at += 2
                self.line += 1
            elif char in SPACE + "\n":
                self.line += 1 if char == "\n" else 0
                self.at += 1
            elif char == "#":
                end = self.text.find("\n", self.at)
                self.at = len(self.text) if end < 0 else end
            else:
                items.append(self._word().text)

    def _test(self, line: int) -> Token:
        start = self.at
        while self.at < len(self.text):
            if self.text.startswith("]]", self.at):
                inner = self.text[start : self.at]
                self.at += 2
                return Token("test", inner, line)
            end = _skip_quoted(self.text, self.at, self.fail)
            self.line += self.text.count("\n", self.at, end)
            self.at = end
        raise self.fail("[[ without ]]")


def _command_starts(out: list[Token]) -> bool:
    return not out or out[-1].kind in ("newline", "op") or out[-1].text in ("then", "do", "else")


def _skip_quoted(text: str, at: int, fail: Fail) -> int:
    """The end of the quoted or expanded unit that starts at `at` (one character if
    none): '...', "...", `...`, $(...), $((...)), ${...}, a backslash escape."""
    char = text[at]
    if char == "\\":
        return min(at + 2, len(text))
    if char == "'":
        end = text.find("'", at + 1)
        if end < 0:
            raise fail("a ' quote is not closed")
        return end + 1
    if char == '"':
        at += 1
        while at < len(text) and text[at] != '"':
            at = _skip_quoted(text, at, fail) if text[at] in "\\$`" else at + 1
        if at >= len(text):
            raise fail('a " quote is not closed')
        return at + 1
    if char == "`":
        at += 1
        while at < len(text) and text[at] != "`":
            at += 2 if text[at] == "\\" else 1
        if at >= len(text):
            raise fail("a ` quote is not closed")
        return at + 1
    if text.startswith("$(", at):
        return _close_parens(text, at + 1, fail) + 1
    if text.startswith("${", at):
        at += 2
        while at < len(text) and text[at] != "}":
            at = _skip_quoted(text, at, fail)
        if at >= len(text):
            raise fail("a ${ is not closed")
        return at + 1
    return at + 1


def _close_parens(text: str, at: int, fail: Fail) -> int:
    """The index of the `)` that closes the `(` at `at` (quotes and nesting followed)."""
    depth = 0
    while at < len(text):
        char = text[at]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return at
        elif char == "#" and text[at - 1] in SPACE + "\n":
            end = text.find("\n", at)
            at = len(text) if end < 0 else end
            continue
        if char in "\\'\"`" or text.startswith("${", at) or text.startswith("$(", at):
            at = _skip_quoted(text, at, fail)
            continue
        at += 1
    raise fail("a ( is not closed")


def tokenize(text: str) -> list[Token]:
    """The tokens of the bash `text` (ConfigError naming the line when it cannot be read)."""
    return _Lexer(text).tokens()


def close_parens(text: str, at: int) -> int:
    """The index of the `)` closing the `(` at `text[at]`, for the expander."""

    return _close_parens(text, at, ConfigError)


def skip_quoted(text: str, at: int) -> int:
    """The end of the quoted or expanded unit at `text[at]`, for the expander."""

    return _skip_quoted(text, at, ConfigError)
