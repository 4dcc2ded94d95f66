"""Sharded (DCP) checkpoints: a round trip, and crafted files refused without running code."""

import os
import pickle

import pytest
import torch

from rl.core.errors import CheckpointError
from rl.core.sharded_io import load_sharded, save_sharded


def state(seed):
    gen = torch.Generator().manual_seed(seed)
    return {
        "model": {"w": torch.randn(4, 3, generator=gen), "b": torch.randn(3, generator=gen)},
        "optimizer": {
            "w": {"exp_avg": torch.randn(4, 3, generator=gen), "step": torch.tensor(3.0)}
        },
    }


def test_round_trip_is_exact(tmp_path):
    saved = state(0)
    save_sharded(saved, tmp_path / "dcp")
    loaded = state(1)
    load_sharded(loaded, tmp_path / "dcp", no_dist=True)
    assert torch.equal(loaded["model"]["w"], saved["model"]["w"])
    assert torch.equal(loaded["optimizer"]["w"]["exp_avg"], saved["optimizer"]["w"]["exp_avg"])
    assert float(loaded["optimizer"]["w"]["step"]) == 3.0


def test_only_tensors_are_written():
    with pytest.raises(TypeError, match="'optimizer.lr' is a float"):
        save_sharded({"optimizer": {"lr": 0.1}}, "/nonexistent")


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def test_crafted_metadata_is_refused_and_runs_nothing(tmp_path):
    save_sharded(state(0), tmp_path / "dcp")
    marker = tmp_path / "pwned"
    (tmp_path / "dcp" / ".metadata").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(CheckpointError, match="refers to builtins.exec"):
        load_sharded(state(1), tmp_path / "dcp", no_dist=True)
    assert not marker.exists()


def test_missing_or_torn_checkpoints_are_one_checkpoint_error(tmp_path):
    with pytest.raises(CheckpointError, match="is missing"):
        load_sharded(state(0), tmp_path / "nothing", no_dist=True)
    save_sharded(state(0), tmp_path / "dcp")
    shard = next(p for p in (tmp_path / "dcp").iterdir() if p.suffix == ".distcp")
    shard.write_bytes(shard.read_bytes()[:40])
    with pytest.raises(CheckpointError, match="cannot be loaded"):
        load_sharded(state(1), tmp_path / "dcp", no_dist=True)
    os.remove(tmp_path / "dcp" / ".metadata")
    with pytest.raises(CheckpointError):
        load_sharded(state(1), tmp_path / "dcp", no_dist=True)
