"""Flattened-bucket weight payloads on a real tiny Hugging Face model's state_dict.

The round trip serializes exactly as SGLang's MultiprocessingSerializer does (ForkingPickler
into bytes), unpickles, and rebuilds each tensor from the metadata the way SGLang's receiver
does: flat[start_idx:end_idx].reshape(shape), then `.to(dtype)` (releases before late 2025)
or `.view(dtype)` (later releases).
"""

import io
import pickle
from multiprocessing.reduction import ForkingPickler

import pytest
import torch

from rl.core.config import load_config
from rl.core.models import load_causal_lm, load_tokenizer
from rl.rollout.sglang.payload import (
    LOAD_FORMAT,
    TensorSlot,
    buckets,
    flatten,
    raise_on_failure,
    update_request,
    update_requests,
)


def serialize(obj):
    """SGLang's MultiprocessingSerializer.serialize (without base64)."""
    buffer = io.BytesIO()
    ForkingPickler(buffer).dump(obj)
    return buffer.getvalue()


def rebuild(payload, cast):
    """SGLang's receiver: each tensor from the flat tensor and its metadata entry."""
    flat, rebuilt = payload["flattened_tensor"], []
    for meta in payload["metadata"]:
        tensor = flat[meta.start_idx : meta.end_idx]
        if cast == "view":
            tensor = tensor.view(meta.dtype).reshape(meta.shape)
        else:
            tensor = tensor.reshape(meta.shape)
            tensor = tensor.to(meta.dtype) if tensor.dtype != meta.dtype else tensor
        rebuilt.append((meta.name, tensor))
    return rebuilt


@pytest.fixture(scope="module")
def weights():
    """The tiny Qwen2's weights as a trainer exports them: bf16 matrices, fp32 norms."""
    config = load_config()
    model = load_causal_lm(config.model, load_tokenizer(config.model), seed=3)
    return [
        (name, tensor.clone() if "norm" in name else tensor.to(torch.bfloat16))
        for name, tensor in model.state_dict().items()
    ]


@pytest.mark.parametrize("cast", ["to", "view"])
@pytest.mark.parametrize("megabytes_fraction", [1 / 64, 1 / 8, 4])
def test_round_trip_rebuilds_every_tensor_bit_exactly(weights, cast, megabytes_fraction):
    budget = int(megabytes_fraction * (1 << 20))
    received = {}
    for bucket in buckets(iter(weights), budget):
        request = update_request(bucket, tp_size=2, serialize=serialize)
        assert request["load_format"] == LOAD_FORMAT == "flattened_bucket"
        assert request["flush_cache"] is False
        assert len(request["named_tensors"]) == 2  # one payload per TP rank
        for rank_bytes in request["named_tensors"]:
            for name, tensor in rebuild(pickle.loads(rank_bytes), cast):
                received.setdefault(name, []).append(tensor)
    assert set(received) == {name for name, _ in weights}
    for dtype in (torch.bfloat16, torch.float32):  # order kept within a dtype
        sent = [name for name, t in weights if t.dtype == dtype]
        assert [name for name in received if name in set(sent)] == sent
    for name, tensor in weights:
        assert len(received[name]) == 2
        for copy in received[name]:
            assert copy.dtype == tensor.dtype and copy.shape == tensor.shape
            assert torch.equal(copy, tensor), name


def test_buckets_respect_the_budget_and_hold_one_dtype(weights):
    budget = 64 << 10
    for bucket in buckets(iter(weights), budget):
        assert len({slot.dtype for slot in bucket.slots}) == 1
        assert bucket.nbytes <= budget or len(bucket.slots) == 1  # an oversized tensor alone


def tensor(numel, dtype=torch.float32):
    return torch.arange(numel, dtype=torch.float32).to(dtype)


def test_bucket_boundaries():
    named = [("a", tensor(4)), ("b", tensor(4)), ("c", tensor(4)), ("big", tensor(40))]
    groups = [[slot.name for slot in b.slots] for b in buckets(iter(named), 32)]
    assert groups == [["a", "b"], ["c"], ["big"]]  # 16+16 fits exactly; 40 floats travel alone
    first = next(buckets(iter(named), 32))
    assert [(s.start_idx, s.end_idx, s.numel) for s in first.slots] == [(0, 4, 4), (4, 8, 4)]


def test_dtypes_get_separate_buckets_and_keep_their_order():
    named = [
        ("w1", tensor(2, torch.bfloat16)),
        ("n1", tensor(2)),
        ("w2", tensor(2, torch.bfloat16)),
    ]
    groups = [[slot.name for slot in b.slots] for b in buckets(iter(named), 1 << 20)]
    assert sorted(groups) == [["n1"], ["w1", "w2"]]


def test_the_stream_is_consumed_lazily():
    pulled = []

    def stream():
        for index in range(6):
            pulled.append(index)
            yield f"t{index}", tensor(4)

    iterator = buckets(stream(), 32)
    first = next(iterator)
    assert [slot.name for slot in first.slots] == ["t0", "t1"] and pulled == [0, 1, 2]


def test_non_contiguous_tensors_rebuild_exactly():
    transposed = torch.randn(3, 5).t()
    bucket = flatten([("t", transposed)])
    payload = {"flattened_tensor": bucket.flattened_tensor, "metadata": bucket.slots}
    assert torch.equal(rebuild(payload, "to")[0][1], transposed)


def test_mixed_dtypes_or_nothing_cannot_be_flattened():
    with pytest.raises(ValueError, match="one dtype"):
        flatten([("a", tensor(2)), ("b", tensor(2, torch.bfloat16))])
    with pytest.raises(ValueError, match="empty"):
        flatten([])
    with pytest.raises(ValueError, match="bucket_bytes"):
        next(buckets(iter([("a", tensor(2))]), 0))


def test_metadata_type_gets_every_field_by_keyword():
    seen = []

    def metadata_type(**fields):
        seen.append(fields)
        return TensorSlot(**fields)

    bucket = flatten([("a", tensor(6).reshape(2, 3))])
    update_request(bucket, tp_size=1, serialize=lambda obj: obj, metadata_type=metadata_type)
    assert seen == [
        {
            "name": "a",
            "shape": torch.Size([2, 3]),
            "dtype": torch.float32,
            "start_idx": 0,
            "end_idx": 6,
            "numel": 6,
        }
    ]


@pytest.mark.parametrize(
    "result", [(False, "shape mismatch"), {"success": False, "message": "shape mismatch"}]
)
def test_a_failed_update_raises_with_sglang_message(result):
    with pytest.raises(RuntimeError, match="shape mismatch"):
        raise_on_failure(result)


@pytest.mark.parametrize("result", [(True, "Success"), {"success": True}, None])
def test_a_successful_update_passes(result):
    raise_on_failure(result)


def tiny(family, tie, seed):
    import transformers

    config = transformers.AutoConfig.for_model(
        family,
        vocab_size=96,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        tie_word_embeddings=tie,
    )
    torch.manual_seed(seed)
    return transformers.AutoModelForCausalLM.from_config(config)


def sent_names(named, ties):
    names = []
    for request in update_requests(named, 16 << 10, 1, serialize, ties=ties):
        names += [name for name, _ in rebuild(pickle.loads(request["named_tensors"][0]), "view")]
    return names


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "llama"])
def test_a_tied_models_embedding_travels_once_and_mismatched_ties_are_refused(family):
    from rl.core.weight_sync.ties import TieCheck, Ties

    model = tiny(family, True, seed=0)
    state = model.state_dict()  # the tied tensor under both names, as SGLang's loader skips
    names = sent_names(iter(state.items()), TieCheck(Ties.of(model)))
    assert "lm_head.weight" not in names and names.count("model.embed_tokens.weight") == 1
    assert sorted(names) == sorted(n for n in state if n != "lm_head.weight")
    untied = tiny(family, False, seed=1)
    with pytest.raises(ValueError, match="'lm_head.weight' differs"):
        sent_names(iter(untied.state_dict().items()), TieCheck(Ties.of(model)))
    once = [(n, t) for n, t in state.items() if n != "lm_head.weight"]
    with pytest.raises(ValueError, match="'lm_head.weight' never did"):  # the head stays stale
        sent_names(iter(once), TieCheck(Ties.of(untied)))
    assert "lm_head.weight" in sent_names(  # an untied model's head travels
        iter(untied.state_dict().items()), TieCheck(Ties.of(untied))
    )
