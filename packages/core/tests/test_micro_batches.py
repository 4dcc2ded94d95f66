"""Micro-batches by rows or by token budget; data-parallel ranks agree on their number
(2 real gloo processes)."""

import json

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rl.core.distributed import free_port
from rl.core.micro_batches import MicroBatching, micro_batch_rows


def mask_of(lengths, width=16):
    return (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()


def test_by_rows_and_by_budget_cover_every_row_once_under_the_cap():
    mask = mask_of([16, 1, 3, 9, 16, 2, 5])
    by_rows = micro_batch_rows(mask, MicroBatching(rows=3))
    assert [r.tolist() for r in by_rows] == [[0, 1, 2], [3, 4, 5], [6]]
    parts = micro_batch_rows(mask, MicroBatching(rows=3, max_tokens=20, key="k"))
    assert sorted(i for p in parts for i in p.tolist()) == list(range(7))
    assert all(int(mask[p].sum()) <= 20 for p in parts)
    assert len(parts) == 3  # ceil(52 / 20)
    with pytest.raises(ValueError, match=r"k = 15 is smaller than sequence 0 \(16 tokens"):
        micro_batch_rows(mask, MicroBatching(max_tokens=15, key="k"))


def worker(rank, world, port, out_file):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    # rank 0's rows need 4 micro-batches under the budget, rank 1's only 1
    lengths = [16, 16, 16, 16] if rank == 0 else [2, 3, 4, 5]
    parts = micro_batch_rows(mask_of(lengths), MicroBatching(max_tokens=16, key="k"))
    with open(f"{out_file}.{rank}", "w") as handle:
        json.dump([p.tolist() for p in parts], handle)
    dist.barrier()  # leave together (a lone teardown can abort gloo's peer)
    dist.destroy_process_group()


def test_ranks_agree_on_the_number_of_micro_batches(tmp_path):
    out = tmp_path / "parts"
    mp.spawn(worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    rank0, rank1 = (json.loads((tmp_path / f"parts.{r}").read_text()) for r in (0, 1))
    assert len(rank0) == len(rank1) == 4
    assert sorted(i for p in rank1 for i in p) == [0, 1, 2, 3] and all(rank1)
