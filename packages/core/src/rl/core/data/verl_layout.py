"""Rows in the layout verl's preprocessing scripts write, built in code (no dataset download).

verl's `examples/data_preprocess/gsm8k.py` and `math_dataset.py` turn each source example
into one parquet row: `data_source` (which picks the rule-based scorer), `prompt` (chat
messages: the question plus an instruction on how to write the answer), `ability`,
`reward_model` (`{"style": "rule", "ground_truth": ...}`) and `extra_info` (`split`,
`index`, ...). DAPO's math set (`math_dapo`) has the same columns with its own instruction.
These functions write that layout from questions made here, so that tests and benchmarks
read exactly what a verl user's files hold; rl reads such files natively.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

GSM8K_SOURCE = "openai/gsm8k"
MATH_SOURCE = "DigitalLearningGmbH/MATH-lighteval"
DAPO_SOURCE = "math_dapo"

# the instruction each preprocessing script appends to the question (verl's wording, a fact
# of the data format: the scorers look for what it asks for)
GSM8K_INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
DAPO_PREFIX = (
    "Solve the following math problem step by step. The last line of your response should "
    "be of the form Answer: $Answer (without quotes) where $Answer is the answer to the "
    "problem.\n\n"
)
DAPO_SUFFIX = '\n\nRemember to put your answer on its own line after "Answer:".'


def gsm8k_row(question: str, answer: str, split: str, index: int) -> dict[str, Any]:
    """One row as verl's gsm8k preprocessing writes it; `answer` is GSM8K's solution text,
    ending in `#### <number>` (the ground truth is that number without commas)."""
    found = re.search(r"#### (\-?[0-9\.\,]+)", answer)
    if found is None:
        raise ValueError(f"a GSM8K answer ends in '#### <number>': {answer!r}")
    return {
        "data_source": GSM8K_SOURCE,
        "prompt": [{"role": "user", "content": f"{question} {GSM8K_INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": found.group(1).replace(",", "")},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
    }


def math_row(problem: str, boxed_answer: str, split: str, index: int) -> dict[str, Any]:
    """One row as verl's MATH preprocessing writes it (the ground truth is the content of
    the solution's last `\\boxed{}`)."""
    return {
        "data_source": MATH_SOURCE,
        "prompt": [{"role": "user", "content": f"{problem} {MATH_INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": boxed_answer},
        "extra_info": {"split": split, "index": index},
    }


def dapo_row(problem: str, answer: str, index: int) -> dict[str, Any]:
    """One row of DAPO's math set (`data_source: math_dapo`)."""
    return {
        "data_source": DAPO_SOURCE,
        "prompt": [{"role": "user", "content": f"{DAPO_PREFIX}{problem}{DAPO_SUFFIX}"}],
        "ability": "MATH",
        "reward_model": {"style": "rule-lighteval/MATH_v2", "ground_truth": answer},
        "extra_info": {"index": f"dapo-{index:06d}"},
    }


_NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Mark", "Albert", "Ken", "Alexis", "Tina")
_ITEMS = ("clips", "apples", "books", "marbles", "stickers", "pencils", "cookies", "stamps")


def word_problem(rng: random.Random) -> tuple[str, str]:
    """A GSM8K-style question and its solution text (`... #### <answer>`)."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    first, second, price = rng.randint(12, 480), rng.randint(2, 9), rng.randint(2, 25)
    kind = rng.randrange(3)
    if kind == 0:
        total = first + first // second
        question = (
            f"{name} sold {item} to {first} of her friends in April, and then she sold "
            f"1/{second} as many {item} in May. How many {item} did {name} sell altogether "
            "in April and May?"
        )
        steps = f"In May {name} sold {first} / {second} = <<{first}/{second}={first // second}>>"
        steps += f"{first // second} {item}.\nAltogether she sold {first} + {first // second} = "
        steps += f"<<{first}+{first // second}={total}>>{total} {item}."
    elif kind == 1:
        total = first * price
        question = (
            f"{name} buys {first} {item} at ${price} each. How many dollars does {name} spend?"
        )
        steps = f"{name} spends {first} * {price} = <<{first}*{price}={total}>>{total} dollars."
    else:
        first = max(first, second * price + rng.randint(0, 60))
        total = first - second * price
        question = (
            f"{name} has {first} {item}. {name} gives {price} {item} to each of {second} "
            f"friends. How many {item} does {name} have left?"
        )
        steps = (
            f"{name} gives away {second} * {price} = <<{second}*{price}={second * price}>>"
            f"{second * price} {item}.\n{name} has {first} - {second * price} = "
            f"<<{first}-{second * price}={total}>>{total} {item} left."
        )
    return question, f"{steps}\n#### {total:,}"


def gsm8k_rows(count: int, split: str, seed: int = 0) -> list[dict[str, Any]]:
    """`count` rows in verl's GSM8K layout, from generated word problems."""
    rng = random.Random(f"{seed}-{split}")
    return [gsm8k_row(*word_problem(rng), split, index) for index in range(count)]


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    """`rows` as one parquet file (struct columns for the nested mappings, as verl's
    `datasets.Dataset.to_parquet` writes them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
