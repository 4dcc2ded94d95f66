"""The vLLM rollout engine (`rollout.name: vllm`); vLLM itself is imported when it is built."""

from rl.rollout.vllm.engine import VLLMRolloutEngine

__all__ = ["VLLMRolloutEngine"]
