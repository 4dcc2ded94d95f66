"""Bash's word expansion for a script that is read, never run: quote removal, `~`,
`$VAR`, `${VAR}` with its operators (`:-` `-` `:=` `=` `:+` `+` `:?`, `#` `##` `%` `%%`,
`/` `//`, `^^` `,,`, `:offset:length`, `${#VAR}`), arrays (`${a[@]}`, `${a[i]}`,
`${#a[@]}`), `$@` `$*` `$#` `$0` `$1`, `$(( ))` (`bash_arith`), `$( )` and backticks
(the `Context` answers them), and field splitting of unquoted results.

A value that cannot be known (a variable neither set by the script nor in the
environment, a command rl does not run, ...) is carried as a `Missing` beside the text, so
the caller refuses only what its command really uses. Brace expansion (`{a,b}`) and
globbing are not done: such words stay as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Protocol

from rl.cli.dialects.bash_arith import ArithmeticProblem, evaluate
from rl.cli.dialects.bash_lexer import close_parens, skip_quoted

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PARAMETER = re.compile(
    r"(?P<length>#)?(?P<name>[A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!0-])(?:\[(?P<index>[^\]]*)\])?"
)
SPLIT = re.compile(r"[ \t\n]+")


@dataclass(frozen=True)
class Missing:
    """A value the reader cannot know: `what` as the script writes it, `why` in words."""

    what: str
    why: str
    exportable: bool = False  # a variable the user can set in the environment


@dataclass(frozen=True)
class Value:
    """A word or a variable's value, with what could not be known in it."""

    text: str
    missing: tuple[Missing, ...] = ()


class Context(Protocol):
    """What expansion asks the shell: variables (script, environment, specials such as
    `$0`, `$1`, `$#`), arrays, assignment (`${X:=v}`), the arguments, `$( )` output."""

    def variable(self, name: str) -> Value | None: ...

    def array(self, name: str) -> list[Value] | None: ...

    def assign(self, name: str, value: Value) -> None: ...

    def arguments(self) -> list[Value]: ...  # "$@": the shell notes that it was read

    def substitute(self, command: str) -> Value: ...


@dataclass
class _Piece:
    value: Value
    split: bool = False  # an unquoted expansion: split into fields
    keeps: bool = False  # quoted: makes a field even when empty
    new_field: bool = False  # an item of "$@" after the first


def _join(values: list[Value], separator: str = " ") -> Value:
    return Value(
        separator.join(v.text for v in values), tuple(m for v in values for m in v.missing)
    )


def unset(name: str) -> Missing:
    """The Missing of a variable that is set nowhere."""
    if name.isdigit():
        return Missing(f"${name}", f"the script's argument {name}, which was not given")
    return Missing(f"${name}", "set neither by the script nor in the environment", True)


class _Unknown(Exception):
    def __init__(self, missing: tuple[Missing, ...]) -> None:
        self.missing = missing


@dataclass
class _Expander:
    context: Context
    assignment: bool = False  # an assignment's value: `~` also after `=` and `:`

    def word(self, raw: str) -> list[_Piece]:
        """The pieces of `raw` read outside quotes."""
        out: list[_Piece] = []
        at = 0
        while at < len(raw):
            char = raw[at]
            if char == "\\":
                out.append(_Piece(Value(raw[at + 1 : at + 2]), keeps=True))
                at += 2
            elif char == "'":
                end = skip_quoted(raw, at)
                out.append(_Piece(Value(raw[at + 1 : end - 1]), keeps=True))
                at = end
            elif char == '"':
                end = skip_quoted(raw, at)
                inner = self.double(raw[at + 1 : end - 1])
                multi = re.search(r"\$\{?@|\$\{[^}]*\[@\]", raw[at:end])
                out += inner if inner or multi else [_Piece(Value(""), keeps=True)]
                at = end
            elif char == "$" or char == "`":
                pieces, at = self.dollar(raw, at, quoted=False)
                out += pieces
            elif char == "~" and self.tilde_here(raw, at):
                out.append(_Piece(self.home(), keeps=True))
                at += 1
            else:
                out.append(_Piece(Value(char)))
                at += 1
        return out

    def tilde_here(self, raw: str, at: int) -> bool:
        after = raw[at + 1 : at + 2]
        if after not in ("", "/") and not (self.assignment and after == ":"):
            return False
        if at == 0:
            return True
        before = raw[at - 1]
        first_equals = before == "=" and "=" not in raw[: at - 1]
        return self.assignment and (before == ":" or first_equals)

    def home(self) -> Value:
        home = self.context.variable("HOME")
        return home if home is not None else Value("~", (unset("HOME"),))

    def double(self, inner: str) -> list[_Piece]:
        """The pieces of the text between double quotes."""
        out: list[_Piece] = []
        at = 0
        while at < len(inner):
            char = inner[at]
            if char == "\\" and inner[at + 1 : at + 2] in ("$", "`", '"', "\\", "\n"):
                escaped = inner[at + 1]  # a backslash-newline joins the lines
                out.append(_Piece(Value("" if escaped == "\n" else escaped), keeps=True))
                at += 2
            elif char in "$`":
                pieces, at = self.dollar(inner, at, quoted=True)
                out += pieces
            else:
                out.append(_Piece(Value(char), keeps=True))
                at += 1
        return out

    def dollar(self, raw: str, at: int, quoted: bool) -> tuple[list[_Piece], int]:
        """The pieces of the `$...` or backtick expansion at `raw[at]`, and where it ends."""
        if raw[at] == "`":
            end = skip_quoted(raw, at)
            command = re.sub(r"\\([$`\\])", r"\1", raw[at + 1 : end - 1])
            return [self.result(self.context.substitute(command), quoted)], end
        ahead = raw[at + 1 : at + 2]
        if raw.startswith("$((", at):
            end = close_parens(raw, at + 1)
            if raw[end - 1] == ")":
                return [self.result(self.arithmetic(raw[at + 3 : end - 1]), quoted)], end + 1
        if ahead == "(":
            end = close_parens(raw, at + 1)
            return [self.result(self.context.substitute(raw[at + 2 : end]), quoted)], end + 1
        if ahead == "{":
            end = skip_quoted(raw, at)
            return self.parameter(raw[at + 2 : end - 1], quoted), end
        if ahead == "'" and not quoted:
            end = skip_quoted(raw, at + 1)
            text = raw[at + 2 : end - 1].encode().decode("unicode_escape", "ignore")
            return [_Piece(Value(text), keeps=True)], end
        if ahead in ("@", "*"):
            return self.many(self.arguments(), ahead, quoted), at + 2
        found = NAME.match(raw, at + 1)
        if found:
            return [self.result(self.scalar(found.group(0)), quoted)], found.end()
        if ahead and (ahead.isdigit() or ahead in "#?$!0-"):
            return [self.result(self.scalar(ahead), quoted)], at + 2
        return [_Piece(Value("$"), keeps=quoted)], at + 1

    def result(self, value: Value, quoted: bool) -> _Piece:
        # a value that is not known is kept whole, so one word reports it once
        return _Piece(value, split=not quoted and not value.missing, keeps=quoted)

    def many(self, values: list[Value], how: str, quoted: bool) -> list[_Piece]:
        """`$@`/`${a[@]}` (one field per item, even quoted) or `$*`/`${a[*]}` (joined)."""
        if how == "*" and quoted:
            return [_Piece(_join(values), keeps=True)]
        return [
            _Piece(v, split=not quoted and not v.missing, keeps=quoted, new_field=i > 0)
            for i, v in enumerate(values)
        ]

    def arguments(self) -> list[Value]:
        return self.context.arguments()

    def scalar(self, name: str) -> Value:
        value = self.context.variable(name)
        return value if value is not None else Value(f"${name}", (unset(name),))

    def text(self, raw: str, quoted: bool = False) -> Value:
        pieces = self.double(raw) if quoted else self.word(raw)
        return _join([p.value for p in pieces], "")

    def arithmetic(self, expression: str) -> Value:
        written = f"$(({expression}))"
        expanded = self.text(expression, quoted=True)
        if expanded.missing:
            return Value(written, expanded.missing)

        def lookup(name: str) -> str:
            value = self.context.variable(name)
            if value is None or value.missing:
                raise _Unknown(value.missing if value is not None else (unset(name),))
            return value.text

        try:
            return Value(str(evaluate(expanded.text, lookup)))
        except _Unknown as unknown:
            return Value(written, unknown.missing)
        except ArithmeticProblem as problem:
            return Value(written, (Missing(written, str(problem)),))

    def parameter(self, inner: str, quoted: bool) -> list[_Piece]:
        """`${...}`: a variable, positional or array item with its operator."""
        if inner == "#":
            return [self.result(self.scalar("#"), quoted)]
        found = PARAMETER.match(inner)
        if not found:
            return [self.result(_unsupported(inner), quoted)]
        name, index, rest = found.group("name"), found.group("index"), inner[found.end() :]
        try:
            items = self.items(name, index)
        except _Unknown as unknown:
            return [self.result(Value(f"${{{inner}}}", unknown.missing), quoted)]
        if found.group("length"):
            if rest:
                return [self.result(_unsupported(inner), quoted)]
            count: Value | None = None
            if index in ("@", "*") or name in ("@", "*"):
                count = Value(str(len(items or [])))
            elif items:
                count = Value(str(len(items[0].text)), items[0].missing)
            return [self.result(count or Value(f"${{#{name}}}", (unset(name),)), quoted)]
        many = index in ("@", "*") or name in ("@", "*")
        how = "*" if "*" in (index, name) else "@"
        try:
            if not many:
                value = items[0] if items else None
                return self.operator(name, value, rest, quoted, inner)
            if items is None:
                return [self.result(Value(f"${{{inner}}}", (unset(name),)), quoted)]
            if rest.startswith(":") and rest[1:2] not in ("-", "=", "+", "?"):
                return self.many(self.slice(name, items, rest[1:]), how, quoted)
            done = [self.apply(name, item, rest, inner) for item in items]
            return self.many(done, how, quoted)
        except _Unknown as unknown:
            return [self.result(Value(f"${{{inner}}}", unknown.missing), quoted)]

    def items(self, name: str, index: str | None) -> list[Value] | None:
        """The values `name[index]` stands for (None when unset)."""
        if name in ("@", "*"):
            return self.arguments()
        array = self.context.array(name)
        if array is None:
            scalar = self.context.variable(name)
            array = None if scalar is None else [scalar]
        if index is None or index in ("@", "*") or array is None:
            return array
        position = self.arithmetic(index)
        if position.missing:
            raise _Unknown(position.missing)
        at = int(position.text)
        return [array[at]] if -len(array) <= at < len(array) else None

    def operator(
        self, name: str, value: Value | None, rest: str, quoted: bool, inner: str
    ) -> list[_Piece]:
        """`${name<rest>}` for one value: the defaults family gives pieces of its word."""
        if not rest:
            return [self.result(value or Value(f"${name}", (unset(name),)), quoted)]
        test = re.match(r"(:?)([-=+?])", rest)
        if test:
            colon, op, word = test.group(1), test.group(2), rest[test.end() :]
            is_set = value is not None and (not colon or value.text != "" or value.missing)
            if op == "+":
                return self.default(word, quoted) if is_set else [_Piece(Value(""), keeps=quoted)]
            if is_set:
                assert value is not None
                return [self.result(value, quoted)]
            if op == "?":
                why = self.text(word, True).text or "a value the script requires"
                return [self.result(Value(f"${name}", (Missing(f"${name}", why, True),)), quoted)]
            if op == "=":
                self.context.assign(name, self.text(word, quoted))
            return self.default(word, quoted)
        if value is None:
            return [self.result(Value(f"${{{inner}}}", (unset(name),)), quoted)]
        return [self.result(self.apply(name, value, rest, inner), quoted)]

    def default(self, word: str, quoted: bool) -> list[_Piece]:
        pieces = self.double(word) if quoted else self.word(word)
        return pieces or [_Piece(Value(""), keeps=quoted)]

    def apply(self, name: str, value: Value, rest: str, inner: str) -> Value:
        """`value` through a trimming, replacing, case or substring operator."""
        text = value.text
        if not rest:
            return value
        if rest[0] in "#%":
            longest = rest[:2] in ("##", "%%")
            pattern = self.text(rest[2 if longest else 1 :])
            return _mark(_trim(text, pattern.text, rest[0], longest), value, pattern)
        if rest[0] == "/":
            body = rest[1:]
            how = body[0] if body[:1] in ("/", "#", "%") else ""
            glob, _, replacement = body[len(how) :].partition("/")
            p, r = self.text(glob), self.text(replacement)
            return _mark(_replace(text, p.text, r.text, how), value, p, r)
        if rest in ("^^", "^", ",,", ","):
            first = text[:1].upper() if rest == "^" else text[:1].lower()
            changed = {"^^": text.upper(), ",,": text.lower()}.get(rest, first + text[1:])
            return replace(value, text=changed)
        if rest[0] == ":":
            return self.substring(value, rest[1:], inner)
        return _unsupported(inner)

    def slice(self, name: str, items: list[Value], spec: str) -> list[Value]:
        """`${@:offset:length}` (offset 1 is `$1`) or `${a[@]:offset:length}`."""
        start, _, length = spec.partition(":")
        begin = self.arithmetic(start)
        size = self.arithmetic(length) if length else None
        unknown = begin.missing + (size.missing if size else ())
        if unknown:
            raise _Unknown(unknown)
        if name in ("@", "*"):
            items = [self.scalar("0"), *items]
        at = int(begin.text)
        at = max(len(items) + at, 0) if at < 0 else at
        return items[at : at + int(size.text)] if size is not None else items[at:]

    def substring(self, value: Value, spec: str, inner: str) -> Value:
        start, _, length = spec.partition(":")
        begin = self.arithmetic(start)
        size = self.arithmetic(length) if length else None
        unknown = begin.missing + (size.missing if size else ())
        if unknown:
            raise _Unknown(unknown)
        text, at = value.text, int(begin.text)
        at = max(len(text) + at, 0) if at < 0 else at
        if size is None:
            return replace(value, text=text[at:])
        count = int(size.text)
        end = at + count if count >= 0 else len(text) + count
        return replace(value, text=text[at:end])


def _unsupported(inner: str) -> Value:
    written = f"${{{inner}}}"
    return Value(written, (Missing(written, "an expansion this reader does not follow"),))


def _mark(text: str, value: Value, *used: Value) -> Value:
    missing = value.missing + tuple(m for u in used for m in u.missing)
    return Value(text, missing)


def glob_regex(pattern: str) -> str:
    """A bash glob pattern as a regular expression (`*`, `?`, `[...]`, `\\x`)."""
    out: list[str] = []
    at = 0
    while at < len(pattern):
        char = pattern[at]
        close = pattern.find("]", at + 2) if char == "[" else -1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif close > 0:
            body = pattern[at + 1 : close]
            body = "^" + body[1:] if body[0] in "!^" else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            at = close
        elif char == "\\" and at + 1 < len(pattern):
            at += 1
            out.append(re.escape(pattern[at]))
        else:
            out.append(re.escape(char))
        at += 1
    return "".join(out)


def _trim(text: str, pattern: str, side: str, longest: bool) -> str:
    regex = re.compile(glob_regex(pattern), re.S)
    sizes = range(len(text), -1, -1) if longest else range(len(text) + 1)
    for size in sizes:
        part = text[:size] if side == "#" else text[len(text) - size :]
        if regex.fullmatch(part):
            return text[size:] if side == "#" else text[: len(text) - size]
    return text


def _replace(text: str, pattern: str, replacement: str, how: str) -> str:
    if not pattern:
        return text
    regex = glob_regex(pattern)
    if how == "#":
        return re.sub(f"^(?:{regex})", lambda _: replacement, text, count=1, flags=re.S)
    if how == "%":
        for start in range(len(text) + 1):
            if re.fullmatch(regex, text[start:], re.S):
                return text[:start] + replacement
        return text
    return re.sub(regex, lambda _: replacement, text, count=0 if how == "/" else 1, flags=re.S)


def _fields(pieces: list[_Piece]) -> list[Value]:
    """Pieces joined into words: unquoted expansions split at blanks, "$@" items apart,
    an unquoted empty result dropped."""
    fields: list[Value] = []
    current: list[Value] | None = None

    def close() -> None:
        nonlocal current
        if current is not None:
            fields.append(_join(current, ""))
        current = None

    for piece in pieces:
        if piece.new_field:
            close()
        if not piece.split:
            if piece.keeps or piece.value.text or piece.value.missing or current is not None:
                current = (current or []) + [piece.value]
            continue
        parts = SPLIT.split(piece.value.text)
        for number, part in enumerate(parts):
            if number:
                close()
            if part:
                current = (current or []) + [replace(piece.value, text=part)]
    close()
    return fields


def expand_word(raw: str, context: Context) -> list[Value]:
    """The words that the raw word `raw` (quotes as written) becomes."""
    assignment = bool(re.match(r"[A-Za-z_][A-Za-z0-9_]*=", raw))
    return _fields(_Expander(context, assignment).word(raw))


def expand_text(raw: str, context: Context, assignment: bool = False) -> Value:
    """`raw` as one string, not split (an assignment's value, a `case` word, a test
    operand)."""
    pieces = _Expander(context, assignment).word(raw)
    joined: list[Value] = []
    for piece in pieces:
        if piece.new_field:
            joined.append(Value(" "))
        joined.append(piece.value)
    return _join(joined, "")
