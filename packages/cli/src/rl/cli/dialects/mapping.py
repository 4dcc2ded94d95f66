"""Table-driven key mapping from a dialect's flattened config to ours.

A dialect is a list of `Rule`s, tried in order; the first whose `source` matches a key
decides: an exact key (`trainer.default_local_dir`) or a prefix ending in `.`
(`actor_rollout_ref.actor.`), whose rest is appended to `target` (a prefix too). `*` in a
source stands for the rest of one key segment (`*.optim.lr`, `data.image_*`), `**` for one
or more whole segments, each carried into the target (`{0}`, ...). A rule without a target
marks the key unsupported with its `reason`. A mapped key must name a key of our schema
(`schema_keys.settable`), else it is unsupported too. Values pass through `convert` when a
rule has one; a rule with `derive` computes our value from the whole flattened upstream
config instead (when ours is the product of several upstream keys, e.g. a batch size).
`also` sets further keys of ours from the same upstream key (each with its own `derive`, or
the same value). A `convert` or `derive` that returns `Unsupported(reason)` marks the key
unsupported for that value (e.g. an algorithm variant we do not implement); one that returns
`NULL` sets our key to null (None means "unset upstream"). On a rule without a target,
`convert` says which values mean "not in use" (it returns None for them). `ignore(key, why)`
writes a rule that ignores a key (rl does the job itself); `ignored_for(why, *keys)` and
`unsupported_for(why, *keys)` write one rule per key for keys that share a reason."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rl.cli.dialects import schema_keys
from rl.cli.dialects.report import Entry, Report, Status

NO_SETTING = "rl has no such setting"


@dataclass(frozen=True)
class Unsupported:
    """A value our schema cannot express, with the reason."""

    reason: str


@dataclass(frozen=True)
class Ignored:
    """An upstream value that changes nothing in this config (a clamp that can never bind),
    with the reason: reported as ignored, our key left as it is."""

    reason: str


class _Null:
    """What a `convert` / `derive` returns to set our key to null explicitly (a None
    return means "unset upstream: our default applies")."""

    def __repr__(self) -> str:
        return "null"


NULL = _Null()
Derive = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Rule:
    source: str
    target: str | None = None
    reason: str = ""
    convert: Callable[[Any], Any] | None = None
    status: Status = "unsupported"  # for rules without a target: or "ignored"
    derive: Derive | None = None  # flat upstream -> our value
    also: tuple[tuple[str, Derive | None], ...] = ()  # more of our keys from this key

    def match(self, key: str) -> str | None:
        """Our key for `key`, "" when the rule matches without a target, None otherwise."""
        found = self._found(key)
        if found is None:
            return None
        if self.target is None:
            return ""
        groups = found.groups()
        stars = groups[:-1] if self.source.endswith(".") else groups
        target = self.target.format(*stars)
        return target + groups[-1] if self.source.endswith(".") else target

    def also_targets(self, key: str) -> list[str]:
        """The `also` keys for `key`, their `{0}`... filled with its `*` segments."""
        found = self._found(key)
        groups = found.groups() if found is not None else ()
        stars = groups[:-1] if self.source.endswith(".") else groups
        return [target.format(*stars) for target, _ in self.also]

    def _found(self, key: str) -> re.Match[str] | None:
        pattern = (
            re.escape(self.source)
            .replace(r"\*\*", r"([^.]+(?:\.[^.]+)*)")  # one or more segments
            .replace(r"\*", r"([^.]+)")  # the `*` of a `**` are gone by now
        )
        prefix = self.source.endswith(".")
        return re.match(pattern + ("(.*)" if prefix else "") + "$", key)


def off_when(*values: Any) -> Callable[[Any], Any]:
    """A `convert` for rules without a target: these upstream values mean "not in use, or
    what rl does anyway" (None), any other is kept (and refused with the rule's reason)."""
    return lambda value: None if value in values else value


def ignore(source: str, reason: str) -> Rule:
    """The rule that ignores `source` for `reason`: rl does that job itself, the run
    means the same (status "ignored")."""
    return Rule(source, reason=reason, status="ignored")


def ignored_for(reason: str, *sources: str) -> list[Rule]:
    """`ignore` for each of `sources` (in order), for one `reason`."""
    return [ignore(source, reason) for source in sources]


def unsupported_for(reason: str, *sources: str) -> list[Rule]:
    """A rule for each of `sources` (in order) that refuses it for one `reason` (a value
    that is off, e.g. false or 0, is reported as default)."""
    return [Rule(source, reason=reason) for source in sources]


def as_list(value: Any) -> Any:
    """A single file name as a one-item list (upstream configs take either)."""
    return [value] if isinstance(value, str) else value


def flatten(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, leaf value) pairs; empty mappings are leaves."""
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            yield from flatten(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], node


def _unset(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _set(tree: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[last] = value


def translate(
    values: Mapping[str, Any],
    rules: Sequence[Rule],
    dialect: str,
    source: str,
    reasons: Sequence[Rule] = (),
) -> tuple[dict[str, Any], Report]:
    """Our config (nested, only the keys that differ from our defaults) and the report.
    `reasons` explain, by upstream key, why a key that moved to a name our schema lacks
    is not supported (first match; `NO_SETTING` otherwise)."""
    ours: dict[str, Any] = {}
    report = Report(dialect, source)
    flat = dict(flatten(values))
    for key, value in flat.items():
        rule, target = next(
            ((r, t) for r in rules if (t := r.match(key)) is not None), (None, None)
        )
        if rule is None or not target:
            reason = rule.reason if rule is not None else NO_SETTING
            status: Status = rule.status if rule is not None else "unsupported"
            off = _unset(value) or value is False or (value == 0 and value is not True)
            if rule is not None and rule.convert is not None:  # the rule says what is off
                off = rule.convert(value) is None
            if off and status == "unsupported":  # not in use: null, false, 0
                report.entries.append(Entry(key, "default", None, value, f"unset; {reason}"))
            else:
                report.entries.append(Entry(key, status, None, value, reason))
            continue
        if not schema_keys.settable(target):
            report.entries.append(_unsettable(key, target, value, reasons))
            continue
        if rule.derive is not None:
            converted = rule.derive(flat)
        else:
            converted = rule.convert(value) if rule.convert is not None else value
        if isinstance(converted, Unsupported):
            report.entries.append(Entry(key, "unsupported", target, value, converted.reason))
            continue
        if isinstance(converted, Ignored):
            report.entries.append(Entry(key, "ignored", None, value, converted.reason))
            continue
        also = [
            (t, converted if d is None else d(flat))
            for t, (_, d) in zip(rule.also_targets(key), rule.also, strict=True)
        ]
        mapped = [(t, v) for t, v in [(target, converted), *also] if not _is_default(t, v)]
        for extra, extra_value in mapped:
            _set(ours, extra, None if extra_value is NULL else extra_value)
        if not mapped:
            why = "" if converted is not None else "unset upstream: ours applies"
            report.entries.append(Entry(key, "default", target, value, why))
        else:
            names = ", ".join(t for t, _ in mapped)
            shown = mapped[0][1] if len(mapped) == 1 else {t: v for t, v in mapped}
            report.entries.append(Entry(key, "mapped", names, shown))
    return ours, report


def _unsettable(key: str, target: str, value: Any, reasons: Sequence[Rule]) -> Entry:
    """The report entry of a key that moved to a name our schema lacks: the first matching
    `reasons` rule says why, with its status (ignored: rl handles it itself) and, through
    its `convert`, which values mean "not in use, or what rl does anyway" (None)."""
    why = next((r for r in reasons if r.match(key) is not None), None)
    reason = why.reason if why is not None else NO_SETTING
    off = _unset(value) or value is False
    if why is not None and why.convert is not None:
        off = why.convert(value) is None
    if off:
        return Entry(key, "default", target, value, reason)
    return Entry(key, why.status if why is not None else "unsupported", target, value, reason)


def _is_default(target: str, value: Any) -> bool:
    """Nothing to write: unset upstream, or equal to our default."""
    inside_mapping = target not in schema_keys.leaves()  # e.g. engine_kwargs.vllm
    default = schema_keys.default(target)
    if isinstance(value, list) and isinstance(default, tuple):
        value = tuple(value)  # YAML lists against our tuples (betas, logger, files)
    if value is NULL:
        return default is None
    return value is None or value == default or (inside_mapping and _unset(value))
