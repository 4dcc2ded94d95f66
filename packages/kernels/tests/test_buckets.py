"""Planning, packing and unpacking whole weight buckets (rl.kernels.buckets)."""

import pytest
import torch

from rl.kernels import (
    layout_for,
    pack_bucket,
    pack_into,
    plan_buckets,
    unpack_bucket,
    unpack_bucket_into,
)


def named_weights():
    generator = torch.Generator().manual_seed(0)
    return [
        ("embed.weight", torch.randn(11, 7, generator=generator)),
        ("layer.0.norm", torch.randn(7, generator=generator).to(torch.bfloat16)),
        ("layer.0.bias", torch.randn(3, generator=generator).to(torch.float16)),
        ("empty", torch.empty(0, 4)),
        ("lm_head.weight", torch.randn(13, 7, generator=generator)),
    ]


@pytest.mark.parametrize("align", [1, 8, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pack_then_unpack_views_equal_each_tensor_cast(cpu_impl, align, dtype):
    weights = named_weights()
    bucket, layout = pack_bucket(weights, dtype=dtype, align_elements=align)
    assert bucket.dtype == dtype and bucket.numel() == layout.numel
    assert all(entry.offset % align == 0 for entry in layout.entries)
    views = unpack_bucket(bucket, layout)
    for (name, tensor), (view_name, view) in zip(weights, views, strict=True):
        assert view_name == name and view.shape == tensor.shape
        assert view.untyped_storage().data_ptr() == bucket.untyped_storage().data_ptr()
        assert torch.equal(view, tensor.to(dtype))


def test_unpack_into_restores_original_dtypes_exactly(cpu_impl):
    weights = named_weights()
    bucket, layout = pack_bucket(weights, dtype=torch.float32)
    received = [torch.zeros_like(tensor) for _, tensor in weights]
    unpack_bucket_into(bucket, layout, received)
    for (_, tensor), got in zip(weights, received, strict=True):
        assert got.dtype == tensor.dtype and torch.equal(got, tensor)


def test_pack_into_reuses_a_bucket_and_checks_shapes(cpu_impl):
    weights = named_weights()
    layout = layout_for(((n, t.shape, t.dtype) for n, t in weights), torch.float32)
    bucket = torch.empty(layout.numel)
    pack_into(bucket, layout, [t for _, t in weights])
    assert torch.equal(unpack_bucket(bucket, layout)[0][1], weights[0][1])
    with pytest.raises(ValueError, match="'embed.weight' has shape \\(7, 11\\)"):
        pack_into(bucket, layout, [weights[0][1].t()] + [t for _, t in weights[1:]])


def test_bucket_of_wrong_dtype_or_size_is_rejected():
    bucket, layout = pack_bucket(named_weights(), dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="bucket has dtype torch.float16 but its layout"):
        unpack_bucket(bucket.to(torch.float16), layout)
    with pytest.raises(ValueError, match="too small for its layout"):
        unpack_bucket(bucket[:-1], layout)
    with pytest.raises(ValueError, match="destination for 'embed.weight' has 76 elements"):
        unpack_bucket_into(bucket, layout, [torch.empty(76)] + [torch.empty(1)] * 4)


def test_plan_buckets_respects_the_byte_budget_and_keeps_order():
    meta = [(f"w{i}", (i + 1, 10), torch.float32) for i in range(6)]
    layouts = plan_buckets(meta, bucket_bytes=4 * 40, dtype=torch.bfloat16)
    names = [entry.name for layout in layouts for entry in layout.entries]
    assert names == [name for name, _, _ in meta]
    # 80 bf16 elements per bucket; sizes 10, 20, 30 | 40 | 50 | 60.
    assert [len(layout.entries) for layout in layouts] == [3, 1, 1, 1]
    assert all(layout.nbytes <= 160 for layout in layouts)


def test_tensor_larger_than_the_budget_gets_its_own_bucket():
    meta = [
        ("small", (2,), torch.float32),
        ("huge", (1000,), torch.float32),
        ("tail", (2,), torch.float32),
    ]
    layouts = plan_buckets(meta, bucket_bytes=64, dtype=torch.float32)
    assert [[e.name for e in layout.entries] for layout in layouts] == [
        ["small"],
        ["huge"],
        ["tail"],
    ]


def test_plan_rejects_bad_arguments():
    with pytest.raises(ValueError, match="bucket_bytes must be positive"):
        plan_buckets([], bucket_bytes=0, dtype=torch.float32)
    with pytest.raises(TypeError, match="tensor 'ids' has dtype int64"):
        layout_for([("ids", (3,), torch.int64)], torch.float32)
