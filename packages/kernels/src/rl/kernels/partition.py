"""Balanced partitioning of sequence workloads across ranks and micro-batches.

`karmarkar_karp` splits items into k parts of near-equal workload;
`token_budget_partition` splits a batch into as few micro-batches as a token
cap allows, balanced by workload, for dynamic batching. Both run the C++
implementation (`rl.kernels._C`, csrc/cpu/partition.cpp) when it is built and
otherwise the pure-Python reference below, which gives the identical partition
(ties are broken by item index in both) and is the oracle in the tests.
`RL_KERNELS_IMPL=reference|cpp` forces one; the GPU values of that variable do
not apply to this host-side code and are ignored here.
"""

from __future__ import annotations

import heapq
import itertools
import math
import sys
from array import array
from collections.abc import Sequence
from types import ModuleType

from rl.kernels import _backend

# Workload of one sequence under the "attention" model: a*L + L**2. FLOPs of a
# dense transformer layer are about 24*h^2*L (projections and MLP) + 4*h*L^2
# (QK^T and AV), proportional to 6*h*L + L^2; a = 6 * 4096 takes a 7B model
# (hidden size 4096) and is verl's constant (verl.utils.seqlen_balancing.calculate_workload).
DEFAULT_ATTENTION_COEFF = 24576.0

WORKLOAD_MODELS = ("tokens", "attention")

_EMPTY = sys.maxsize  # "smallest item index" of an empty set: empty sets sort last


def sequence_workloads(
    lengths: Sequence[int], model: str = "tokens", attention_coeff: float = DEFAULT_ATTENTION_COEFF
) -> list[float]:
    """Workload of each sequence: `L` ("tokens") or `attention_coeff * L + L**2` ("attention").

    `lengths` are prompt + response tokens per sequence (ints >= 0).
    """
    if model not in WORKLOAD_MODELS:
        raise ValueError(f"workload model {model!r} is not one of {WORKLOAD_MODELS}")
    packed = _check_lengths(lengths)  # plain ints, also from numpy arrays or tensors
    if model == "tokens":
        return [float(length) for length in packed]
    return [attention_coeff * length + float(length) ** 2 for length in packed]


def karmarkar_karp(
    workloads: Sequence[float], k: int, *, equal_size: bool = False
) -> list[list[int]]:
    """Split item indices into `k` parts of near-equal total workload (largest differencing).

    Returns k lists of indices (each ascending), heaviest part first. Guarantee:
    max part - min part <= max(workloads), so max part <= mean + max item. With
    `equal_size`, part sizes differ by at most one (needs len(workloads) >= k).
    Empty parts appear only when len(workloads) < k.
    """
    values = _check_workloads(workloads)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if equal_size and len(values) < k:
        raise ValueError(f"equal_size needs at least k = {k} items, got {len(values)}")
    module = _compiled()
    if module is None:
        part_of_item = kk_reference(values, k, equal_size)
    else:
        out = array("q", bytes(8 * len(values)))
        module.partition_kk(_address(values), len(values), k, equal_size, _address(out))
        part_of_item = out.tolist()
    return _parts(part_of_item, k)


def token_budget_partition(
    lengths: Sequence[int],
    max_tokens: int,
    *,
    min_parts: int = 1,
    workloads: Sequence[float] | None = None,
    key: str = "max_tokens",
) -> list[list[int]]:
    """Split row indices into micro-batches of at most `max_tokens` tokens, balanced by workload.

    `lengths`: tokens per row (prompt + response). Every index lands in exactly
    one part (indices ascending inside it) and no part holds more than
    `max_tokens` tokens. The number of parts is the smallest
    k >= max(min_parts, ceil(sum / max_tokens)) at which Karmarkar–Karp on
    `workloads` (default: the lengths) respects the cap, trying k up to
    F = max(min_parts, first-fit-decreasing bin count); when it never does, a
    greedy gives F parts (heaviest first into the lightest part with room, or
    first-fit decreasing when that strands a row; then rebalanced by moves).
    So there are at most F parts.
    Parts are ordered heavy-first; none is empty unless len(lengths) < min_parts,
    in which case empty parts pad the result to `min_parts` (so every
    data-parallel rank runs the same number of micro-batches).
    Raises ValueError naming `key` (the config key behind the cap) when one row
    alone is longer than the cap.
    """
    packed_lengths = _check_lengths(lengths)
    if max_tokens < 1:
        raise ValueError(f"{key} must be >= 1, got {max_tokens}")
    if min_parts < 1:
        raise ValueError(f"min_parts must be >= 1, got {min_parts}")
    if packed_lengths and max(packed_lengths) > max_tokens:
        index = next(i for i, length in enumerate(packed_lengths) if length > max_tokens)
        raise ValueError(
            f"{key} = {max_tokens} is smaller than sequence {index} "
            f"({packed_lengths[index]} tokens, prompt + response); raise {key}"
        )
    if workloads is None:
        values = array("d", packed_lengths)
    else:
        values = _check_workloads(workloads)
        if len(values) != len(packed_lengths):
            raise ValueError(f"got {len(packed_lengths)} lengths but {len(values)} workloads")
    module = _compiled()
    if module is None:
        part_of_item, num_parts = capped_reference(packed_lengths, values, max_tokens, min_parts)
    else:
        out = array("q", bytes(8 * len(values)))
        num_parts = module.partition_capped(
            _address(packed_lengths),
            _address(values),
            len(values),
            max_tokens,
            min_parts,
            _address(out),
        )
        part_of_item = out.tolist()
    return _parts(part_of_item, num_parts)


def balance_ratio(parts: Sequence[Sequence[int]], workloads: Sequence[float]) -> float:
    """Max part workload / mean part workload (1.0 is perfect; empty parts count in the mean)."""
    sums = [sum(workloads[i] for i in part) for part in parts]
    if not sums:
        raise ValueError("balance_ratio of zero parts")
    mean = sum(sums) / len(sums)
    return max(sums) / mean if mean > 0 else 1.0


# --- reference implementation (mirrors csrc/cpu/partition.cpp step for step) ---


def kk_reference(workloads: Sequence[float], k: int, equal_size: bool) -> list[int]:
    """Part (heavy-first) of each item under the largest differencing method."""
    n = len(workloads)
    values = list(workloads)
    order = sorted(range(n), key=lambda i: (values[i], i))
    if equal_size:
        pad = -n % k  # zero-workload dummies n, n+1, ...: one per part at most
        values += [0.0] * pad
        order = list(range(n, n + pad)) + order
        groups = [order[start : start + k] for start in range(0, len(order), k)]
    else:
        groups = [[i] for i in order]
    heap = []  # (-spread, smallest item index, the non-empty sets heaviest first)
    for group in groups:
        sets = sorted(([values[i], i, [i]] for i in group), key=_set_order)
        heapq.heappush(heap, (-_spread(sets, k), min(group), sets))
    while len(heap) > 1:
        _, id_a, sets_a = heapq.heappop(heap)
        _, id_b, sets_b = heapq.heappop(heap)
        merged = _merge_states(sets_a, sets_b, k)
        heapq.heappush(heap, (-_spread(merged, k), min(id_a, id_b), merged))
    part_of_item = [0] * n
    if heap:
        for part, (_, _, items) in enumerate(heap[0][2]):
            for i in items:
                if i < n:
                    part_of_item[i] = part
    return part_of_item


def capped_reference(
    lengths: Sequence[int], workloads: Sequence[float], max_tokens: int, min_parts: int
) -> tuple[list[int], int]:
    """(part of each item, number of parts) for `token_budget_partition`; lengths fit the cap."""
    n = len(lengths)
    k_min = max(min_parts, -(-sum(lengths) // max_tokens))
    part_of_item = kk_reference(workloads, k_min, False)
    if _fits(part_of_item, k_min, lengths, max_tokens):
        return _heavy_first(part_of_item, k_min, workloads), k_min
    bins = first_fit_decreasing(lengths, max_tokens)  # lazily: KK mostly fits at k_min
    k_max = max(min_parts, len(bins))
    for k in range(k_min + 1, k_max + 1):
        part_of_item = kk_reference(workloads, k, False)
        if _fits(part_of_item, k, lengths, max_tokens):
            return _heavy_first(part_of_item, k, workloads), k
    parts = _greedy_parts(bins, k_max, lengths, workloads, max_tokens)
    part_of_item = [0] * n
    for part, items in enumerate(parts):
        for i in items:
            part_of_item[i] = part
    return _heavy_first(part_of_item, k_max, workloads), k_max


def first_fit_decreasing(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Bins of item indices: longest first (ties: lower index), each into the first bin it fits."""
    bins: list[list[int]] = []
    loads: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for b, load in enumerate(loads):
            if load + lengths[i] <= max_tokens:
                bins[b].append(i)
                loads[b] += lengths[i]
                break
        else:
            bins.append([i])
            loads.append(lengths[i])
    return bins


def capped_lpt(
    lengths: Sequence[int], workloads: Sequence[float], max_tokens: int, k: int
) -> list[list[int]] | None:
    """Heaviest workload first, each into the lightest of k parts with room; None if one finds none.

    Ties: the part with fewer items (an empty one before a zero-workload one), then
    the lower part; so with len >= k no part stays empty.
    """
    parts: list[list[int]] = [[] for _ in range(k)]
    tokens, loads = [0] * k, [0.0] * k
    for i in sorted(range(len(lengths)), key=lambda i: (-workloads[i], i)):
        best = -1
        for p in range(k):
            if tokens[p] + lengths[i] <= max_tokens and (
                best < 0 or (loads[p], len(parts[p])) < (loads[best], len(parts[best]))
            ):
                best = p
        if best < 0:
            return None
        parts[best].append(i)
        tokens[best] += lengths[i]
        loads[best] += workloads[i]
    return parts


def _greedy_parts(
    bins: list[list[int]],
    k: int,
    lengths: Sequence[int],
    workloads: Sequence[float],
    max_tokens: int,
) -> list[list[int]]:
    """The fallback: capped LPT, else FFD bins split up to k parts; then single-item moves."""
    parts = capped_lpt(lengths, workloads, max_tokens, k) or [list(b) for b in bins]
    tokens = [sum(lengths[i] for i in p) for p in parts]
    loads = [_sum_in_order(workloads, p) for p in parts]
    while len(parts) < k:  # n >= k here, so the fullest part has two items or more
        src = max(range(len(parts)), key=lambda b: (len(parts[b]), loads[b], -b))
        item = max(parts[src], key=lambda i: (workloads[i], -i))
        parts[src].remove(item)
        tokens[src] -= lengths[item]
        loads[src] -= workloads[item]
        parts.append([item])
        tokens.append(lengths[item])
        loads.append(workloads[item])
    for _ in range(4 * len(lengths) + 16):
        heavy = max(range(k), key=lambda b: (loads[b], -b))
        move = _find_move(parts, heavy, tokens, loads, lengths, workloads, max_tokens)
        if move is None:
            break
        item, target = move
        parts[heavy].remove(item)
        tokens[heavy] -= lengths[item]
        loads[heavy] -= workloads[item]
        parts[target].append(item)
        tokens[target] += lengths[item]
        loads[target] += workloads[item]
    return parts


def _find_move(parts, heavy, tokens, loads, lengths, workloads, max_tokens):
    """(item, target): an item of the heaviest part whose move lowers the pair's maximum."""
    if len(parts[heavy]) < 2:
        return None
    candidates = sorted(parts[heavy], key=lambda i: (-workloads[i], i))
    for target in sorted(range(len(parts)), key=lambda b: (loads[b], b)):
        if target == heavy:
            continue
        for i in candidates:
            if (
                workloads[i] > 0
                and tokens[target] + lengths[i] <= max_tokens
                and loads[target] + workloads[i] < loads[heavy]
            ):
                return i, target
    return None


def _set_order(s: list) -> tuple[float, int]:
    return -s[0], s[1]  # sum descending, then smallest item index


def _spread(sets: list, k: int) -> float:
    # A state lists its non-empty sets only; the k - len(sets) empty ones weigh 0.
    return sets[0][0] - (sets[k - 1][0] if len(sets) == k else 0.0)


def _merge_states(a: list, b: list, k: int) -> list:
    """Pair a's i-th heaviest set with b's i-th lightest (i.e. b[k - 1 - i]), heaviest first."""
    merged = []
    for i in itertools.chain(range(len(a)), range(max(len(a), k - len(b)), k)):
        j = k - 1 - i
        if i < len(a) and j < len(b):
            merged.append(_merge_sets(a[i], b[j]))
        else:
            merged.append(a[i] if i < len(a) else b[j])
    merged.sort(key=_set_order)
    return merged


def _merge_sets(a: list, b: list) -> list:
    # Extend the longer item list with the shorter (item order inside a set is irrelevant).
    longer, shorter = (a[2], b[2]) if len(a[2]) >= len(b[2]) else (b[2], a[2])
    longer.extend(shorter)
    return [a[0] + b[0], min(a[1], b[1]), longer]


def _fits(part_of_item: list[int], k: int, lengths: Sequence[int], max_tokens: int) -> bool:
    tokens = [0] * k
    for i, part in enumerate(part_of_item):
        tokens[part] += lengths[i]
    return max(tokens) <= max_tokens


def _sum_in_order(workloads: Sequence[float], items: list[int]) -> float:
    total = 0.0
    for i in items:
        total += workloads[i]
    return total


def _heavy_first(part_of_item: list[int], k: int, workloads: Sequence[float]) -> list[int]:
    """Renumber parts by workload descending (summed in item order), then smallest item index."""
    loads = [0.0] * k
    first = [_EMPTY] * k
    for i, part in enumerate(part_of_item):
        loads[part] += workloads[i]
        first[part] = min(first[part], i)
    rank = [0] * k
    for new, old in enumerate(sorted(range(k), key=lambda p: (-loads[p], first[p]))):
        rank[old] = new
    return [rank[part] for part in part_of_item]


# --- plumbing -------------------------------------------------------------------


def _compiled() -> ModuleType | None:
    """`rl.kernels._C` when it has the partition ops and the reference is not forced."""
    forced = _backend.forced_impl()
    module = _backend.compiled_module("_C")
    usable = module is not None and hasattr(module, "partition_kk")
    if forced == "reference":
        return None
    if forced == "cpp" and not usable:
        raise RuntimeError(
            f"{_backend.ENV_VAR}=cpp but rl.kernels._C has no partition ops "
            f"({_backend.compiled_import_error('_C') or 'built before they existed'}); "
            "rebuild rl-kernels or unset the variable"
        )
    return module if usable else None


def _check_lengths(lengths: Sequence[int]) -> array:
    try:
        packed = array("q", lengths)
    except TypeError as error:
        raise TypeError(f"lengths must be ints: {error}") from None
    if packed and min(packed) < 0:
        index = next(i for i, length in enumerate(packed) if length < 0)
        raise ValueError(f"sequence {index} has a negative length ({packed[index]})")
    return packed


def _check_workloads(workloads: Sequence[float]) -> array:
    packed = array("d", workloads)
    if packed and not (min(packed) >= 0 and all(map(math.isfinite, packed))):
        index = next(i for i, w in enumerate(packed) if not (w >= 0 and math.isfinite(w)))
        raise ValueError(f"workload {index} is {packed[index]}; workloads must be finite and >= 0")
    return packed


def _address(values: array) -> int:
    return values.buffer_info()[0]


def _parts(part_of_item: Sequence[int], k: int) -> list[list[int]]:
    parts: list[list[int]] = [[] for _ in range(k)]
    for i, part in enumerate(part_of_item):
        parts[part].append(i)
    return parts
