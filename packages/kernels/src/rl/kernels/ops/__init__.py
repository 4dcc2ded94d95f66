"""Torch ops of rl-kernels, one file per op (reference + compiled implementations)."""
