"""Synthetic verifiable task: small-number addition and subtraction.

Prompts look like `23+9=` and the answer is the integer (`32`); the reward
checks it exactly. Train and validation sets are drawn with different seeds;
with single-digit operands they share problems, so validation accuracy says how
reliably the policy solves the task, not how it generalises to unseen ones.
"""

from __future__ import annotations

import random

DATA_SOURCE = "arithmetic"


def arithmetic_rows(count: int, seed: int, max_operand: int = 9) -> list[dict[str, str]]:
    """`count` rows {prompt, answer, data_source}; deterministic for a seed."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        op = rng.choice("+-")
        if op == "-" and b > a:
            a, b = b, a  # keep answers non-negative
        answer = a + b if op == "+" else a - b
        rows.append({"prompt": f"{a}{op}{b}=", "answer": str(answer), "data_source": DATA_SOURCE})
    return rows
