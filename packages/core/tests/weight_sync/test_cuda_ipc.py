"""CUDA IPC transport: message plumbing here, the real 2-process round trip on a GPU."""

import os
import pickle
import secrets
import subprocess
import sys
from multiprocessing.connection import Listener
from pathlib import Path

import pytest
import torch

from rl.core.weight_sync import CudaIpcSender, IpcMessage, WeightSender
from rl.core.weight_sync.cuda_ipc import cuda_handle
from rl.kernels import RawEntry, layout_for

WORKER = Path(__file__).parent / "_ipc_worker.py"


def fake_handle():
    """The shape of `reduce_tensor`'s args for a CUDA bf16 bucket, with dummy bytes."""
    return (
        torch.Tensor,
        torch.Size([96]),
        (1,),
        0,
        torch.storage.TypedStorage,
        torch.bfloat16,
        0,
        b"\x01cuda-ipc-handle",
        192,
        0,
        False,
        b"/torch_ref_counter",
        8,
        b"\x02event",
        True,
    )


def test_message_round_trip_keeps_layout_and_handle():
    layout = layout_for(
        [("q", (8, 8), torch.bfloat16), ("k", (4, 8), torch.bfloat16)], torch.bfloat16
    )
    for message in (
        IpcMessage(layout, fake_handle()),
        IpcMessage(RawEntry("ids", (2, 3), torch.int64), fake_handle()),
        IpcMessage(None),
    ):
        assert IpcMessage.from_bytes(message.to_bytes()) == message


def test_message_decoder_builds_nothing_else():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    # the name only: a library (Ray) may have replaced builtins.print in this process
    with pytest.raises(pickle.UnpicklingError, match="may not build "):
        IpcMessage.from_bytes(pickle.dumps(IpcMessage(None, (Evil(),))))
    with pytest.raises(TypeError, match="expected an IpcMessage, got dict"):
        IpcMessage.from_bytes(pickle.dumps({}))


def test_a_bucket_not_on_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="'w' is on cpu"):
        cuda_handle(torch.zeros(4), "the bucket holding 'w'")

    class Channel:
        def send_bytes(self, data):
            raise AssertionError("nothing may be sent")

    sender = WeightSender(transport=CudaIpcSender(Channel()))
    with pytest.raises(ValueError, match="bucket holding 'model.w' is on cpu"):
        sender.sync([("model.w", torch.ones(3))])


@pytest.mark.gpu
def test_weights_cross_processes_through_cuda_ipc(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    generator = torch.Generator().manual_seed(0)
    weights = {
        "embed": torch.randn(1000, 64, generator=generator).bfloat16(),
        "norm": torch.randn(64, generator=generator),
        "q": torch.randn(64, 64, generator=generator).bfloat16(),
        "ids": torch.arange(12).reshape(3, 4),
    }
    authkey = secrets.token_bytes(16)
    with Listener(("127.0.0.1", 0), authkey=authkey) as listener:
        process = subprocess.Popen(
            [sys.executable, str(WORKER), str(listener.address[1]), str(tmp_path)],
            env={**os.environ, "RL_TEST_AUTHKEY": authkey.hex()},
        )
        with listener.accept() as connection:
            sender = WeightSender(bucket_bytes=64 << 10, transport=CudaIpcSender(connection))
            metrics = sender.sync((name, tensor.cuda()) for name, tensor in weights.items())
        assert process.wait(timeout=120) == 0
    got = torch.load(tmp_path / "got.pt", weights_only=True)
    assert got["calls"] == 1 and got["names"] == list(weights)
    for name, tensor in weights.items():
        assert got["extra"][name].dtype == tensor.dtype and torch.equal(got["extra"][name], tensor)
    assert metrics["weight_sync/buckets"] == 3  # embed (bf16, 125 KiB) | norm (fp32) | q (bf16)
