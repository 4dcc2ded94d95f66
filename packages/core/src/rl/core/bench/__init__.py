"""rl-core's benchmarks, each a runnable module (`python -m rl.core.bench.<name>`).

- `scaling`: step time at 1 rank against 2 Ray ranks, and the bytes each rank moves.
- `reshard`: rl-kernels' resharding benchmark plus the time of the weight sync's
  delta check (`ContentFingerprints`) on the same parameter set.

No shipped module imports this package (a test holds every package to that).
"""
