"""rl.bench.flops: a hand count for a tiny config, and torch's own FLOP counter on a real
1-layer Qwen2 forward (an independent reference)."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import Qwen2Config, Qwen2ForCausalLM

from rl.bench import flops

TINY = {
    "hidden_size": 8,
    "intermediate_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "vocab_size": 10,
}


def test_a_three_token_forward_by_hand():
    d = flops.dims(TINY)
    # q/o: 8x8 each, k/v: 8x4 each -> 2*8*(8+8+4+4) = 384; MLP 2*3*8*16 = 768
    assert flops.layer_flops_per_token(d) == 384 + 768
    # causal: the 3 tokens see 1 + 2 + 3 = 6 keys; 4 * q_dim 8 per key
    assert flops.causal_keys(0, 3) == 6 and flops.causal_keys(2, 2) == 3 + 4
    assert flops.forward_flops(d, 3, 6, 3) == 3 * 1152 + 4 * 8 * 6 + 2 * 8 * 10 * 3 == 4128


def test_generation_training_and_sharing_by_hand():
    d = flops.dims(TINY)
    per_token, per_key, head = 1152, 32, 160
    # one prompt of 2 tokens, n=2 responses of 3 tokens
    prefill = 2 * per_token + 3 * per_key + head  # keys 1+2, head at the last position
    decode = 2 * per_token + (3 + 4) * per_key + 2 * head  # 2 steps at positions 3 and 4
    assert flops.generation_flops(d, [2], 2, 3.0, shared=True) == prefill + 2 * decode
    assert flops.generation_flops(d, [2], 2, 3.0, shared=False) == 2 * prefill + 2 * decode
    row = 5 * per_token + 15 * per_key + 3 * head  # one 5-token row, head on 3 positions
    shared = 2 * per_token + 3 * per_key + 2 * (3 * per_token + 12 * per_key + 3 * head)
    assert flops.sequence_forward_flops(d, [2], 2, 3.0, shared=False) == 2 * row
    assert flops.sequence_forward_flops(d, [2], 2, 3.0, shared=True) == shared
    assert flops.training_flops(d, [2], 2, 3.0, shared=False) == 3 * 2 * row
    assert flops.training_flops(d, [2], 2, 3.0, shared=False, recompute=True) == 4 * 2 * row


@pytest.mark.parametrize("length", [1, 7])
def test_a_real_forward_against_torch_flop_counter(length):
    """Eager attention multiplies the whole L x L score matrix (the causal mask is added,
    not skipped), so torch counts L*L keys where the model FLOPs count L(L+1)/2; the head
    runs on every position. With those two taken as torch runs them, the counts agree
    exactly: nothing else (norms, RoPE, softmax) is a matmul."""
    config = Qwen2Config(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.arange(length)[None])
    d = flops.dims(config.to_dict())
    assert counter.get_total_flops() == flops.forward_flops(d, length, length * length, length)
    causal = flops.forward_flops(d, length, flops.causal_keys(0, length), length)
    assert causal < counter.get_total_flops() or length == 1
