"""The visual demo's files: a tiny Qwen2.5-VL-shaped model and the square-counting task in
verl's image layout (`rl.core.data.visual_tasks`).

`python -m rl.cli.visual_demo outputs/visual` writes `model/` (2 language layers 128
wide, one vision block 80 wide; the real Qwen2.5 tokenizer, VL chat template and image
processor), `train.parquet` (2,048 rows) and `test.parquet` (128 rows); then
`rl train examples/visual_squares.yaml` warm-starts the model by SFT and trains it by
GRPO to count the squares it is shown.
"""

from __future__ import annotations

import argparse
from pathlib import Path

TRAIN_ROWS, TEST_ROWS = 2048, 128


def prepare(folder: str | Path, seed: int = 0) -> Path:
    """Write the demo's model folder and data files under `folder` (kept when there)."""
    from rl.core.data.verl_layout import write_parquet
    from rl.core.data.visual_tasks import square_rows
    from rl.core.models.vl_shapes import build_vl_model_folder

    root = Path(folder)
    if not (root / "model" / "config.json").exists():
        build_vl_model_folder(
            "qwen2.5-vl-3b",
            root / "model",
            seed=seed,
            num_layers=2,
            vision_depth=1,
            hidden_size=128,
            intermediate_size=256,
            vision_hidden_size=80,
            vision_intermediate_size=160,
        )
    for split, count in (("train", TRAIN_ROWS), ("test", TEST_ROWS)):
        if not (root / f"{split}.parquet").exists():
            write_parquet(square_rows(count, split, seed), root / f"{split}.parquet")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", default="outputs/visual")
    print(prepare(parser.parse_args().folder))


if __name__ == "__main__":
    main()
