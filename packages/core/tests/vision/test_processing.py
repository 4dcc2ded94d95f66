"""Rows with images become the token ids and image inputs that verl gets from the model's
processor (transformers' Qwen2.5-VL processor is the oracle), at the positions the model
computes (its own `get_rope_index`), or are refused naming file and row."""

from __future__ import annotations

import random

import pytest
import torch

from rl.core.batch import select
from rl.core.data.dataset import PromptDataset
from rl.core.data.verl_layout import write_parquet
from rl.core.data.visual_tasks import geometry_rows, png_cell, square_rows, squares_image
from rl.core.errors import DataError
from rl.core.vision.inputs import ImageInputs, image_batch, images_of_rows
from rl.core.vision.rope import mrope_positions, row_grids

pytest.importorskip("PIL")


def _processor_oracle(folder, tokenizer, monkeypatch):
    """transformers' Qwen2_5_VLProcessor with the folder's image processor. Its class check
    wants a video processor, which needs torchvision (no CPU build on PyPI for this torch):
    the check is skipped here, test-only; images go through its real code."""
    from transformers import Qwen2_5_VLProcessor
    from transformers.processing_utils import ProcessorMixin

    from rl.core.vision.processing import VisionProcessor

    monkeypatch.setattr(ProcessorMixin, "check_argument_for_proper_class", lambda *a: None)
    image_processor = VisionProcessor.from_folder(str(folder), tokenizer).image_processor
    return Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=None,
        chat_template=tokenizer.chat_template,
    )


def _verl_messages(messages):
    """verl's RLHFDataset._build_messages: text split at <image> into content parts."""
    import re

    out = []
    for message in messages:
        parts = []
        for segment in [s for s in re.split("(<image>|<video>)", message["content"]) if s]:
            parts.append(
                {"type": "image"} if segment == "<image>" else {"type": "text", "text": segment}
            )
        out.append({**message, "content": parts})
    return out


def _rows():
    rng = random.Random(0)
    two = {
        "data_source": "rl/squares",
        "prompt": [
            {"role": "system", "content": "Count carefully."},
            {"role": "user", "content": "Left: <image> right: <image> Which has more?"},
        ],
        "images": [png_cell(squares_image(2, rng, 84)), png_cell(squares_image(3, rng))],
        "reward_model": {"ground_truth": "right"},
    }
    return [*geometry_rows(2, "train"), *square_rows(2, "train"), two]


def test_ids_and_images_equal_the_processors_as_verl_applies_it(
    vl_model_folder, vl_tokenizer, vision, monkeypatch
):
    from rl.core.vision.images import open_image

    processor = _processor_oracle(vl_model_folder(), vl_tokenizer, monkeypatch)
    rows = _rows()
    dataset = PromptDataset(rows, vl_tokenizer, max_prompt_length=512, vision=vision)
    for row, item in zip(rows, dataset.items, strict=True):
        messages = _verl_messages(row["prompt"])
        raw = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        images = [open_image(cell, "test") for cell in row["images"]]
        expected = processor(text=[raw], images=images, return_tensors="pt")
        assert item.prompt_ids == expected["input_ids"][0].tolist()
        assert torch.equal(item.images.image_grid_thw, expected["image_grid_thw"])
        assert torch.equal(item.images.pixel_values, expected["pixel_values"].float())
        assert item.prompt_text == raw  # the text as rendered, before widening
        assert "images" not in item.extra


def test_positions_equal_the_models_own_for_padded_rows(vl_model_folder, vl_tokenizer, vision):
    from transformers import AutoModelForImageTextToText

    from rl.rollout.hf import left_pad

    model = AutoModelForImageTextToText.from_pretrained(vl_model_folder())
    text_only = {"prompt": [{"role": "user", "content": "no picture here"}], "answer": "x"}
    dataset = PromptDataset(
        [*_rows(), text_only], vl_tokenizer, max_prompt_length=512, vision=vision
    )
    ids, mask = left_pad([it.prompt_ids for it in dataset.items], vl_tokenizer.pad_token_id)
    # a right-padded response after each prompt, as the trainer's rows have it
    ids = torch.cat([ids, torch.full((len(ids), 3), 7)], 1)
    mask = torch.cat([mask, torch.tensor([[1, 1, 0]] * len(ids))], 1)
    empty = torch.zeros(0, 3, dtype=torch.long)
    grids = [empty if it.images is None else it.images.image_grid_thw for it in dataset.items]
    ours = mrope_positions(ids, mask, grids, model.config.image_token_id, 2)
    kinds = (ids == model.config.image_token_id).int()
    oracle, _ = model.model.get_rope_index(
        ids, kinds, image_grid_thw=torch.cat(grids), attention_mask=mask
    )
    assert torch.equal(ours, oracle)
    # an image's run shares one time position; the text after it jumps by the grid's side
    assert len({*ours[0, 0][kinds[0].bool()].tolist()}) == 1


def test_a_micro_batch_takes_its_own_rows_images():
    rng = torch.Generator().manual_seed(0)
    items = [
        ImageInputs(torch.randn(4, 6, generator=rng), torch.tensor([[1, 2, 2]])),
        None,
        ImageInputs(torch.randn(10, 6, generator=rng), torch.tensor([[1, 2, 3], [1, 2, 2]])),
    ]
    batch = image_batch(items)
    assert batch["pixel_values"].shape == (3, 10, 6) and batch["image_grid_thw"].shape == (3, 2, 3)
    picked = images_of_rows(select(batch, [2, 0]))
    assert torch.equal(
        picked.pixel_values, torch.cat([items[2].pixel_values, items[0].pixel_values])
    )
    assert picked.image_grid_thw.tolist() == [[1, 2, 3], [1, 2, 2], [1, 2, 2]]
    assert images_of_rows(select(batch, [1])) is None
    assert [g.tolist() for g in row_grids(batch["image_grid_thw"])] == [
        [[1, 2, 2]],
        [],
        [[1, 2, 3], [1, 2, 2]],
    ]


def _sourced(tmp_path, rows):
    path = write_parquet(rows, tmp_path / "train.parquet")
    from rl.core.data import read_rows

    return path, read_rows([str(path)])


def test_rows_whose_placeholders_and_images_disagree_are_refused_by_file_and_row(
    tmp_path, vl_tokenizer, vision
):
    rows = square_rows(3, "train")
    rows[2]["images"] = rows[2]["images"] * 2
    path, sourced = _sourced(tmp_path, rows)
    with pytest.raises(
        DataError,
        match=rf"{path}, row 2: the prompt has 1 <image> placeholder\(s\) and column 'images' 2 image\(s\)",
    ):
        PromptDataset(sourced, vl_tokenizer, max_prompt_length=512, vision=vision)


def test_images_for_a_text_model_videos_and_overlong_image_prompts_are_refused(
    tmp_path, vl_tokenizer, vision
):
    _, sourced = _sourced(tmp_path, square_rows(1, "train"))
    with pytest.raises(
        DataError,
        match=r"row 0: the row has 1 image\(s\) in column 'images', but model.path is a text-only model",
    ):
        PromptDataset(sourced, vl_tokenizer, max_prompt_length=512)
    with pytest.raises(DataError, match="a prompt with images is not cut"):
        PromptDataset(sourced, vl_tokenizer, max_prompt_length=20, truncation="left", vision=vision)
    video = [{"prompt": [{"role": "user", "content": "<video> what happens?"}], "answer": "x"}]
    with pytest.raises(DataError, match="<video> placeholder; videos are not read yet"):
        PromptDataset(video, vl_tokenizer, max_prompt_length=512, vision=vision)
    short = {"prompt": "hi", "answer": "x"}
    kept = PromptDataset(
        [*square_rows(2, "train"), short],
        vl_tokenizer,
        max_prompt_length=20,
        filter_overlong_prompts=True,
        vision=vision,
    )
    assert (kept.num_filtered, len(kept), kept.items[0].images) == (2, 1, None)


def test_images_are_read_from_paths_beside_the_data_file(tmp_path, vl_tokenizer, vision):
    image = squares_image(2, random.Random(1))
    image.save(tmp_path / "two.png")
    rows = [{**square_rows(1, "train")[0], "images": [{"bytes": None, "path": "two.png"}]}]
    in_bytes = PromptDataset(
        square_rows(1, "train"), vl_tokenizer, max_prompt_length=512, vision=vision
    )
    _, sourced = _sourced(tmp_path, rows)
    from_path = PromptDataset(sourced, vl_tokenizer, max_prompt_length=512, vision=vision)
    assert from_path.items[0].images.image_grid_thw.tolist() == [[1, 4, 4]]
    assert in_bytes.items[0].prompt_ids == from_path.items[0].prompt_ids
    missing = [{**rows[0], "images": ["nowhere.png"]}]
    _, sourced = _sourced(tmp_path, missing)
    with pytest.raises(DataError, match=r"row 0, image 1: no image file at 'nowhere.png'"):
        PromptDataset(sourced, vl_tokenizer, max_prompt_length=512, vision=vision)


def test_pixel_bounds_resize_the_images_as_the_processor_does(vl_model_folder, vl_tokenizer):
    from PIL import Image

    from rl.core.vision.processing import VisionProcessor

    folder = str(vl_model_folder())
    image = Image.new("RGB", (560, 280), (9, 9, 9))
    default = VisionProcessor.from_folder(folder, vl_tokenizer).process([image])
    bounded = VisionProcessor.from_folder(folder, vl_tokenizer, max_pixels=28 * 28 * 8)
    small = bounded.process([image])
    assert default.image_grid_thw.tolist() == [[1, 20, 40]]  # 280 x 560 in 14-pixel patches
    frames, h, w = small.image_grid_thw[0].tolist()
    assert frames == 1 and h * w * 14 * 14 <= 28 * 28 * 8 and w == 2 * h  # bound, aspect kept
