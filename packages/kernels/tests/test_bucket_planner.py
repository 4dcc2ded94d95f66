"""Dtype-aware, order-keeping bucket planning (rl.kernels.bucket_plan)."""

import pytest
import torch

from rl.kernels import BucketLayout, RawEntry, group_stream, plan_stream

F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16


def names(plan):
    return [
        [e.name for e in item.entries] if isinstance(item, BucketLayout) else ("raw", item.name)
        for item in plan
    ]


def test_empty_input_gives_an_empty_plan():
    assert plan_stream([], bucket_bytes=1024) == []


def test_one_huge_tensor_gets_its_own_bucket_never_split():
    plan = plan_stream([("huge", (1 << 20,), BF16)], bucket_bytes=64)
    assert len(plan) == 1 and plan[0].nbytes == 2 << 20
    plan = plan_stream(
        [("a", (4,), F32), ("huge", (1000,), F32), ("b", (4,), F32)], bucket_bytes=64
    )
    assert names(plan) == [["a"], ["huge"], ["b"]]


def test_mixed_dtypes_are_never_cast_and_start_new_buckets_in_stream_order():
    meta = [
        ("embed", (8, 4), BF16),
        ("norm", (4,), F32),
        ("q", (4, 4), BF16),
        ("k", (4, 4), BF16),
        ("head", (2, 4), F16),
    ]
    plan = plan_stream(meta, bucket_bytes=1 << 20)
    assert names(plan) == [["embed"], ["norm"], ["q", "k"], ["head"]]
    for layout in plan:
        assert all(entry.dtype == layout.dtype for entry in layout.entries)
    assert [layout.dtype for layout in plan] == [BF16, F32, BF16, F16]


def test_integer_and_bool_tensors_pass_through_as_raw_entries_in_order():
    meta = [
        ("w0", (4,), F32),
        ("position_ids", (1, 16), torch.int64),
        ("mask", (3,), torch.bool),
        ("w1", (4,), F32),
        ("w2", (4,), F32),
    ]
    plan = plan_stream(meta, bucket_bytes=1 << 20)
    assert names(plan) == [["w0"], ("raw", "position_ids"), ("raw", "mask"), ["w1", "w2"]]
    assert plan[1] == RawEntry("position_ids", (1, 16), torch.int64)
    assert plan[1].nbytes == 128 and plan[2].nbytes == 3


def test_zero_size_tensors_join_the_current_bucket():
    meta = [("a", (4,), F32), ("empty", (0, 7), F32), ("b", (4,), F32)]
    plan = plan_stream(meta, bucket_bytes=32)
    assert names(plan) == [["a", "empty", "b"]]
    assert plan[0].entries[1].numel == 0 and plan[0].entries[2].offset == 4
    assert names(plan_stream([("only_empty", (0,), BF16)], bucket_bytes=8)) == [["only_empty"]]


def test_exact_fit_stays_in_one_bucket_and_one_more_byte_overflows():
    exact = [("a", (8,), F32), ("b", (8,), F32)]  # 32 + 32 bytes
    assert names(plan_stream(exact, bucket_bytes=64)) == [["a", "b"]]
    assert names(plan_stream(exact, bucket_bytes=63)) == [["a"], ["b"]]
    three = [("a", (8,), F32), ("b", (8,), F32), ("c", (1,), F32)]
    assert names(plan_stream(three, bucket_bytes=64)) == [["a", "b"], ["c"]]


def test_every_bucket_respects_the_budget_unless_a_single_tensor_exceeds_it():
    generator = torch.Generator().manual_seed(0)
    dtypes = [F32, BF16, F16]
    meta = [
        (f"w{i}", (int(torch.randint(0, 60, (1,), generator=generator)),), dtypes[i % 7 % 3])
        for i in range(200)
    ]
    plan = plan_stream(meta, bucket_bytes=96)
    flat = [e.name for layout in plan for e in layout.entries]
    assert flat == [name for name, _, _ in meta]
    for layout in plan:
        assert layout.nbytes <= 96 or len(layout.entries) == 1


def test_group_stream_is_lazy_and_carries_the_items():
    produced = []

    def exporter():
        for i in range(6):
            produced.append(i)
            yield f"w{i}", torch.ones(4)

    groups = group_stream(exporter(), lambda item: (item[0], item[1].shape, item[1].dtype), 32)
    first = next(groups)
    assert [name for name, _ in first.items] == ["w0", "w1"]
    assert produced == [0, 1, 2]  # w2 closed the first bucket; w3.. not yet produced
    rest = list(groups)
    assert [len(group.items) for group in rest] == [2, 2]


def test_bad_budget_is_rejected():
    with pytest.raises(ValueError, match="bucket_bytes must be positive"):
        plan_stream([("a", (1,), F32)], bucket_bytes=0)


CPU = torch.device("cpu")


def test_pool_recycles_a_bucket_only_once_no_view_of_it_is_alive():
    from rl.kernels import BucketPool

    pool = BucketPool(max_cached_bytes=1 << 20)
    first = pool.take(10, BF16, CPU, reserve_bytes=64)
    address = first.data_ptr()
    view = first[2:5]
    del first
    second = pool.take(10, BF16, CPU, reserve_bytes=64)
    assert second.data_ptr() != address  # a view of the first bucket is still held
    del view, second
    third = pool.take(16, F32, CPU)  # 64 bytes: fits the reserved buffers
    assert third.dtype == F32 and third.numel() == 16
    assert third.data_ptr() == address  # best fit among idle buffers, oldest first
    assert pool.cached_bytes == 128


def test_pool_respects_its_cap_and_allocates_fresh_beyond_it():
    from rl.kernels import BucketPool

    pool = BucketPool(max_cached_bytes=100)
    held = [pool.take(40, torch.uint8, CPU) for _ in range(3)]
    assert pool.cached_bytes == 80 and len({t.data_ptr() for t in held}) == 3
    assert pool.take(0, F32, CPU).numel() == 0
