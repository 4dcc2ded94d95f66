"""Receiver process of the CUDA IPC round trip (GPU only):
`python _ipc_worker.py PORT OUT_DIR` with the auth key in RL_TEST_AUTHKEY (hex)."""

import os
import sys
from multiprocessing.connection import Client
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from _receiver import BufferingEngine

from rl.core.weight_sync import CudaIpcReceiver


def main() -> None:
    port, out = int(sys.argv[1]), Path(sys.argv[2])
    authkey = bytes.fromhex(os.environ["RL_TEST_AUTHKEY"])
    torch.cuda.init()
    engine = BufferingEngine()
    with Client(("127.0.0.1", port), authkey=authkey) as connection:
        CudaIpcReceiver(connection).receive(engine)
    got = {name: tensor.cpu() for name, tensor in engine.extras.items()}
    torch.save({"extra": got, "names": engine.names, "calls": engine.calls}, out / "got.pt")


if __name__ == "__main__":
    main()
