"""The real reference: a megatron-core GPTModel (local spec, CPU) built for the same tiny shapes
by rl-megatron's `build_gpt_model`.

`from_hf` must produce exactly its state-dict names and shapes, and the
converted HF weights loaded into it must give the HF model's logits — the
proof that the QKV grouping and gate/up order are megatron-core's.
"""

from __future__ import annotations

import pytest
import torch

from rl.megatron.layouts import converter_for

pytestmark = [
    pytest.mark.megatron,
    # megatron-core's own deprecation notices about its internals, not about this code
    pytest.mark.filterwarnings("ignore::DeprecationWarning:megatron.*"),
    pytest.mark.filterwarnings("ignore:full scope is deprecated:UserWarning"),
]

LOGIT_ATOL = 1e-5


def build_gpt_model(config):
    """rl-megatron's builder: the HF config's shapes, local spec, no fusions, fp32."""
    model = pytest.importorskip("rl.megatron.model")
    return model.build_gpt_model(config, spec="local").eval()


def _real_entries(model) -> dict[str, tuple[int, ...]]:
    return {
        k: tuple(v.shape) for k, v in model.state_dict().items() if not k.endswith("_extra_state")
    }


CASES = [
    ("llama", {}),
    ("llama", dict(num_attention_heads=8, num_key_value_heads=4, head_dim=8)),
    ("llama", dict(tie_word_embeddings=True)),
    ("qwen2", dict(num_attention_heads=8, num_key_value_heads=2, head_dim=8)),
    ("qwen3", {}),
    ("qwen3_moe", {}),
]
IDS = ["llama", "llama-4-groups", "llama-tied", "qwen2-2-groups-of-4", "qwen3", "qwen3_moe"]


@pytest.mark.parametrize(("model_type", "overrides"), CASES, ids=IDS)
def test_names_and_shapes_match_gpt_model(megatron_world, tiny_hf, model_type, overrides):
    config, _, checkpoint = tiny_hf(model_type, **overrides)
    converted = dict(converter_for(config).from_hf(checkpoint.items()))
    expected = _real_entries(build_gpt_model(config))
    assert {k: tuple(v.shape) for k, v in converted.items()} == expected


@pytest.mark.parametrize(("model_type", "overrides"), CASES, ids=IDS)
def test_converted_weights_give_hf_logits(
    megatron_world, tiny_hf, monkeypatch, model_type, overrides
):
    from megatron.core.transformer.moe import moe_utils

    # megatron-core 0.16.1 reads `te_general_gemm` in the router even when it failed to import TE.
    monkeypatch.setattr(moe_utils, "te_general_gemm", None, raising=False)
    config, hf_model, checkpoint = tiny_hf(model_type, **overrides)
    model = build_gpt_model(config)
    missing, unexpected = model.load_state_dict(
        dict(converter_for(config).from_hf(checkpoint.items())), strict=False
    )
    assert not unexpected and all(k.endswith("_extra_state") for k in missing)

    torch.manual_seed(1)
    ids = torch.randint(0, config.vocab_size, (2, 12))
    positions = torch.arange(12).expand(2, -1)
    causal = torch.ones(1, 1, 12, 12, dtype=torch.bool).triu(diagonal=1)  # True = masked
    with torch.no_grad():
        expected = hf_model(ids).logits
        got = model(ids, positions, attention_mask=causal)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=LOGIT_ATOL, rtol=0)


@pytest.mark.parametrize("model_type", ["llama", "qwen2", "qwen3"])
def test_te_spec_names_follow_megatrons_own_local_to_te_map(megatron_world, tiny_hf, model_type):
    """TE is not installed here; the local spec's `sharded_state_dict_keys_map` names the TE keys."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    config, _, checkpoint = tiny_hf(model_type)
    keys_map = get_gpt_layer_local_spec().submodules.sharded_state_dict_keys_map
    expected = {}
    for name, shape in _real_entries(build_gpt_model(config)).items():
        for local, te in keys_map.items():
            name = name.replace("." + local, "." + te)
        expected[name] = shape
    converted = converter_for(config, spec="te").from_hf(checkpoint.items())
    assert {k: tuple(v.shape) for k, v in converted} == expected
