"""Synthetic agentic task: three-operand arithmetic with a calculator tool.

Prompts look like `7*8-5=` and the answer is the integer (`51`). A model this small cannot
multiply and add reliably in one go; it can copy the expression into a tool call,
`calculator(7*8-5)`, read the result the chat template writes back (`#51#`) and copy
that. Each row carries a `demonstration` for the SFT warm-start (the conversation after
the prompt; SFT learns the assistant's turns only): half of them call the tool, half
answer directly, so the warm-started policy does both and RL has to find out that the
tool pays. Train and validation sets are drawn with different seeds.
"""

from __future__ import annotations

import random
from typing import Any

from rl.core.agent.tools import evaluate

DATA_SOURCE = "calculator"
TOOL = "calculator"


def calculator_rows(
    count: int, seed: int, max_operand: int = 9, tool_share: float = 0.5
) -> list[dict[str, Any]]:
    """`count` rows {prompt, answer, data_source, demonstration}; deterministic for a seed."""
    rng = random.Random(seed)
    low = min(2, max_operand)
    rows = []
    for _ in range(count):
        a, b, c = (rng.randint(low, max_operand) for _ in range(3))
        expression = f"{a}{rng.choice('+-*')}{b}{rng.choice('+-*')}{c}"
        answer = str(evaluate(expression))
        direct = [{"role": "assistant", "content": answer}]
        with_tool = [
            {"role": "assistant", "content": f"{TOOL}({expression})"},
            {"role": "tool", "content": answer},
            {"role": "assistant", "content": answer},
        ]
        rows.append(
            {
                "prompt": f"{expression}=",
                "answer": answer,
                "data_source": DATA_SOURCE,
                "demonstration": with_tool if rng.random() < tool_share else direct,
            }
        )
    return rows
