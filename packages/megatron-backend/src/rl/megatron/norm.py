"""RMSNorm for megatron-core's local spec that also works under sequence parallelism.

The local spec's `WrappedTorchNorm` refuses `sequence_parallel` (only TransformerEngine's
norms take it). With sequence parallelism each TP rank normalises its slice of the
sequence, so the norm weight's gradient is partial on each rank: marking the weight
`sequence_parallel` makes megatron-core's `finalize_model_grads` sum it over the TP group,
as it does for TransformerEngine's norms.
"""

from __future__ import annotations

from typing import Any

import torch


class LocalRMSNorm(torch.nn.RMSNorm):
    """Built by megatron as `LocalRMSNorm(config=..., hidden_size=..., eps=...)`."""

    def __init__(self, config: Any, hidden_size: int, eps: float = 1e-5, **_: Any) -> None:
        if config.normalization != "RMSNorm":
            raise ValueError(
                f"LocalRMSNorm is an RMSNorm; the config asks for {config.normalization}"
            )
        super().__init__(hidden_size, eps=eps, dtype=config.params_dtype)
        for param in self.parameters():
            param.sequence_parallel = config.sequence_parallel  # type: ignore[attr-defined]
