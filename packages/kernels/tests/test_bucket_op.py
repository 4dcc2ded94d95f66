"""rl_kernels::bucket_pack / bucket_unpack: the compiled (C++) and the torch reference paths,
each against an independent cast written here with numpy and integer bit arithmetic (IEEE
round-to-nearest-even), and against each other bit for bit."""

import numpy as np
import pytest
import torch

from rl.kernels import _backend
from rl.kernels.ops.bucket import bucket_pack, bucket_unpack

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


# --- the independent oracle: no torch cast is used --------------------------------------


def _bits(tensor: torch.Tensor) -> np.ndarray:
    """The raw bits of a float32/16-bit tensor, as numpy unsigned integers."""
    if tensor.dtype == torch.float32:
        return tensor.contiguous().view(torch.int32).numpy().view(np.uint32)
    return tensor.contiguous().view(torch.int16).numpy().view(np.uint16)


def _from_bits(bits: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.float32:
        return torch.from_numpy(bits.astype(np.uint32).view(np.int32).copy()).view(torch.float32)
    return torch.from_numpy(bits.astype(np.uint16).view(np.int16).copy()).view(dtype)


def oracle_float32(tensor: torch.Tensor) -> np.ndarray:
    """Exact widening to float32 bits: bf16 is the top half of a float32; fp16 by numpy."""
    bits = _bits(tensor.reshape(-1))
    if tensor.dtype == torch.float32:
        return bits
    if tensor.dtype == torch.bfloat16:
        return bits.astype(np.uint32) << 16
    return bits.view(np.float16).astype(np.float32).view(np.uint32)


def oracle_cast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`tensor` (flattened) cast to `dtype` through float32 (exact for every 16-bit value),
    narrowing with round-to-nearest-even: numpy's own float16 conversion, and for bfloat16
    the carry trick on the float32 bits (NaN stays a quiet NaN)."""
    wide = oracle_float32(tensor)
    if dtype == torch.float32:
        return _from_bits(wide, dtype)
    if dtype == torch.float16:
        with np.errstate(over="ignore"):  # overflow to inf is the cast's answer
            narrow = wide.view(np.float32).astype(np.float16)
        return _from_bits(narrow.view(np.uint16), dtype)
    wide64 = wide.astype(np.uint64)
    rounded = ((wide64 + 0x7FFF + ((wide64 >> 16) & 1)) >> 16) & 0xFFFF
    nan = np.isnan(wide.view(np.float32))
    rounded[nan] = (wide64[nan] >> 16) | 0x0040
    return _from_bits(rounded, dtype)


def oracle_pack(tensors, offsets, bucket: torch.Tensor) -> torch.Tensor:
    expected = bucket.clone()
    for tensor, offset in zip(tensors, offsets, strict=True):
        expected[offset : offset + tensor.numel()] = oracle_cast(tensor, bucket.dtype)
    return expected


def oracle_unpack(bucket: torch.Tensor, offsets, tensors) -> list[torch.Tensor]:
    return [
        oracle_cast(bucket[offset : offset + t.numel()], t.dtype).reshape(t.shape)
        for t, offset in zip(tensors, offsets, strict=True)
    ]


def test_the_oracle_agrees_with_hand_worked_casts(assert_bitwise_equal):
    """Ties to even, the largest finite values and their overflow, subnormals."""
    values = torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 65519.0, 65520.0, 2.0**-25])
    as_bf16 = oracle_cast(values, torch.bfloat16)
    assert as_bf16.view(torch.int16).tolist() == [0x3F80, 0x3F82, 0x4780, 0x4780, 0x3300]
    values = torch.tensor([1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 65519.0, 65520.0, 2.0**-25])
    as_fp16 = oracle_cast(values, torch.float16)
    assert as_fp16.view(torch.int16).tolist() == [0x3C00, 0x3C02, 0x7BFF, 0x7C00, 0x0000]
    big = torch.tensor([3.4e38, -3.4e38]).to(torch.float32)
    assert oracle_cast(big, torch.bfloat16).view(torch.int16).tolist() == [0x7F80, -0x80]


def mixed_pack_case(bucket_dtype):
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
    return tensors, offsets, torch.full((total,), 7.0, dtype=bucket_dtype)


UNPACK_SHAPES, UNPACK_OFFSETS = [(5, 3), (1,), (2048,), (0,), (31, 3)], [1, 17, 19, 4000, 4003]


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
def test_pack_mixed_dtypes_odd_sizes_matches_the_oracle_bitwise(
    cpu_impl, assert_bitwise_equal, bucket_dtype
):
    tensors, offsets, bucket = mixed_pack_case(bucket_dtype)
    expected = oracle_pack(tensors, offsets, bucket)
    bucket_pack(tensors, offsets, bucket)
    assert_bitwise_equal(bucket, expected)


@pytest.mark.parametrize("bucket_dtype", DTYPES)
@pytest.mark.parametrize("target_dtype", DTYPES)
def test_unpack_casts_back_like_the_oracle_bitwise(
    cpu_impl, assert_bitwise_equal, bucket_dtype, target_dtype
):
    bucket = special_values(4099, seed=11).to(bucket_dtype)
    actual = [torch.zeros(s, dtype=target_dtype) for s in UNPACK_SHAPES]
    expected = oracle_unpack(bucket, UNPACK_OFFSETS, actual)
    bucket_unpack(bucket, UNPACK_OFFSETS, actual)
    for a, e in zip(actual, expected, strict=True):
        assert_bitwise_equal(a, e)


@pytest.mark.parametrize("bucket_dtype", DTYPES)
def test_the_cpp_and_reference_paths_agree_bitwise(monkeypatch, assert_bitwise_equal, bucket_dtype):
    """The same pack and unpack through each path (forced), compared with each other."""
    if _backend.compiled_module("_C") is None:
        pytest.fail(f"rl.kernels._C is not built: {_backend.compiled_import_error('_C')}")
    tensors, offsets, bucket = mixed_pack_case(bucket_dtype)
    packed, unpacked = {}, {}
    for impl in ("cpp", "reference"):
        monkeypatch.setenv("RL_KERNELS_IMPL", impl)
        packed[impl] = bucket.clone()
        bucket_pack(tensors, offsets, packed[impl])
        unpacked[impl] = [torch.full_like(t, 5.0) for t in tensors]
        bucket_unpack(packed[impl], offsets, unpacked[impl])
    assert_bitwise_equal(packed["cpp"], packed["reference"])
    for cpp, reference in zip(unpacked["cpp"], unpacked["reference"], strict=True):
        assert_bitwise_equal(cpp, reference)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_16bit_pattern_round_trips_through_float32(cpu_impl, assert_bitwise_equal, dtype):
    """All 65536 bit patterns: 16-bit -> fp32 -> 16-bit is exact, and matches the oracle."""
    patterns = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
    wide = torch.empty(patterns.numel(), dtype=torch.float32)
    bucket_unpack(patterns, [0], [wide])
    assert_bitwise_equal(wide, oracle_cast(patterns, torch.float32))
    narrow = torch.empty_like(patterns)
    bucket_pack([wide], [0], narrow)
    assert_bitwise_equal(narrow, patterns)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_random_float32_bit_patterns_round_like_the_oracle(cpu_impl, assert_bitwise_equal, dtype):
    """2^20 random fp32 patterns (all exponents, NaN payloads) rounded to nearest even."""
    values = special_values(2**20, seed=5)
    bucket = torch.empty(values.numel(), dtype=dtype)
    bucket_pack([values], [0], bucket)
    assert_bitwise_equal(bucket, oracle_cast(values, dtype))


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
