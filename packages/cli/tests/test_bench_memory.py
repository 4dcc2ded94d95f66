"""rl.bench.memory.TreeSampler: a child process's memory counts, attributed to the phase
that was current while it was held."""

import subprocess
import sys
import time

from rl.bench.memory import TreeSampler, tree_rss_bytes

HOLD = "import sys, time; b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); "
HOLD += "print('ready', flush=True); sys.stdin.readline()"


def test_a_child_process_memory_is_in_the_peak_of_its_phase():
    phase = {"now": "generate"}
    with TreeSampler(lambda: phase["now"], interval_s=0.02) as sampler:
        alone = tree_rss_bytes(sampler.pid) / (1 << 20)
        time.sleep(0.1)
        phase["now"] = "update_actor"
        child = subprocess.Popen(
            [sys.executable, "-c", HOLD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(0.2)  # several samples while the child holds its 300 MiB
        finally:
            child.communicate("\n", timeout=30)
        phase["now"] = None
        time.sleep(0.1)
    assert sampler.samples >= 5
    assert set(sampler.phase_peak_mib) == {"generate", "update_actor"}
    assert sampler.phase_peak_mib["update_actor"] > sampler.phase_peak_mib["generate"] + 250
    assert sampler.peak_mib == sampler.phase_peak_mib["update_actor"]
    assert sampler.phase_peak_mib["generate"] < alone + 100


def test_a_disabled_sampler_samples_nothing():
    with TreeSampler(enabled=False) as sampler:
        pass
    assert sampler.samples == 0 and sampler.peak_mib == 0.0
