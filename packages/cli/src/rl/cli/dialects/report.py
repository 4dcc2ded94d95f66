"""What an import did with each upstream key, so that no key is dropped without a word:
mapped to ours, left to our default (unset upstream, or equal to ours), ignored (what rl
handles itself: infrastructure, logging, the process layout; with the reason) or
unsupported (it would change what is trained and rl cannot honour it: a run refuses it
unless the user allows it by name, `refusal`)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["mapped", "default", "unsupported", "ignored"]


@dataclass(frozen=True)
class Entry:
    source: str  # the upstream key, dotted
    status: Status
    target: str | None = None  # our key, when mapped or defaulted
    value: Any = None
    reason: str = ""


def entry_line(entry: Entry) -> str:
    """`key -> ours = value (reason)`."""
    arrow = f" -> {entry.target}" if entry.target else ""
    why = f" ({entry.reason})" if entry.reason else ""
    return f"{entry.source}{arrow} = {entry.value!r}{why}"


UNREAD = "not read while "  # how `switches.apply` starts a switched-off section's note


def _fold_unread(notes: list[str]) -> list[str]:
    """The notes, with those of switched-off sections in one line."""
    unread = [n for n in notes if n.startswith(UNREAD)]
    if len(unread) < 2:
        return list(notes)
    sections = [n.split(": ", 1)[1].split(" (")[0] for n in unread if ": " in n]
    shown = ", ".join(sections[:4]) + (
        f" and {len(sections) - 4} more" if len(sections) > 4 else ""
    )
    folded = f"{len(unread)} sections not read while their switch is off, as upstream: {shown}"
    return [n for n in notes if not n.startswith(UNREAD)] + [folded]


@dataclass
class Report:
    dialect: str
    source: str  # the file (and overrides) converted
    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. which dialect was detected
    dropped: list[Entry] = field(default_factory=list)  # refused keys the user allowed

    def count(self, status: Status) -> int:
        return sum(entry.status == status for entry in self.entries)

    def refused(self) -> list[Entry]:
        """The keys that change what is trained and that rl cannot honour (status
        "unsupported"): a run refuses them unless the user allows them by name."""
        return [entry for entry in self.entries if entry.status == "unsupported"]

    def render(self, full: bool = False, refusing: bool = False) -> str:
        """The report ranked by consequence, one screen unless `full`: what changes
        training (each key, its value and why), then what rl handles itself (one line per reason), then what mapped (each key
        when `full`, else their count); `refusing` labels the first REFUSED. `full` lists
        every key, defaults included."""
        counts = Counter(entry.status for entry in self.entries)
        lines = [*self.notes] if full else _fold_unread(self.notes)
        lines.append(
            f"{self.dialect} -> rl: {len(self.entries)} keys from {self.source}: "
            + ", ".join(f"{counts[s]} {s}" for s in ("mapped", "default", "unsupported", "ignored"))
        )
        if self.dropped:
            lines.append(f"  run WITHOUT {len(self.dropped)} setting(s) (--allow-unsupported):")
            lines += [f"  dropped     {entry_line(entry)}" for entry in self.dropped]
        label = "REFUSED    " if refusing else "unsupported"
        lines += [f"  {label} {entry_line(e)}" for e in self.refused()]
        if full:
            for status in ("ignored", "mapped", "default"):
                lines += [
                    f"  {status:<11} {entry_line(e)}" for e in self.entries if e.status == status
                ]
            return "\n".join(lines)
        lines += self._ignored_by_reason()
        if counts["mapped"]:
            lines.append(
                f"  mapped      {counts['mapped']} key(s) to rl's (--report full lists them)"
            )
        return "\n".join(lines)

    def _ignored_by_reason(self) -> list[str]:
        """One line per reason for the keys rl handles itself (status "ignored")."""
        groups: dict[str, list[str]] = {}
        for entry in self.entries:
            if entry.status == "ignored":
                groups.setdefault(entry.reason, []).append(entry.source)
        lines = []
        for reason, keys in groups.items():
            shown = ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
            lines.append(f"  ignored     {len(keys)} key(s), {reason}: {shown}")
        return lines

    def name_upstream(self, message: str) -> str:
        """`message` with the upstream key written after each of our keys it names that an
        upstream key was mapped to: `rollout.tensor_parallel_size [verl:
        actor_rollout_ref.rollout.tensor_model_parallel_size]`, so that a refusal names
        the key the user wrote. A key met first in an override (`key=value`, as a refusal
        proposes them) gets it after the whole override, which stays as typed."""
        sources: dict[str, list[str]] = {}
        for entry in self.entries:
            if entry.status in ("mapped", "default") and entry.target:
                for target in entry.target.split(", "):
                    if entry.source != target:
                        sources.setdefault(target, []).append(entry.source)
        for target in sorted(sources, key=len, reverse=True):
            pattern = re.compile(rf"(?<![\w.]){re.escape(target)}(?![\w])")
            found = pattern.search(message)
            if found is None or message[found.end() :].startswith(" ["):
                continue
            end = _override_end(message, found.start(), found.end())
            if message[end:].startswith(" ["):
                continue
            named = f" [{self.dialect}: {', '.join(sources[target])}]"
            message = message[:end] + named + message[end:]
        return message


def _override_end(message: str, start: int, end: int) -> int:
    """Where the override `key=value` whose key spans start..end ends (a quoted one at its
    closing quote); `end` itself when the key is not followed by `=`."""
    if not message[end:].startswith("="):
        return end
    if start and message[start - 1] in "'\"":
        close = message.find(message[start - 1], end)
        return len(message) if close < 0 else close + 1
    space = re.search(r"\s", message[end:])
    return len(message) if space is None else end + space.start()
