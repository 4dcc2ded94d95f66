"""A bash script read in order, as bash would run it, without running anything: assignments
(`X=v`, `export`/`declare`/`local`/`readonly`, arrays, `unset`), variables from the
environment, `cd`/`pushd`, `shift`, `set --` (`bash_builtins`), functions,
`if`/`case`/`&&`/`||` decided from what is known (`bash_conditions`), and `$( )` computed
from the few commands `bash_commands` knows. It stops at the first command `is_launch`
accepts and gives it with its words expanded.

What cannot be known stays a `Missing`: a branch whose condition cannot be decided, and a
loop body (never run), make the variables they assign unknown; a launch command found
there is given with `under` set, for the caller to refuse.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from rl.cli.dialects import bash_builtins, bash_commands
from rl.cli.dialects.bash_arith import ArithmeticProblem, evaluate
from rl.cli.dialects.bash_conditions import Status, evaluate_double, evaluate_words
from rl.cli.dialects.bash_expand import (
    Missing,
    Value,
    expand_text,
    expand_word,
    glob_regex,
)
from rl.cli.dialects.bash_lexer import Token
from rl.cli.dialects.bash_parser import (
    ASSIGNMENT,
    AndOr,
    Arith,
    Case,
    Function,
    Group,
    If,
    Loop,
    Node,
    Pipeline,
    Simple,
    Test,
    parse,
)
from rl.core.config.errors import ConfigError

DECLARE = ("export", "declare", "typeset", "local", "readonly")
BASH_OWN = {"RANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "?", "$", "!", "-"}


@dataclass
class Found:
    """The launch command: its words expanded, where it runs and under what."""

    words: list[Value]
    line: int
    cwd: Value
    prefix: dict[str, Value]  # `NAME=v command`: the command's own environment
    under: Missing | None  # a branch or loop that keeps it from being known to run


class _Stop(Exception):
    """The launch command was found."""


class _Exit(Exception):
    """`exit` (or `return` outside a function)."""

    def __init__(self, line: int) -> None:
        self.line = line


class _Return(Exception):
    pass


class _Unsupported(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


@dataclass
class Shell:
    """The state a script builds as bash reads it (see the module's docstring)."""

    script: str  # $0 as the script was named
    positional: list[Value]
    environ: Mapping[str, str]
    cwd: Value
    now: datetime
    is_launch: Callable[[list[Value]], bool]
    variables: dict[str, Value] = field(default_factory=dict)
    arrays: dict[str, list[Value]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    functions: dict[str, Node] = field(default_factory=dict)
    sourced: list[str] = field(default_factory=list)
    under: Missing | None = None  # the undecided branch or loop being read
    capture: list[Value] | None = None  # the output of a $( ) being computed
    found: Found | None = None
    directories: list[Value] = field(default_factory=list)  # pushd's stack
    read: set[str] = field(default_factory=set)  # "$@" once read (shared with subshells)
    calls: int = 0  # functions being run
    asking: bool = False  # reading an `if`/`while` condition: a command not run is undecided
    exited: int | None = None  # the line of an `exit` met before the launch command

    # the expansion context (bash_expand.Context)
    def variable(self, name: str) -> Value | None:
        if name in self.variables:
            return self.variables[name]
        if name in self.arrays:
            return self.arrays[name][0] if self.arrays[name] else Value("")
        if name.isdigit():
            index = int(name)
            if index == 0:
                return Value(self.script)
            return self.positional[index - 1] if index <= len(self.positional) else None
        if name == "#":
            return Value(str(len(self.positional)))
        if name == "PWD":
            return self.cwd
        if name in BASH_OWN:
            return Value(f"${name}", (Missing(f"${name}", "bash's own value, not guessed"),))
        if name in self.environ and name not in self.removed:
            return Value(self.environ[name])
        return None

    def array(self, name: str) -> list[Value] | None:
        if name == "BASH_SOURCE" and name not in self.arrays:
            return [Value(self.script)]
        return self.arrays.get(name)

    def assign(self, name: str, value: Value) -> None:
        if self.under is not None:
            why = f"it is assigned {self.under.what}, which rl cannot decide ({self.under.why})"
            value = Value(f"${name}", (Missing(f"${name}", why),))
        self.variables[name] = value
        self.arrays.pop(name, None)

    def arguments(self) -> list[Value]:
        self.read.add("$@")
        return list(self.positional)

    def substitute(self, command: str) -> Value:
        """The output of `$(command)`, trailing newlines removed."""
        written = f"$({command.strip()})"
        try:
            nodes = parse(command)
            inner = replace(self.subshell(capture=True), is_launch=lambda words: False)
            with suppress(_Exit, _Return):
                inner.run(nodes)
        except _Unsupported as unsupported:
            return Value(written, (Missing(written, f"rl does not run {unsupported.why}"),))
        except ConfigError:
            return Value(written, (Missing(written, "bash this reader does not follow"),))
        output = inner.capture or []
        missing = tuple(m for value in output for m in value.missing)
        if missing:
            return Value(written, missing)
        return Value("".join(value.text for value in output).rstrip("\n"))

    # reading the script
    def subshell(self, capture: bool = False) -> Shell:
        return replace(
            self,
            variables=dict(self.variables),
            arrays={name: list(items) for name, items in self.arrays.items()},
            removed=set(self.removed),
            functions=dict(self.functions),
            capture=[] if capture else None,
            directories=list(self.directories),
        )

    def run(self, nodes: list[Node]) -> Status:
        status: Status = True
        for node in nodes:
            status = self.node(node)
        return status

    def node(self, node: Node) -> Status:
        if isinstance(node, Simple):
            return self.simple(node)
        if isinstance(node, AndOr):
            return self.and_or(node)
        if isinstance(node, Pipeline):
            status: Status = True
            for command in node.commands:  # each runs in a subshell of its own
                status = self.child(command)
            return (not status) if node.negated and isinstance(status, bool) else status
        if isinstance(node, If):
            return self.if_(node)
        if isinstance(node, Case):
            return self.case(node)
        if isinstance(node, Loop):
            loop = Missing(f"in a `{node.kind}` loop (line {node.line})", "rl does not run loops")
            with self.undecided(loop):
                self.run(node.body)
            return True
        if isinstance(node, Group):
            return self.child(node) if node.subshell else self.run(node.body)
        if isinstance(node, Function):
            self.functions[node.name] = node.body
            return True
        if isinstance(node, Test):
            return evaluate_double(node.raw, lambda raw: expand_text(raw, self), self.cwd)
        return self.arith(node)

    def child(self, node: Node) -> Status:
        inner = self.subshell(capture=self.capture is not None)
        try:
            status = inner.node(node) if not isinstance(node, Group) else inner.run(node.body)
        except _Exit:
            status = True
        finally:
            self.found = inner.found
            if self.capture is not None and inner.capture is not None:
                self.capture += inner.capture
        return status

    def and_or(self, node: AndOr) -> Status:
        status = self.node(node.first)
        for operator, command in node.rest:
            if isinstance(status, Missing):
                after = Missing(f"after the `{operator}` of line {node.line}", _why(status))
                with self.undecided(after):
                    self.node(command)
            elif status == (operator == "&&"):
                status = self.node(command)
        return status

    def if_(self, node: If) -> Status:
        for number, (condition, body) in enumerate(node.branches):
            status = self.condition(condition) if condition else True
            if status is True:
                return self.run(body)
            if isinstance(status, Missing):
                branch = Missing(f"under the `if` of line {node.line}", _why(status))
                with self.undecided(branch):
                    for _, rest in node.branches[number:]:
                        self.run(rest)
                return branch
        return True

    def condition(self, nodes: list[Node]) -> Status:
        """An `if` condition: a command rl does not run is a question it cannot answer
        (elsewhere, as in `a && b`, the script's author expects it to succeed)."""
        outer = self.asking
        self.asking = True
        try:
            return self.run(nodes)
        finally:
            self.asking = outer

    def case(self, node: Case) -> Status:
        word = expand_text(node.word, self)
        for patterns, body in node.arms:
            if word.missing:
                branch = Missing(f"under the `case` of line {node.line}", _why(word.missing[0]))
                with self.undecided(branch):
                    self.run(body)
                continue
            for pattern in patterns:
                value = expand_text(pattern, self)
                if re.fullmatch(glob_regex(value.text), word.text, re.S):
                    return self.run(body)
        return True

    def arith(self, node: Arith) -> Status:
        assigned = re.match(r"\s*([A-Za-z_]\w*)\s*([-+*/%]?)=(?!=)(.*)$", node.raw, re.S)
        expression = node.raw
        if assigned:
            name, op, rest = assigned.groups()
            expression = f"{name} {op} ({rest})" if op else rest
        value = expand_text(expression, self)
        try:
            result = evaluate(value.text, self.arith_variable) if not value.missing else None
        except (ArithmeticProblem, _MissingName):
            result = None
        if assigned:
            text = str(result) if result is not None else f"$(({node.raw}))"
            why = (Missing(f"(({node.raw.strip()}))", "not evaluated"),) if result is None else ()
            self.assign(assigned.group(1), Value(text, why))
        return result != 0 if result is not None else Missing(f"(({node.raw}))", "not evaluated")

    def arith_variable(self, name: str) -> str:
        value = self.variable(name)
        if value is None or value.missing:
            raise _MissingName(name)
        return value.text

    @contextmanager
    def undecided(self, why: Missing) -> Iterator[None]:
        outer = self.under
        self.under = outer or why
        try:
            yield
        finally:
            self.under = outer

    # simple commands
    def simple(self, node: Simple) -> Status:
        if not node.words:
            for token in node.assigns:
                self.assign_token(token)
            return True
        words = [field for token in node.words for field in self.expand(token)]
        prefix = {token.text.split("=", 1)[0]: self.assigned(token) for token in node.assigns}
        if self.is_launch(words):
            self.found = Found(words, node.line, self.cwd, prefix, self.under)
            raise _Stop
        if not words:
            return True
        name = words[0].text if not words[0].missing else ""
        if self.capture is None or not _to_elsewhere(node.redirects):
            return self.command(name, node, words, node.line)
        kept = len(self.capture)
        status = self.command(name, node, words, node.line)
        del self.capture[kept:]  # its output went to a file or /dev/null
        return status

    def expand(self, token: Token) -> list[Value]:
        if token.kind == "array":
            return [Value(token.text + "(" + " ".join(token.items) + ")")]
        return expand_word(token.text, self)

    def assigned(self, token: Token) -> Value:
        return expand_text(token.text.split("=", 1)[1], self, assignment=True)

    def assign_token(self, token: Token) -> None:
        """`NAME=value`, `NAME+=value`, `NAME[i]=value` or `NAME=( items )`."""
        found = ASSIGNMENT.match(token.text)
        if not found:
            return
        name, index, append = found.groups()
        if token.kind == "array":
            items = [v for raw in token.items for v in expand_word(raw, self)]
            if self.under is not None:
                self.assign(name, Value(""))
                return
            self.arrays[name] = (self.arrays.get(name, []) if append else []) + items
            self.variables.pop(name, None)
            return
        value = self.assigned(token)
        if index:
            self.assign_item(name, index[1:-1], value)
        elif append:
            before = self.variable(name) or Value("")
            self.assign(name, Value(before.text + value.text, before.missing + value.missing))
        else:
            self.assign(name, value)

    def assign_item(self, name: str, index: str, value: Value) -> None:
        items = self.arrays.setdefault(name, [])
        position = expand_text(index, self)
        if self.under is not None or position.missing or not position.text.isdigit():
            self.assign(name, Value(""))
            return
        at = int(position.text)
        items.extend(Value("") for _ in range(at + 1 - len(items)))
        items[at] = value

    def command(self, name: str, node: Simple, words: list[Value], line: int) -> Status:
        arguments = [word.text for word in words[1:]]
        if name in DECLARE:
            self.declare(node.words[1:])
            return True
        if name == "unset":
            for variable in arguments:
                if not variable.startswith("-"):
                    self.removed.add(variable)
                    self.variables.pop(variable, None)
                    self.arrays.pop(variable, None)
            return True
        if name in ("shift", "set"):
            return bash_builtins.positional_change(self, name, words[1:])
        if name in ("cd", "pushd", "popd"):
            return bash_builtins.change_directory(self, name, words[1:])
        if name in ("source", "."):
            self.sourced += arguments[:1]
            return True
        if name in ("exit", "return"):
            if self.under is not None:
                return True  # an exit bash may not reach
            raise _Return if name == "return" and self.calls else _Exit(line)
        if name in ("true", ":"):
            return True
        if name == "false":
            return False
        if name in ("test", "["):
            return evaluate_words(words[1:], self.cwd)
        if name in self.functions:
            return self.call(name, words[1:])
        if self.capture is None:  # any other command: its output is not used
            return Missing(f"`{name}`", "rl does not run it") if self.asking else True
        return self.output(name, words)

    def declare(self, tokens: list[Token]) -> None:
        """`export`/`declare`/`local`/`readonly` arguments: `NAME=value` assigns (flags and
        bare names do not)."""
        for token in tokens:
            if token.kind == "array" or ASSIGNMENT.match(token.text):
                self.assign_token(token)
                continue
            for value in self.expand(token):  # "NAME=a b", quoted as a whole
                found = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)$", value.text, re.S)
                if found:
                    self.assign(found.group(1), Value(found.group(2), value.missing))

    def output(self, name: str, words: list[Value]) -> Status:
        unknown = [m for word in words for m in word.missing]
        if name not in bash_commands.COMMANDS:
            raise _Unsupported(f"`{name or words[0].text}`")
        assert self.capture is not None
        if unknown or (self.cwd.missing and name in ("pwd", "realpath", "readlink")):
            self.capture.append(Value("", tuple(unknown) or self.cwd.missing))
            return True
        arguments = [word.text for word in words[1:]]
        try:
            text = bash_commands.output(name, arguments, self.cwd.text, self.now, self.environ)
        except bash_commands.Unsupported as unsupported:
            raise _Unsupported(str(unsupported)) from None
        self.capture.append(Value(text))
        return True

    def call(self, name: str, arguments: list[Value]) -> Status:
        outer = self.positional
        self.positional = arguments
        self.calls += 1
        try:
            return self.node(self.functions[name])
        except _Return:
            return True
        finally:
            self.positional = outer
            self.calls -= 1


class _MissingName(Exception):
    pass


def _why(missing: Missing) -> str:
    return f"{missing.what}: {missing.why}"


def _to_elsewhere(redirects: list[tuple[str, str]]) -> bool:
    """Whether the command's standard output goes to a file (`>x`, `&>x`, `1>x`)."""
    return any(op.lstrip("1").startswith((">", "&>")) for op, _ in redirects)


def find_launch(
    text: str,
    script: str,
    arguments: list[str],
    environ: Mapping[str, str],
    cwd: Path,
    now: datetime,
    is_launch: Callable[[list[Value]], bool],
) -> tuple[Found | None, Shell]:
    """The first command of the bash `text` that `is_launch` accepts (None if none), and
    the shell state at that point. ConfigError (naming the line) for bash not followed."""
    shell = Shell(
        script=script,
        positional=[Value(argument) for argument in arguments],
        environ=environ,
        cwd=Value(str(cwd)),
        now=now,
        is_launch=is_launch,
    )
    try:
        shell.run(parse(text))
    except _Stop:
        pass
    except _Exit as stop:
        shell.exited = stop.line
    return shell.found, shell
