"""rl-rollout: generation engines (vLLM, SGLang, Hugging Face) and weight receivers."""

__version__ = "0.1.0"
