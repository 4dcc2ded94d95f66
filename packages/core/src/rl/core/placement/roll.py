"""ROLL's per-role `device_mapping`, read safely (ROLL itself `eval`s the string; we never do).

    actor_train:
      device_mapping: list(range(0,8))
    actor_infer:
      device_mapping: "[0, 1, 2, 3]"

Accepted values: a list of ints, or one of the strings `list(range(b))`,
`list(range(a, b))`, `list(range(a, b, s))`, `[0, 1, 2]`, `list([0, 1, 2])`.
Role keys are ROLL's: `actor_train`, `actor_infer`, `reference`, `critic`, `reward`, and
`rewards.<domain>` (one of ROLL's reward workers; only one may have devices).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from rl.core.placement.errors import PlacementError
from rl.core.placement.model import Placement
from rl.core.placement.roles import add_role, lookup_role
from rl.core.placement.validate import build_placement, check_cluster

ROLL_ROLES = {
    "actor_train": "actor",
    "actor_infer": "rollout",
    "reference": "ref",
    "critic": "critic",
    "reward": "reward",
}
ROLL_UNSUPPORTED = {
    "teacher": "distillation teachers have no role here",
    "student_infer": "distillation students have no role here",
    "sft_train": "SFT pipelines place no RL roles",
}
DEVICE_MAPPING_FORMS = (
    "a list of ints, or 'list(range(b))', 'list(range(a, b))', 'list(range(a, b, s))', "
    "'[0, 1, 2]', 'list([0, 1, 2])'"
)
_NUM = r"\s*(\d+)\s*"
_RANGE = re.compile(rf"^\s*list\(\s*range\({_NUM}(?:,{_NUM}(?:,{_NUM})?)?\)\s*\)\s*$")
_LIST = re.compile(r"^\s*(?:list\(\s*(\[[\d\s,]*\])\s*\)|(\[[\d\s,]*\]))\s*$")


def parse_device_mapping(value: Any, key: str) -> tuple[int, ...]:
    """The device indices of one ROLL `device_mapping` (see the module docstring for forms).

    `key` is the role key the value belongs to, for the error message.
    """
    if isinstance(value, str):
        value = _from_string(value, key)
    if not isinstance(value, list | tuple) or any(
        isinstance(d, bool) or not isinstance(d, int) for d in value
    ):
        raise PlacementError(
            f"{key}.device_mapping = {value!r} is not allowed: {DEVICE_MAPPING_FORMS}"
        )
    return tuple(value)


def _from_string(text: str, key: str) -> list[int]:
    if match := _RANGE.match(text):
        args = [int(g) for g in match.groups() if g is not None]
        if len(args) == 3 and args[2] == 0:
            raise PlacementError(f"{key}.device_mapping = {text!r}: a range step of 0")
        return list(range(*args))
    if match := _LIST.match(text):
        # The regex admits only digits, commas and spaces in brackets: literal_eval is safe.
        try:
            return list(ast.literal_eval(match.group(1) or match.group(2)))
        except (SyntaxError, ValueError):
            pass
    raise PlacementError(f"{key}.device_mapping = {text!r} is not allowed: {DEVICE_MAPPING_FORMS}")


def parse_roll(
    device_mappings: Mapping[str, Any],
    *,
    nnodes: int,
    num_gpus_per_node: int,
    tensor_parallel_size: int | None = None,
) -> Placement:
    """The `Placement` of ROLL roles: `device_mappings` is role key -> `device_mapping` value."""
    check_cluster(nnodes, num_gpus_per_node)
    devices: dict[str, tuple[int, ...]] = {}
    sources: dict[str, str] = {}
    for key, value in device_mappings.items():
        name = "reward" if key.startswith("rewards.") else key
        role = lookup_role(name, ROLL_ROLES, ROLL_UNSUPPORTED, "ROLL")
        add_role(devices, role, parse_device_mapping(value, key), key, sources)
    return build_placement(
        devices,
        nnodes=nnodes,
        n_gpus_per_node=num_gpus_per_node,
        tensor_parallel_size=tensor_parallel_size,
    )
