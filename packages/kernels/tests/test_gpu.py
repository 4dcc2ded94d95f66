"""The CUDA implementation against the torch reference, on a real GPU (`nox -s gpu_tests`)."""

import pytest
import torch

from rl.kernels import _backend, pack_bucket, unpack_bucket_into
from rl.kernels.ops.bucket import bucket_pack, pack_reference

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


@pytest.fixture(autouse=True)
def force_cuda(monkeypatch):
    if _backend.compiled_module("_C_cuda") is None:
        pytest.fail("rl.kernels._C_cuda was not built: is nvcc on PATH at install time?")
    monkeypatch.setenv("RL_KERNELS_IMPL", "cuda")


@pytest.mark.parametrize("bucket_dtype", DTYPES)
def test_cuda_pack_matches_reference_bitwise(bucket_dtype, assert_bitwise_equal):
    generator = torch.Generator().manual_seed(0)
    shapes = [(1,), (3, 5), (0,), (4097,), (1 << 20,), (33, 1031)]
    tensors = [
        (torch.randn(s, generator=generator) * 1000).to(DTYPES[i % 3]).cuda()
        for i, s in enumerate(shapes)
    ]
    offsets, cursor = [], 1
    for tensor in tensors:
        offsets.append(cursor)
        cursor += tensor.numel() + 3  # misaligned starts with gaps
    expected = torch.zeros(cursor, dtype=bucket_dtype, device="cuda")
    pack_reference(tensors, offsets, expected)
    actual = torch.zeros(cursor, dtype=bucket_dtype, device="cuda")
    bucket_pack(tensors, offsets, actual)
    torch.cuda.synchronize()
    assert_bitwise_equal(actual.cpu(), expected.cpu())


def test_cuda_round_trip_of_many_tensors():
    weights = [(f"w{i}", torch.randn(i % 17 + 1, 33, device="cuda")) for i in range(3000)]
    bucket, layout = pack_bucket(weights, dtype=torch.float32, align_elements=64)
    received = [torch.empty_like(tensor) for _, tensor in weights]
    unpack_bucket_into(bucket, layout, received)
    for (_, tensor), got in zip(weights, received, strict=True):
        assert torch.equal(got, tensor)


def test_cpu_tensor_in_a_cuda_bucket_is_rejected():
    with pytest.raises(ValueError, match="tensor 0 is on cpu but the bucket is on cuda"):
        bucket_pack([torch.ones(2)], [0], torch.empty(2, device="cuda"))
