"""rl_kernels::bucket_pack / bucket_unpack against the torch reference."""

import pytest
import torch

from rl.kernels.ops.bucket import bucket_pack, bucket_unpack, pack_reference, unpack_reference

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def special_values(numel: int, seed: int) -> torch.Tensor:
    """float32 values that stress the casts: ties, subnormals, overflow, inf, NaN."""
    generator = torch.Generator().manual_seed(seed)
    random_bits = torch.randint(-(2**31), 2**31 - 1, (numel,), generator=generator)
    values = random_bits.to(torch.int32).view(torch.float32).clone()
    edge = torch.tensor(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            65504.0,
            65519.0,
            65520.0,
            70000.0,
            1e-8,
            3e-8,
            6e-8,
            2.0**-24,
            2.0**-25,
            1.5 * 2.0**-24,
            2.0**-14,
            1.0 + 2.0**-8,
            1.0 + 3 * 2.0**-8,
            1.0 + 2.0**-11,
            3.4e38,
            float("inf"),
            float("-inf"),
            float("nan"),
        ],
        dtype=torch.float32,
    )
    values[: min(numel, edge.numel())] = edge[: min(numel, edge.numel())]
    return values


@pytest.mark.parametrize("bucket_dtype", DTYPES)
def test_pack_mixed_dtypes_odd_sizes_matches_reference_bitwise(
    cpu_impl, assert_bitwise_equal, bucket_dtype
):
    shapes = [(1,), (3, 5), (0,), (7, 1, 3), (1031,), (2, 65537)]
    tensors = [
        special_values(int(torch.Size(s).numel()), seed).to(DTYPES[seed % 3]).reshape(s)
        for seed, s in enumerate(shapes)
    ]
    # Deliberately misaligned starts, gaps, and out-of-order placement.
    offsets, cursor = [], 3
    for tensor in tensors:
        offsets.append(cursor)
        cursor += tensor.numel() + 1
    tensors, offsets = tensors[::-1], offsets[::-1]
    sizes = [t.numel() for t in tensors]
    total = max(o + s for o, s in zip(offsets, sizes, strict=True)) + 5
    expected = torch.full((total,), 7.0, dtype=bucket_dtype)
    pack_reference(tensors, offsets, expected)
    actual = torch.full((total,), 7.0, dtype=bucket_dtype)
    bucket_pack(tensors, offsets, actual)
    assert_bitwise_equal(actual, expected)


@pytest.mark.parametrize("bucket_dtype", DTYPES)
@pytest.mark.parametrize("target_dtype", DTYPES)
def test_unpack_casts_back_bitwise(cpu_impl, assert_bitwise_equal, bucket_dtype, target_dtype):
    bucket = special_values(4099, seed=11).to(bucket_dtype)
    shapes, offsets = [(5, 3), (1,), (2048,), (0,), (31, 3)], [1, 17, 19, 4000, 4003]
    expected = [torch.empty(s, dtype=target_dtype) for s in shapes]
    unpack_reference(bucket, offsets, expected)
    actual = [torch.zeros(s, dtype=target_dtype) for s in shapes]
    bucket_unpack(bucket, offsets, actual)
    for a, e in zip(actual, expected, strict=True):
        assert_bitwise_equal(a, e)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_16bit_pattern_round_trips_through_float32(cpu_impl, assert_bitwise_equal, dtype):
    """All 65536 bit patterns: 16-bit -> fp32 -> 16-bit is exact, and matches torch."""
    patterns = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    wide = torch.empty(patterns.numel(), dtype=torch.float32)
    bucket_unpack(patterns, [0], [wide])
    assert_bitwise_equal(wide, patterns.float())
    narrow = torch.empty_like(patterns)
    bucket_pack([wide], [0], narrow)
    assert_bitwise_equal(narrow, patterns)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_random_float32_bit_patterns_round_like_torch(cpu_impl, assert_bitwise_equal, dtype):
    """2^20 random fp32 patterns (all exponents, NaN payloads) cast exactly as torch does."""
    values = special_values(2**20, seed=5)
    bucket = torch.empty(values.numel(), dtype=dtype)
    bucket_pack([values], [0], bucket)
    assert_bitwise_equal(bucket, values.to(dtype))


def test_empty_list_is_a_no_op(cpu_impl):
    bucket = torch.arange(4, dtype=torch.float32)
    bucket_pack([], [], bucket)
    bucket_unpack(bucket, [], [])
    assert torch.equal(bucket, torch.arange(4, dtype=torch.float32))


def test_bucket_elements_outside_segments_are_untouched(cpu_impl):
    bucket = torch.full((10,), -3.0, dtype=torch.bfloat16)
    bucket_pack([torch.ones(3)], [4], bucket)
    assert bucket.tolist() == [-3.0] * 4 + [1.0] * 3 + [-3.0] * 3


@pytest.mark.parametrize(
    ("tensors", "offsets", "bucket", "message"),
    [
        (
            [torch.ones(4)],
            [0],
            torch.empty(3),
            r"needs bucket elements \[0, 4\) but the bucket holds 3",
        ),
        ([torch.ones(2)], [-1], torch.empty(3), r"tensor 0 needs bucket elements"),
        ([torch.ones(2), torch.ones(2)], [0, 1], torch.empty(4), "tensor 1 overlaps tensor 0"),
        ([torch.ones(2, dtype=torch.int64)], [0], torch.empty(3), "tensor 0 has dtype int64"),
        ([torch.ones(2)], [0], torch.empty(3, dtype=torch.float64), "bucket has dtype float64"),
        ([torch.ones(2)], [0, 2], torch.empty(3), "got 1 tensors but 2 offsets"),
        ([torch.ones(4, 2).t()], [0], torch.empty(8), "tensor 0 is not contiguous"),
        ([torch.ones(2)], [0], torch.empty(2, 2), "bucket must be a contiguous 1-D tensor"),
    ],
)
def test_bad_input_names_the_problem(cpu_impl, tensors, offsets, bucket, message):
    with pytest.raises((ValueError, TypeError), match=message):
        bucket_pack(tensors, offsets, bucket)


def test_unpack_may_read_overlapping_slices(cpu_impl):
    bucket = torch.arange(6, dtype=torch.float32)
    first, second = torch.empty(4), torch.empty(4)
    bucket_unpack(bucket, [0, 2], [first, second])
    assert first.tolist() == [0, 1, 2, 3] and second.tolist() == [2, 3, 4, 5]


def test_opcheck_pack_and_unpack():
    tensors = [torch.randn(3, 5), torch.randn(7).to(torch.bfloat16)]
    torch.library.opcheck(
        torch.ops.rl_kernels.bucket_pack.default, (tensors, [1, 17], torch.zeros(24))
    )
    torch.library.opcheck(
        torch.ops.rl_kernels.bucket_unpack.default,
        (torch.randn(24), [1, 17], [torch.empty(3, 5), torch.empty(7, dtype=torch.float16)]),
    )


def test_forcing_a_missing_impl_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RL_KERNELS_IMPL", "cuda")
    with pytest.raises(RuntimeError, match="RL_KERNELS_IMPL=cuda but bucket has no usable cuda"):
        bucket_pack([torch.ones(2)], [0], torch.empty(2))
    monkeypatch.setenv("RL_KERNELS_IMPL", "fastest")
    with pytest.raises(ValueError, match="not an implementation"):
        bucket_pack([torch.ones(2)], [0], torch.empty(2))
