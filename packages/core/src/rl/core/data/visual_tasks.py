"""Image rows in the layout verl's geometry3k preprocessing writes, built in code.

verl's `examples/data_preprocess/geo3k.py` writes one parquet row per problem:
`data_source: hiyouga/geometry3k`, `prompt` (one user message: the problem, whose text
holds an `<image>` placeholder where the figure goes, then an instruction to think in
`<think>` tags and box the answer), `images` (the figure; in parquet a
`{"bytes", "path"}` struct, as `datasets` writes images), `ability`, `reward_model`
(`{"style": "rule", "ground_truth": ...}`) and `extra_info`. `geo3k_row` writes that layout.

`square_rows` is a visual task of the same layout whose answer only the image holds:
a small picture of 1 to `most` coloured squares on white, and the question how many
there are (the same text for every row). A text-only policy can only guess.
"""

from __future__ import annotations

import io
import random
from typing import Any

GEO3K_SOURCE = "hiyouga/geometry3k"
# the instruction verl's geo3k preprocessing appends (a fact of the data format: the
# scorer's format reward looks for what it asks)
GEO3K_INSTRUCTION = (
    "You FIRST think about the reasoning process as an internal monologue and then provide "
    "the final answer. The reasoning process MUST BE enclosed within <think> </think> tags. "
    "The final answer MUST BE put in \\boxed{}."
)
SQUARES_SOURCE = "rl/squares"
SQUARES_QUESTION = "<image>How many squares are in the picture? Answer with one digit."
_COLOURS = ((220, 40, 40), (40, 160, 60), (40, 80, 220), (230, 160, 20))


def png_cell(image: Any) -> dict[str, Any]:
    """A PIL image as the `{"bytes", "path"}` struct `datasets` writes to parquet."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def geo3k_row(problem: str, answer: str, image: Any, split: str, index: int) -> dict[str, Any]:
    """One row as verl's geo3k preprocessing writes it (`problem` holds its `<image>`)."""
    return {
        "data_source": GEO3K_SOURCE,
        "prompt": [{"role": "user", "content": f"{problem} {GEO3K_INSTRUCTION}"}],
        "images": [png_cell(image)],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"split": split, "index": index, "answer": answer, "question": problem},
    }


def squares_image(count: int, rng: random.Random, size: int = 56) -> Any:
    """`count` non-overlapping coloured squares (side size/4) on a white `size`² image."""
    from PIL import Image, ImageDraw

    side = size // 4
    cells = [(x, y) for x in range(4) for y in range(4)]
    image = Image.new("RGB", (size, size), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for x, y in rng.sample(cells, count):
        left, top = x * side + 1, y * side + 1
        draw.rectangle([left, top, left + side - 3, top + side - 3], fill=rng.choice(_COLOURS))
    return image


def square_rows(count: int, split: str, seed: int = 0, most: int = 4) -> list[dict[str, Any]]:
    """`count` rows of the square-counting task in verl's image layout; the ground truth is
    the number of squares, scored by exact match of the response's first digit."""
    rng = random.Random(f"squares-{seed}-{split}")
    rows = []
    for index in range(count):
        squares = rng.randint(1, most)
        rows.append(
            {
                "data_source": SQUARES_SOURCE,
                "prompt": [{"role": "user", "content": SQUARES_QUESTION}],
                "images": [png_cell(squares_image(squares, rng))],
                "ability": "vision",
                "reward_model": {"style": "rule", "ground_truth": str(squares)},
                "extra_info": {"split": split, "index": index},
            }
        )
    return rows


def geometry_rows(count: int, split: str, seed: int = 0) -> list[dict[str, Any]]:
    """`count` geo3k-layout rows: a figure of a right triangle with its legs written on
    it, and the question of its area (the figure holds the numbers)."""
    from PIL import Image, ImageDraw

    rng = random.Random(f"geometry-{seed}-{split}")
    rows = []
    for index in range(count):
        base, height = rng.randint(2, 9), rng.randint(2, 9)
        image = Image.new("RGB", (84, 56), (255, 255, 255))
        draw = ImageDraw.Draw(image)
        draw.polygon([(8, 48), (8 + 7 * base, 48), (8, 48 - 4 * height)], outline=(0, 0, 0))
        draw.text((10, 48 - 2 * height), str(height), fill=(0, 0, 0))
        draw.text((8 + 3 * base, 48 - 10), str(base), fill=(0, 0, 0))
        problem = "<image>Find the area of the right triangle in the figure."
        area = base * height / 2
        answer = str(int(area)) if area == int(area) else str(area)
        rows.append(geo3k_row(problem, answer, image, split, index))
    return rows
