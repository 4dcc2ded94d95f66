"""`rl.rollout.decode_step.DecodeStep`: the HF engine's decode step gives the logits of
`model(...)` with a `DynamicCache`, for each family it serves, and declines the rest."""

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    DynamicCache,
    LlamaConfig,
    MistralConfig,
    Qwen2Config,
    Qwen2MoeConfig,
    Qwen3Config,
)

from rl.rollout.decode_step import DecodeStep
from rl.rollout.hf_sampling import CachedForward, positions

SHAPE = dict(
    vocab_size=97,
    hidden_size=128,
    intermediate_size=160,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped queries
    max_position_embeddings=128,
)
FAMILIES = {
    "qwen2": lambda: Qwen2Config(**SHAPE),  # q/k/v biases
    "qwen3": lambda: Qwen3Config(**SHAPE, head_dim=48),  # per-head q/k norms, own head_dim
    "llama": lambda: LlamaConfig(  # Llama 3.1's rotary scaling
        **SHAPE,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    ),
    "mistral": lambda: MistralConfig(**SHAPE, sliding_window=None),
}


def build(config):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    for parameter in model.parameters():  # norms and biases away from their init values
        parameter.data.add_(torch.randn_like(parameter) * 0.05)
    return model


def decode_logits(model, decoder_of, prompt_ids, prompt_mask, tokens, repeat):
    """The logits of each decode step after a prefill of the left-padded prompts, each
    prompt's rows `repeat` times, feeding `tokens` [rows, steps]."""
    cache = DynamicCache(config=model.config)
    model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=positions(prompt_mask),
        past_key_values=cache,
        use_cache=True,
    )
    decoder = decoder_of(model)
    decoder.start(cache, repeat, tokens.shape[1])
    mask = prompt_mask.repeat_interleave(repeat, 0).bool()[:, None, None, :]
    position = positions(prompt_mask)[:, -1:].repeat_interleave(repeat, 0)
    steps = []
    for step in range(tokens.shape[1]):
        mask = torch.cat([mask, mask.new_ones(*mask.shape[:-1], 1)], -1)
        position = position + 1
        steps.append(decoder(tokens[:, step : step + 1], position, mask).float())
    return torch.stack(steps, 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_logits_of_model_forward_for_each_family(family):
    model = build(FAMILIES[family]())
    assert DecodeStep.of(model) is not None
    prompt_ids = torch.tensor([[0, 0, 5, 6, 7], [8, 9, 10, 11, 12], [0, 0, 0, 0, 13]])
    prompt_mask = (prompt_ids != 0).long()
    tokens = torch.randint(1, 97, (9, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = decode_logits(model, CachedForward, prompt_ids, prompt_mask, tokens, 3)
        got = decode_logits(model, DecodeStep.of, prompt_ids, prompt_mask, tokens, 3)
    assert got.shape == (9, 6, 97)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def declined():
    eager = build(Qwen2Config(**SHAPE))
    eager.set_attn_implementation("eager")
    trained = build(Qwen2Config(**SHAPE)).train()
    moe = Qwen2MoeConfig(**SHAPE, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
    return {
        "eager attention": eager,
        "a sliding window": build(MistralConfig(**SHAPE, sliding_window=16)),
        "mixture of experts": build(moe),
        "training mode": trained,
    }


def test_models_it_does_not_serve_keep_model_forward():
    for reason, model in declined().items():
        assert DecodeStep.of(model) is None, reason
