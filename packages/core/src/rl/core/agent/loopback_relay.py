"""Run an agent program inside a sandbox without a network, with the run's endpoint on its
loopback: `python -m rl.core.agent.loopback_relay SOCKET PATH -- COMMAND...`.

In the sandbox's network namespace only the loopback exists. This relay brings it up (an
`unshare` namespace starts with it down), listens on a free loopback port, and passes each
connection on to the endpoint's Unix socket `SOCKET` (bound into the sandbox, the only way
out); then it runs COMMAND with `OPENAI_BASE_URL=http://127.0.0.1:<port><PATH>` and exits
with its status (128 + N when a signal N ended it). Its standard input, output and error
are the command's.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
import struct
import sys

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """Bring `lo` up where it is down and this process may (root in its namespace)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        try:
            flags = struct.unpack("16sH14s", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
            if not flags & _IFF_UP:
                up = struct.pack("16sH14s", b"lo", flags | _IFF_UP, b"")
                fcntl.ioctl(probe, _SIOCSIFFLAGS, up)
        except OSError:
            pass  # the listen below says whether the loopback works


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(ConnectionError, OSError):
        writer.close()


async def _main(unix_path: str, path: str, command: list[str]) -> int:
    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(unix_path)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    loopback_up()
    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}{path}"}
    child = await asyncio.create_subprocess_exec(*command, env=env)
    status = await child.wait()
    server.close()
    return 128 - status if status < 0 else status


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: loopback_relay SOCKET PATH -- COMMAND...", file=sys.stderr)
        return 2
    return asyncio.run(_main(argv[0], argv[1], argv[3:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
