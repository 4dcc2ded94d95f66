"""rl-megatron: the training engine on megatron-core, with the HF <-> mcore weight bridge."""

__version__ = "0.1.0"
