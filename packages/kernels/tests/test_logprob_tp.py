"""Vocab-parallel fused_logprob_entropy with 2 real gloo processes equals the unsharded op."""

import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rl.kernels import fused_logprob_entropy


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def worker(rank, world, port, out_file):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        g = torch.Generator().manual_seed(0)
        hidden = torch.randn(11, 8, generator=g)
        weight = torch.randn(30, 8, generator=g)  # 15 rows per rank
        labels = torch.tensor([0, 14, 15, 29, 3, 17, 22, 9, 1, 28, 16])  # both halves
        g_lp, g_h = torch.randn(11, generator=g), torch.randn(11, generator=g)
        shard = weight[rank * 15 : (rank + 1) * 15].clone().requires_grad_(True)
        h = hidden.clone().requires_grad_(True)
        lp, ent = fused_logprob_entropy(
            h, shard, labels, 0.8, tp_group=dist.group.WORLD, vocab_chunk=4
        )
        ((lp * g_lp).sum() + (ent * g_h).sum()).backward()
        shards = [torch.empty_like(shard) for _ in range(world)]
        dist.all_gather(shards, shard.grad)
        if rank == 0:
            full_h, full_w = (
                hidden.clone().requires_grad_(True),
                weight.clone().requires_grad_(True),
            )
            want_lp, want_ent = fused_logprob_entropy(full_h, full_w, labels, 0.8)
            ((want_lp * g_lp).sum() + (want_ent * g_h).sum()).backward()
            errors = {
                "logprob": (lp - want_lp).abs().max().item(),
                "entropy": (ent - want_ent).abs().max().item(),
                "grad_hidden": (h.grad - full_h.grad).abs().max().item(),
                "grad_weight": (torch.cat(shards) - full_w.grad).abs().max().item(),
            }
            with open(out_file, "w") as handle:
                json.dump(errors, handle)
        # leave together: a rank that tears gloo down while its peer still works can
        # abort ("terminate called without an active exception")
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    # Under load, gloo's teardown still aborted a rank after that barrier (CI, 2026-11-29):
    # the results are written and checked by the parent, so each rank leaves without
    # running gloo's C++ destructors. What is tested is the numbers, not the teardown.
    os._exit(0)


def test_two_gloo_ranks_equal_the_unsharded_result(tmp_path):
    out = tmp_path / "errors.json"
    mp.spawn(worker, args=(2, free_port(), str(out)), nprocs=2, join=True)
    errors = json.loads(out.read_text())
    assert all(value < 1e-5 for value in errors.values()), errors
