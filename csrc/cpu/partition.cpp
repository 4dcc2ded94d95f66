// Balanced partitioning: Karmarkar–Karp (largest differencing) and the
// token-capped micro-batch split built on it. Mirrors the Python reference in
// rl/kernels/partition.py step for step (same orders, same tie-breaks, same
// floating-point sums in the same order), so both give identical partitions.
#include "rl_kernels/partition.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

namespace rl_kernels {
namespace {

constexpr int64_t kEmpty = std::numeric_limits<int64_t>::max();  // first index of an empty set

// One set of a partial partition: its workload sum, its smallest item index
// (the tie-break) and its items as a singly linked list through `next`.
struct Set {
  double sum;
  int64_t first;
  int64_t head;
  int64_t tail;
};

bool heavier(const Set& a, const Set& b) {
  return a.sum > b.sum || (a.sum == b.sum && a.first < b.first);
}

// Largest differencing into k parts over `values` (n real items, then the
// equal-size dummies); writes the heavy-first part of each real item. A state
// stores its non-empty sets only, heaviest first (empty sets weigh 0 and sort
// last, so they are implicit): early merges of near-empty states stay cheap.
class Differencing {
 public:
  Differencing(const std::vector<double>& values, int64_t n, int64_t k, bool equal_size)
      : values_(values), n_(n), k_(k), next_(values.size(), -1) {
    const int64_t total = static_cast<int64_t>(values.size());
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return values[a] < values[b] || (values[a] == values[b] && a < b);
    });
    if (equal_size) {
      std::vector<int64_t> dummies(total - n);
      std::iota(dummies.begin(), dummies.end(), n);
      order.insert(order.begin(), dummies.begin(), dummies.end());
    }
    const int64_t group = equal_size ? k : 1;
    const int64_t states = (total + group - 1) / group;
    sets_.reset(new Set[states * k]);  // uninitialised: only the non-empty prefixes are written
    for (int64_t start = 0; start < total; start += group) {
      add_state(order.data() + start, std::min(group, total - start));
    }
  }

  void run(int64_t* part_of_item) {
    auto lower = [this](int64_t x, int64_t y) {  // x pops after y
      return spread_[x] < spread_[y] || (spread_[x] == spread_[y] && id_[x] > id_[y]);
    };
    std::vector<int64_t> heap(id_.size());
    std::iota(heap.begin(), heap.end(), 0);
    std::make_heap(heap.begin(), heap.end(), lower);
    while (heap.size() > 1) {
      std::pop_heap(heap.begin(), heap.end(), lower);
      const int64_t a = heap.back();
      heap.pop_back();
      std::pop_heap(heap.begin(), heap.end(), lower);
      const int64_t b = heap.back();
      heap.pop_back();
      merge_into(a, b);
      heap.push_back(a);
      std::push_heap(heap.begin(), heap.end(), lower);
    }
    if (heap.empty()) return;
    const Set* sets = &sets_[heap[0] * k_];
    for (int64_t part = 0; part < count_[heap[0]]; ++part) {
      for (int64_t i = sets[part].head; i >= 0; i = next_[i]) {
        if (i < n_) part_of_item[i] = part;
      }
    }
  }

 private:
  void add_state(const int64_t* items, int64_t count) {
    const int64_t s = static_cast<int64_t>(id_.size());
    Set* sets = &sets_[s * k_];
    for (int64_t j = 0; j < count; ++j) sets[j] = {values_[items[j]], items[j], items[j], items[j]};
    std::sort(sets, sets + count, heavier);
    count_.push_back(count);
    spread_.push_back(spread(sets, count));
    id_.push_back(*std::min_element(items, items + count));
  }

  double spread(const Set* sets, int64_t count) const {
    return sets[0].sum - (count == k_ ? sets[k_ - 1].sum : 0.0);
  }

  // Pairs a's i-th heaviest set with b's i-th lightest (b's set k-1-i); the result replaces a.
  void merge_into(int64_t a, int64_t b) {
    Set* sa = &sets_[a * k_];
    const Set* sb = &sets_[b * k_];
    const int64_t ma = count_[a], mb = count_[b];
    merged_.clear();
    for (int64_t i = 0; i < k_; ++i) {
      if (i == ma) i = std::max(ma, k_ - mb);  // skip pairs of two empty sets
      if (i >= k_) break;
      const int64_t j = k_ - 1 - i;
      if (i < ma && j < mb) {
        const Set& x = sa[i];
        const Set& y = sb[j];
        next_[x.tail] = y.head;
        merged_.push_back({x.sum + y.sum, std::min(x.first, y.first), x.head, y.tail});
      } else {
        merged_.push_back(i < ma ? sa[i] : sb[j]);
      }
    }
    std::sort(merged_.begin(), merged_.end(), heavier);
    std::copy(merged_.begin(), merged_.end(), sa);
    count_[a] = static_cast<int64_t>(merged_.size());
    spread_[a] = spread(sa, count_[a]);
    id_[a] = std::min(id_[a], id_[b]);
  }

  const std::vector<double>& values_;
  const int64_t n_;
  const int64_t k_;
  std::vector<int64_t> next_;
  std::unique_ptr<Set[]> sets_;  // state s owns sets_[s*k, s*k + count_[s]), heaviest first
  std::vector<int64_t> count_;   // non-empty sets of each state
  std::vector<double> spread_;
  std::vector<int64_t> id_;  // smallest item index of the state: the heap's tie-break
  std::vector<Set> merged_;
};

void differencing(const double* workloads, int64_t n, int64_t k, bool equal_size,
                  int64_t* part_of_item) {
  std::vector<double> values(workloads, workloads + n);
  if (equal_size) values.resize(n + (k - n % k) % k, 0.0);
  Differencing(values, n, k, equal_size).run(part_of_item);
}

bool fits(const int64_t* part_of_item, int64_t n, int64_t k, const int64_t* lengths,
          int64_t max_tokens) {
  std::vector<int64_t> tokens(k, 0);
  for (int64_t i = 0; i < n; ++i) tokens[part_of_item[i]] += lengths[i];
  return *std::max_element(tokens.begin(), tokens.end()) <= max_tokens;
}

// Renumbers parts by workload (summed in item order) descending, then smallest item.
void heavy_first(int64_t* part_of_item, int64_t n, int64_t k, const double* workloads) {
  std::vector<double> loads(k, 0.0);
  std::vector<int64_t> first(k, kEmpty);
  for (int64_t i = 0; i < n; ++i) {
    loads[part_of_item[i]] += workloads[i];
    first[part_of_item[i]] = std::min(first[part_of_item[i]], i);
  }
  std::vector<int64_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return loads[a] > loads[b] || (loads[a] == loads[b] && first[a] < first[b]);
  });
  std::vector<int64_t> rank(k);
  for (int64_t r = 0; r < k; ++r) rank[order[r]] = r;
  for (int64_t i = 0; i < n; ++i) part_of_item[i] = rank[part_of_item[i]];
}

using Parts = std::vector<std::vector<int64_t>>;

Parts first_fit_decreasing(const int64_t* lengths, int64_t n, int64_t max_tokens) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return lengths[a] > lengths[b] || (lengths[a] == lengths[b] && a < b);
  });
  Parts bins;
  std::vector<int64_t> loads;
  for (int64_t i : order) {
    size_t b = 0;
    while (b < loads.size() && loads[b] + lengths[i] > max_tokens) ++b;
    if (b == loads.size()) {
      bins.emplace_back();
      loads.push_back(0);
    }
    bins[b].push_back(i);
    loads[b] += lengths[i];
  }
  return bins;
}

// Heaviest workload first, each into the lightest of k parts with room (ties:
// fewer items, then lower part); false when an item finds no room.
bool capped_lpt(const int64_t* lengths, const double* workloads, int64_t n, int64_t k,
                int64_t max_tokens, Parts& parts) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return workloads[a] > workloads[b] || (workloads[a] == workloads[b] && a < b);
  });
  parts.assign(k, {});
  std::vector<int64_t> tokens(k, 0);
  std::vector<double> loads(k, 0.0);
  for (int64_t i : order) {
    int64_t best = -1;
    for (int64_t p = 0; p < k; ++p) {
      if (tokens[p] + lengths[i] > max_tokens) continue;
      if (best < 0 || loads[p] < loads[best] ||
          (loads[p] == loads[best] && parts[p].size() < parts[best].size())) {
        best = p;
      }
    }
    if (best < 0) return false;
    parts[best].push_back(i);
    tokens[best] += lengths[i];
    loads[best] += workloads[i];
  }
  return true;
}

// The greedy fallback's rebalancing: parts (from capped LPT, or FFD bins split
// up to k parts) improved by single-item moves.
class Greedy {
 public:
  Greedy(Parts bins, const int64_t* lengths, const double* workloads, int64_t max_tokens)
      : parts_(std::move(bins)), lengths_(lengths), workloads_(workloads), cap_(max_tokens) {
    for (const auto& part : parts_) {
      int64_t tokens = 0;
      double load = 0.0;
      for (int64_t i : part) tokens += lengths_[i], load += workloads_[i];
      tokens_.push_back(tokens);
      loads_.push_back(load);
    }
  }

  void split_to(int64_t k) {  // n >= k here, so the fullest part has two items or more
    while (static_cast<int64_t>(parts_.size()) < k) {
      size_t src = 0;
      for (size_t b = 1; b < parts_.size(); ++b) {
        if (parts_[b].size() > parts_[src].size() ||
            (parts_[b].size() == parts_[src].size() && loads_[b] > loads_[src])) {
          src = b;
        }
      }
      int64_t item = parts_[src][0];
      for (int64_t i : parts_[src]) {
        if (workloads_[i] > workloads_[item] || (workloads_[i] == workloads_[item] && i < item)) {
          item = i;
        }
      }
      take(src, item);
      parts_.push_back({item});
      tokens_.push_back(lengths_[item]);
      loads_.push_back(workloads_[item]);
    }
  }

  void rebalance(int64_t max_moves) {
    for (int64_t step = 0; step < max_moves; ++step) {
      size_t heavy = 0;
      for (size_t b = 1; b < parts_.size(); ++b) {
        if (loads_[b] > loads_[heavy]) heavy = b;
      }
      if (!move_one(heavy)) break;
    }
  }

  void write(int64_t* part_of_item) const {
    for (size_t p = 0; p < parts_.size(); ++p) {
      for (int64_t i : parts_[p]) part_of_item[i] = static_cast<int64_t>(p);
    }
  }

 private:
  void take(size_t part, int64_t item) {
    auto& items = parts_[part];
    items.erase(std::find(items.begin(), items.end(), item));
    tokens_[part] -= lengths_[item];
    loads_[part] -= workloads_[item];
  }

  // Moves one item of the heaviest part to the lightest part where it lowers
  // the pair's maximum and fits the cap; false when no such move exists.
  bool move_one(size_t heavy) {
    if (parts_[heavy].size() < 2) return false;
    std::vector<int64_t> candidates = parts_[heavy];
    std::sort(candidates.begin(), candidates.end(), [&](int64_t a, int64_t b) {
      return workloads_[a] > workloads_[b] || (workloads_[a] == workloads_[b] && a < b);
    });
    std::vector<size_t> targets(parts_.size());
    std::iota(targets.begin(), targets.end(), 0);
    std::sort(targets.begin(), targets.end(), [&](size_t a, size_t b) {
      return loads_[a] < loads_[b] || (loads_[a] == loads_[b] && a < b);
    });
    for (size_t target : targets) {
      if (target == heavy) continue;
      for (int64_t i : candidates) {
        if (workloads_[i] > 0 && tokens_[target] + lengths_[i] <= cap_ &&
            loads_[target] + workloads_[i] < loads_[heavy]) {
          take(heavy, i);
          parts_[target].push_back(i);
          tokens_[target] += lengths_[i];
          loads_[target] += workloads_[i];
          return true;
        }
      }
    }
    return false;
  }

  Parts parts_;
  const int64_t* lengths_;
  const double* workloads_;
  const int64_t cap_;
  std::vector<int64_t> tokens_;
  std::vector<double> loads_;
};

int64_t capped(const int64_t* lengths, const double* workloads, int64_t n, int64_t max_tokens,
               int64_t min_parts, int64_t* part_of_item) {
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) total += lengths[i];
  const int64_t k_min = std::max(min_parts, (total + max_tokens - 1) / max_tokens);
  differencing(workloads, n, k_min, false, part_of_item);
  if (fits(part_of_item, n, k_min, lengths, max_tokens)) {
    heavy_first(part_of_item, n, k_min, workloads);
    return k_min;
  }
  Parts bins = first_fit_decreasing(lengths, n, max_tokens);
  const int64_t k_max = std::max(min_parts, static_cast<int64_t>(bins.size()));
  for (int64_t k = k_min + 1; k <= k_max; ++k) {
    differencing(workloads, n, k, false, part_of_item);
    if (fits(part_of_item, n, k, lengths, max_tokens)) {
      heavy_first(part_of_item, n, k, workloads);
      return k;
    }
  }
  Parts lpt;
  const bool placed = capped_lpt(lengths, workloads, n, k_max, max_tokens, lpt);
  Greedy greedy(placed ? std::move(lpt) : std::move(bins), lengths, workloads, max_tokens);
  greedy.split_to(k_max);
  greedy.rebalance(4 * n + 16);
  greedy.write(part_of_item);
  heavy_first(part_of_item, n, k_max, workloads);
  return k_max;
}

bool valid_workloads(const double* workloads, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!(workloads[i] >= 0) || !std::isfinite(workloads[i])) return false;
  }
  return true;
}

}  // namespace
}  // namespace rl_kernels

extern "C" rl_status_t rl_partition_kk(const double* workloads, int64_t n, int64_t k,
                                       int equal_size, int64_t* part_of_item) {
  if (n < 0 || k < 1 || (equal_size && n < k)) return RL_ERR_BAD_SIZE;
  if (n > 0 && (workloads == nullptr || part_of_item == nullptr)) return RL_ERR_NULL_POINTER;
  if (!rl_kernels::valid_workloads(workloads, n)) return RL_ERR_BAD_SIZE;
  rl_kernels::differencing(workloads, n, k, equal_size != 0, part_of_item);
  return RL_OK;
}

extern "C" rl_status_t rl_partition_capped(const int64_t* lengths, const double* workloads,
                                           int64_t n, int64_t max_tokens, int64_t min_parts,
                                           int64_t* part_of_item, int64_t* num_parts) {
  if (n < 0 || max_tokens < 1 || min_parts < 1) return RL_ERR_BAD_SIZE;
  if (num_parts == nullptr) return RL_ERR_NULL_POINTER;
  if (n > 0 && (lengths == nullptr || workloads == nullptr || part_of_item == nullptr)) {
    return RL_ERR_NULL_POINTER;
  }
  if (!rl_kernels::valid_workloads(workloads, n)) return RL_ERR_BAD_SIZE;
  for (int64_t i = 0; i < n; ++i) {
    if (lengths[i] < 0) return RL_ERR_BAD_SIZE;
    if (lengths[i] > max_tokens) return RL_ERR_OUT_OF_BOUNDS;
  }
  *num_parts = rl_kernels::capped(lengths, workloads, n, max_tokens, min_parts, part_of_item);
  return RL_OK;
}
