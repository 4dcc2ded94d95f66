"""ROLL's ifeval rule: verifiable instructions (keywords, length, content, format, case,
start/end, punctuation, language) checked on a response, one module per group, the ids
ROLL's data uses in `registry`, the scorer in `scorer`."""

from rl.core.rewards.ifeval.registry import INSTRUCTIONS, Instruction
from rl.core.rewards.ifeval.scorer import ifeval

__all__ = ["INSTRUCTIONS", "Instruction", "ifeval"]
