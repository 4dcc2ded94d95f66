"""Parameter counts from config.json against the model transformers builds from it."""

from __future__ import annotations

import json

import pytest
import torch

from rl.core.config import ConfigError, load_config
from rl.core.models.shapes import model_shape, shape_config
from rl.core.plan import model_dims, parameter_counts
from rl.core.plan.model_dims import dims_from_hf


def _built(hf: dict, head: str = "causal") -> int:
    """Parameters of the model transformers builds from `hf` (on the meta device: no
    memory), counting a tied head once."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification

    config = AutoConfig.for_model(**hf)
    with torch.device("meta"):
        if head == "value":
            config.num_labels = 1
            model = AutoModelForTokenClassification.from_config(config)
        else:
            model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied one once


@pytest.mark.parametrize("shape", ["qwen2.5-0.5b", "qwen3-0.6b", "llama-3.2-1b"])
@pytest.mark.parametrize("tied", [True, False])
def test_counts_match_the_built_model(shape, tied):
    hf = shape_config(model_shape(shape), num_layers=2)
    hf["tie_word_embeddings"] = tied
    counts = parameter_counts(dims_from_hf(hf))
    assert counts.total == _built(hf)


@pytest.mark.parametrize("shape", ["qwen2.5-0.5b", "llama-3.2-1b"])
def test_critic_count_matches_the_value_model(shape):
    hf = shape_config(model_shape(shape), num_layers=1)
    assert parameter_counts(dims_from_hf(hf)).critic_total == _built(hf, head="value")


def test_released_qwen2_5_0_5b_has_494_million_parameters():
    """Qwen2.5-0.5B's model card: 0.49B parameters (0.36B without the embedding)."""
    counts = parameter_counts(
        dims_from_hf(shape_config(model_shape("qwen2.5-0.5b"), num_layers=24))
    )
    assert counts.total == 494_032_768
    assert counts.total - counts.embedding == pytest.approx(0.36e9, rel=0.01)


def test_builtin_tiny_model_count_matches_the_loaded_model():
    from rl.core.models.loading import load_causal_lm, load_tokenizer

    config = load_config(None, [])
    model = load_causal_lm(config.model, load_tokenizer(config.model))
    assert parameter_counts(model_dims(config)).total == sum(p.numel() for p in model.parameters())


def test_model_folder_is_read_from_config_json_only(tmp_path):
    hf = shape_config(model_shape("qwen2.5-0.5b"), num_layers=3)
    (tmp_path / "config.json").write_text(json.dumps(hf))
    dims = model_dims(load_config(None, [f"model.path={tmp_path}"]))
    assert (dims.num_layers, dims.vocab_size, dims.num_key_value_heads) == (3, 151936, 2)
    assert dims.tied_embeddings and dims.qkv_bias


def test_a_folder_without_config_json_is_refused_naming_model_path(tmp_path):
    with pytest.raises(ConfigError, match="model.path"):
        model_dims(load_config(None, [f"model.path={tmp_path}"]))


def test_a_config_json_without_a_decoders_shapes_is_refused_naming_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ConfigError, match=r"config.json does not give a decoder's shapes"):
        model_dims(load_config(None, [f"model.path={tmp_path}"]))
