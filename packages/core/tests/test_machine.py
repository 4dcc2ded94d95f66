"""`rl.core.machine.cpu_model`: the name benchmark headers print."""

from pathlib import Path

from rl.core.machine import cpu_model


def test_the_cpu_model_is_what_the_os_reports():
    name = cpu_model()
    assert name and name.strip() == name
    info = Path("/proc/cpuinfo")
    names = [
        line.split(":", 1)[1].strip()
        for line in (info.read_text().splitlines() if info.exists() else [])
        if line.startswith("model name")
    ]
    if names:  # x86 Linux: the first core's
        assert name == names[0]
