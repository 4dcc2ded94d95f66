"""Test-only: put this folder on PYTHONPATH and every Python process (an `rl train` run,
its workers) starts with megatron-core's CPU shims installed (`../_cpu_shims.py`)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _cpu_shims

_cpu_shims.install()
