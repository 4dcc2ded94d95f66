"""Vision-language folders built in code load as released ones do: transformers reads the
flat config into its language and vision parts, the tokenizer's vision tokens sit at the
config's ids, the chat template writes an image part as the vision run, and the image
processor cuts images into the configured patches."""

from __future__ import annotations

import json

import pytest
import torch

from rl.core.models.vl_shapes import VL_SHAPES, build_vl_model_folder, vl_config, vl_shape

pytest.importorskip("PIL")


@pytest.mark.parametrize("shape", sorted(VL_SHAPES))
def test_a_folder_loads_with_its_parts_where_the_release_has_them(vl_model_folder, shape):
    from PIL import Image
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoTokenizer

    from rl.core.vision.processing import VisionProcessor

    folder = vl_model_folder(shape)
    config = AutoConfig.from_pretrained(folder)
    spec = vl_shape(shape)
    assert config.model_type == spec.model_type
    text = config.text_config
    assert (text.hidden_size, text.num_hidden_layers, text.vocab_size) == (256, 2, 151936)
    assert text.hidden_size // text.num_attention_heads == 128  # the release's head dim
    assert config.vision_config.depth == 2
    model = AutoModelForImageTextToText.from_pretrained(folder)
    assert type(model).__name__ == spec.architecture
    # tied head: the output layer is the embedding, as in the 3B / 2B releases
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for key in ("image_token_id", "vision_start_token_id", "vision_end_token_id"):
        token = tokenizer.convert_ids_to_tokens(getattr(config, key))
        assert token == {"image_token_id": "<|image_pad|>"}.get(
            key, "<|vision_start|>" if "start" in key else "<|vision_end|>"
        )
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]}]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>" in rendered
    assert rendered.endswith("<|im_start|>assistant\n")
    processor = VisionProcessor.from_folder(str(folder), tokenizer)
    inputs = processor.process([Image.new("RGB", (84, 56), (10, 200, 30))])
    # 56 x 84 pixels in 14-pixel patches, two frames of one image folded into each patch
    assert inputs.image_grid_thw.tolist() == [[1, 4, 6]]
    assert inputs.pixel_values.shape == (24, 3 * 2 * 14 * 14)
    assert inputs.placeholder_tokens(processor.merge_size) == [6]
    saved = json.loads((folder / "preprocessor_config.json").read_text())
    assert saved["processor_class"] == spec.processor_class


def test_the_weights_are_seeded_and_every_tensor_is_drawn(tmp_path):
    from safetensors.torch import load_file

    small = {"hidden_size": 128, "vision_hidden_size": 80, "vision_intermediate_size": 160}
    first = build_vl_model_folder("qwen2.5-vl-3b", tmp_path / "a", seed=3, **small)
    second = build_vl_model_folder("qwen2.5-vl-3b", tmp_path / "b", seed=3, **small)
    a, b = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any("visual" in k and "patch_embed" in k for k in a)
    assert all(float(t.float().abs().sum()) > 0 for t in a.values())


def test_widths_that_break_the_heads_are_refused():
    with pytest.raises(ValueError, match="hidden_size must be a positive multiple of 128"):
        vl_config(vl_shape("qwen2.5-vl-3b"), hidden_size=200)
    with pytest.raises(ValueError, match="vision_hidden_size must be a positive multiple of 80"):
        vl_config(vl_shape("qwen2.5-vl-3b"), vision_hidden_size=100)
    with pytest.raises(ValueError, match="multiple of the vision width 160"):
        vl_config(vl_shape("qwen2-vl-2b"), vision_hidden_size=160, vision_intermediate_size=200)
    with pytest.raises(ValueError, match="unknown vision-language shape"):
        vl_shape("llava")
