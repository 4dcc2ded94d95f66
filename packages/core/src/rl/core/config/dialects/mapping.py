"""Table-driven key mapping from a dialect's flattened config to ours.

A dialect is a list of `Rule`s, tried in order; the first whose `source` matches a key
decides: an exact key (`trainer.default_local_dir`) or a prefix ending in `.`
(`actor_rollout_ref.actor.`), whose rest is appended to `target` (a prefix too). `*` in a
source stands for the rest of one key segment (`*.optim.lr`, `data.image_*`), `**` for one
or more whole segments, each carried into the target (`{0}`, ...). A rule without a target
marks the key unsupported with its `reason`. A mapped key must name a key of our schema
(`schema_keys.settable`), else it is unsupported too. Values pass through `convert` when a
rule has one; a rule with `derive` computes our value from the whole flattened upstream
config instead (when ours is the product of several upstream keys, e.g. a batch size)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rl.core.config.dialects import schema_keys
from rl.core.config.dialects.report import Entry, Report, Status

NO_SETTING = "rl has no such setting"


@dataclass(frozen=True)
class Rule:
    source: str
    target: str | None = None
    reason: str = ""
    convert: Callable[[Any], Any] | None = None
    status: Status = "unsupported"  # for rules without a target: or "ignored"
    derive: Callable[[Mapping[str, Any]], Any] | None = None  # flat upstream -> our value

    def match(self, key: str) -> str | None:
        """Our key for `key`, "" when the rule matches without a target, None otherwise."""
        pattern = (
            re.escape(self.source)
            .replace(r"\*\*", r"([^.]+(?:\.[^.]+)*)")  # one or more segments
            .replace(r"\*", r"([^.]+)")  # the `*` of a `**` are gone by now
        )
        prefix = self.source.endswith(".")
        found = re.match(pattern + ("(.*)" if prefix else "") + "$", key)
        if found is None:
            return None
        if self.target is None:
            return ""
        groups = found.groups()
        stars = groups[:-1] if prefix else groups
        target = self.target.format(*stars)
        return target + groups[-1] if prefix else target


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
            if (_unset(value) or value is False) and status == "unsupported":  # not in use
                report.entries.append(Entry(key, "default", None, value, f"unset; {reason}"))
            else:
                report.entries.append(Entry(key, status, None, value, reason))
            continue
        if not schema_keys.settable(target):
            status = "default" if _unset(value) or value is False else "unsupported"
            why = next((r.reason for r in reasons if r.match(key) is not None), NO_SETTING)
            report.entries.append(Entry(key, status, target, value, why))
            continue
        if rule.derive is not None:
            converted = rule.derive(flat)
        else:
            converted = rule.convert(value) if rule.convert is not None else value
        inside_mapping = target not in schema_keys.leaves()  # e.g. engine_kwargs.vllm
        if (
            converted is None
            or converted == schema_keys.default(target)
            or (inside_mapping and _unset(converted))
        ):
            why = "" if converted is not None else "unset upstream: ours applies"
            report.entries.append(Entry(key, "default", target, value, why))
            continue
        _set(ours, target, converted)
        report.entries.append(Entry(key, "mapped", target, converted))
    return ours, report
