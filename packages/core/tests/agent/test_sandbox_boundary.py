"""The sandbox's OS boundaries and limits: each boundary this machine offers holds an escape
attempt on its own (the inner guard left out), the boundary in force is the strongest that
works, a boundary that is asked for and missing is refused naming the key, and the limits
(network, processes, memory) turn into a failed result, never a crash of the caller."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from rl.core.agent import sandbox_boundary
from rl.core.agent.sandbox import SandboxLimits, run_python
from rl.core.agent.tools import PythonRunner, ToolError
from rl.core.rewards.code import code

OS_BOUNDARIES = [
    pytest.param(
        name,
        marks=pytest.mark.skipif(
            bool(sandbox_boundary.why_not(name)), reason=sandbox_boundary.why_not(name)
        ),
    )
    for name in ("bwrap", "unshare")
]
ESCAPES = """
import os
B = {outside!r}
refused = 0
for attempt in (
    lambda: open(B + '/x', 'w'),
    lambda: os.mkfifo(B + '/fifo'),
    lambda: os.utime(B + '/f', (1, 1)),
    lambda: os.chmod(B + '/f', 0o777),
    lambda: os.mkdir(B + '/d'),
    lambda: os.remove(B + '/f'),
):
    try:
        attempt()
    except OSError:
        refused += 1
print(refused)
"""


@pytest.fixture
def listener():
    """A TCP port on the loopback that accepts connections (the test's own)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        yield server


def connects(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def connect_code(server: socket.socket) -> str:
    port = server.getsockname()[1]
    return f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 2)\nprint('in')"


@pytest.mark.parametrize("boundary", OS_BOUNDARIES)
def test_the_boundary_alone_keeps_writes_inside(boundary, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("orig")
    before = sorted((p.name, p.stat().st_mtime_ns, p.stat().st_mode) for p in outside.iterdir())
    result = run_python(ESCAPES.format(outside=str(outside)), boundary=boundary, inner=False)
    assert result.ok and result.stdout == "6\n", result.stderr  # all six failed in the kernel
    assert sorted((p.name, p.stat().st_mtime_ns, p.stat().st_mode) for p in outside.iterdir()) == (
        before
    )
    inside = run_python("open('f', 'w').write('x'); print(open('f').read())", boundary=boundary)
    assert inside.ok and inside.stdout == "x\n"


REMOUNT = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
print(libc.mount(None, b"/", None, 32 | 4096, None), ctypes.get_errno())  # remount, bind: rw
open({target!r}, "w")
"""


@pytest.mark.parametrize("boundary", OS_BOUNDARIES)
def test_the_boundary_alone_cannot_be_remounted_writable(boundary, tmp_path):
    target = tmp_path / "escaped"
    result = run_python(REMOUNT.format(target=str(target)), boundary=boundary, inner=False)
    assert result.stdout == "-1 1\n"  # EPERM: no capability left to remount with
    assert "Read-only file system" in result.error() and not target.exists()


@pytest.mark.parametrize("boundary", OS_BOUNDARIES)
def test_the_boundary_alone_has_no_network_and_cannot_see_the_trainer(boundary, listener):
    result = run_python(connect_code(listener), boundary=boundary, inner=False)
    # bwrap brings up a loopback of its own (nothing listens there), unshare none
    assert any(why in result.error() for why in ("Connection refused", "Network is unreachable"))
    assert "in" not in result.stdout and not connects(listener)
    signal_parent = run_python(
        f"import os\nos.kill({os.getpid()}, 0)", boundary=boundary, inner=False
    )
    assert "ProcessLookupError" in signal_parent.error()  # its own pid namespace


@pytest.mark.parametrize("boundary", ["guard", *OS_BOUNDARIES])
def test_no_network_under_each_boundary_with_its_guard(boundary, listener):
    result = run_python(connect_code(listener), boundary=boundary)
    assert "PermissionError: sandbox: socket" in result.error()
    assert not connects(listener)


def test_the_boundary_in_force_is_the_strongest_that_works():
    available = sandbox_boundary.available()
    assert available[-1] == "guard"
    assert sandbox_boundary.in_force() == available[0]
    assert sandbox_boundary.in_force() in sandbox_boundary.BOUNDARIES


@pytest.fixture
def fresh_probes(monkeypatch):
    monkeypatch.setenv(sandbox_boundary.ENV, "auto")  # choose() writes it; restored after
    sandbox_boundary.why_not.cache_clear()
    sandbox_boundary._resolve.cache_clear()
    sandbox_boundary._SAID.clear()
    yield
    sandbox_boundary.why_not.cache_clear()
    sandbox_boundary._resolve.cache_clear()


@pytest.mark.parametrize("asked", ["bwrap", "unshare"])
def test_a_boundary_that_is_missing_is_refused_naming_the_key(
    asked, monkeypatch, fresh_probes, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither bwrap nor unshare on it
    with pytest.raises(sandbox_boundary.SandboxUnavailable, match=r"reward\.sandbox\.boundary = "):
        sandbox_boundary.choose(asked)
    assert sandbox_boundary.choose("auto") == "guard"
    assert os.environ[sandbox_boundary.ENV] == "guard"


def test_a_chosen_boundary_is_in_force_and_passed_on(fresh_probes):
    assert sandbox_boundary.choose("guard") == "guard"
    assert sandbox_boundary.in_force() == "guard"
    assert os.environ[sandbox_boundary.ENV] == "guard"  # what reward workers inherit


def test_a_fork_bomb_stops_at_its_first_fork():
    for bomb in (
        "import os\nwhile True:\n    os.fork()",
        "import multiprocessing\nmultiprocessing.Process(target=print).start()",
        "import _posixsubprocess",
    ):
        result = run_python(bomb)
        assert not result.ok and "PermissionError: sandbox:" in result.error(), bomb


def test_past_the_memory_limit_the_reward_fails_and_the_tool_reports_an_error():
    hog = "x = bytearray(2 * 1024**3)\nprint(3)"
    limits = SandboxLimits(memory_mb=256, timeout_s=10)
    assert code(hog, {"inputs": [""], "outputs": ["3"]}, limits) == 0.0
    with pytest.raises(ToolError, match="MemoryError"):
        PythonRunner(limits).call({"code": hog})
    assert code("print(3)", {"inputs": [""], "outputs": ["3"]}, limits) == 1.0


def test_sandboxed_code_cannot_write_into_the_caller_s_folder(tmp_path):
    target = Path(tmp_path) / "escaped"
    result = run_python(f"open({str(target)!r}, 'w').write('x')")
    assert "outside the working directory" in result.error() and not target.exists()


def test_the_boundary_in_force_is_said_once(fresh_probes, caplog):
    with caplog.at_level("INFO", logger="rl.core.agent.sandbox_boundary"):
        chosen = sandbox_boundary.choose("auto")
        sandbox_boundary.in_force()
        run_python("print(1)")
    said = [r.getMessage() for r in caplog.records if "sandbox boundary" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith(f"sandbox boundary: {chosen} (")
