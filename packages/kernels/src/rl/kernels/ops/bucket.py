"""Bucket pack/unpack: the cast-copy at the heart of weight resharding.

`rl_kernels::bucket_pack(tensors, offsets, bucket)` casts every tensor into the
flat `bucket` at its element offset; `rl_kernels::bucket_unpack(bucket,
offsets, tensors)` casts the slices back into the tensors. Both are registered
with `torch.library.custom_op` (mutating their last argument) and run the
torch reference, the C++ CPU kernel or the CUDA kernel, chosen by device.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import torch

from rl.kernels import _backend
from rl.kernels._dtypes import dtype_code

OP_NAME = "bucket"


def check_segments(
    tensors: Sequence[torch.Tensor],
    offsets: Sequence[int],
    bucket: torch.Tensor,
    *,
    allow_overlap: bool = False,
) -> None:
    """Raise a clear error when the segments do not fit the bucket.

    Names the tensor by index; checks dtypes, devices, contiguity, bounds and
    (for writes into the bucket) overlap.
    """
    if len(tensors) != len(offsets):
        raise ValueError(f"got {len(tensors)} tensors but {len(offsets)} offsets")
    if bucket.dim() != 1 or not bucket.is_contiguous():
        raise ValueError(f"bucket must be a contiguous 1-D tensor, got shape {tuple(bucket.shape)}")
    dtype_code(bucket.dtype, "bucket")
    spans = []
    for index, (tensor, offset) in enumerate(zip(tensors, offsets, strict=True)):
        what = f"tensor {index}"
        dtype_code(tensor.dtype, what)
        if tensor.device != bucket.device:
            raise ValueError(f"{what} is on {tensor.device} but the bucket is on {bucket.device}")
        if not tensor.is_contiguous():
            raise ValueError(f"{what} is not contiguous; call .contiguous() first")
        end = offset + tensor.numel()
        if offset < 0 or end > bucket.numel():
            raise ValueError(
                f"{what} needs bucket elements [{offset}, {end}) but the bucket holds "
                f"{bucket.numel()}: allocate a larger bucket or plan the layout again"
            )
        if tensor.numel() and not allow_overlap:
            spans.append((offset, end, index))
    spans.sort()
    for (_, end, first), (start, _, second) in pairwise(spans):
        if start < end:
            raise ValueError(f"tensor {second} overlaps tensor {first} in the bucket")


# --- reference -----------------------------------------------------------------


def pack_reference(
    tensors: Sequence[torch.Tensor], offsets: Sequence[int], bucket: torch.Tensor
) -> None:
    """Torch oracle: `bucket[o : o + t.numel()] = t.flatten()` cast to the bucket dtype."""
    for tensor, offset in zip(tensors, offsets, strict=True):
        bucket.narrow(0, offset, tensor.numel()).copy_(tensor.reshape(-1))


def unpack_reference(
    bucket: torch.Tensor, offsets: Sequence[int], tensors: Sequence[torch.Tensor]
) -> None:
    """Torch oracle: `t.copy_(bucket[o : o + t.numel()].view(t.shape))` cast to t's dtype."""
    for tensor, offset in zip(tensors, offsets, strict=True):
        tensor.copy_(bucket.narrow(0, offset, tensor.numel()).view(tensor.shape))


# --- compiled ------------------------------------------------------------------


def _segment_table(
    tensors: Sequence[torch.Tensor], offsets: Sequence[int], device: torch.device
) -> torch.Tensor:
    """int64 [n, 4] rows of (data pointer, numel, offset, dtype code): `rl_segment_t`."""
    rows = [
        [t.data_ptr(), t.numel(), int(o), dtype_code(t.dtype, f"tensor {i}")]
        for i, (t, o) in enumerate(zip(tensors, offsets, strict=True))
    ]
    return torch.tensor(rows, dtype=torch.int64, device=device).reshape(-1, 4)


def _run_cpp(
    direction: str, tensors: Sequence[torch.Tensor], offsets: Sequence[int], bucket: torch.Tensor
) -> None:
    module = _backend.compiled_module("_C")
    assert module is not None
    table = _segment_table(tensors, offsets, torch.device("cpu"))
    kernel = module.bucket_pack if direction == "pack" else module.bucket_unpack
    kernel(
        table.data_ptr(),
        len(tensors),
        bucket.data_ptr(),
        dtype_code(bucket.dtype, "bucket"),
        bucket.numel(),
        torch.get_num_threads(),
    )


def _run_cuda(
    direction: str, tensors: Sequence[torch.Tensor], offsets: Sequence[int], bucket: torch.Tensor
) -> None:
    module = _backend.compiled_module("_C_cuda")
    assert module is not None
    table = _segment_table(tensors, offsets, bucket.device)
    kernel = module.bucket_pack if direction == "pack" else module.bucket_unpack
    max_numel = max((t.numel() for t in tensors), default=0)
    stream = torch.cuda.current_stream(bucket.device).cuda_stream
    kernel(
        table.data_ptr(),
        len(tensors),
        max_numel,
        bucket.data_ptr(),
        dtype_code(bucket.dtype, "bucket"),
        stream,
    )
    # The table's memory returns to the caching allocator when `table` dies;
    # recording the stream keeps it from being reused before the kernel ran.
    table.record_stream(torch.cuda.current_stream(bucket.device))


def available_impls(device_type: str) -> set[str]:
    """Implementations of this op usable on `device_type` in this process."""
    return _backend.compiled_impls(device_type)


def _dispatch(
    direction: str, tensors: Sequence[torch.Tensor], offsets: Sequence[int], bucket: torch.Tensor
) -> str:
    # Unpacking only reads the bucket, so slices may share elements there.
    check_segments(tensors, offsets, bucket, allow_overlap=direction == "unpack")
    impl = _backend.choose_impl(OP_NAME, bucket.device.type, available_impls(bucket.device.type))
    if impl == "cpp":
        _run_cpp(direction, tensors, offsets, bucket)
    elif impl == "cuda":
        _run_cuda(direction, tensors, offsets, bucket)
    elif direction == "pack":
        pack_reference(tensors, offsets, bucket)
    else:
        unpack_reference(bucket, offsets, tensors)
    return impl


# --- torch ops -----------------------------------------------------------------


@torch.library.custom_op("rl_kernels::bucket_pack", mutates_args=("bucket",))
def bucket_pack(tensors: list[torch.Tensor], offsets: list[int], bucket: torch.Tensor) -> None:
    """Cast-copy each of `tensors` (any shape; fp32/fp16/bf16) into the 1-D `bucket`.

    `offsets[i]` is where tensor i starts, in bucket elements; slices must not
    overlap. Elements of the bucket outside every slice are left untouched.
    """
    _dispatch("pack", tensors, offsets, bucket)


@bucket_pack.register_fake
def _(tensors: list[torch.Tensor], offsets: list[int], bucket: torch.Tensor) -> None:
    return None


@torch.library.custom_op("rl_kernels::bucket_unpack", mutates_args=("tensors",))
def bucket_unpack(bucket: torch.Tensor, offsets: list[int], tensors: list[torch.Tensor]) -> None:
    """Cast-copy `bucket[offsets[i] : offsets[i] + tensors[i].numel()]` into `tensors[i]`."""
    _dispatch("unpack", tensors, offsets, bucket)


@bucket_unpack.register_fake
def _(bucket: torch.Tensor, offsets: list[int], tensors: list[torch.Tensor]) -> None:
    return None
