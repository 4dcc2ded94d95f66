"""Model folders built by `build_model_folder` load with transformers as released ones do:
the real vocabulary, the tie kept, every weight read from the file, a forward pass."""

import json

import pytest
import torch
from safetensors import safe_open

from rl.core.models.shapes import SHAPES, build_model_folder

# qwen2.5 at its real width (the vLLM test and other packages use that folder too); the
# other two narrowed, as cheap tests use them, with the real vocabulary and tokenizer.
SMALL = {"hidden_size": 256, "intermediate_size": 512}
FOLDERS = {"qwen2.5-0.5b": {}, "qwen3-0.6b": SMALL, "llama-3.2-1b": SMALL}
SIZES = {"qwen2.5-0.5b": 151665, "qwen3-0.6b": 151669, "llama-3.2-1b": 128256}
EOS = {"qwen2.5-0.5b": 151645, "qwen3-0.6b": 151645, "llama-3.2-1b": 128009}


@pytest.fixture(scope="module", params=sorted(FOLDERS))
def shape(request):
    return request.param


@pytest.fixture(scope="module")
def folder(shape, model_folder):
    return model_folder(shape, **FOLDERS[shape])


@pytest.fixture(scope="module")
def loaded(folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
    return AutoTokenizer.from_pretrained(folder), model, info


def test_folder_holds_the_released_files(folder):
    assert sorted(path.name for path in folder.iterdir()) == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    with safe_open(folder / "model.safetensors", "pt") as weights:
        names = set(weights.keys())
    assert "model.embed_tokens.weight" in names and "lm_head.weight" not in names


def test_tokenizer_and_config_agree_on_the_real_vocabulary(shape, loaded):
    tokenizer, model, _ = loaded
    assert len(tokenizer) == SIZES[shape]
    assert model.config.vocab_size == SHAPES[shape].vocab_size >= len(tokenizer)
    assert tokenizer.eos_token_id == EOS[shape]
    assert type(model).__name__ == SHAPES[shape].architecture


def test_every_weight_is_read_and_the_head_stays_tied(loaded):
    _, model, info = loaded
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight is model.model.embed_tokens.weight
    norm = model.model.norm.weight
    assert not torch.equal(norm, torch.ones_like(norm))  # drawn, not left at the default


def test_a_forward_pass_on_a_chat_prompt(shape, loaded):
    tokenizer, model, _ = loaded
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 3 + 4?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"]
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], SHAPES[shape].vocab_size)
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()


def test_generation_config_stops_at_the_end_of_turn(shape, folder):
    from transformers import GenerationConfig

    generation = GenerationConfig.from_pretrained(folder)
    assert EOS[shape] in generation.eos_token_id


def test_same_seed_same_weights_other_seed_other_weights(tmp_path):
    def q_norm(name, seed):
        folder = build_model_folder("qwen3-0.6b", tmp_path / name, num_layers=1, seed=seed, **SMALL)
        with safe_open(folder / "model.safetensors", "pt") as weights:
            return weights.get_tensor("model.layers.0.self_attn.q_norm.weight")

    first = q_norm("first", seed=1)
    assert torch.equal(q_norm("again", seed=1), first)
    assert not torch.equal(q_norm("other", seed=2), first)


def test_bfloat16_folders_store_bfloat16(tmp_path):
    folder = build_model_folder(
        "llama-3.2-1b", tmp_path / "bf16", num_layers=1, dtype="bfloat16", **SMALL
    )
    assert json.loads((folder / "config.json").read_text())["torch_dtype"] == "bfloat16"
    with safe_open(folder / "model.safetensors", "pt") as weights:
        assert weights.get_tensor("model.embed_tokens.weight").dtype == torch.bfloat16


def test_a_folder_that_is_not_empty_is_never_overwritten(tmp_path):
    (tmp_path / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="not empty"):
        build_model_folder("qwen3-0.6b", tmp_path, num_layers=1, **SMALL)
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen3-0.6b", "llama-3.2-1b"])
def test_released_widths_load_with_the_released_parameter_count(name, tmp_path):
    from transformers import AutoModelForCausalLM

    shape = SHAPES[name]
    model = AutoModelForCausalLM.from_pretrained(build_model_folder(name, tmp_path, num_layers=1))
    q_width = shape.num_attention_heads * shape.head_dim
    kv_width = shape.num_key_value_heads * shape.head_dim
    layer = (
        shape.hidden_size * (q_width + 2 * kv_width)
        + q_width * shape.hidden_size
        + 3 * shape.hidden_size * shape.intermediate_size
        + 2 * shape.hidden_size
        + (2 * shape.head_dim if name.startswith("qwen3") else 0)  # q/k norms
    )
    embedding = shape.vocab_size * shape.hidden_size
    assert sum(p.numel() for p in model.parameters()) == embedding + layer + shape.hidden_size
