"""rl-fsdp's benchmarks, each a runnable module; no shipped module imports them.

- `python -m rl.fsdp.bench.one_rank`: the engine at one rank, FSDP2-wrapped against plain.
- `python -m rl.fsdp.bench.prefix_grouper`: shared prompts against unshared packing.

Timing order and output come from `rl.kernels.bench.harness`.
"""
