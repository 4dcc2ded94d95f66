"""`take`: gather along one dimension by an index that may repeat, with a backward that adds
the repeated places' gradients in the same order every run.

`source[..., index]` (advanced indexing) differentiates into `index_put_(accumulate=True)`.
On CPU, with more than one torch thread and at least 32768 elements, torch runs that as
atomic float adds spread over the threads, so a place that appears several times in
`index` sums its gradients in whatever order the threads reach it: the same run twice
differs in the last bits (`torch.use_deterministic_algorithms` lists the op). Packed
shared prompts repeat a prompt's positions once per response, so every backward through
such a gather drifted. `index_select` differentiates into `index_add_`, which on CPU adds
the indexed slices one after another in the index's order. On CUDA it is the other way
round: `index_add_` uses atomics and `index_put_`'s accumulate sorts the index first
(deterministic), so there the indexing form is kept.
"""

from __future__ import annotations

import torch


def take(source: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """`source.index_select(dim, index)` (index: int64, one dimension; repeats allowed) whose
    gradient is bit-identical from run to run on CPU and CUDA alike."""
    if source.device.type == "cpu":
        return source.index_select(dim, index)
    return source[(slice(None),) * (dim % source.dim()) + (index,)]
