"""WeightSender in process: one lazy update_weights call, fresh buckets, metrics, errors."""

import pytest
import torch

from rl.core.weight_sync import DEFAULT_BUCKET_BYTES, WeightSender, sync_weights


def mixed_weights():
    generator = torch.Generator().manual_seed(0)
    return [
        ("embed", torch.randn(64, 8, generator=generator).to(torch.bfloat16)),
        ("norm", torch.randn(8, generator=generator)),
        ("q", torch.randn(8, 8, generator=generator).to(torch.bfloat16)),
        ("k", torch.randn(8, 8, generator=generator).to(torch.bfloat16)),
        ("position_ids", torch.arange(16).reshape(1, 16)),
        ("mask", torch.tensor([True, False, True])),
        ("empty", torch.empty(0, 3, dtype=torch.float16)),
        ("head", torch.randn(8, 64, generator=generator).t()),  # non-contiguous
    ]


def test_one_call_with_every_weight_exact_in_its_own_dtype(receiver):
    engine = receiver.BufferingEngine()
    weights = mixed_weights()
    metrics = WeightSender(bucket_bytes=300).sync(weights, engine)
    assert engine.calls == 1
    assert engine.names == [name for name, _ in weights]
    for name, tensor in weights:
        got = engine.extras[name]
        assert got.dtype == tensor.dtype and got.shape == tensor.shape
        assert torch.equal(got, tensor), name
    total = sum(t.numel() * t.element_size() for _, t in weights)
    assert metrics["weight_sync/bytes"] == total == metrics["weight_sync/sent_bytes"]
    # embed (1024 B) | norm | q+k (256 B) | 2 raw | empty | head (fp32 2048 B)
    assert metrics["weight_sync/buckets"] == 5
    assert metrics["weight_sync/skipped_tensors"] == 0
    assert metrics["weight_sync/pack_s"] >= 0


def test_views_stay_valid_while_the_receiver_holds_all_of_them(receiver):
    source, target = receiver.tiny_model(1), receiver.tiny_model(2)
    engine = receiver.BufferingEngine(target)
    metrics = sync_weights(source.state_dict().items(), engine, bucket_bytes=64 << 10)
    assert metrics["weight_sync/buckets"] > 3 and engine.calls == 1
    for name, tensor in target.state_dict().items():
        assert torch.equal(tensor, source.state_dict()[name]), name


def test_the_stream_is_lazy_buckets_are_packed_as_the_receiver_pulls():
    produced = []

    def exporter():
        for i in range(4):
            produced.append(i)
            yield f"w{i}", torch.full((4,), float(i))

    class Peeking:
        def update_weights(self, named_tensors):
            first = next(named_tensors)
            assert first[0] == "w0" and produced == [0, 1]  # w1 closed bucket 0
            list(named_tensors)

    metrics = WeightSender(bucket_bytes=16).sync(exporter(), Peeking())
    assert metrics["weight_sync/buckets"] == 4


def test_receiver_that_stops_early_is_an_error_naming_the_first_missing_weight():
    class Lazy:
        def update_weights(self, named_tensors):
            next(named_tensors)

    weights = [(f"w{i}", torch.ones(4)) for i in range(3)]
    with pytest.raises(RuntimeError, match="Lazy.update_weights returned before .* 'w1'"):
        WeightSender(bucket_bytes=16).sync(weights, Lazy())


@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        ([("w", [1.0, 2.0])], TypeError, "weight 'w' is a list, not a torch.Tensor"),
        ([("w", torch.ones(2)), ("w", torch.ones(2))], ValueError, "'w' is offered twice"),
        ([(3, torch.ones(2))], TypeError, "weight #0 has name 3"),
        ([torch.ones(2)], TypeError, "weight #0 is Tensor, not a"),
    ],
)
def test_bad_inputs_are_clear_errors_naming_the_weight(receiver, weights, error, match):
    with pytest.raises(error, match=match):
        WeightSender().sync(weights, receiver.BufferingEngine())


def test_bad_arguments():
    with pytest.raises(ValueError, match="bucket_bytes must be positive"):
        WeightSender(bucket_bytes=0)
    with pytest.raises(ValueError, match="needs the rollout engine"):
        WeightSender().sync([("w", torch.ones(1))])
    assert DEFAULT_BUCKET_BYTES == 256 << 20


def test_empty_sync_still_calls_the_engine_once(receiver):
    engine = receiver.BufferingEngine()
    metrics = WeightSender().sync([], engine)
    assert engine.calls == 1 and metrics["weight_sync/buckets"] == 0


def test_a_copying_receiver_lets_the_sender_recycle_two_buckets():
    class Copying:
        def __init__(self):
            self.addresses = set()

        def update_weights(self, named_tensors):
            for _, tensor in named_tensors:
                self.addresses.add(tensor.untyped_storage().data_ptr())

    engine = Copying()
    weights = [(f"w{i}", torch.full((256,), float(i))) for i in range(12)]
    metrics = WeightSender(bucket_bytes=2048).sync(weights, engine)
    assert metrics["weight_sync/buckets"] == 6
    assert len(engine.addresses) == 2  # double buffering: bucket k+1 packs while k is yielded


def test_unpacked_in_process_hands_the_offered_tensors_without_a_copy():
    """`InProcessTransport(pack=False)` (the workers' colocated sync): the engine gets each
    offered tensor itself, detached (the same memory, no autograd record; a transposed view
    made contiguous, as for every transport), in one call; no bucket is packed, and the
    bytes are counted as sent."""
    from rl.core.weight_sync.transports import InProcessTransport

    weights = [*mixed_weights(), ("trained", torch.ones(3, requires_grad=True))]
    seen = []

    class Recording:
        def update_weights(self, named_tensors):
            seen.extend(named_tensors)

    sender = WeightSender(bucket_bytes=300, transport=InProcessTransport(pack=False))
    metrics = sender.sync(weights, Recording())
    assert [name for name, _ in seen] == [name for name, _ in weights]
    for (_, got), (name, offered) in zip(seen, weights, strict=True):
        assert torch.equal(got, offered) and not got.requires_grad, name
        same_memory = got.data_ptr() == offered.data_ptr()
        assert same_memory == offered.is_contiguous(), name
    total = sum(t.numel() * t.element_size() for _, t in weights)
    assert metrics["weight_sync/buckets"] == 0
    assert metrics["weight_sync/sent_bytes"] == total == metrics["weight_sync/bytes"]
