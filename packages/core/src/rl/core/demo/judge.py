"""The judge demo's data: a tiny judge taught to grade answers of the arithmetic task
(`builtin:judge_grades`, for `rl sft`), and the task's problems tagged for the judge's
reward domain (`builtin:arithmetic_judged`, for `rl train`).

A grade row asks the judge, in the demo's judge prompt (`TEMPLATE`, what
`reward.domains.<d>.judge.prompt` names in examples/judge_rl.yaml), whether a response
matches the reference answer, and its answer is `yes` or `no`: 30 % of the responses are
the right answer, the others what a policy may say wrong (`_wrong`). The judge is then asked exactly what it was taught: the scorer renders
the same template through the same chat template (`rl.core.rewards.judge`).
"""

from __future__ import annotations

import random
from typing import Any

from rl.core.demo.arithmetic import arithmetic_rows
from rl.core.demo.characters import TINY_CHARS

# the response and the reference side by side, between brackets: a model this small learns
# to compare neighbours quickly, tokens further apart slowly, and to tell an empty response
# ("7?" against "77?") hardly at all without the bracket before it
TEMPLATE = "({response}{reference})"
RIGHT_SHARE = 0.3  # of the grade rows, right answers
DOMAIN = "judged"  # the judged rows' data_source: the tag of the judge's reward domain
VERDICT = "judge_verdict"  # the grade rows' data_source: the verdict must be the label
# every character the policy can say, nothing at all, and the answer with a character
# more: a judge never shown letters approved "s" for any answer, one never shown an empty
# answer approved it, one shown few answers with a character more approved "22" for 2, and
# within 30 steps the policy learned to say just that (reward hacking the judge's blind
# spot)
_NOISE = TINY_CHARS


def _wrong(rng: random.Random, answer: str, max_operand: int) -> str:
    """A wrong answer: another number, nothing, the answer with a character more (before or
    after it), or a few characters."""
    draw = rng.random()
    if draw < 0.4:
        return str(rng.choice([n for n in range(2 * max_operand + 1) if str(n) != answer]))
    if draw < 0.5:
        return ""
    if draw < 0.75:  # the answer doubled a third of the time: "22" is no 2
        extra = answer if rng.random() < 1 / 3 else rng.choice(_NOISE)
        return extra + answer if rng.random() < 0.5 else answer + extra
    while True:
        text = "".join(rng.choice(_NOISE) for _ in range(rng.randint(1, 2)))
        if text != answer:
            return text


def judge_grade_rows(count: int, seed: int, max_operand: int) -> list[dict[str, Any]]:
    """`count` rows {prompt: the judge's question, answer: yes | no}."""
    rng = random.Random(seed + 7919)
    rows = []
    for problem in arithmetic_rows(count, seed, max_operand):
        right = rng.random() < RIGHT_SHARE
        answer = problem["answer"]
        response = answer if right else _wrong(rng, answer, max_operand)
        # as the llm_judge scorer fills it (rl.core.rewards.judge_prompts.judge_message)
        prompt = TEMPLATE.format(question=problem["prompt"], response=response, reference=answer)
        rows.append({"prompt": prompt, "answer": "yes" if right else "no", "data_source": VERDICT})
    return rows


def judged_rows(count: int, seed: int, max_operand: int) -> list[dict[str, Any]]:
    """The arithmetic problems, tagged for the judge's domain."""
    return [{**row, "data_source": DOMAIN} for row in arithmetic_rows(count, seed, max_operand)]
