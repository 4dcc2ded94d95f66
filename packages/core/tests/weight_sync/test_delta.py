"""Delta sync: unchanged weights are skipped, changed ones always sent (real tiny model)."""

import pytest
import torch

from rl.core.weight_sync import ContentFingerprints, WeightSender, content_digest


def train_step(model, frozen_prefixes):
    for name, param in model.named_parameters():
        param.requires_grad_(not name.startswith(frozen_prefixes))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    input_ids = torch.randint(3, 20, (2, 8), generator=torch.Generator().manual_seed(0))
    model(input_ids=input_ids, labels=input_ids).loss.backward()
    optimizer.step()


def test_frozen_weights_are_skipped_after_the_first_sync(receiver):
    source, target = receiver.tiny_model(1), receiver.tiny_model(2)
    engine = receiver.BufferingEngine(target)
    sender = WeightSender(bucket_bytes=32 << 10, delta=True)

    first = sender.sync(source.state_dict().items(), engine)
    assert first["weight_sync/skipped_tensors"] == 0
    assert first["weight_sync/sent_bytes"] == first["weight_sync/bytes"]

    frozen = ("model.embed_tokens.", "model.layers.0.")
    train_step(source, frozen)
    second = sender.sync(source.state_dict().items(), engine)
    state = source.state_dict()
    skipped = [n for n in state if n.startswith(frozen)]
    assert not source.config.tie_word_embeddings  # tied: test_ties.py
    skipped_bytes = sum(state[n].numel() * state[n].element_size() for n in skipped)
    assert second["weight_sync/skipped_tensors"] == len(skipped) > 3
    assert second["weight_sync/sent_bytes"] == second["weight_sync/bytes"] - skipped_bytes
    for name, tensor in target.state_dict().items():
        assert torch.equal(tensor, state[name]), name

    third = sender.sync(source.state_dict().items(), engine)
    assert third["weight_sync/skipped_tensors"] == len(state)
    assert third["weight_sync/sent_bytes"] == 0 and third["weight_sync/buckets"] == 0
    assert engine.calls == 3


def test_a_one_element_change_is_sent(receiver):
    weights = {"a": torch.zeros(1000), "b": torch.ones(7, dtype=torch.bfloat16)}
    engine = receiver.BufferingEngine()
    sender = WeightSender(delta=True)
    sender.sync(weights.items(), engine)
    weights["a"][537] = 1e-30
    metrics = sender.sync(weights.items(), engine)
    assert metrics["weight_sync/skipped_tensors"] == 1
    assert torch.equal(engine.extras["a"], weights["a"])


def test_fingerprint_sees_bits_shape_and_dtype():
    prints = ContentFingerprints()
    assert prints.changed("w", torch.zeros(4))
    assert not prints.changed("w", torch.zeros(4))
    assert prints.changed("w", torch.tensor([-0.0, 0.0, 0.0, 0.0]))  # equal values, other bits
    assert prints.changed("w", torch.zeros(2, 2))
    assert prints.changed("w", torch.zeros(2, 2, dtype=torch.bfloat16))
    nan = torch.full((3,), float("nan"))
    assert prints.changed("n", nan) and not prints.changed("n", nan.clone())
    assert prints.changed("ids", torch.arange(5)) and not prints.changed("ids", torch.arange(5))
    assert len(content_digest(torch.empty(0))) == 32
    with pytest.raises(ValueError, match="contiguous CPU tensor"):
        content_digest(torch.zeros(4, 4).t())


def test_a_failed_sync_forgets_the_fingerprints_so_the_next_sends_everything(receiver):
    class Failing:
        def update_weights(self, named_tensors):
            next(named_tensors)
            raise OSError("engine died")

    weights = [("a", torch.ones(4)), ("b", torch.zeros(4))]
    sender = WeightSender(bucket_bytes=16, delta=True)
    with pytest.raises(OSError, match="engine died"):
        sender.sync(weights, Failing())
    metrics = sender.sync(weights, receiver.BufferingEngine())
    assert metrics["weight_sync/skipped_tensors"] == 0
