"""The Python sandbox enforces its limits: wall-clock timeout (the process group killed),
CPU seconds, memory, no network, no new processes, no writes outside its directory."""

from __future__ import annotations

import time
from pathlib import Path

from rl.core.agent.sandbox import SandboxLimits, run_cases, run_python


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


def test_the_guard_cannot_be_switched_off_from_inside(tmp_path):
    target = tmp_path / "escaped.txt"
    for code in (
        "import __main__; __main__._inside = lambda p: True",
        "import os; os.path.realpath = lambda p: os.getcwd()",
        "import sys; sys.modules['os'].path.realpath = str",
    ):
        result = run_python(f"{code}\nopen({str(target)!r}, 'w').write('x')")
        assert "outside the working directory" in result.error(), code
    assert not target.exists()


def test_endless_output_is_capped_in_the_child_not_buffered_by_the_caller():
    result = run_python("while True: print('x' * 10**6)", SandboxLimits(timeout_s=10))
    assert not result.ok and "File too large" in result.error()
    assert len(result.stdout) == SandboxLimits().output_bytes


def test_cases_run_each_in_a_fresh_process_and_folder_under_one_start():
    code = (
        "import os, sys\n"
        "print(os.path.exists('mark'), sys.stdin.read())\n"
        "open('mark', 'w').write('x')\n"
        "sys.modules['json'] = None  # state that must not reach the next case\n"
    )
    results = run_cases(code, ["a", "b", "c"])
    assert [r.stdout for r in results] == ["False a\n", "False b\n", "False c\n"]
    other = "import sys\nopen('../' + sys.stdin.read() + '/.stdin', 'a').write('x')"
    peek = run_cases(other, ["case1", "case0"], stop_at_failure=False)  # each the other's
    assert all("outside the working directory" in r.error() for r in peek)


def test_cases_stop_at_the_first_failure_and_each_has_its_own_clock():
    code = "import sys, time\nif sys.stdin.read() == 'hang':\n    time.sleep(60)\nprint('ok')"
    limits = SandboxLimits(timeout_s=1.0)
    stopped = run_cases(code, ["", "hang", ""], limits)
    assert [r.ok for r in stopped] == [True, False] and stopped[1].timed_out
    all_run = run_cases(code, ["", "hang", ""], limits, stop_at_failure=False)
    assert [r.error() for r in all_run] == ["", "timed out", ""]
    assert all_run[2].stdout == "ok\n"
