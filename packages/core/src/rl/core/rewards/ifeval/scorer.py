"""ROLL's ifeval rule (its GeneralRuleRewardWorker): one verifiable instruction per row,
named with its parameters by the row's ground truth, checked on the response's answer.

- the row's `tag` must be "ifeval" (ROLL checks no other tag);
- its ground truth is a JSON object (or a mapping): `func_name`, the instruction's id (see
  `registry.INSTRUCTIONS`), and the instruction's parameters under fixed keys (`N`,
  `quantifier`, `end_phrase`, `keyword_list`, `word`, `forbidden_words`, `letter`, `i`,
  `first_word`, `postscript_marker`, `options`, `section_splitter`, `original_prompt`,
  `language`), the keys an instruction does not use being null or absent;
- the answer is what follows the response's last `</think>` (all of it without one);
- `acc` is 1.0 when the instruction is followed, else 0.0; a check that fails on the
  response counts as not followed, as in ROLL; `score` adds a repetition penalty (-0.5
  times the share of repeated word 3-grams of the whole response, its thinking included).

A row that cannot be scored raises ValueError: no readable ground truth, an unknown or
missing `func_name`, or a parameter its instruction reads that is absent or null (ROLL
scores those 0, or, for an unknown instruction, fails on the batch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rl.core.imports import is_installed
from rl.core.rewards.ifeval.registry import INSTRUCTIONS
from rl.core.rewards.roll_text import answer_after_think, drop_special_tokens, repetition_penalty

TAG = "ifeval"
REPETITION_MAX_PENALTY = -0.5


def read_constraint(ground_truth: Any) -> Mapping[str, Any]:
    """The row's instruction: its ground truth as a mapping (JSON text is decoded)."""
    if isinstance(ground_truth, str):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError as error:
            raise ValueError(f"ifeval: the ground truth is not JSON ({error})") from None
    if not isinstance(ground_truth, Mapping):
        raise ValueError(
            "ifeval: the ground truth must be a JSON object with 'func_name' and the "
            f"instruction's parameters, got {type(ground_truth).__name__}"
        )
    return ground_truth


def instruction_followed(answer: str, constraint: Mapping[str, Any]) -> bool:
    """Whether `answer` follows the instruction `constraint` names (ValueError for a row
    that cannot be scored: see the module's docstring)."""
    name = constraint.get("func_name")
    if name not in INSTRUCTIONS:
        raise ValueError(
            f"ifeval: func_name {name!r} is not an instruction ROLL knows; "
            f"known: {sorted(INSTRUCTIONS)}"
        )
    instruction = INSTRUCTIONS[name]
    missing = [key for key in instruction.keys if constraint.get(key) is None]
    if missing:
        raise ValueError(f"ifeval: instruction {name} needs {missing} in the ground truth")
    if instruction.library is not None and not is_installed(instruction.library):
        raise ValueError(
            f"ifeval: instruction {name} needs the {instruction.library} package: "
            f"pip install {instruction.library}"
        )
    try:
        return bool(instruction.check(answer, *(constraint[key] for key in instruction.keys)))
    except Exception:  # ROLL counts a check that fails on the response as not followed
        return False


def ifeval(
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any],
    *,
    reward_type: str | None = None,
) -> dict[str, float]:
    """ROLL's ifeval reward of one response (see the module's docstring). `reward_type` is
    taken, as ROLL's configs set it, and, as in ROLL, changes nothing."""
    tag = extra_info.get("tag")
    if tag != TAG:
        raise ValueError(
            f"ifeval: the row's tag is {tag!r}; ROLL's ifeval rule scores only rows tagged {TAG!r}"
        )
    constraint = read_constraint(ground_truth)
    response = drop_special_tokens(solution_str)
    followed = float(instruction_followed(answer_after_think(response), constraint))
    penalty = repetition_penalty(response, REPETITION_MAX_PENALTY)
    return {"score": followed + penalty, "acc": followed, "repetition_penalty": penalty}
