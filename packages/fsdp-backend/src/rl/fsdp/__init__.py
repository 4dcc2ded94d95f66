"""rl-fsdp: the training engine on PyTorch FSDP2 for Hugging Face causal LMs."""

__version__ = "0.1.0"
