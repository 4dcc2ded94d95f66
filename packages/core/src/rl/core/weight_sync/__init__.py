"""Trainer -> rollout weight sync through one-dtype resharding buckets (rl.kernels).

Weights stream from `TrainEngine.export_weights()` in Hugging Face names; the
sender packs consecutive same-dtype tensors into freshly allocated buckets and
calls `rollout.update_weights` once per sync with a lazy iterator of views
(see `RolloutEngine.update_weights`). Carriers: in-process (default),
torch.distributed broadcast (`BroadcastSender`/`BroadcastReceiver`) and CUDA
IPC between colocated processes (`CudaIpcSender`/`CudaIpcReceiver`). Tied weights
(`lm_head.weight` of a model with `tie_word_embeddings`) are sent once, and receivers
check the tie (`ties.py`).
"""

from rl.core.weight_sync.broadcast import BroadcastReceiver, BroadcastSender
from rl.core.weight_sync.cuda_ipc import CudaIpcReceiver, CudaIpcSender, IpcMessage
from rl.core.weight_sync.delta import ContentFingerprints, content_digest
from rl.core.weight_sync.groups import WeightGroup, each_tensor, fused_module
from rl.core.weight_sync.sender import DEFAULT_BUCKET_BYTES, WeightSender, sync_weights
from rl.core.weight_sync.stats import SyncStats
from rl.core.weight_sync.ties import TieCheck, Ties, tied_aliases, without_aliases
from rl.core.weight_sync.transports import InProcessTransport, Transport

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "BroadcastReceiver",
    "BroadcastSender",
    "ContentFingerprints",
    "CudaIpcReceiver",
    "CudaIpcSender",
    "InProcessTransport",
    "IpcMessage",
    "SyncStats",
    "TieCheck",
    "Ties",
    "Transport",
    "WeightGroup",
    "WeightSender",
    "content_digest",
    "each_tensor",
    "fused_module",
    "sync_weights",
    "tied_aliases",
    "without_aliases",
]
