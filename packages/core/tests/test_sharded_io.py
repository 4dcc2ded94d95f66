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


def test_a_stop_inside_a_sharded_write_is_the_stop_not_a_write_error(tmp_path, monkeypatch):
    """The grace timer of a stop signal can fire inside torch.distributed.checkpoint's save,
    which ships exceptions between ranks pickled and wraps them: the run must still end as
    stopped (its exit code, its message), not as a failed checkpoint write."""
    import pickle

    import torch.distributed.checkpoint as dcp_module
    from torch.distributed.checkpoint.api import CheckpointException

    from rl.core.errors import RunStopped

    stop = pickle.loads(pickle.dumps(RunStopped("stopped by SIGTERM: abandoned", 15)))
    assert (str(stop), stop.signum, stop.exit_code) == ("stopped by SIGTERM: abandoned", 15, 143)

    def save(*args, **kwargs):
        raise CheckpointException("save failed", {0: (stop, None)})

    monkeypatch.setattr(dcp_module, "save", save)
    with pytest.raises(RunStopped, match="abandoned") as raised:
        save_sharded({"w": torch.zeros(2)}, tmp_path / "dcp")
    assert raised.value.exit_code == 143
