"""`python -m rl.kernels.bench <op> [options]`: run one op's standalone benchmark."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "bucket": "rl.kernels.bench.bucket",
    "logprob": "rl.kernels.bench.logprob",
    "partition": "rl.kernels.bench.partition",
    "reshard": "rl.kernels.bench.reshard",
    "varlen": "rl.kernels.bench.varlen",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m rl.kernels.bench {{{','.join(BENCHMARKS)}}} [options]")
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return int(module.main(argv[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
