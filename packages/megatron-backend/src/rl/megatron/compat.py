"""Fixes for megatron-core bugs that the local (non-TransformerEngine) spec runs into.

Each is a no-op once megatron-core has fixed it; none changes behaviour on CUDA.
"""

from __future__ import annotations


def fix_router_without_te() -> None:
    """megatron-core 0.16 reads `moe_utils.te_general_gemm` in the MoE router's gating
    linear whenever the router dtype is not fp64, but defines it only when
    TransformerEngine imports: without TE every MoE forward is a NameError. None is what
    the code means (fall back to torch's matmul)."""
    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None
