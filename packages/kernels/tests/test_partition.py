"""Balanced partitioning (rl.kernels.partition): Karmarkar–Karp and token-capped micro-batches.

Bounds the tests hold the implementations to:
- Karmarkar–Karp: max part - min part <= the largest item (merging two partial
  partitions by pairing heaviest with lightest never widens the larger spread,
  and each starts with spread <= its largest item), hence max part <= mean + max
  item and max / max(mean, max item) < 2.
- token_budget_partition: ceil(sum / cap) <= parts <= max(min_parts, FFD bin
  count) (first-fit decreasing uses at most 11/9 OPT + 6/9 bins), and no smaller
  k at or above the lower bound lets Karmarkar–Karp respect the cap.
"""

import math
import os
from array import array

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rl.kernels import _backend, partition
from rl.kernels.partition import (
    balance_ratio,
    karmarkar_karp,
    sequence_workloads,
    token_budget_partition,
)

SETTINGS = settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # the impl env var is shared
)

# Few distinct small values (many ties) mixed with spread-out ones.
lengths_lists = st.lists(
    st.one_of(st.integers(0, 6), st.integers(0, 3000)), min_size=0, max_size=48
)


def part_sums(parts, values):
    return [sum(values[i] for i in part) for part in parts]


def assert_covers(parts, n):
    flat = [i for part in parts for i in part]
    assert sorted(flat) == list(range(n))
    assert all(part == sorted(part) for part in parts)


def ffd_bin_count(lengths, cap):
    loads = []
    for length in sorted(lengths, reverse=True):
        for b, load in enumerate(loads):
            if load + length <= cap:
                loads[b] += length
                break
        else:
            loads.append(length)
    return len(loads)


def kk_fits(workloads, k, lengths, cap):
    return max(part_sums(karmarkar_karp(workloads, k), lengths)) <= cap


# --- sequence_workloads, balance_ratio ------------------------------------------


def test_sequence_workloads_models():
    assert sequence_workloads([0, 3, 10]) == [0.0, 3.0, 10.0]
    assert sequence_workloads([2, 1000], "attention") == [24576 * 2 + 4, 24576 * 1000 + 10**6]
    assert sequence_workloads([4], "attention", attention_coeff=1.0) == [20.0]
    assert sequence_workloads(torch.tensor([2, 5])) == [2.0, 5.0]  # plain floats back
    assert token_budget_partition(torch.tensor([5, 3, 8, 1]), 9) == [[2, 3], [0, 1]]
    with pytest.raises(ValueError, match="workload model 'flops' is not one of"):
        sequence_workloads([1], "flops")
    with pytest.raises(ValueError, match="sequence 1 has a negative length"):
        sequence_workloads([1, -2])


def test_balance_ratio():
    assert balance_ratio([[0], [1]], [3.0, 1.0]) == 1.5
    assert balance_ratio([[0, 1], []], [1.0, 1.0]) == 2.0  # empty parts count in the mean
    assert balance_ratio([[], []], []) == 1.0


# --- karmarkar_karp ----------------------------------------------------------------


def test_karmarkar_karp_textbook_instance(cpu_impl):
    # LDM on {4..8} into 2: differences 8-7, 6-5 -> {4,1,1} -> 3,1 -> 2: sums 16 / 14.
    parts = karmarkar_karp([8, 7, 6, 5, 4], 2)
    assert part_sums(parts, [8, 7, 6, 5, 4]) == [16, 14]
    assert karmarkar_karp([5.0, 5.0, 5.0], 3) == [[0], [1], [2]]  # ties: by index
    assert karmarkar_karp([1.0, 2.0], 4) == [[1], [0], [], []]
    assert karmarkar_karp([], 2) == [[], []]


@SETTINGS
@given(lengths=lengths_lists, k=st.integers(1, 12), attention=st.booleans())
def test_karmarkar_karp_partitions_and_spread_bound(cpu_impl, lengths, k, attention):
    workloads = sequence_workloads(lengths, "attention" if attention else "tokens")
    parts = karmarkar_karp(workloads, k)
    assert len(parts) == k
    assert_covers(parts, len(lengths))
    sums = part_sums(parts, workloads)
    assert sums == sorted(sums, reverse=True)  # heavy-first
    if len(lengths) >= k:
        assert all(parts)
    if workloads:
        assert sums[0] - sums[-1] <= max(workloads) * (1 + 1e-12)
        mean = sum(workloads) / k
        assert sums[0] <= mean + max(workloads) * (1 + 1e-12)


@SETTINGS
@given(lengths=lengths_lists, k=st.integers(1, 12))
def test_karmarkar_karp_equal_size(cpu_impl, lengths, k):
    if len(lengths) < k:
        with pytest.raises(ValueError, match=f"equal_size needs at least k = {k} items"):
            karmarkar_karp(lengths, k, equal_size=True)
        return
    parts = karmarkar_karp(lengths, k, equal_size=True)
    assert_covers(parts, len(lengths))
    sizes = [len(part) for part in parts]
    assert max(sizes) - min(sizes) <= 1
    sums = part_sums(parts, lengths)
    assert sums == sorted(sums, reverse=True)
    assert sums[0] - sums[-1] <= max(lengths)


# --- token_budget_partition -----------------------------------------------------------


@SETTINGS
@given(
    lengths=lengths_lists,
    extra=st.integers(0, 4000),
    min_parts=st.integers(1, 8),
    attention=st.booleans(),
)
def test_token_budget_partition_invariants(cpu_impl, lengths, extra, min_parts, attention):
    cap = max([1, *lengths]) + extra
    workloads = sequence_workloads(lengths, "attention") if attention else None
    values = workloads or [float(x) for x in lengths]
    parts = token_budget_partition(lengths, cap, min_parts=min_parts, workloads=workloads)
    n, k = len(lengths), len(parts)
    assert_covers(parts, n)
    assert max(part_sums(parts, lengths)) <= cap  # never over the cap
    k_min = max(min_parts, math.ceil(sum(lengths) / cap))
    assert k_min <= k <= max(min_parts, ffd_bin_count(lengths, cap))
    assert not any(kk_fits(values, j, lengths, cap) for j in range(k_min, k))  # smallest k
    if n >= min_parts:
        assert all(parts)
    else:
        assert k == min_parts and sum(1 for p in parts if p) == n
    sums = part_sums(parts, values)
    assert sums == sorted(sums, reverse=True)  # heavy-first
    if kk_fits(values, k, lengths, cap):  # Karmarkar–Karp's own parts
        assert sorted(parts) == sorted(karmarkar_karp(values, k))
    else:  # the greedy fallback
        assert k == max(min_parts, ffd_bin_count(lengths, cap))


def test_token_budget_partition_mostly_needs_only_the_lower_bound(cpu_impl):
    import random

    rng = random.Random(0)
    at_bound = 0
    for _ in range(200):
        lengths = [min(int(rng.lognormvariate(6.5, 0.8)), 8192) for _ in range(64)]
        parts = token_budget_partition(lengths, 8192)
        at_bound += len(parts) == math.ceil(sum(lengths) / 8192)
    assert at_bound >= 150


def test_token_budget_partition_pads_to_min_parts(cpu_impl):
    assert token_budget_partition([5, 9], 10, min_parts=4) == [[1], [0], [], []]
    assert token_budget_partition([], 10, min_parts=3) == [[], [], []]
    assert token_budget_partition([], 10) == [[]]
    assert token_budget_partition([3, 3, 3, 3], 100, min_parts=2) == [[0, 3], [1, 2]]


def test_token_budget_partition_greedy_fallback(cpu_impl):
    # Balancing squared lengths puts the three 2-token rows together (6 > 5 tokens)
    # at k = 2 = the FFD bin count; the capped LPT greedy places every row.
    lengths = [2, 2, 2, 3]
    workloads = sequence_workloads(lengths, "attention", attention_coeff=0.0)
    assert not kk_fits(workloads, 2, lengths, 5)
    assert token_budget_partition(lengths, 5, workloads=workloads) == [[2, 3], [0, 1]]
    # Two parts must hold exactly 7 tokens each: KK and capped LPT both miss, FFD packs.
    lengths = [2, 3, 4, 2, 3]
    workloads = sequence_workloads(lengths, "attention", attention_coeff=0.0)
    assert partition.capped_lpt(lengths, workloads, 7, 2) is None
    assert token_budget_partition(lengths, 7, workloads=workloads) == [[1, 2], [0, 3, 4]]


def test_greedy_split_path_keeps_cap_and_fills_every_part(monkeypatch):
    # Safety net (not reached in random searches): min_parts above the FFD bin count
    # and capped LPT failing; FFD bins are then split by moving heaviest items out.
    monkeypatch.setattr(partition, "capped_lpt", lambda *args: None)
    lengths = [5, 4, 3, 3, 2, 2, 1]
    workloads = [float(x) for x in lengths]
    bins = partition.first_fit_decreasing(lengths, 10)
    parts = partition._greedy_parts(bins, 4, lengths, workloads, 10)
    assert len(bins) == 2 and len(parts) == 4 and all(parts)
    assert sorted(i for part in parts for i in part) == list(range(7))
    assert max(part_sums(parts, lengths)) <= 10
    assert max(part_sums(parts, workloads)) <= 6  # rebalanced: 20 tokens over 4 parts


def test_over_cap_names_the_key_row_and_cap(cpu_impl):
    message = (
        "actor.max_tokens_per_micro_batch = 100 is smaller than sequence 2 (101 tokens, "
        "prompt + response); raise actor.max_tokens_per_micro_batch"
    )
    with pytest.raises(ValueError) as info:
        token_budget_partition([5, 100, 101, 200], 100, key="actor.max_tokens_per_micro_batch")
    assert str(info.value) == message
    with pytest.raises(ValueError, match="^max_tokens = 3 is smaller than sequence 0"):
        token_budget_partition([4], 3)


def test_bad_arguments_are_rejected(cpu_impl):
    with pytest.raises(ValueError, match="k must be >= 1"):
        karmarkar_karp([1.0], 0)
    with pytest.raises(ValueError, match="workload 1 is nan"):
        karmarkar_karp([1.0, float("nan")], 2)
    with pytest.raises(ValueError, match="workload 0 is -1.0"):
        karmarkar_karp([-1.0], 1)
    with pytest.raises(ValueError, match="got 2 lengths but 1 workloads"):
        token_budget_partition([1, 2], 5, workloads=[1.0])
    with pytest.raises(ValueError, match="min_parts must be >= 1"):
        token_budget_partition([1], 5, min_parts=0)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        token_budget_partition([0], 0)
    with pytest.raises(TypeError, match="lengths must be ints"):
        token_budget_partition([1.5], 5)


# --- C++ == Python reference ---------------------------------------------------------


def compiled():
    module = _backend.compiled_module("_C")
    if module is None or not hasattr(module, "partition_kk"):
        pytest.fail(
            f"rl.kernels._C lacks the partition ops: {_backend.compiled_import_error('_C')}"
        )
    return module


def kk_cpp(workloads, k, equal_size):
    values, out = array("d", workloads), array("q", bytes(8 * len(workloads)))
    compiled().partition_kk(values.buffer_info()[0], len(values), k, equal_size,
                            out.buffer_info()[0])  # fmt: skip
    return out.tolist()


def capped_cpp(lengths, workloads, cap, min_parts):
    packed, values = array("q", lengths), array("d", workloads)
    out = array("q", bytes(8 * len(lengths)))
    address = [a.buffer_info()[0] for a in (packed, values, out)]
    k = compiled().partition_capped(
        address[0], address[1], len(lengths), cap, min_parts, address[2]
    )
    return out.tolist(), k


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    lengths=lengths_lists,
    k=st.integers(1, 12),
    extra=st.integers(0, 3000),
    min_parts=st.integers(1, 8),
    attention=st.booleans(),
)
def test_cpp_matches_reference_exactly(lengths, k, extra, min_parts, attention):
    workloads = sequence_workloads(lengths, "attention" if attention else "tokens")
    assert kk_cpp(workloads, k, False) == partition.kk_reference(workloads, k, False)
    if len(lengths) >= k:
        assert kk_cpp(workloads, k, True) == partition.kk_reference(workloads, k, True)
    cap = max([1, *lengths]) + extra
    expected = partition.capped_reference(lengths, workloads, cap, min_parts)
    assert capped_cpp(lengths, workloads, cap, min_parts) == expected


def test_cpp_matches_reference_on_fallback_and_large_inputs():
    import random

    for lengths, cap in (([2, 2, 2, 3], 5), ([2, 3, 4, 2, 3], 7)):  # LPT, then FFD fallback
        workloads = [float(x * x) for x in lengths]
        expected = partition.capped_reference(lengths, workloads, cap, 1)
        assert capped_cpp(lengths, workloads, cap, 1) == expected
    rng = random.Random(1)
    for _ in range(10):  # squared lengths dominate: Karmarkar–Karp misses the cap, greedy runs
        lengths = [min(int(rng.lognormvariate(6.0, 1.2)), 4096) for _ in range(200)]
        workloads = sequence_workloads(lengths, "attention", attention_coeff=rng.choice([0, 512]))
        for cap in (4096, 5000):
            expected = partition.capped_reference(lengths, workloads, cap, 1)
            assert capped_cpp(lengths, workloads, cap, 1) == expected
        assert kk_cpp(workloads, 16, True) == partition.kk_reference(workloads, 16, True)


def test_cpp_reports_errors_as_status_codes():
    with pytest.raises(RuntimeError, match="partition_capped: a segment lies outside"):
        capped_cpp([7], [7.0], 6, 1)  # RL_ERR_OUT_OF_BOUNDS: the Python API checks first
    with pytest.raises(RuntimeError, match="partition_kk: negative size"):
        kk_cpp([1.0], 0, False)


def test_forcing_cpp_without_the_ops_is_an_error(monkeypatch):
    monkeypatch.setenv("RL_KERNELS_IMPL", "cpp")
    monkeypatch.setattr(_backend, "compiled_module", lambda name: None)
    with pytest.raises(RuntimeError, match="RL_KERNELS_IMPL=cpp but rl.kernels._C has no"):
        karmarkar_karp([1.0], 1)
    monkeypatch.setenv("RL_KERNELS_IMPL", "cuda")  # a GPU choice: ignored by host-side code
    assert karmarkar_karp([1.0, 2.0], 2) == [[1], [0]]
    assert os.environ["RL_KERNELS_IMPL"] == "cuda"
