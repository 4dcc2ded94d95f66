"""rl-kernels: the compiled performance core of the rl post-training stack.

Ops are torch custom ops (`torch.ops.rl_kernels.*`) with a torch reference,
a C++ CPU and a CUDA implementation; see `python -m rl.kernels.info`.
"""

from rl.kernels.bucket_plan import (
    PlanGroup,
    PlanItem,
    RawEntry,
    group_stream,
    is_bucketable,
    plan_stream,
)
from rl.kernels.buckets import (
    BucketEntry,
    BucketLayout,
    BucketPool,
    layout_for,
    pack_bucket,
    pack_into,
    plan_buckets,
    unpack_bucket,
    unpack_bucket_into,
)
from rl.kernels.ops.logprob import fused_logprob_entropy, logprob_of_logits
from rl.kernels.partition import (
    balance_ratio,
    karmarkar_karp,
    sequence_workloads,
    token_budget_partition,
)
from rl.kernels.varlen import (
    PackedLayout,
    aligned_cu_seqlens,
    packed_labels,
    packed_layout,
    packed_position_ids,
    pad,
    segment_ids,
    segment_max,
    segment_mean,
    segment_sum,
    unpad,
)

__version__ = "0.1.0"

__all__ = [
    "BucketEntry",
    "BucketLayout",
    "BucketPool",
    "PackedLayout",
    "PlanGroup",
    "PlanItem",
    "RawEntry",
    "__version__",
    "aligned_cu_seqlens",
    "balance_ratio",
    "fused_logprob_entropy",
    "group_stream",
    "is_bucketable",
    "karmarkar_karp",
    "layout_for",
    "logprob_of_logits",
    "pack_bucket",
    "pack_into",
    "packed_labels",
    "packed_layout",
    "packed_position_ids",
    "pad",
    "plan_buckets",
    "plan_stream",
    "segment_ids",
    "segment_max",
    "segment_mean",
    "segment_sum",
    "sequence_workloads",
    "token_budget_partition",
    "unpack_bucket",
    "unpack_bucket_into",
    "unpad",
]
