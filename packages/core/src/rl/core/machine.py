"""The CPU a measurement ran on, for the headers of benchmark output."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo's `model name` (x86), else lscpu's `Model
    name` (ARM names its cores there), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        out = ""
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if "Model name" in line]
    return names[0] if names else platform.processor() or platform.machine()
