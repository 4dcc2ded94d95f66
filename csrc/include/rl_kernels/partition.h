// Balanced partitioning of sequence workloads (data-parallel ranks, micro-batches).
//
// Both entry points write `part_of_item[i]`, the part of item i, with parts
// numbered heavy-first. The results are deterministic (ties broken by item
// index) and identical, part for part, to the pure-Python reference in
// rl/kernels/partition.py, which the tests compare against.
#pragma once

#include "rl_kernels/common.h"

#ifdef __cplusplus
extern "C" {
#endif

// Karmarkar–Karp largest differencing method into `k` parts, O(n k log n).
// A heap holds partial partitions (k sets sorted by sum, descending); the one
// with the largest spread (max - min set sum) is merged with the next by pairing
// its heaviest set with the other's lightest. Ties: larger spread first, then
// the partial partition holding the smaller item index; inside one, sets order
// by sum descending, then by smallest item index (empty sets last).
// `equal_size` != 0 starts from groups of k consecutive items (ascending by
// workload) instead of single items, so part sizes differ by at most one; the
// n % k missing items are zero-workload dummies placed in the first group.
// Guarantee: max part - min part <= the largest workload.
// Parts are numbered by the final order (heaviest first); with n >= k none is
// empty. Workloads must be finite and >= 0.
// Errors: RL_ERR_NULL_POINTER; RL_ERR_BAD_SIZE (n < 0, k < 1, equal_size with
// n < k, a negative or non-finite workload).
rl_status_t rl_partition_kk(const double* workloads, int64_t n, int64_t k, int equal_size,
                            int64_t* part_of_item);

// Token-capped partition: every part holds at most `max_tokens` tokens (sum of
// `lengths`), never more. The number of parts is the smallest
// k >= max(min_parts, ceil(sum / max_tokens)) at which Karmarkar–Karp on
// `workloads` (e.g. the lengths as doubles) respects the cap, searched
// up to F = max(min_parts, first-fit-decreasing bin count). When KK misses the
// cap at every k up to F, a greedy takes over with F parts: capped LPT (heaviest
// workload first, each into the lightest part with room), or, when an item
// finds no room, first-fit decreasing on lengths split to F parts by moving the
// heaviest item of the fullest part into a new one; then single-item moves from
// the heaviest part to a lighter one (lightest first) while one lowers the
// pair's maximum and respects the cap. So *num_parts <= max(min_parts, FFD count).
// No part is empty unless n < min_parts. Parts are numbered heavy-first by
// workload (sum in item order; ties: smaller first item index).
// Errors: RL_ERR_NULL_POINTER; RL_ERR_BAD_SIZE (n < 0, max_tokens < 1,
// min_parts < 1, a negative length, a negative or non-finite workload);
// RL_ERR_OUT_OF_BOUNDS (a single length exceeds max_tokens: no part can hold it).
rl_status_t rl_partition_capped(const int64_t* lengths, const double* workloads, int64_t n,
                                int64_t max_tokens, int64_t min_parts, int64_t* part_of_item,
                                int64_t* num_parts);

#ifdef __cplusplus
}
#endif
