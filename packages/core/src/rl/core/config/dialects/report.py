"""What an import did with each upstream key: mapped to ours, left to our default, or not
supported (with the reason), so that no key is dropped without a word."""

from __future__ import annotations

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
        return "\n".join(lines)
