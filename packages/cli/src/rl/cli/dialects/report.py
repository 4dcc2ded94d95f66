"""What an import did with each upstream key: mapped to ours, left to our default, or not
supported (with the reason), so that no key is dropped without a word."""

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


@dataclass
class Report:
    dialect: str
    source: str  # the file (and overrides) converted
    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. which dialect was detected

    def count(self, status: Status) -> int:
        return sum(entry.status == status for entry in self.entries)

    def render(self, verbose: bool = False) -> str:
        """The summary and every unsupported key with its reason (all keys if `verbose`)."""
        counts = Counter(entry.status for entry in self.entries)
        lines = [*self.notes]
        lines.append(
            f"{self.dialect} -> rl: {len(self.entries)} keys from {self.source}: "
            + ", ".join(f"{counts[s]} {s}" for s in ("mapped", "default", "unsupported", "ignored"))
        )
        for entry in self.entries:
            if entry.status == "unsupported" or verbose:
                arrow = f" -> {entry.target}" if entry.target else ""
                why = f" ({entry.reason})" if entry.reason else ""
                lines.append(f"  {entry.status:<11} {entry.source}{arrow} = {entry.value!r}{why}")
        if not verbose:
            lines += self._ignored_by_reason()
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
