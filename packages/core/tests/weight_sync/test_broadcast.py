"""Broadcast transport, for real: 2 processes on gloo, a tiny HF model on each side."""

from pathlib import Path

import pytest
import torch

from rl.core.distributed import free_port

WORKER = Path(__file__).parent / "_broadcast_worker.py"


def run_ranks(warm_ranks, tmp_path: Path) -> None:
    port = free_port()
    warm_ranks(WORKER, [[rank, port, tmp_path] for rank in (0, 1)], timeout=180)


@pytest.mark.slow  # two processes on gloo (forked from a server that imported transformers)
def test_receiver_rank_ends_with_the_sender_weights_bit_for_bit(tmp_path, warm_ranks):
    run_ranks(warm_ranks, tmp_path)
    sent = torch.load(tmp_path / "0.pt", weights_only=True)
    got = torch.load(tmp_path / "1.pt", weights_only=True)
    assert got["calls"] == 2  # one update_weights per sync
    for name, tensor in sent["state"].items():
        assert torch.equal(got["state"][name], tensor), name
    for name, tensor in sent["extra"].items():
        assert got["extra"][name].dtype == tensor.dtype, name
        assert torch.equal(got["extra"][name], tensor), name

    first, second = sent["metrics"]
    assert first["weight_sync/skipped_tensors"] == 0 and first["weight_sync/buckets"] > 3
    assert got["received"][0] == first["weight_sync/sent_bytes"] == first["weight_sync/bytes"]
    changed = [n for n in sent["state"] if ".layers.1." in n]
    assert second["weight_sync/skipped_tensors"] == len(sent["state"]) + 4 - len(changed)
    assert got["received"][1] == second["weight_sync/sent_bytes"] < first["weight_sync/bytes"]
