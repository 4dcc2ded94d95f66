"""Tied word embeddings in checkpoint files and `rl merge`: the shared tensor is written
once (as `save_pretrained` writes it) and comes back tied (tiny tied Qwen2 / Qwen3 / Llama)."""

import json

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file

from rl.core.checkpoint_io import load_weights, save_weights
from rl.core.config import load_config
from rl.core.config.loader import dump_config
from rl.core.models import build_char_tokenizer, load_causal_lm, load_tokenizer
from rl.core.sharded_io import save_sharded
from rl.core.trainer.checkpoint import checkpoint_dir, save_checkpoint
from rl.core.trainer.merge import merge_checkpoint
from rl.core.weight_sync.ties import tied_aliases, without_aliases

EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"
LLAMA3_ROPE = dict(
    rope_type="llama3",
    factor=32.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=64,
)
FAMILIES = {"qwen2": {}, "qwen3": {}, "llama": dict(rope_scaling=LLAMA3_ROPE)}


def tied_model(family, vocab=96, seed=0, **extra):
    config = transformers.AutoConfig.for_model(
        family,
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        **FAMILIES[family],
        **extra,
    )
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_save_weights_writes_a_tied_tensor_once_and_loads_it_tied(tmp_path, family):
    model = tied_model(family)
    state = model.state_dict()
    path = tmp_path / "weights.safetensors"
    save_weights(state, path)
    assert set(load_file(path)) == set(state) - {HEAD}
    with safe_open(str(path), framework="pt") as reader:
        assert json.loads(reader.metadata()["rl.tied"]) == {HEAD: EMBED}
    loaded = load_weights(path)
    assert set(loaded) == set(state) and loaded[HEAD] is loaded[EMBED]
    for name, tensor in state.items():
        assert torch.equal(loaded[name], tensor), name
    fresh = tied_model(family, seed=1)
    fresh.load_state_dict(loaded)
    assert fresh.lm_head.weight is fresh.model.embed_tokens.weight


def test_views_of_one_buffer_are_still_written_as_copies(tmp_path):
    buffer = torch.arange(12.0)
    weights = {"a": buffer[:6], "b": buffer[6:], "c": torch.ones(3)}
    save_weights(weights, tmp_path / "w.safetensors")
    loaded = load_weights(tmp_path / "w.safetensors")
    assert set(loaded) == {"a", "b", "c"} and loaded["a"] is not loaded["b"]
    for name, tensor in weights.items():
        assert torch.equal(loaded[name], tensor), name


@pytest.mark.parametrize("with_copy", [False, True], ids=["tied once", "older: alias too"])
def test_rl_merge_of_a_tied_checkpoint_keeps_the_tie(tmp_path, with_copy):
    """A run folder as the trainer leaves it (config.yaml, checkpoints/global_step_N with
    the actor's DCP shards under HF names); the merged folder loads tied in transformers.
    Checkpoints written before ties were skipped hold the alias too: they merge alike."""
    tokenizer = build_char_tokenizer()
    base = tied_model(
        "qwen3",
        vocab=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model_dir, run = tmp_path / "model", tmp_path / "run"
    base.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    config = load_config(overrides=[f"model.path={model_dir}"])
    run.mkdir()
    (run / "config.yaml").write_text(dump_config(config))
    trained = load_causal_lm(config.model, load_tokenizer(config.model))
    with torch.no_grad():  # "training" moved every weight, the tied one included
        for param in trained.parameters():
            param.add_(torch.randn(param.shape, generator=torch.Generator().manual_seed(1)))
    state = dict(trained.state_dict())
    if not with_copy:
        state = dict(without_aliases(state.items(), tied_aliases(trained)))

    def write(folder):
        save_sharded({"model": state}, folder / "actor" / "dcp")

    point = save_checkpoint(checkpoint_dir(run), 1, write, keep=None, run_id="tied")
    out = merge_checkpoint(point, tmp_path / "merged")
    files = load_file(out / "model.safetensors")
    assert HEAD not in files and torch.equal(files[EMBED], trained.model.embed_tokens.weight)
    assert json.loads((out / "config.json").read_text())["tie_word_embeddings"] is True
    merged = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert merged.lm_head.weight is merged.model.embed_tokens.weight
    for name, tensor in trained.state_dict().items():
        assert torch.equal(merged.state_dict()[name], tensor), name
