"""Element types shared with the compiled core (csrc/include/rl_kernels/common.h)."""

from __future__ import annotations

import torch

# The numbering is the C ABI's `rl_dtype_t`: never renumber, only append.
RL_DTYPE_CODES: dict[torch.dtype, int] = {
    torch.float32: 0,
    torch.float16: 1,
    torch.bfloat16: 2,
}
SUPPORTED_DTYPES = tuple(RL_DTYPE_CODES)


def dtype_code(dtype: torch.dtype, what: str) -> int:
    """The C ABI code of `dtype`; `what` names the tensor in the error message."""
    try:
        return RL_DTYPE_CODES[dtype]
    except KeyError:
        allowed = ", ".join(str(d).removeprefix("torch.") for d in SUPPORTED_DTYPES)
        raise TypeError(
            f"{what} has dtype {str(dtype).removeprefix('torch.')}, which the kernel "
            f"does not take; allowed: {allowed}. Cast it first (tensor.to(torch.bfloat16))."
        ) from None
