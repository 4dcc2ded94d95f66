"""The SGLang rollout engine (`rollout.name: sglang`).

Importing this package does not import SGLang: `SGLangRolloutEngine(...)` does, with the
one-line install hint when it is missing and the supported-version check (version.py).
The pure parts (options, sampling, outputs, payload, logprobs, version) run without it.
"""

from rl.rollout.sglang.engine import SGLangRolloutEngine
from rl.rollout.sglang.version import SUPPORTED_SGLANG

__all__ = ["SUPPORTED_SGLANG", "SGLangRolloutEngine"]
