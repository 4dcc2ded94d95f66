"""Peak resident memory of this process."""

from __future__ import annotations

import resource
import sys


def peak_rss_mib() -> float:
    """ru_maxrss: KiB on Linux, bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024
