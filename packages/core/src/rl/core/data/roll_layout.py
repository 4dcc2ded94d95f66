"""Rows in ROLL's RLVR data layout (json / jsonl), read and written.

ROLL's RLVR files hold one prompt per row: `messages` (chat messages stored as a JSON
*string*, `[{"role": "user", "content": ...}]`), `ground_truth` (the answer its reward
workers compare with), `tag` (which picks the row's domain, hence its reward worker:
`rewards.<domain>.tag_included`) and often `id`, `domain`. ROLL's encode function
(roll/pipeline/rlvr/rlvr_pipeline.py) parses a string of messages with `json.loads`
before its chat template renders them; `messages_of` does the same here, so that such a
string reaches the chat template as messages, never as raw JSON text. `roll_row` and
`write_jsonl` write the layout (tests and benchmarks read exactly what a ROLL user's files
hold).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MESSAGES_KEY = "messages"  # ROLL's data_args.messages in its example configs
ANSWER_KEY = "ground_truth"
TAG_KEY = "tag"  # ROLL's data_args.tag default


def messages_of(value: Any) -> Any:
    """A JSON string holding a list of {role, content} messages, parsed (as ROLL's
    `json.loads`); any other value unchanged (a plain-text prompt stays text)."""
    if not isinstance(value, str) or not value.lstrip().startswith("["):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if (
        isinstance(parsed, list)
        and parsed
        and all(isinstance(m, dict) and "role" in m and "content" in m for m in parsed)
    ):
        return parsed
    return value


def roll_row(
    question: str,
    ground_truth: str,
    tag: str,
    index: int,
    system: str | None = None,
) -> dict[str, Any]:
    """One row as ROLL's RLVR data holds it: messages as a JSON string."""
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": question})
    return {
        "id": str(index),
        MESSAGES_KEY: json.dumps(messages, ensure_ascii=False),
        ANSWER_KEY: ground_truth,
        TAG_KEY: tag,
    }


def write_jsonl(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path
