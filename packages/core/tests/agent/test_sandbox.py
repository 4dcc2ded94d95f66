"""The Python sandbox enforces its limits: wall-clock timeout (the process group killed),
CPU seconds, memory, no network, no new processes, no writes outside its directory."""

from __future__ import annotations

import time
from pathlib import Path

from rl.core.agent.sandbox import SandboxLimits, run_python


def test_code_runs_and_prints_in_its_own_directory():
    result = run_python("open('note.txt', 'w').write('ok'); print(open('note.txt').read())")
    assert result.ok and result.stdout == "ok\n"
    where = run_python("import os; print(os.getcwd())").stdout.strip()
    assert "rl-sandbox-" in where and not Path(where).exists()  # removed afterwards


def test_a_hanging_program_is_killed_at_the_wall_clock_limit():
    start = time.monotonic()
    result = run_python("import time\ntime.sleep(60)", SandboxLimits(timeout_s=1.0))
    assert result.timed_out and result.error() == "timed out"
    assert time.monotonic() - start < 10


def test_cpu_and_memory_limits():
    spin = run_python("while True: pass", SandboxLimits(timeout_s=30, cpu_s=1))
    assert not spin.ok and "killed by" in spin.error()
    hog = run_python("x = bytearray(2 * 1024**3)", SandboxLimits(memory_mb=256))
    assert not hog.ok and "MemoryError" in hog.error()
    raise_limit = run_python("import resource; resource.setrlimit(resource.RLIMIT_CPU, (99, 99))")
    assert not raise_limit.ok  # the hard limit cannot be lifted from inside


def test_no_network_no_processes_no_writes_outside(tmp_path):
    network = run_python("import socket; socket.create_connection(('127.0.0.1', 9), 1)")
    assert "PermissionError: sandbox: socket" in network.error()
    raw = run_python("import socket; socket.socket()")
    assert "PermissionError: sandbox: socket" in raw.error()
    for code in ("import os; os.system('true')", "import subprocess; subprocess.run(['true'])"):
        assert "is not allowed" in run_python(code).error()
    target = tmp_path / "escaped.txt"
    escape = run_python(f"open({str(target)!r}, 'w').write('x')")
    assert "outside the working directory" in escape.error() and not target.exists()
    climb = run_python("open('../escaped.txt', 'w').write('x')")
    assert "outside the working directory" in climb.error()


def test_output_is_bounded():
    result = run_python("print('x' * 100000)", SandboxLimits(output_bytes=1000))
    assert result.ok and len(result.stdout) == 1000
