"""Weight sync through real kernel buckets into a real HF rollout engine."""

import torch

from rl.core.config import load_config
from rl.core.models import load_causal_lm, load_tokenizer
from rl.core.weight_sync import sync_weights
from rl.rollout.hf import HFRolloutEngine


def test_every_weight_arrives_exactly_in_several_buckets():
    config = load_config()
    tokenizer = load_tokenizer(config.model)
    source = load_causal_lm(config.model, tokenizer, seed=1)
    engine = HFRolloutEngine(load_causal_lm(config.model, tokenizer, seed=2), tokenizer)
    metrics = sync_weights(source.state_dict().items(), engine, bucket_bytes=64 << 10)
    assert metrics["weight_sync/buckets"] > 3
    expected = source.state_dict()
    for name, tensor in engine.model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    total = sum(t.numel() * t.element_size() for t in expected.values())
    assert metrics["weight_sync/bytes"] == total
