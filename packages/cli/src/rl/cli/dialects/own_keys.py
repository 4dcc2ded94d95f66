"""rl's own keys beside an upstream config's on one command line: `rl train --from roll
FILE actor_train.model_args.dtype=fp32 data.prompt_key=question`. An override whose key is
not the upstream system's (not in the composed file, not a documented key, not matched by
a rule of the dialect's table) but names a key of our schema is ours: it is applied to the
converted config, after everything the conversion set. Any other override goes to the
upstream system's composition (which refuses what that system would)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from rl.cli.dialects import schema_keys
from rl.cli.dialects.mapping import Rule


def key_of(override: str) -> str:
    """The dotted key of `key=value`, `+key=value`, `++key=value` or `~key`."""
    return override.split("=", 1)[0].lstrip("+~")


def split(
    overrides: Sequence[str],
    upstream_keys: Iterable[str],
    rules: Sequence[Rule],
    documented: list[str],
) -> tuple[list[str], list[str]]:
    """(the upstream system's overrides, ours), each in the order given."""
    known = set(upstream_keys)
    sections = {k.rsplit(".", i)[0] for k in known for i in range(1, k.count(".") + 1)}
    upstream: list[str] = []
    ours: list[str] = []
    for override in overrides:
        key = key_of(override)
        theirs = (
            key in known
            or key in sections
            or any(fnmatchcase(key, d) for d in documented)
            or any(rule.match(key) is not None for rule in rules)
        )
        plain = not override.startswith(("+", "~")) and "=" in override
        if not theirs and plain and schema_keys.settable(key):
            ours.append(override)
        else:
            upstream.append(override)
    return upstream, ours
