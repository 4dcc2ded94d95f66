"""The memory of one device the plan checks against, and where the figure came from."""

from __future__ import annotations

import os

from rl.core.config import Config

GIB = 1024**3


def device_memory(config: Config) -> tuple[int | None, str]:
    """(bytes, source in words): `cluster.device_memory_gb` when set; on trainer.device=cuda
    the first visible GPU's total memory (None when no GPU is visible here: the plan then
    cannot check the fit and says which key to set); on cpu this machine's RAM."""
    if config.cluster.device_memory_gb is not None:
        return int(config.cluster.device_memory_gb * GIB), "cluster.device_memory_gb"
    if config.trainer.device == "cuda":
        import torch

        unknown = None, "no GPU's memory readable here: set cluster.device_memory_gb"
        if not torch.cuda.is_available():
            return unknown
        try:
            props = torch.cuda.get_device_properties(0)
        except (AssertionError, RuntimeError):  # a CPU-only build, a driver that fails
            return unknown
        return int(props.total_memory), f"{props.name} (torch.cuda)"
    return machine_ram(), "this machine's RAM"


def human_bytes(value: int) -> str:
    """Bytes in GiB from 1 GiB up, else MiB."""
    return f"{value / GIB:.2f} GiB" if value >= GIB else f"{value / 1024**2:.1f} MiB"


def machine_ram() -> int:
    """Physical memory of this machine in bytes."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def kv_cache_space(config: Config, device_bytes: int | None) -> int | None:
    """Bytes a preallocating rollout engine (vLLM, SGLang) claims on each of its devices for
    weights and KV cache: rollout.gpu_memory_utilization × the device on GPU, the
    VLLM_CPU_KVCACHE_SPACE GiB (KV cache only) on CPU for vLLM; None when unknown or the
    engine allocates as it goes (hf)."""
    name = config.rollout.name
    if name not in ("vllm", "sglang"):
        return None
    if config.trainer.device == "cuda":
        if device_bytes is None:
            return None
        return int(config.rollout.gpu_memory_utilization * device_bytes)
    space = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "") if name == "vllm" else ""
    try:
        gib = float(space)
    except ValueError:
        return None
    return int(gib * GIB) if gib > 0 else None
