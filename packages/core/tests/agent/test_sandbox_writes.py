"""The sandbox's guard refuses every kind of file-system change outside its work folder and
allows it inside, one test a kind. The guard is tested alone (boundary "guard"), so that
the result does not depend on the OS boundary this machine offers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rl.core.agent.sandbox import run_python

# Each acts on the folder B, which holds a file f and an empty directory d.
MUTATIONS = {
    "open_write": "open(B + '/f', 'w').write('x')",
    "open_append": "open(B + '/f', 'a').write('x')",
    "open_exclusive_create": "open(B + '/new', 'x')",
    "open_read_plus": "open(B + '/f', 'r+').write('x')",
    "os_open_create": "os.open(B + '/new', os.O_CREAT | os.O_WRONLY)",
    "os_open_truncate": "os.open(B + '/f', os.O_RDWR | os.O_TRUNC)",
    "os_open_dir_fd": "os.open('new', os.O_CREAT | os.O_WRONLY, dir_fd=os.open(B, os.O_RDONLY))",
    "remove": "os.remove(B + '/f')",
    "unlink_dir_fd": "os.unlink('f', dir_fd=os.open(B, os.O_RDONLY))",
    "rmdir": "os.rmdir(B + '/d')",
    "rename": "os.rename(B + '/f', B + '/g')",
    "replace": "os.replace(B + '/f', B + '/d/g')",
    "chmod": "os.chmod(B + '/f', 0o777)",
    "fchmod": "os.fchmod(os.open(B + '/f', os.O_RDONLY), 0o777)",
    "chown": "s = os.stat(B + '/f'); os.chown(B + '/f', s.st_uid, s.st_gid)",
    "utime": "os.utime(B + '/f', (1, 1))",
    "utime_now": "os.utime(B + '/f')",
    "mkfifo": "os.mkfifo(B + '/fifo')",
    "mknod": "os.mknod(B + '/node')",
    "link": "os.link(B + '/f', B + '/hard')",
    "symlink": "os.symlink('f', B + '/soft')",
    "mkdir": "os.mkdir(B + '/new')",
    "makedirs": "os.makedirs(B + '/a/b')",
    "truncate": "os.truncate(B + '/f', 0)",
    "setxattr": "os.setxattr(B + '/f', 'user.rl', b'1')",
    "shutil_rmtree": "shutil.rmtree(B + '/d')",
    "shutil_move": "shutil.move(B + '/f', B + '/d')",
    "shutil_copy": "shutil.copy(B + '/f', B + '/copy')",
    "pathlib_touch": "pathlib.Path(B + '/f').touch()",
    "pathlib_write": "pathlib.Path(B + '/new').write_text('x')",
}
HEADER = "import os, pathlib, shutil\n"


def snapshot(folder: Path) -> dict[str, tuple[int, int, int, int, bytes]]:
    """Every entry under `folder` with its mode, size, change and modification times and
    content: any change to the folder changes it (ctime moves even on a no-op chown)."""
    seen = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        content = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        seen[str(path)] = (st.st_mode, st.st_size, st.st_ctime_ns, st.st_mtime_ns, content)
    return seen


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "f").write_text("orig")
    (folder / "d").mkdir()
    return folder


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_each_change_outside_the_work_folder_is_refused(kind, outside):
    before = snapshot(outside)
    code = f"{HEADER}B = {str(outside)!r}\n{MUTATIONS[kind]}\nprint('done')"
    result = run_python(code, boundary="guard")
    assert not result.ok and "PermissionError: sandbox:" in result.error(), result.stderr
    assert snapshot(outside) == before


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_each_change_inside_the_work_folder_is_allowed(kind):
    setup = "open('f', 'w').write('orig'); os.mkdir('d')\n"
    result = run_python(
        f"{HEADER}{setup}B = '.'\n{MUTATIONS[kind]}\nprint('done')", boundary="guard"
    )
    assert result.ok and result.stdout == "done\n", result.stderr


def test_a_relative_path_that_climbs_out_is_outside(outside):
    # the work folder is a sibling of `outside` only by chance; climb to the root instead
    climb = "../" * 20 + str(outside).lstrip("/")
    result = run_python(f"{HEADER}os.mkfifo({climb + '/fifo'!r})", boundary="guard")
    assert "PermissionError: sandbox:" in result.error()
    assert not (outside / "fifo").exists()


def test_the_directory_cannot_be_changed_nor_an_outside_directory_opened(outside):
    moved = run_python(f"import os; os.chdir({str(outside)!r})", boundary="guard")
    assert "PermissionError: sandbox: os.chdir" in moved.error()
    opened = run_python(f"import os; os.open({str(outside)!r}, os.O_RDONLY)", boundary="guard")
    assert "PermissionError: sandbox: opening the directory" in opened.error()
    read = run_python(f"print(open({str(outside / 'f')!r}).read())", boundary="guard")
    assert read.ok and read.stdout == "orig\n"  # reading is not guarded


@pytest.mark.parametrize(
    "tamper",
    [
        "import sys, importlib.machinery as m\n"
        "os = sys.modules['_imp'].create_builtin(m.ModuleSpec('posix', None))",
        "import sys\ndel sys.modules['posix']\nimport posix as os",
        "import gc\nos.mkfifo = [f for f in gc.get_referents(os.mkfifo) if callable(f)][0]",
        "os.mkfifo = os.mkfifo.__closure__[0].cell_contents",
    ],
)
def test_the_unaudited_calls_cannot_be_recovered(tamper, outside):
    code = f"import os\n{tamper}\nos.mkfifo({str(outside / 'fifo')!r})"
    result = run_python(code, boundary="guard")
    assert not result.ok  # the replacement holds nothing to recover, and posix is fenced
    assert not os.path.exists(outside / "fifo")


def test_a_path_object_that_answers_twice_differently_is_refused(outside):
    # the call converts the path before the guard sees it: a path object of one's own that
    # answers `outside` first and `inside` after would get past a guard that asked it again
    code = f"""
import os
class Shifty:
    calls = 0
    def __fspath__(self):
        Shifty.calls += 1
        return {str(outside / "f")!r} if Shifty.calls == 1 else "f"
os.utime(Shifty(), (1, 1))
"""
    before = snapshot(outside)
    result = run_python(code, boundary="guard")
    assert "PermissionError: sandbox:" in result.error()
    assert snapshot(outside) == before
