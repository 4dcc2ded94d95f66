"""The inner guard of the sandbox (`rl.core.agent.sandbox` states the promise): Python code
run in the sandboxed process before the user's code. It sets the resource limits, under the
`unshare` boundary makes every mount but the work folder read-only (then drops every
capability), runs each case in a fresh fork of itself, and there installs an audit
hook that refuses, outside the work folder, every file-system change CPython reports:

    open for writing (w a x +, O_WRONLY O_RDWR O_CREAT O_APPEND O_TRUNC), and opening a
    directory outside (its descriptor would let a relative `dir_fd` call escape)
    os.remove/unlink, os.rmdir, os.mkdir/makedirs, os.rename/replace, os.link, os.symlink,
    os.chmod/fchmod/lchmod, os.chown/fchown/lchown, os.utime, os.truncate/ftruncate,
    os.setxattr/removexattr, shutil.rmtree (shutil's copies, moves and chown reduce to these)

with `dir_fd` arguments and file descriptors resolved through /proc/self/fd. CPython
raises no audit event for os.mkfifo and os.mknod: both are replaced, before the user's code
runs, by functions that hand the call to the hook (the real ones are reachable from the hook
alone), and `_imp.create_builtin` is wrapped so that a fresh `posix` module cannot be built
to get them back. The working directory is fixed (os.chdir refused), so that relative paths
resolve for the guard as they do for the kernel. Sockets, new processes (fork, exec, spawn,
subprocess, `_posixsubprocess`), ctypes, signals to other processes and raising a limit are
refused too.
"""

from __future__ import annotations

PRELUDE = r"""
import os, resource, sys

def _readonly_mounts(root):
    # In a new mount namespace (the `unshare` boundary): every mount read-only but the work
    # folder, which becomes a mount of its own. Nothing propagates to the host's mounts.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_void_p]
    rec, private, bind, remount, rdonly = 1 << 14, 1 << 18, 1 << 12, 1 << 5, 1
    kept = {2: 2, 4: 4, 8: 8, 1024: 1024, 2048: 2048, 4096: 1 << 21}  # statvfs flag: mount flag

    def mount(source, target, flags):
        if libc.mount(source, target.encode(), None, flags, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sandbox: mount {target}: {os.strerror(err)}")

    mount(b"none", "/", rec | private)
    mount(root.encode(), root, bind | rec)
    os.chdir(root)  # onto the new mount: the old directory below it becomes read-only
    with open("/proc/self/mountinfo") as table:
        points = [line.split()[4].encode().decode("unicode_escape") for line in table]
    for point in points:
        if point == root or point.startswith(root + "/"):
            continue
        try:
            have = os.statvfs(point).f_flag
        except OSError:
            continue  # hidden under another mount
        flags = remount | bind | rdonly
        for stat_flag, mount_flag in kept.items():
            flags |= mount_flag if have & stat_flag else 0
        mount(None, point, flags)
    # The namespace's root could remount them writable again: give up every capability
    # (bounding set, then effective, permitted and inheritable), and never regain one.
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP; EINVAL past the last capability
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    if libc.capset(header, (ctypes.c_uint32 * 6)()) != 0 or libc.prctl(38, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "sandbox: cannot drop capabilities")

def _limits(cpu, memory, output):
    # set in the server, inherited by each case (a case's CPU seconds count from its fork)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU first, then SIGKILL
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

def _guard():
    # the case's own folder, the current directory, is the one place it may change
    root = os.path.realpath(os.getcwd())
    # everything the guard uses is bound here, out of reach of the code it guards
    realpath, fsdecode, pathlike, readlink = os.path.realpath, os.fsdecode, os.PathLike, os.readlink
    fspath, direntry, modules = os.fspath, os.DirEntry, sys.modules
    join, isdir = os.path.join, os.path.isdir
    real_mkfifo, real_mknod = os.mkfifo, os.mknod
    imp = sys.modules["_imp"]
    real_create_builtin = imp.create_builtin
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    blocked = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.fork",
               "os.spawn", "pty.", "ctypes.", "os.kill", "os.killpg", "signal.pthread_kill",
               "os.chdir", "os.chroot", "resource.setrlimit", "resource.prlimit",
               "gc.get_objects", "gc.get_referrers", "gc.get_referents")  # the hook's closure
    fenced = {"_posixsubprocess", "posix", "_ctypes"}  # modules the code may not import anew
    # event: (position of a path it changes, position of that path's dir_fd or None), ...
    changes = {
        "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),),
        "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.utime": ((0, 3),),
        "os.truncate": ((0, None),), "os.setxattr": ((0, None),),
        "os.removexattr": ((0, None),), "shutil.rmtree": ((0, 1),),
        "os.rename": ((0, 2), (1, 3)), "os.link": ((0, 2), (1, 3)),
        "os.symlink": ((0, None), (1, 2)),  # the link's text too: no link leads outside
        "rl.sandbox.mkfifo": ((0, 2),), "rl.sandbox.mknod": ((0, 3),),
    }

    def text(path):
        # A path object of the user's own class could answer one path to the call and
        # another to the guard: only str, bytes, os.DirEntry and pathlib's own paths pass.
        kind = type(path)
        if kind is str or kind is bytes:
            return fsdecode(path)
        paths = modules.get("pathlib")
        trusted = (direntry, getattr(paths, "PosixPath", None), getattr(paths, "PurePosixPath", None))
        if kind in trusted:
            return fsdecode(fspath(path))
        raise PermissionError(f"sandbox: a path must be str, bytes or pathlib's, not {kind}")

    def where(path, dir_fd=None):
        if isinstance(path, int):
            path, dir_fd = readlink(f"/proc/self/fd/{path}"), None
            if not path.startswith("/"):
                return root  # a pipe or socket: no place in the file system
        path = text(path)
        if isinstance(dir_fd, int) and dir_fd >= 0 and not path.startswith("/"):
            path = join(readlink(f"/proc/self/fd/{dir_fd}"), path)
        return realpath(path)

    def inside(path, dir_fd=None):
        try:
            target = where(path, dir_fd)
        except Exception:
            return False
        return target == root or target.startswith(root + "/")

    def check_open(args):
        path, mode = args[0], args[1]
        if path is None or isinstance(path, int):
            return
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        writing = isinstance(mode, str) and any(c in mode for c in "wax+")
        if (writing or flags & write_flags) and not inside(path):
            raise PermissionError(f"sandbox: writing {path!r} outside the working directory")
        if not inside(path) and isdir(text(path)):
            raise PermissionError(f"sandbox: opening the directory {path!r} outside the "
                                  "working directory")

    def check_change(event, args):
        for at, fd_at in changes[event]:
            if at >= len(args):
                continue
            fd = args[fd_at] if fd_at is not None and fd_at < len(args) else None
            if not isinstance(args[at], (str, bytes, pathlike, int)) or not inside(args[at], fd):
                raise PermissionError(f"sandbox: {event} outside the working directory")

    def guard(event, args):
        if event.startswith(blocked):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" and len(args) >= 2:
            check_open(args)
        elif event in changes:
            check_change(event, args)
            if event == "rl.sandbox.mkfifo":
                real_mkfifo(args[0], args[1], dir_fd=args[2])
            elif event == "rl.sandbox.mknod":
                real_mknod(args[0], args[1], args[2], dir_fd=args[3])
        elif event == "rl.sandbox.create_builtin":
            if args[0].name in fenced:
                raise PermissionError(f"sandbox: building {args[0].name} anew is not allowed")
            args[1].append(real_create_builtin(args[0]))
        elif event == "import" and args[0] in fenced:
            raise PermissionError(f"sandbox: import {args[0]} is not allowed")

    # Neither call raises an audit event: each hands its arguments to the hook, which
    # checks them and makes the call; nothing here holds the real functions.
    def mkfifo(path, mode=0o666, *, dir_fd=None):
        sys.audit("rl.sandbox.mkfifo", path, mode, dir_fd)

    def mknod(path, mode=0o600, device=0, *, dir_fd=None):
        sys.audit("rl.sandbox.mknod", path, mode, device, dir_fd)

    def create_builtin(spec):
        made = []
        sys.audit("rl.sandbox.create_builtin", spec, made)
        return made[0]

    import posix
    os.mkfifo = posix.mkfifo = mkfifo
    os.mknod = posix.mknod = mknod
    imp.create_builtin = create_builtin
    sys.addaudithook(guard)

def _case(code, guarded, folder):
    # In a fresh fork of the server, in its own folder: its input, output and error files
    # become the standard streams, the guard goes in, the code runs; never returns.
    os.chdir(folder)
    for fd, name, flags in ((0, ".stdin", os.O_RDONLY), (1, ".stdout", os.O_WRONLY),
                            (2, ".stderr", os.O_WRONLY)):
        opened = os.open(name, flags | (os.O_CREAT if fd else 0), 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin, sys.stdout, sys.stderr = (open(0, closefd=False), open(1, "w", closefd=False),
                                         open(2, "w", closefd=False))
    if guarded:
        _guard()
    for name in ("_serve", "_case", "_guard", "_readonly_mounts", "_limits"):
        globals().pop(name, None)  # nothing of the server within the code's reach
    status = 0
    try:
        exec(compile(code, "<sandbox>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            status = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            status = 1
    except BaseException:
        sys.__excepthook__(*sys.exc_info())  # the interpreter's own report, as at exit
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            status = status or 120  # as the interpreter does when the flush at exit fails
    os._exit(status)

def _serve(cases, timeout_ms, stop, guarded):
    # One case after another, each in a fork of this process, which runs no user code.
    import time
    code = sys.stdin.read()
    with open(".status", "w") as report:
        for index in range(cases):
            pid = os.fork()
            if pid == 0:
                try:
                    _case(code, guarded, f"case{index}")
                finally:
                    os._exit(121)
            deadline, pause, done = time.monotonic() + timeout_ms / 1000, 0.0005, 0
            while not done and time.monotonic() < deadline:
                time.sleep(pause)
                pause = min(pause * 2, 0.02)
                done, wait_status = os.waitpid(pid, os.WNOHANG)
            if not done:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                report.write(f"{index} timeout\n")
            else:
                report.write(f"{index} {os.waitstatus_to_exitcode(wait_status)}\n")
            report.flush()
            if stop and (not done or wait_status):
                break

_cpu, _memory, _output, _remount, _guarded, _cases, _timeout_ms, _stop = map(int, sys.argv[1:9])
if _remount:
    _readonly_mounts(os.path.realpath(os.getcwd()))
_limits(_cpu, _memory, _output)
_serve(_cases, _timeout_ms, _stop, _guarded)
"""
