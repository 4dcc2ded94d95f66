"""Weight resharding at a 7B shape, with rl-core's delta check timed on the same tensors.

    python -m rl.core.bench.reshard [the options of `python -m rl.kernels.bench reshard`]

Runs rl-kernels' resharding benchmark (copy, pack, pack+deliver per bucket size) and
adds one row: the median time of `ContentFingerprints.changed` over every tensor once
the content is known (no tensor changed), what the weight sync pays per step to skip
unchanged tensors. The check lives here because rl-kernels depends on nothing of ours.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from rl.core.weight_sync.delta import ContentFingerprints, hash_name
from rl.kernels.bench import reshard as kernels_reshard


def delta_check_seconds(source: list[tuple[str, torch.Tensor]], repeats: int) -> tuple[str, float]:
    """(where the fingerprints are computed, median seconds of one check of every tensor)."""
    prints = ContentFingerprints()
    for name, tensor in source:
        prints.changed(name, tensor)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        changed = [prints.changed(name, tensor) for name, tensor in source]
        samples.append(time.perf_counter() - start)
        assert not any(changed)
    where = "device copy compare" if source[0][1].device.type != "cpu" else hash_name()
    return where, statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m rl.core.bench.reshard"
    repeats = kernels_reshard.make_parser(prog).parse_args(argv).repeats

    def delta_check(source: list, tags: dict, weight_bytes: int) -> list[dict]:
        where, seconds = delta_check_seconds(source, repeats)
        stage = f"delta-check ({where})"
        return [kernels_reshard.row(tags, stage, 0, 0, weight_bytes, seconds, None)]

    return kernels_reshard.main(argv, extra_stages=delta_check, prog=prog)


if __name__ == "__main__":
    sys.exit(main())
