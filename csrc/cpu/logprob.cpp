// CPU epilogues of the fused log-prob / entropy op (see rl_kernels/logprob.h).
// One pass over each row of the tile: the running max is updated first, so
// the sums are rescaled at most once per tile rather than per element.
#include "rl_kernels/logprob.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

rl_status_t check(const void* logits, int64_t rows, int64_t cols, int64_t ld, const void* labels) {
  if (rows < 0 || cols < 0 || ld < cols) return RL_ERR_BAD_SIZE;
  if (rows > 0 && cols > 0 && (logits == nullptr || labels == nullptr)) return RL_ERR_NULL_POINTER;
  return RL_OK;
}

// The row loops are cloned for AVX2 where the compiler can (GCC's target_clones, picked at
// load time; the default clone for any other x86-64 CPU) and written to vectorize: each
// sum is kept in `kLanes` partial sums, added in one fixed order at the end, so every
// clone (8-wide AVX2, 4-wide SSE2, scalar) gives the same bits.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RL_ROW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RL_ROW_CLONES
#endif

constexpr int64_t kLanes = 8;

// float from its bits: GCC >= 11 and clang have __builtin_bit_cast; older compilers copy
// (correct, though their loops may stay scalar)
#if defined(__has_builtin)
#if __has_builtin(__builtin_bit_cast)
#define RL_HAS_BIT_CAST 1
#endif
#endif

// exp(x) in float32 as Cephes computes it (x = n ln 2 + r, a degree-6 polynomial in r,
// 2^n written into the exponent bits), within 2 ulp of exp on [-87, 0] and 0 below -87
// (exp is subnormal there: far under the sums' rounding). Branch-free arithmetic, so the
// loops that call it vectorize; std::exp is one libm call per logit, which made the
// epilogue cost 6 ns a logit on one core, more than the tile's GEMM at H = 128.
inline float fast_exp(float x) {
  const float clamped = x < -87.0f ? -87.0f : x;  // the callers' x is at most ~0
  // round to nearest by the 1.5 * 2^23 trick (exact for |n| < 2^22; no fast-math here)
  const float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (clamped - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
#ifdef RL_HAS_BIT_CAST
  const float two_n = __builtin_bit_cast(float, bits);
#else
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
#endif
  const float above = static_cast<float>(x >= -87.0f);  // 0 below the range, as exp ~ 0
  return p * two_n * above;
}

inline float lane_sum(const float (&lanes)[kLanes]) {
  float total = 0.0f;
  for (int64_t k = 0; k < kLanes; ++k) total += lanes[k];
  return total;
}

RL_ROW_CLONES
void forward_row(const float* z, int64_t cols, int64_t label, float scale, float& m, float& s,
                 float& sx, float& label_x) {
  float lane_max[kLanes];
  for (int64_t k = 0; k < kLanes; ++k) lane_max[k] = -std::numeric_limits<float>::infinity();
  const int64_t body = cols - cols % kLanes;
  for (int64_t j = 0; j < body; j += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) {
      const float x = z[j + k] * scale;
      lane_max[k] = x > lane_max[k] ? x : lane_max[k];
    }
  }
  float tile_max = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < kLanes; ++k) tile_max = std::fmax(tile_max, lane_max[k]);
  for (int64_t j = body; j < cols; ++j) tile_max = std::fmax(tile_max, z[j] * scale);
  const float new_max = std::fmax(m, tile_max);
  // Rescale what was accumulated under the old max (exp(-inf) = 0 on the first tile).
  const float rescale = std::isinf(m) ? 0.0f : std::exp(m - new_max);
  float sum[kLanes] = {}, sum_x[kLanes] = {};
  for (int64_t j = 0; j < body; j += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) {
      const float x = z[j + k] * scale;
      const float e = fast_exp(x - new_max);
      sum[k] += e;
      sum_x[k] += e * x;
    }
  }
  for (int64_t j = body; j < cols; ++j) {
    const float x = z[j] * scale;
    const float e = fast_exp(x - new_max);
    sum[j - body] += e;
    sum_x[j - body] += e * x;
  }
  s = s * rescale + lane_sum(sum);
  sx = sx * rescale + lane_sum(sum_x);
  m = new_max;
  if (label >= 0 && label < cols) label_x = z[label] * scale;
}

RL_ROW_CLONES
void backward_row(float* z, int64_t cols, int64_t label, float scale, float lse, float mean_x,
                  float g_lp, float g_h) {
  for (int64_t j = 0; j < cols; ++j) {
    const float x = z[j] * scale;
    const float p = fast_exp(x - lse);
    z[j] = (-g_lp * p - g_h * p * (x - mean_x)) * scale;
  }
  if (label >= 0 && label < cols) z[label] += g_lp * scale;
}

}  // namespace

extern "C" rl_status_t rl_logprob_tile_forward(const float* logits, int64_t rows, int64_t cols,
                                               int64_t ld, const int64_t* labels,
                                               int64_t col_start, float scale, float* row_max,
                                               float* row_sum, float* row_sx, float* label_x,
                                               int num_threads) {
  const rl_status_t status = check(logits, rows, cols, ld, labels);
  if (status != RL_OK) return status;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(num_threads > 0 ? num_threads : 1) if (rows > 16)
#else
  (void)num_threads;
#endif
  for (int64_t r = 0; r < rows; ++r) {
    forward_row(logits + r * ld, cols, labels[r] - col_start, scale, row_max[r], row_sum[r],
                row_sx[r], label_x[r]);
  }
  return RL_OK;
}

extern "C" rl_status_t rl_logprob_tile_backward(float* logits, int64_t rows, int64_t cols,
                                                int64_t ld, const int64_t* labels,
                                                int64_t col_start, float scale, const float* lse,
                                                const float* mean_x, const float* grad_logprob,
                                                const float* grad_entropy, int num_threads) {
  const rl_status_t status = check(logits, rows, cols, ld, labels);
  if (status != RL_OK) return status;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(num_threads > 0 ? num_threads : 1) if (rows > 16)
#else
  (void)num_threads;
#endif
  for (int64_t r = 0; r < rows; ++r) {
    backward_row(logits + r * ld, cols, labels[r] - col_start, scale, lse[r], mean_x[r],
                 grad_logprob[r], grad_entropy[r]);
  }
  return RL_OK;
}
