"""Files the run writes get the mode the user's umask gives any new file (0644 under the
usual 022), not a private 0600.

safetensors (0.8) writes `.safetensors` files through a private temporary file, so a
saved model or checkpoint came out 0600 whatever the umask — `save_file` directly and
`save_pretrained` through it. `save_safetensors` is `save_file` with the umask's mode;
`follow_umask` gives it to every file a library wrote into a folder (an HF export).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it (Linux: /proc), else set and reset."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """What `open(path, "w")` would give a new file now: 0666 less the umask."""
    return 0o666 & ~current_umask()


def save_safetensors(
    tensors: dict[str, Any], path: str | os.PathLike[str], metadata: dict[str, str] | None = None
) -> None:
    """`safetensors.torch.save_file`, the file then given the umask's mode."""
    from safetensors.torch import save_file

    save_file(tensors, str(path), metadata=metadata)
    os.chmod(path, file_mode())


def follow_umask(folder: str | os.PathLike[str]) -> None:
    """Give every regular file under `folder` (just written by a library) the umask's mode."""
    mode = file_mode()
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, mode)
