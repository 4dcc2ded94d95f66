"""Splitting calls over ranks and putting the answers back (pure functions)."""

import pytest
import torch

from rl.core.config import ConfigError
from rl.core.engines import Rollouts
from rl.core.workers.dispatch import (
    data_parallel_rows,
    gather_rows,
    mean_metrics,
    scatter_rows,
    spread_rows,
)
from rl.core.workers.roles import _assemble


def mask_of(lengths, width=12):
    return torch.tensor([[1] * n + [0] * (width - n) for n in lengths])


def test_shares_have_equal_rows_cover_the_batch_and_balance_tokens():
    lengths = [12, 1, 11, 2, 10, 3, 9, 4]
    parts = data_parallel_rows(mask_of(lengths), 2)
    assert [len(p) for p in parts] == [4, 4]
    assert sorted(torch.cat(parts).tolist()) == list(range(8))
    loads = [sum(lengths[i] for i in p.tolist()) for p in parts]
    assert max(loads) - min(loads) <= max(lengths)  # Karmarkar-Karp's bound
    assert loads == [26, 26]  # this instance balances exactly
    for part in parts:
        assert part.tolist() == sorted(part.tolist())


def test_world_of_one_keeps_the_order():
    assert data_parallel_rows(mask_of([3, 1, 2]), 1)[0].tolist() == [0, 1, 2]


def test_rows_that_do_not_split_evenly_are_refused_with_what_to_change():
    with pytest.raises(ConfigError, match="7 rows cannot be split evenly over 2"):
        data_parallel_rows(mask_of([1] * 7), 2)


def test_scatter_then_gather_gives_the_callers_order():
    batch = {"attention_mask": mask_of([5, 1, 4, 2, 6, 3]), "x": torch.arange(6.0).unsqueeze(1)}
    parts = scatter_rows(batch, 3)
    answers = [sub["x"] * 10 for _, sub in parts]  # each rank answers for its rows
    gathered = gather_rows([rows for rows, _ in parts], answers, 6)
    assert torch.equal(gathered, batch["x"] * 10)
    assert gather_rows([rows for rows, _ in parts], [None, None, None], 6) is None


def test_metrics_average_over_the_ranks_that_report_them():
    assert mean_metrics([{"a": 1.0, "b": 2.0}, {"a": 3.0}]) == {"a": 2.0, "b": 2.0}


def test_spread_rows_contiguous_or_rerank():
    assert spread_rows(5, 2, rerank=False) == [[0, 1, 2], [3, 4]]
    # ChatLearn's data_rerank: prompt 0's n=2 samples (rows 0, 1) land on different replicas
    assert spread_rows(6, 2, rerank=True) == [[0, 2, 4], [1, 3, 5]]


def test_replica_answers_are_assembled_in_row_order():
    shares = [[0, 2], [1, 3]]
    answers = [
        Rollouts([[1], [3]], [[10], [30]], [[-0.1], [-0.3]], ["stop", "length"]),
        Rollouts([[2], [4]], [[20], [40]], [[-0.2], [-0.4]], ["stop", "stop"]),
    ]
    out = _assemble(shares, answers, 4)
    assert out.prompt_ids == [[1], [2], [3], [4]]
    assert out.response_ids == [[10], [20], [30], [40]]
    assert out.logprobs == [[-0.1], [-0.2], [-0.3], [-0.4]]
    assert out.finish_reasons == ["stop", "stop", "length", "stop"]
