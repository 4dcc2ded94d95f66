"""Bash's grammar over `bash_lexer`'s tokens, as far as a launch script needs it: simple
commands (prefix assignments, words, redirections), pipelines, `&&`/`||` lists, `if`,
`case`, `for`/`while`/`until` loops, `{ ...; }` and `( ... )` groups, function
definitions, `[[ ... ]]` and `(( ... ))`. The tree is read by `bash_run`, never run.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rl.cli.dialects.bash_lexer import Token, tokenize
from rl.core.config.errors import ConfigError

ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?)=", re.S)
COMPOUND = ("if", "for", "select", "while", "until", "case", "function", "{")
ARM_ENDS = (";;", ";&", ";;&")


@dataclass
class Simple:
    """`NAME=v ... command word ... >redirect`; `words` may hold array tokens
    (`declare -a x=( ... )`)."""

    assigns: list[Token]
    words: list[Token]
    redirects: list[tuple[str, str]]
    line: int


@dataclass
class Pipeline:
    commands: list[Node]
    negated: bool
    line: int


@dataclass
class AndOr:
    first: Node
    rest: list[tuple[str, Node]]  # ("&&" | "||", pipeline)
    line: int


@dataclass
class If:
    branches: list[tuple[list[Node], list[Node]]]  # (condition, body); `else` has []
    line: int


@dataclass
class Loop:
    kind: str  # for, select, while, until
    header: str
    body: list[Node]
    line: int


@dataclass
class Case:
    word: str
    arms: list[tuple[list[str], list[Node]]]
    line: int


@dataclass
class Group:
    body: list[Node]
    subshell: bool
    line: int


@dataclass
class Function:
    name: str
    body: Node
    line: int


@dataclass
class Test:
    raw: str  # what stands between [[ and ]]
    line: int


@dataclass
class Arith:
    raw: str  # what stands between (( and ))
    line: int


Node = Simple | Pipeline | AndOr | If | Loop | Case | Group | Function | Test | Arith


@dataclass
class _Parser:
    tokens: list[Token]
    at: int = 0
    ends: list[str] = field(default_factory=list)

    def peek(self, ahead: int = 0) -> Token | None:
        at = self.at + ahead
        return self.tokens[at] if at < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise ConfigError(f"the script ends inside a command ({' '.join(self.ends)} missing)")
        self.at += 1
        return token

    def is_word(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "word" and token.text in texts

    def is_op(self, *texts: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "op" and token.text in texts

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text:
            raise ConfigError(f"line {token.line}: {text!r} expected, found {token.text!r}")

    def skip_newlines(self) -> None:
        while (token := self.peek()) is not None and token.kind == "newline":
            self.at += 1

    def commands(self, *ends: str) -> list[Node]:
        """Commands up to one of the reserved words `ends`, a `)` or a `;;` (not taken)."""
        nodes: list[Node] = []
        while True:
            while (token := self.peek()) is not None and (
                token.kind == "newline" or (token.kind == "op" and token.text in (";", "&"))
            ):
                self.at += 1
            if token is None or self.is_word(*ends) or self.is_op(")", *ARM_ENDS):
                return nodes
            nodes.append(self.and_or())

    def and_or(self) -> Node:
        first, rest = self.pipeline(), []
        while self.is_op("&&", "||"):
            operator = self.take().text
            self.skip_newlines()
            rest.append((operator, self.pipeline()))
        return AndOr(first, rest, _line(first)) if rest else first

    def pipeline(self) -> Node:
        negated = False
        while self.is_word("!", "time"):
            negated ^= self.take().text == "!"
        commands = [self.command()]
        while self.is_op("|", "|&"):
            self.take()
            self.skip_newlines()
            commands.append(self.command())
        if len(commands) == 1 and not negated:
            return commands[0]
        return Pipeline(commands, negated, _line(commands[0]))

    def command(self) -> Node:
        token = self.peek()
        assert token is not None
        node: Node
        if token.kind == "word" and token.text in COMPOUND:
            node = self.compound(token)
        elif token.kind == "op" and token.text == "(":
            self.take()
            node = Group(self.within(")", lambda: self.commands()), True, token.line)
            self.expect(")")
        elif token.kind == "test":
            node = Test(self.take().text, token.line)
        elif token.kind == "arith":
            node = Arith(self.take().text, token.line)
        elif token.kind == "word" and self.is_op_at(1, "(") and self.is_op_at(2, ")"):
            self.at += 3
            self.skip_newlines()
            return Function(token.text, self.command(), token.line)
        else:
            return self.simple()
        while (token := self.peek()) is not None and token.kind == "redirect":
            self.take()
            self.take()
        return node

    def is_op_at(self, ahead: int, text: str) -> bool:
        token = self.peek(ahead)
        return token is not None and token.kind == "op" and token.text == text

    def within(self, end: str, parse: Callable[[], list[Node]]) -> list[Node]:
        """`parse()` with `end` named in the error if the script ends first."""
        self.ends.append(end)
        try:
            return parse()
        finally:
            self.ends.pop()

    def compound(self, token: Token) -> Node:
        self.take()
        keyword = token.text
        if keyword == "if":
            return self.if_(token.line)
        if keyword in ("for", "select", "while", "until"):
            header: list[str] = []
            while not self.is_word("do"):
                part = self.take()
                if part.kind in ("word", "arith"):
                    header.append(part.text)
            self.take()
            body = self.within("done", lambda: self.commands("done"))
            self.expect("done")
            return Loop(keyword, " ".join(header), body, token.line)
        if keyword == "case":
            return self.case(token.line)
        if keyword == "function":
            name = self.take().text
            if self.is_op("("):
                self.take()
                self.expect(")")
            self.skip_newlines()
            return Function(name, self.command(), token.line)
        body = self.within("}", lambda: self.commands("}"))
        self.expect("}")
        return Group(body, False, token.line)

    def if_(self, line: int) -> If:
        branches: list[tuple[list[Node], list[Node]]] = []
        while True:
            condition = self.within("then", lambda: self.commands("then"))
            self.expect("then")
            body = self.within("fi", lambda: self.commands("elif", "else", "fi"))
            branches.append((condition, body))
            word = self.take().text
            if word == "else":
                branches.append(([], self.within("fi", lambda: self.commands("fi"))))
                self.expect("fi")
                return If(branches, line)
            if word == "fi":
                return If(branches, line)

    def case(self, line: int) -> Case:
        word = self.take().text
        self.skip_newlines()
        self.expect("in")
        arms: list[tuple[list[str], list[Node]]] = []
        while True:
            self.skip_newlines()
            if self.is_word("esac"):
                self.take()
                return Case(word, arms, line)
            if self.is_op("("):
                self.take()
            patterns = [self.take().text]
            while self.is_op("|"):
                self.take()
                patterns.append(self.take().text)
            self.expect(")")
            arms.append((patterns, self.within("esac", lambda: self.commands("esac"))))
            if self.is_op(*ARM_ENDS):
                self.take()

    def simple(self) -> Simple:
        first = self.peek()
        line = first.line if first is not None else 0
        assigns: list[Token] = []
        words: list[Token] = []
        redirects: list[tuple[str, str]] = []
        while (token := self.peek()) is not None:
            if token.kind == "redirect":
                self.take()
                target = self.peek()
                if target is not None and target.kind == "word":
                    self.take()
                redirects.append(
                    (token.text, target.text if target and target.kind == "word" else "")
                )
            elif token.kind == "array" or (token.kind == "word" and ASSIGNMENT.match(token.text)):
                (words if words else assigns).append(self.take())
            elif token.kind == "word":
                words.append(self.take())
            else:
                break
        if not (assigns or words or redirects):
            found = self.peek()
            raise ConfigError(f"line {line}: unexpected {found.text if found else 'end'!r}")
        return Simple(assigns, words, redirects, line)


def _line(node: Node) -> int:
    return node.line


def parse(text: str) -> list[Node]:
    """The commands of the bash script `text` (ConfigError naming the line when bash this
    reader does not follow is met)."""
    parser = _Parser(tokenize(text))
    nodes = parser.commands()
    if parser.peek() is not None:
        token = parser.peek()
        assert token is not None
        raise ConfigError(f"line {token.line}: unexpected {token.text!r}")
    return nodes
